# fenced: top-level Makefile.
#
# Every part of the tree has a fragment in mk/*.mk that adds its sources,
# programs and tests to the variables below.  One variant scheme: every
# variant builds the same targets with the same rules into its own
# directory, build/<variant>:
#
#   VARIANT=release   (default) -O2 -g                      build/release
#   VARIANT=asan      ASan + UBSan, -O2 -g                  build/asan
#   VARIANT=tsan      ThreadSanitizer, -O1 -g               build/tsan
#
# (SAN=1 is the old spelling of VARIANT=asan.)  The release build also
# keeps convenience links build/<program> -> release/<program> (and
# build/tests -> release/tests), so build/fenced and build/fencectl work.
#
#   make            build everything (release)
#   make VARIANT=asan build/asan/fenced      one program of a variant
#   make run        install missing packages, build fenced, fencectl and
#                   fence-store (all the README's tour uses), run fenced on
#                   127.0.0.1:7700 (make run-build: the same without running)
#   make test       install missing packages, build the variants, run every test
#   make bench      one benchmark table from one run (mk/bench.mk, docs/performance.md);
#                   make bench-all adds every older per-part benchmark
#   make fuzz       run the libFuzzer targets (clang), FUZZ_SECONDS each

CC       ?= cc
SAN      ?= 0
ifeq ($(SAN),1)
VARIANT  ?= asan
endif
VARIANT  ?= release
ifeq ($(filter release asan tsan,$(VARIANT)),)
$(error VARIANT must be release, asan or tsan (not '$(VARIANT)'))
endif
BUILD    ?= build/$(VARIANT)
PREFIX   ?= /usr/local

PKGS     := raft libuv
WARN     := -Wall -Wextra -Werror -Wshadow -Wpointer-arith -Wstrict-prototypes \
            -Wmissing-prototypes -Wno-missing-field-initializers
ifeq ($(VARIANT),tsan)
CFLAGS   ?= -O1 -g
else
CFLAGS   ?= -O2 -g
endif
CFLAGS   += -std=c11 -D_GNU_SOURCE $(WARN) -fvisibility=hidden -Iinclude -Isrc $(EXTRA_CFLAGS) \
            -MMD -MP
LDFLAGS  ?=
# EXTRA_CFLAGS: extra compiler flags (the fuzz build adds its own).  Planted
# bugs are patches built by tests/mutants/build.sh, never flags.
EXTRA_CFLAGS ?=
ifeq ($(VARIANT),asan)
SAN      := 1
CFLAGS   += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
LDFLAGS  += -fsanitize=address,undefined
endif
ifeq ($(VARIANT),tsan)
CFLAGS   += -fsanitize=thread
LDFLAGS  += -fsanitize=thread
endif

# Filled in by the fragments.
BINS         :=   # programs installed / used by tests
LIBS_OUT     :=   # libraries
UNIT_TESTS   :=   # C test programs over pure code (also run under ASan/UBSan)
INTEG_TESTS  :=   # test programs/scripts that start real processes
TSAN_TESTS   :=   # C test programs also run in the tsan variant (threaded code)
FUZZ_TARGETS :=   # libFuzzer drivers (names under tests/fuzz/)

all:

# FENCE_ASSERT's handler (src/base/assert.c): libfence, libfence-guard and
# libfenceproto embed this one object, so that each is complete on its own
# (the installed libraries too); programs link build/<variant>/libfencecommon.a.
COMMON_ASSERT_OBJ := $(BUILD)/src/base/assert.o
# The daemons' command tables (src/server/commands_table.c,
# src/store/commands_table.c), which tests of the ACL and compat modules
# link (mk/acl.mk, mk/compat.mk, mk/cmdtab.mk).
COMPAT_TABLES := $(BUILD)/src/server/commands_table.o $(BUILD)/src/store/commands_table.o
include $(sort $(wildcard mk/*.mk))
# Corpus replays of the fuzz targets (mk/fuzz.mk), added once every fragment
# has registered its targets.
UNIT_TESTS += $(FUZZ_REPLAYS)
# Asserts stay on: no <assert.h> outside src/server and src/store.
INTEG_TESTS += tests/tidy_asserts.sh

all: $(BINS) $(LIBS_OUT)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CFLAGS_$(subst /,_,$(dir $<))) -c $< -o $@

# Test programs only (no daemon side effects); used by scripts/test.sh.
tests: all $(UNIT_TESTS) $(filter $(BUILD)/%,$(INTEG_TESTS))
unit-tests: $(UNIT_TESTS)
tsan-tests: $(TSAN_TESTS)

list-unit:
	@echo $(UNIT_TESTS)
list-integ:
	@echo $(INTEG_TESTS)
list-tsan:
	@echo $(TSAN_TESTS)
# What make run builds (tests/integration/test_fencectl_tour.sh checks that
# the README's tour uses nothing else).
list-run:
	@echo $(RUN_PROGS)

# Convenience links of the release build: build/<name> -> release/<name>
# for every program and library directly in build/release, and build/tests
# (a directory left there by the old single-directory layout is replaced).
ifeq ($(BUILD),build/release)
RELEASE_TOP := $(foreach f,$(BINS) $(LIBS_OUT),$(if $(findstring /,$(f:build/release/%=%)),,$(f)))
RELEASE_LINKS := $(RELEASE_TOP:build/release/%=build/%)
$(RELEASE_LINKS): build/%: build/release/%
	@ln -sfn release/$* $@
release-tests-link:
	@mkdir -p build/release/tests
	@[ -L build/tests ] || { rm -rf build/tests && ln -s release/tests build/tests; }
all tests: $(RELEASE_LINKS) release-tests-link
.PHONY: release-tests-link
endif

test:
	@bash scripts/test.sh

# What the README's tour uses besides redis-cli: fenced, fencectl (as
# build/fencectl) and fence-store (make run-store).  Ports: docs/ports.md.
RUN_PROGS := $(BUILD)/fenced $(BUILD)/fencectl $(BUILD)/fence-store
ifeq ($(BUILD),build/release)
RUN_PROGS += build/fenced build/fencectl build/fence-store
endif
run-build:
	@bash scripts/deps.sh run
	@$(MAKE) --no-print-directory $(RUN_PROGS)

run: run-build
	./$(BUILD)/fenced --config fenced.conf

clean:
	rm -rf build

.PHONY: all tests unit-tests tsan-tests list-unit list-integ list-tsan list-run test run run-build clean
.DELETE_ON_ERROR:

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
