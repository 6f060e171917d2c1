# The layers every daemon and library share, one folder each, each below
# the ones that use it (docs/conventions.md "Layout"):
#   src/base    assertions, numbers, bytes, hashing, hex, limits, log, fs,
#               crc32c, options (src/proto sits on it)
#   src/net     the connection layer, its guards, TLS and the memory-BIO pump
#   src/ops     metrics and their HTTP endpoint
#   src/token   signed fencing tokens
#   src/auth    the ACL: users, rules, categories (pure)
#   src/daemon  the RESP daemon skeleton: listeners and shared options,
#               AUTH/HELLO/CLIENT/COMMAND (Redis compatibility), the served
#               ACL (LOG, reload, per-user connections), start-up warnings
# One static library, libfencecommon.a; every program links it after its
# own objects.
# -fPIC: the guard's shared library takes crc32c.o from here, libfence
# assert.o and num.o.
COMMON_DIRS := base net ops token auth daemon
$(foreach d,$(COMMON_DIRS),$(eval CFLAGS_src_$(d)_ := -fPIC $(shell pkg-config --cflags libuv 2>/dev/null)))
COMMON_SRC := $(foreach d,$(COMMON_DIRS),$(wildcard src/$(d)/*.c))
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
COMMON_LIB := $(BUILD)/libfencecommon.a

$(COMMON_LIB): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

LIBS_OUT += $(COMMON_LIB)

# Client TLS (src/net/tls.c) needs OpenSSL 3 (libssl-dev); a program that
# links tls.o (fenced, fence-store) adds $(TLS_LIBS).  tls_conf.c is pure.
TLS_LIBS := $(shell pkg-config --libs libssl libcrypto 2>/dev/null || echo -lssl -lcrypto)

# Unit tests: one program per tests/unit/test_common_*.c, linked with the
# library (the connection layer's test also needs the RESP codec and libuv).
COMMON_TEST_SRC := $(wildcard tests/unit/test_common_*.c)
COMMON_TESTS    := $(COMMON_TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
$(COMMON_TESTS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(COMMON_LIB) $(BUILD)/libfenceproto.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(COMMON_LIB) $(LDFLAGS) $(shell pkg-config --libs libuv 2>/dev/null) $(SODIUM_LIBS) $(TLS_LIBS)
UNIT_TESTS += $(COMMON_TESTS)
