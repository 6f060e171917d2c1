# src/daemon/compat*.c: the Redis-client compatibility commands (HELLO,
# CLIENT, SELECT, COMMAND, MULTI refusal, ...) that fenced and fence-store
# answer before their own commands, and its tests.  The module itself is
# part of libfencecommon.a (mk/common.mk); the command tables it describes
# are src/server/commands_table.c and src/store/commands_table.c
# ($(COMPAT_TABLES), in the top Makefile).

# Unit test: libfencecommon.a before libfenceproto.a (compat uses the
# encoders), and again after it (the RESP parser uses base/num.h).
$(BUILD)/tests/test_compat: $(BUILD)/tests/unit/test_compat.o $(COMPAT_TABLES) \
                            $(BUILD)/libfencecommon.a $(BUILD)/libfenceproto.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(BUILD)/libfencecommon.a $(LDFLAGS)
UNIT_TESTS += $(BUILD)/tests/test_compat

# Fuzz target tests/fuzz/compat_fuzz.c (see mk/fuzz.mk).
FUZZ_TARGETS += compat
FUZZ_compat_LIBS := $(COMPAT_TABLES) $(BUILD)/libfencecommon.a $(BUILD)/libfenceproto.a
FUZZ_compat_LDLIBS := $(BUILD)/libfencecommon.a

# Integration tests with real clients (redis-py, redis-cli, ioredis,
# node-redis) against fenced and fence-store, which both call
# fence_compat_handle before their own commands (src/server/compat_hook.c,
# src/store/server.c).  compat_node.js is test_compat_node.sh's helper.
INTEG_TESTS += $(sort $(wildcard tests/integration/test_compat_*))
# RESP3 (HELLO 3) with node-redis' defaults, ioredis and redis-cli -3, and a
# TLS client's addresses; resp3_node.js is test_resp3_node.sh's helper.
INTEG_TESTS += $(sort $(wildcard tests/integration/test_resp3*))
