# libfence: the C client library (static + shared), its pkg-config file,
# and the client's tests (make install-lib: mk/install.mk).
HIREDIS_CFLAGS := $(shell pkg-config --cflags hiredis 2>/dev/null)
HIREDIS_LIBS   := $(shell pkg-config --libs hiredis 2>/dev/null || echo -lhiredis)

CLIENT_SRC := $(wildcard src/libfence/*.c)
CLIENT_OBJ := $(CLIENT_SRC:%.c=$(BUILD)/%.o)
CLIENT_LIB := $(BUILD)/libfence.a
CLIENT_SO_VERSION := 0
CLIENT_SO  := $(BUILD)/libfence.so.$(CLIENT_SO_VERSION)
CLIENT_LIBS := $(HIREDIS_LIBS) $(shell pkg-config --libs openssl 2>/dev/null || echo -lssl -lcrypto) -lpthread

# Objects are position-independent so one build serves both libraries.
# Both carry src/base's assert.o (FENCE_ASSERT's handler) and num.o (the
# decimal parsers), so that the installed libfence needs nothing else.
CFLAGS_src_libfence_ := -fPIC $(HIREDIS_CFLAGS)

$(CLIENT_LIB): $(CLIENT_OBJ) $(COMMON_ASSERT_OBJ) $(BUILD)/src/base/num.o
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

$(CLIENT_SO): $(CLIENT_OBJ) $(COMMON_ASSERT_OBJ) $(BUILD)/src/base/num.o
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libfence.so.$(CLIENT_SO_VERSION) $(LDFLAGS) -o $@ $^ $(CLIENT_LIBS)
	ln -sf libfence.so.$(CLIENT_SO_VERSION) $(BUILD)/libfence.so

LIBS_OUT += $(CLIENT_LIB) $(CLIENT_SO)

# Unit tests: tests/unit/test_client*.c, linked with the static library
# (they reach the private helpers in src/libfence/pure.h too).
CLIENT_TEST_SRC := $(wildcard tests/unit/test_client*.c)
CLIENT_TESTS    := $(CLIENT_TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
$(filter-out $(BUILD)/tests/test_client_cli%,$(CLIENT_TESTS)): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(CLIENT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS)
UNIT_TESTS += $(CLIENT_TESTS)

# The threaded C API test runs against a real fenced, so it is an
# integration test (tests/integration/test_client_threads.sh runs it).  It
# is built, with the library, in the asan and the tsan variants
# (build/asan/tests/test_client_threads, build/tsan/tests/...): the same
# object rule as everything else, only the variant's flags differ.
# test_client_fake and test_client_fake_store (unit tests over fake servers)
# also run under tsan.
CFLAGS_tests_integration_ := $(HIREDIS_CFLAGS)
CLIENT_THREADS_TEST := $(BUILD)/tests/test_client_threads
$(CLIENT_THREADS_TEST): $(BUILD)/tests/integration/test_client_threads.o $(CLIENT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS)
TSAN_TESTS += $(BUILD)/tests/test_client_fake $(BUILD)/tests/test_client_fake_store
tsan-tests: $(CLIENT_THREADS_TEST)
ifeq ($(VARIANT),asan)
unit-tests: $(CLIENT_THREADS_TEST)
endif
INTEG_TESTS += $(wildcard tests/integration/test_client_*.sh)

# libfence's election calls against a real fenced (test_client_elect.sh).
CLIENT_ELECT_TEST := $(BUILD)/tests/test_client_elect
$(CLIENT_ELECT_TEST): $(BUILD)/tests/integration/test_client_elect.o $(CLIENT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS)
tests: $(CLIENT_ELECT_TEST)

# libfence's semaphore calls against a real fenced (test_client_sem.sh).
CLIENT_SEM_TEST := $(BUILD)/tests/test_client_sem
$(CLIENT_SEM_TEST): $(BUILD)/tests/integration/test_client_sem.o $(CLIENT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS)
tests: $(CLIENT_SEM_TEST)

# libfence's multi-lock calls (SIGNED too) against a real fenced and a
# verifying fence-store (test_client_multi.sh).
CLIENT_MULTI_TEST := $(BUILD)/tests/test_client_multi
$(CLIENT_MULTI_TEST): $(BUILD)/tests/integration/test_client_multi.o $(CLIENT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS)
tests: $(CLIENT_MULTI_TEST)

# The fence-store helper over TLS with a login: a C program run by
# tests/integration/test_client_store_tls.py against a real fence-store
# (built in every variant; the test prefers the asan one).
CLIENT_STORE_TLS_TEST := $(BUILD)/tests/test_client_store_tls
$(CLIENT_STORE_TLS_TEST): $(BUILD)/tests/integration/test_client_store_tls.o $(CLIENT_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(CLIENT_LIBS)
tests: $(CLIENT_STORE_TLS_TEST)
ifeq ($(VARIANT),asan)
unit-tests: $(CLIENT_STORE_TLS_TEST)
endif
INTEG_TESTS += tests/integration/test_client_store_tls.py

# make install-lib (the library, its header and pkg-config file): mk/install.mk.

# Fuzz target for the client's and fencectl's parsers (see mk/fuzz.mk).
FUZZ_TARGETS += client
FUZZ_client_LIBS := $(BUILD)/src/fencectl/args.o $(BUILD)/libfence.a
FUZZ_client_LDLIBS := $(CLIENT_LIBS)
FUZZ_client_FLAGS := -max_len=1024
INTEG_TESTS += tests/integration/test_client_tls.py

# The fake RESP servers the test_client_fake* programs share
# (tests/unit/client_fake.c, client_fake.h).
$(filter $(BUILD)/tests/test_client_fake%,$(CLIENT_TESTS)): $(BUILD)/tests/unit/client_fake.o
