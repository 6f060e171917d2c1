# src/guard: libfence-guard, the resource-side fencing-token guard
# (include/fence_guard.h), as a static and a shared library.
GUARD_SRC := $(wildcard src/guard/*.c)
GUARD_OBJ := $(GUARD_SRC:%.c=$(BUILD)/%.o) $(BUILD)/src/base/crc32c.o
GUARD_LIB := $(BUILD)/libfence-guard.a
GUARD_SO_VERSION := 0
GUARD_SO  := $(BUILD)/libfence-guard.so.$(GUARD_SO_VERSION)
# -fPIC so one set of objects serves both libraries.
CFLAGS_src_guard_ := -fPIC -pthread

# Both libraries carry src/base's assert.o (FENCE_ASSERT's handler).
$(GUARD_LIB): $(GUARD_OBJ) $(COMMON_ASSERT_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

$(GUARD_SO): $(GUARD_OBJ) $(COMMON_ASSERT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) -shared -pthread -Wl,-soname,libfence-guard.so.$(GUARD_SO_VERSION) -o $@ $^ $(LDFLAGS)
	ln -sf libfence-guard.so.$(GUARD_SO_VERSION) $(BUILD)/libfence-guard.so

LIBS_OUT += $(GUARD_LIB) $(GUARD_SO)

# Unit tests: one program per tests/unit/test_guard*.c, linked with the
# static library (they may also use its internal format.h functions).
GUARD_TEST_SRC := $(wildcard tests/unit/test_guard*.c)
GUARD_TESTS    := $(GUARD_TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
$(GUARD_TESTS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(GUARD_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -o $@ $^ $(LDFLAGS)
UNIT_TESTS += $(GUARD_TESTS)

# Fuzz target tests/fuzz/guard_fuzz.c: the log decoder (see mk/fuzz.mk).
FUZZ_TARGETS += guard
FUZZ_guard_LIBS := $(BUILD)/libfence-guard.a
FUZZ_guard_LDLIBS := -pthread

guard: $(GUARD_LIB) $(GUARD_SO) $(GUARD_TESTS)

# make bench-guard: admits/s and admits per fsync for 1..64 threads, on
# distinct fences and on one fence (tests/bench/guard_bench.c).
$(BUILD)/guard-bench: $(BUILD)/tests/bench/guard_bench.o $(GUARD_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -o $@ $^ $(LDFLAGS)
bench-all: bench-guard
bench-guard: $(BUILD)/guard-bench
	./$(BUILD)/guard-bench $(GUARD_BENCH_ARGS)

.PHONY: guard bench bench-guard
