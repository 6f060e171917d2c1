# Signed fencing tokens (src/token/signtok*.c, docs/security.md): libsodium,
# and who links it.
#
# The signtok objects are part of $(COMMON_LIB) (mk/common.mk globs
# src/token/*.c).  A program that calls a fence_signtok_* function links
# $(COMMON_LIB) and $(SODIUM_LIBS) (-lsodium); a program that does not needs
# neither (a static library only brings in the objects that are used).
# This fragment wires the parts that use signed tokens today:
#   libfence-guard (.a and .so)  carries signtok.o, signtok_file.o, assert.o
#                                itself, so a resource links only the guard
#                                (and -lsodium, -pthread)
#   the guard's tests and bench  + -lsodium
#   fencectl (keygen)            + $(COMMON_LIB) -lsodium
# Still to wire by the daemons' owners: fenced, fence-store and fence-proxy
# add $(COMMON_LIB) $(SODIUM_LIBS) to their link lines.
SODIUM_CFLAGS := $(shell pkg-config --cflags libsodium 2>/dev/null)
SODIUM_LIBS   := $(shell pkg-config --libs libsodium 2>/dev/null || echo -lsodium)

# Position-independent, because libfence-guard.so includes these objects.
CFLAGS_src_token_ += $(SODIUM_CFLAGS)
CFLAGS_src_auth_ += $(SODIUM_CFLAGS)

SIGNTOK_OBJ := $(BUILD)/src/token/signtok.o $(BUILD)/src/token/signtok_file.o \
               $(BUILD)/src/base/assert.o

# libfence-guard: the guard's signed-token check (src/guard/guard.c, verify_keys_path) uses them.
$(GUARD_LIB) $(GUARD_SO): $(SIGNTOK_OBJ)
$(GUARD_SO): LDFLAGS += $(SODIUM_LIBS)
$(GUARD_TESTS) $(BUILD)/guard-bench: LDFLAGS += $(SODIUM_LIBS)

# fencectl keygen (src/fencectl/keygen.c).
$(FENCECTL): $(COMMON_LIB)
$(FENCECTL): LDFLAGS += $(SODIUM_LIBS)

# Unit tests of the format, the key files, signing and the cache.
SIGNTOK_TESTS := $(BUILD)/tests/test_signtok
$(SIGNTOK_TESTS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -o $@ $^ $(LDFLAGS) $(SODIUM_LIBS)
UNIT_TESTS += $(SIGNTOK_TESTS)

# Fuzz target tests/fuzz/signtok_fuzz.c: the signed-token and key-file
# parsers (see mk/fuzz.mk).
FUZZ_TARGETS += signtok
FUZZ_signtok_LIBS := $(BUILD)/libfencecommon.a
FUZZ_signtok_LDLIBS := $(SODIUM_LIBS) -pthread
FUZZ_signtok_FLAGS := -max_len=4096

signtok: $(COMMON_LIB) $(SIGNTOK_TESTS)
.PHONY: signtok

# PostgreSQL's signed admit (adapters/postgres/fence_signed.sql).
INTEG_TESTS += tests/integration/test_pg_adapter_signed.py

# make bench-signed: grants/s with and without SIGNED, and fence-store
# FENCE.ADMIT with a plain token vs a verified one, in the same run
# (tests/bench/signed_bench.sh).
bench-all: bench-signed
bench-signed: $(BUILD)/fenced $(BUILD)/fence-store $(BUILD)/fencectl
	@BUILD=$(BUILD) bash tests/bench/signed_bench.sh

.PHONY: bench bench-signed
