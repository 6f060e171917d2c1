# libfence: the C client library (static + shared), its pkg-config file,
# and the client's tests (make install-lib: mk/install.mk).
HIREDIS_CFLAGS := $(shell pkg-config --cflags hiredis 2>/dev/null)
HIREDIS_LIBS   := $(shell pkg-config --libs hiredis 2>/dev/null || echo -lhiredis)

CLIENT_SRC := $(wildcard src/client/*.c)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/%.o)
CLIENT_LIB := $(BUILD)/libfence.a
CLIENT_SO_VERSION := 0
CLIENT_SO  := $(BUILD)/libfence.so.$(CLIENT_SO_VERSION)
CLIENT_LIBS := $(HIREDIS_LIBS) -lpthread

# Objects are position-independent so one build serves both libraries.
CFLAGS_src_client_ := -fPIC $(HIREDIS_CFLAGS)

$(CLIENT_LIB): $(CLIENT_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(CLIENT_SO): $(CLIENT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libfence.so.$(CLIENT_SO_VERSION) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS)
	ln -sf libfence.so.$(CLIENT_SO_VERSION) $(BUILD)/libfence.so

LIBS_OUT += $(CLIENT_LIB) $(CLIENT_SO)

# Unit tests: tests/unit/test_client*.c, linked with the static library
# (they reach the private helpers in src/client/pure.h too).
CLIENT_TEST_SRC := $(wildcard tests/unit/test_client*.c)
CLIENT_TESTS    := $(CLIENT_TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
$(filter-out $(BUILD)/tests/test_client_cli%,$(CLIENT_TESTS)): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(CLIENT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS)
UNIT_TESTS += $(CLIENT_TESTS)

# The threaded C API test runs against a real fenced, so it is an
# integration test; it is always built with ASan/UBSan (library included),
# whatever the surrounding build, and run by test_client_threads.sh.
CLIENT_ASAN_TEST := $(BUILD)/tests/test_client_threads_asan
$(CLIENT_ASAN_TEST): tests/integration/test_client_threads.c $(CLIENT_SRC) $(wildcard src/client/*.h) include/fence.h
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -MMD -MP,$(CFLAGS)) $(HIREDIS_CFLAGS) -fsanitize=address,undefined \
	    -fno-omit-frame-pointer -fno-sanitize-recover=undefined \
	    -o $@ tests/integration/test_client_threads.c $(CLIENT_SRC) \
	    $(LDFLAGS) -fsanitize=address,undefined $(CLIENT_LIBS)
tests: $(CLIENT_ASAN_TEST)
INTEG_TESTS += $(wildcard tests/integration/test_client_*.sh)

# ThreadSanitizer builds (library included) of the fake-server unit test and
# of the threaded test: the fake one runs as a test of its own, the threaded
# one from test_client_threads.sh after the ASan run.
CLIENT_TSAN_FLAGS := $(filter-out -MMD -MP,$(CFLAGS)) $(HIREDIS_CFLAGS) -O1 -fsanitize=thread
$(BUILD)/tests/test_client_fake_tsan: tests/unit/test_client_fake.c $(CLIENT_SRC) $(wildcard src/client/*.h) include/fence.h
	@mkdir -p $(dir $@)
	$(CC) $(CLIENT_TSAN_FLAGS) -o $@ tests/unit/test_client_fake.c $(CLIENT_SRC) \
	    $(LDFLAGS) -fsanitize=thread $(CLIENT_LIBS)
$(BUILD)/tests/test_client_threads_tsan: tests/integration/test_client_threads.c $(CLIENT_SRC) $(wildcard src/client/*.h) include/fence.h
	@mkdir -p $(dir $@)
	$(CC) $(CLIENT_TSAN_FLAGS) -o $@ tests/integration/test_client_threads.c $(CLIENT_SRC) \
	    $(LDFLAGS) -fsanitize=thread $(CLIENT_LIBS)
ifneq ($(SAN),1)
INTEG_TESTS += $(BUILD)/tests/test_client_fake_tsan
tests: $(BUILD)/tests/test_client_threads_tsan
endif

# make install-lib (the library, its header and pkg-config file): mk/install.mk.

# Fuzz target for the client's and fencectl's parsers (see mk/fuzz.mk).
FUZZ_TARGETS += client
FUZZ_client_LIBS := $(BUILD)/src/cli/args.o $(BUILD)/libfence.a
FUZZ_client_LDLIBS := $(HIREDIS_LIBS) -lpthread
FUZZ_client_FLAGS := -max_len=1024
