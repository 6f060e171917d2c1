# src/store: fence-store, the fenced key/value server on LMDB (the reference
# resource).  Uses the RESP codec (libfenceproto.a) and the shared parts
# (libfencecommon.a: connection layer, options, log); links no lock-service
# code.  Every src/store/*.c is linked: the LMDB layer is db*.c, one
# concern a file (listed in src/store/db_int.h).
CFLAGS_src_store_ := $(shell pkg-config --cflags libuv lmdb 2>/dev/null)
STORE_SRC := $(wildcard src/store/*.c)
STORE_OBJ := $(STORE_SRC:%.c=$(BUILD)/%.o)
STORE_LIBS := $(shell pkg-config --libs libuv 2>/dev/null) \
              $(shell pkg-config --libs lmdb 2>/dev/null || echo -llmdb) \
              $(TLS_LIBS)

$(BUILD)/fence-store: $(STORE_OBJ) $(BUILD)/libfenceproto.a $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(STORE_OBJ) $(COMMON_LIB) $(BUILD)/libfenceproto.a \
	    $(COMMON_LIB) $(STORE_LIBS) $(SODIUM_LIBS) -pthread $(LDFLAGS)

BINS += $(BUILD)/fence-store

# Integration tests: scripts that start real fence-store processes.
# (test_store_helpers.py is a module the Python tests import, not a test.)
INTEG_TESTS += $(sort $(filter-out %/test_store_helpers.py,\
    $(wildcard tests/integration/test_store*.sh tests/integration/test_store*.py)))

# Fuzz target tests/fuzz/store_fuzz.c: RESP parse + command checks.
FUZZ_TARGETS += store
FUZZ_store_LIBS := $(BUILD)/src/store/cmd.o $(BUILD)/src/store/commands_table.o $(BUILD)/libfenceproto.a $(COMMON_LIB)
FUZZ_store_LDLIBS := $(SODIUM_LIBS) -pthread

# make run-store: fence-store in the foreground on 127.0.0.1:7710.
run-store:
	@bash scripts/deps.sh run
	@$(MAKE) --no-print-directory $(BUILD)/fence-store
	./$(BUILD)/fence-store --port 7710 --bind 127.0.0.1 --data-dir var/fence-store

.PHONY: run-store

# make bench-store: redis-benchmark against a fresh fence-store (free port,
# temp dir), requests/s per command (tests/bench/store_bench.sh).
bench-all: bench-store
bench-store: $(BUILD)/fence-store
	@BUILD=$(BUILD) bash tests/bench/store_bench.sh

.PHONY: bench bench-store

# The WAL record codec: unit test and fuzz target (tests/fuzz/walrec_fuzz.c:
# the parser recovery runs over a WAL file's bytes).
$(BUILD)/tests/test_store_walrec: $(BUILD)/tests/unit/test_store_walrec.o \
                                  $(BUILD)/src/store/walrec.o $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)
UNIT_TESTS += $(BUILD)/tests/test_store_walrec
FUZZ_TARGETS += walrec
FUZZ_walrec_LIBS := $(BUILD)/src/store/walrec.o $(COMMON_LIB)
