# Fuzzing: libFuzzer targets for every parser, and their corpus replay.
#
# Adding a fuzz target (any part, from its own mk fragment):
#
#   1. Write tests/fuzz/<name>_fuzz.c.  It includes "fuzz.h" and defines
#        int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
#      It checks properties with assert() or FUZZ_CHECK() (both abort), uses
#      no globals that carry state from one input to the next, and returns 0.
#   2. Register it in your fragment:
#        FUZZ_TARGETS    += <name>
#        FUZZ_<name>_LIBS := $(BUILD)/libfencefoo.a   # libs/objects it links
#        FUZZ_<name>_LDLIBS := -lm                    # optional
#        FUZZ_<name>_FLAGS := -max_len=4096            # optional libFuzzer flags
#      Write the libraries in terms of $(BUILD): the same names are built
#      with the normal compiler for the replay and with clang for fuzzing.
#   3. Commit a small seed corpus in tests/fuzz/corpus/<name>/ (hand-made
#      inputs plus what fuzzing finds; < 200 files, merged with -merge=1).
#      An optional dictionary tests/fuzz/<name>.dict is used when present.
#
# What you get:
#   make test            runs $(BUILD)/tests/fuzz_<name>_replay (a UNIT_TESTS
#                        entry, so also under ASan/UBSan): tests/fuzz/replay.c
#                        linked with your target, fed every corpus file.
#   make fuzz            builds build/fuzz/<name> with clang
#                        -fsanitize=fuzzer,address,undefined (libraries are
#                        recompiled with clang into build/fuzz-objs/, with
#                        coverage instrumentation) and runs each target for
#                        FUZZ_SECONDS (default 60) on tests/fuzz/corpus-new/
#                        <name>/, a scratch copy of its corpus (git-ignored)
#                        where new inputs accumulate.  Crashes are written to
#                        build/fuzz/artifacts/<name>/.
#                        FUZZ_TARGET=<name> picks one target; FUZZ_ARGS adds
#                        libFuzzer flags (e.g. FUZZ_ARGS=-jobs=2).
#   make fuzz-merge      adds the inputs of corpus-new/<name>/ that bring new
#                        edge coverage to the committed corpus (libFuzzer
#                        -merge=1 -use_counters=0).
#   make fuzz-build      only builds the fuzzers.
#
# Reproduce a crash: build/fuzz/<name> build/fuzz/artifacts/<name>/crash-...
# or, without clang: $(BUILD)/tests/fuzz_<name>_replay <dir holding it>.
# See docs/testing.md, "Fuzzing".

FUZZ_SECONDS ?= 60
FUZZ_TARGET  ?=
FUZZ_ARGS    ?=
FUZZ_CC      ?= clang
# Where the clang-built libraries and the fuzzers go.
FUZZ_OBJ_BUILD := build/fuzz-objs
FUZZ_BIN_DIR   := build/fuzz

# The targets parts register; FUZZ_REPLAYS is appended to UNIT_TESTS by the
# Makefile after every fragment has been read (so that fragments sorted
# after this one count too).  Both are expanded late on purpose.
FUZZ_SELECTED = $(if $(FUZZ_TARGET),$(FUZZ_TARGET),$(FUZZ_TARGETS))
FUZZ_REPLAYS  = $(FUZZ_TARGETS:%=$(BUILD)/tests/fuzz_%_replay)

# The targets written with the state machine (src/core): the log entry
# decoder and the snapshot decoder.
FUZZ_TARGETS += entry snapshot
FUZZ_entry_LIBS := $(BUILD)/libfencecore.a $(BUILD)/libfencecommon.a
FUZZ_snapshot_LIBS := $(BUILD)/libfencecore.a $(BUILD)/libfencecommon.a

# FUZZ_<name>_LIBS is looked up per target when a rule is used, which
# needs second expansion ($$ below).
.SECONDEXPANSION:

# The replay: replay.c compiled once per target with its name and corpus.
$(BUILD)/tests/fuzz/replay_%.o: tests/fuzz/replay.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -DFUZZ_NAME='"$*"' \
	    -DFUZZ_CORPUS_DIR='"$(CURDIR)/tests/fuzz/corpus/$*"' -c $< -o $@

$(BUILD)/tests/fuzz_%_replay: $(BUILD)/tests/fuzz/replay_%.o \
                              $(BUILD)/tests/fuzz/%_fuzz.o $$(FUZZ_$$*_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $(filter %.o %.a,$^) $(LDFLAGS) $(FUZZ_$*_LDLIBS)

# The drivers, compiled as by the Makefile's object rule, but by a rule of
# their own so that .PRECIOUS keeps them (make would otherwise delete them
# as intermediate files of the pattern chains here).
$(BUILD)/tests/fuzz/%_fuzz.o: tests/fuzz/%_fuzz.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CFLAGS_tests_fuzz_) -c $< -o $@
.PRECIOUS: $(BUILD)/tests/fuzz/%_fuzz.o $(BUILD)/tests/fuzz/replay_%.o

# The fuzzer itself; only meaningful in the clang build that `make fuzz`
# starts (BUILD=$(FUZZ_OBJ_BUILD)).
$(FUZZ_BIN_DIR)/%: $(BUILD)/tests/fuzz/%_fuzz.o $$(FUZZ_$$*_LIBS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fsanitize=fuzzer -o $@ $(filter %.o %.a,$^) \
	    $(LDFLAGS) $(FUZZ_$*_LDLIBS)

# Recompile everything a fuzzer needs with clang: sanitizers on (the asan
# variant's flags),
# coverage instrumentation for libFuzzer, and warnings not fatal (gcc's
# -Werror build already guards the warnings; a clang-only one must not
# stop a fuzzing run).
fuzz-build:
	@command -v $(FUZZ_CC) >/dev/null || { echo "fuzz: $(FUZZ_CC) not found (scripts/deps.sh installs clang)"; exit 1; }
	@test -n "$(strip $(FUZZ_SELECTED))" || { echo "fuzz: no targets"; exit 1; }
	$(MAKE) --no-print-directory CC=$(FUZZ_CC) BUILD=$(FUZZ_OBJ_BUILD) VARIANT=asan \
	    EXTRA_CFLAGS='$(EXTRA_CFLAGS) -fsanitize=fuzzer-no-link -Wno-error' \
	    $(addprefix $(FUZZ_BIN_DIR)/,$(FUZZ_SELECTED))

fuzz: fuzz-build
	@rc=0; $(foreach t,$(FUZZ_SELECTED),bash tests/fuzz/run.sh $(t) \
	    $(FUZZ_SECONDS) $(FUZZ_$(t)_FLAGS) $(FUZZ_ARGS) || rc=1;) exit $$rc

fuzz-merge: fuzz-build
	@rc=0; $(foreach t,$(FUZZ_SELECTED),bash tests/fuzz/run.sh --merge $(t) \
	    || rc=1;) exit $$rc

.PHONY: fuzz fuzz-build fuzz-merge
