# fenced: top-level Makefile.
#
# Every part of the tree has a fragment in mk/*.mk that adds its sources,
# programs and tests to the variables below.  Build output goes to $(BUILD)
# (build/ by default; build/asan for the sanitizer variant).
#
#   make            build everything
#   make run        install missing packages, build, run fenced on 127.0.0.1:7700
#   make test       install missing packages, build, run every test
#   make bench      benchmark table (see mk/*.mk for the parts it covers)
#   make fuzz       run the libFuzzer targets (clang), FUZZ_SECONDS each

CC       ?= cc
BUILD    ?= build
SAN      ?= 0
PREFIX   ?= /usr/local

PKGS     := raft libuv
WARN     := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
            -Wmissing-prototypes -Wno-missing-field-initializers
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE $(WARN) -fvisibility=hidden -Iinclude -Isrc $(EXTRA_CFLAGS) \
            -MMD -MP
LDFLAGS  ?=
# EXTRA_CFLAGS: extra compiler flags (the fuzz build adds its own).  Planted
# bugs are patches built by tests/mutants/build.sh, never flags.
EXTRA_CFLAGS ?=
ifeq ($(SAN),1)
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif

# Filled in by the fragments.
BINS         :=   # programs installed / used by tests
LIBS_OUT     :=   # libraries
UNIT_TESTS   :=   # C test programs over pure code (also run under ASan/UBSan)
INTEG_TESTS  :=   # test programs/scripts that start real processes
FUZZ_TARGETS :=   # libFuzzer drivers (names under tests/fuzz/)

all:

include $(sort $(wildcard mk/*.mk))
# Corpus replays of the fuzz targets (mk/fuzz.mk), added once every fragment
# has registered its targets.
UNIT_TESTS += $(FUZZ_REPLAYS)

all: $(BINS) $(LIBS_OUT)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CFLAGS_$(subst /,_,$(dir $<))) -c $< -o $@

# Test programs only (no daemon side effects); used by scripts/test.sh.
tests: all $(UNIT_TESTS) $(filter $(BUILD)/%,$(INTEG_TESTS))
unit-tests: $(UNIT_TESTS)

list-unit:
	@echo $(UNIT_TESTS)
list-integ:
	@echo $(INTEG_TESTS)

test:
	@bash scripts/test.sh

run:
	@bash scripts/deps.sh run
	@$(MAKE) --no-print-directory $(BUILD)/fenced
	./$(BUILD)/fenced --config fenced.conf

clean:
	rm -rf build

.PHONY: all tests unit-tests list-unit list-integ test run clean
.DELETE_ON_ERROR:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
