# src/common: parts shared by every daemon and library (assertions,
# numbers, bytes, hashing, limits, log, fs, crc32c; the connection layer,
# its guards and TLS; options; ACL; signed tokens; metrics; Redis-client
# compatibility).  One static library; every program links it after its
# own objects.
# -fPIC: the guard's shared library takes crc32c.o from here.
CFLAGS_src_common_ := -fPIC $(shell pkg-config --cflags libuv 2>/dev/null)
COMMON_SRC := $(wildcard src/common/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
COMMON_LIB := $(BUILD)/libfencecommon.a

$(COMMON_LIB): $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

LIBS_OUT += $(COMMON_LIB)

# Client TLS (src/common/tls.c) needs OpenSSL 3 (libssl-dev); a program that
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
