# src/server: the fenced daemon.
CFLAGS_src_server_ := $(shell pkg-config --cflags libuv raft openssl 2>/dev/null)
SERVER_SRC := $(wildcard src/server/*.c)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/%.o)
# src/leader: the leader module (no libuv, no raft), also linked by the
# simulation (mk/sim.mk) and test_leader.
LEADER_SRC := $(wildcard src/leader/*.c)
LEADER_OBJ := $(LEADER_SRC:%.c=$(BUILD)/%.o)
SERVER_LIBS := $(shell pkg-config --libs libuv raft 2>/dev/null) $(TLS_LIBS)

$(BUILD)/fenced: $(SERVER_OBJ) $(LEADER_OBJ) $(BUILD)/libfencecore.a $(BUILD)/libfenceproto.a \
                 $(BUILD)/libfencecommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(SERVER_OBJ) $(LEADER_OBJ) $(BUILD)/libfenceproto.a $(BUILD)/libfencecore.a \
	    $(BUILD)/libfencecommon.a $(BUILD)/libfenceproto.a $(SERVER_LIBS) $(SODIUM_LIBS) \
	    -pthread $(LDFLAGS)

BINS += $(BUILD)/fenced

# Integration tests: scripts that start real fenced processes (python ones
# run under /usr/bin/python3; test_fenced_lib.py is their shared helper).
INTEG_TESTS += $(sort $(wildcard tests/integration/test_fenced_*.sh))
INTEG_TESTS += $(filter-out tests/integration/test_fenced_lib.py, \
                 $(sort $(wildcard tests/integration/test_fenced_*.py)))
# The coordination kinds (issue 21): one test per kind (test_fenced_sem*.py
# come in by the glob above).
INTEG_TESTS += tests/integration/test_elect.py tests/integration/test_rw.py \
               tests/integration/test_multi.py

# Fuzz target: the config-file and --peers parsers (tests/fuzz/config_fuzz.c).
FUZZ_TARGETS += config
FUZZ_config_LIBS := $(BUILD)/src/server/config.o $(BUILD)/libfencecommon.a

# fenced's io_destroy reaper (src/server/aio_reap.c, which interposes
# glibc's syscall()): its unit test links the object itself.
$(BUILD)/tests/test_aio_reap: $(BUILD)/tests/unit/test_aio_reap.o $(BUILD)/src/server/aio_reap.o \
                             $(BUILD)/libfencecommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ -pthread $(LDFLAGS)
UNIT_TESTS += $(BUILD)/tests/test_aio_reap
