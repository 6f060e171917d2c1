# fencectl: the command-line client, `make bench-client`, and its tests.
CLI_SRC := $(wildcard src/fencectl/*.c)
CLI_OBJ := $(CLI_SRC:%.c=$(BUILD)/%.o)
# The pure parts, for the unit tests (parsing, histogram).
CLI_LIB_OBJ := $(BUILD)/src/fencectl/args.o $(BUILD)/src/fencectl/hist.o
FENCECTL := $(BUILD)/fencectl

# (mk/client.mk is read after this file: name its library literally.)
$(FENCECTL): $(CLI_OBJ) $(BUILD)/libfence.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS) -lm

BINS += $(FENCECTL)

# Unit tests of the CLI's pure parts (argument parsing, histogram).
# (mk/client.mk adds them to UNIT_TESTS with the other test_client* ones.)
CLI_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_client_cli*.c))
$(CLI_TESTS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(CLI_LIB_OBJ) $(BUILD)/libfence.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS) -lm

INTEG_TESTS += $(wildcard tests/integration/test_fencectl_*.sh)

# (make install-cli: mk/install.mk.)

# make bench-client (in make bench-all): a fresh fenced on a free port in a
# temp dir, `fencectl bench` against it, then fenced stopped by PID.
# BENCH_ARGS adds options.
BENCH_ARGS ?=
bench-all: bench-client
bench-client:
	@$(MAKE) --no-print-directory $(BUILD)/fenced $(FENCECTL)
	@BUILD=$(BUILD) bash tests/bench/fencectl_bench.sh $(BENCH_ARGS)

.PHONY: bench bench-client
