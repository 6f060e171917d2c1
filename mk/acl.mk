# Users and permissions (src/auth/acl.c, docs/security.md): part of
# libfencecommon.a (mk/common.mk globs its layer folders); it hashes with
# libsodium, so every program that links acl.o adds $(SODIUM_LIBS).

# Unit test of the parser, logins and checks.
# (The gate's part links the connection layer: the RESP codec and libuv.)
$(BUILD)/tests/test_acl: $(BUILD)/tests/unit/test_acl.o $(COMPAT_TABLES) \
                         $(BUILD)/libfencecommon.a $(BUILD)/libfenceproto.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(BUILD)/libfencecommon.a $(LDFLAGS) $(SODIUM_LIBS) \
	    $(shell pkg-config --libs libuv 2>/dev/null)
UNIT_TESTS += $(BUILD)/tests/test_acl

# Fuzz target tests/fuzz/acl_fuzz.c (mk/fuzz.mk).
FUZZ_TARGETS += acl
FUZZ_acl_LIBS := $(BUILD)/src/base/num.o $(COMPAT_TABLES) $(BUILD)/libfencecommon.a \
                 $(BUILD)/libfenceproto.a
FUZZ_acl_LDLIBS = $(SODIUM_LIBS) $(shell pkg-config --libs libuv 2>/dev/null)
FUZZ_acl_FLAGS := -max_len=8192

# The daemons check logins with libsodium (acl.o).
ACL_SODIUM := $(shell pkg-config --libs libsodium 2>/dev/null || echo -lsodium)
$(BUILD)/fenced $(BUILD)/fence-store: LDFLAGS += $(ACL_SODIUM)
