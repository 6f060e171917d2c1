# src/common/compat.c: the Redis-client compatibility commands (HELLO,
# CLIENT, SELECT, COMMAND, MULTI refusal, ...) that fenced and fence-store
# answer before their own commands, and its tests.  The module itself is
# part of libfencecommon.a (mk/common.mk); the command tables it describes
# are src/server/commands_table.c and src/store/commands_table.c.
COMPAT_TABLES := $(BUILD)/src/server/commands_table.o $(BUILD)/src/store/commands_table.o

# Unit test: libfencecommon.a before libfenceproto.a (compat uses the
# encoders).
$(BUILD)/tests/test_compat: $(BUILD)/tests/unit/test_compat.o $(COMPAT_TABLES) \
                            $(BUILD)/libfencecommon.a $(BUILD)/libfenceproto.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)
UNIT_TESTS += $(BUILD)/tests/test_compat

# Fuzz target tests/fuzz/compat_fuzz.c (see mk/fuzz.mk).
FUZZ_TARGETS += compat
FUZZ_compat_LIBS := $(COMPAT_TABLES) $(BUILD)/libfencecommon.a $(BUILD)/libfenceproto.a

# Integration tests with real clients (redis-py, redis-cli, ioredis,
# node-redis) against fenced and fence-store.  They pass only once both
# daemons call fence_compat_handle (the lead wires that), so they are NOT
# in INTEG_TESTS yet: run them with `make test-compat-pending`.
COMPAT_PENDING_TESTS := $(sort $(wildcard tests/integration/pending/test_compat_*))
test-compat-pending: $(BUILD)/fenced $(BUILD)/fence-store
	@bash tests/run.sh $(COMPAT_PENDING_TESTS)
.PHONY: test-compat-pending
