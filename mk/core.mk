# src/core: the deterministic state machine (a static library).
CORE_SRC := $(wildcard src/core/*.c)
CORE_OBJ := $(CORE_SRC:%.c=$(BUILD)/%.o)
CORE_LIB := $(BUILD)/libfencecore.a

$(CORE_LIB): $(CORE_OBJ)
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

LIBS_OUT += $(CORE_LIB)

# Unit tests: one program per tests/unit/test_core*.c, linked with the core.
CORE_TEST_SRC := $(wildcard tests/unit/test_core*.c)
CORE_TESTS    := $(CORE_TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# Anything linking the core links libfencecommon.a after it (FENCE_ASSERT's
# handler and fence__fatal live there).
$(CORE_TESTS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(CORE_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)
UNIT_TESTS += $(CORE_TESTS)

# Integration-style checks of the core (scripts; run once from the normal
# build): banned calls/includes/globals, test_core under valgrind, and the
# control run (the tests must fail against the grant_expired mutant,
# tests/mutants/grant_expired.patch built by tests/mutants/build.sh).
INTEG_TESTS += tests/tidy.sh tests/unit/valgrind_core.sh \
               tests/unit/core_bug_control.sh tests/unit/multi_bug_control.sh \
               tests/unit/heap_bug_control.sh

# test_core_model runs the core against a reference model kept in its own
# file (tests/unit/core_model.c, core_model.h).
$(BUILD)/tests/test_core_model: $(BUILD)/tests/unit/core_model.o
