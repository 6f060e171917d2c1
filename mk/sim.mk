# tests/sim: deterministic cluster simulation on libraft's raft_fixture,
# running the real state machine (src/core) under the same leader module
# as fenced (src/leader/).  See docs/testing.md.
#
#   make sim SEEDS=N [SEED_START=S] [SIM_ARGS='--nodes 5 --duration 60000']
#   FENCE_SIM_SEED=n build/tests/fence_sim --verbose      replay one seed
CFLAGS_tests_sim_ := $(shell pkg-config --cflags raft 2>/dev/null)
SIM_LIBS := $(shell pkg-config --libs raft 2>/dev/null)

# The simulation's files (sim_*.c, one concern each; see sim_int.h).
SIM_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard tests/sim/sim_*.c)))
SIM_LEADER_OBJ := $(LEADER_OBJ) $(BUILD)/src/server/voter_floor.o $(BUILD)/src/server/observe_set.o
SIM_BIN := $(BUILD)/tests/fence_sim

$(SIM_BIN): $(SIM_OBJ) $(SIM_LEADER_OBJ) $(CORE_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(SIM_LIBS) $(LDFLAGS)

UNIT_TESTS += $(SIM_BIN)

# Unit tests of the leader module through its ops table (fake raft, real
# core): phases, group commit and its cuts, orphans, waits, the rule.
LEADER_TEST := $(BUILD)/tests/test_leader
$(LEADER_TEST): $(BUILD)/tests/sim/test_leader.o $(SIM_LEADER_OBJ) $(CORE_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)

UNIT_TESTS += $(LEADER_TEST)

# Control: the same simulation against the grant_expired mutant (the core
# with tests/mutants/grant_expired.patch applied, built by
# tests/mutants/build.sh in a scratch copy) must report an invariant
# violation.  The build script decides what is out of date; it fails loudly
# when the patch no longer applies.
SIM_BUG_DIR   := $(BUILD)/mutant/grant_expired
SIM_BUG_BIN   := $(SIM_BUG_DIR)/tests/fence_sim
SIM_BUG_CHECK := $(BUILD)/tests/fence_sim_bug_check.sh

$(SIM_BUG_BIN): FORCE_SIM_BUG
	+@bash tests/mutants/build.sh grant_expired $(SIM_BUG_DIR) tests/fence_sim
FORCE_SIM_BUG:

# A tiny wrapper so the runner sees a program without arguments.
$(SIM_BUG_CHECK): $(SIM_BUG_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: the sim must catch the planted core bug (tests/mutants/grant_expired.patch)\nexec "$$(dirname "$$0")/../mutant/grant_expired/tests/fence_sim" --expect-violation --seeds 30 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_BUG_CHECK)

# Control: the same simulation against the leader_read_early mutant (the
# leader module answers a read as soon as its batch is proposed, before the
# writes ahead of it in its pipeline are applied) must report a violation:
# the sim runs the daemon's leader module, not a copy of its own.
SIM_LMUT_DIR   := $(BUILD)/mutant/leader_read_early
SIM_LMUT_BIN   := $(SIM_LMUT_DIR)/tests/fence_sim
SIM_LMUT_CHECK := $(BUILD)/tests/fence_sim_leader_mutant_check.sh

$(SIM_LMUT_BIN): FORCE_SIM_BUG
	+@bash tests/mutants/build.sh leader_read_early $(SIM_LMUT_DIR) tests/fence_sim

$(SIM_LMUT_CHECK): $(SIM_LMUT_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: the sim must catch the planted leader-module bug (tests/mutants/leader_read_early.patch)\nexec "$$(dirname "$$0")/../mutant/leader_read_early/tests/fence_sim" --expect-violation --seeds 30 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_LMUT_CHECK)

# Control: the same simulation against the sem_slot_twice mutant (a waiter
# handed a semaphore's slot is told slot 0, whatever slot it got: two
# leases believe they hold slot 0) must report a violation.
SIM_SMUT_DIR   := $(BUILD)/mutant/sem_slot_twice
SIM_SMUT_BIN   := $(SIM_SMUT_DIR)/tests/fence_sim
SIM_SMUT_CHECK := $(BUILD)/tests/fence_sim_sem_mutant_check.sh

$(SIM_SMUT_BIN): FORCE_SIM_BUG
	+@bash tests/mutants/build.sh sem_slot_twice $(SIM_SMUT_DIR) tests/fence_sim

$(SIM_SMUT_CHECK): $(SIM_SMUT_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: the sim must catch the planted semaphore bug (tests/mutants/sem_slot_twice.patch)\nexec "$$(dirname "$$0")/../mutant/sem_slot_twice/tests/fence_sim" --expect-violation --seeds 30 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_SMUT_CHECK)

# Control: the simulation against the shared_new_token mutant (a shared
# holder joining a phase is given a new token, so the holders admitted
# before it no longer carry the phase's token) must report a violation
# (sim_shared.c); the unit tests (test_core_shared) fail against it too.
SIM_RWMUT_DIR   := $(BUILD)/mutant/shared_new_token
SIM_RWMUT_BIN   := $(SIM_RWMUT_DIR)/tests/fence_sim
SIM_RWMUT_CHECK := $(BUILD)/tests/fence_sim_shared_mutant_check.sh

$(SIM_RWMUT_BIN): FORCE_SIM_BUG
	+@bash tests/mutants/build.sh shared_new_token $(SIM_RWMUT_DIR) tests/fence_sim

$(SIM_RWMUT_CHECK): $(SIM_RWMUT_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: the sim must catch the planted shared-phase bug (tests/mutants/shared_new_token.patch)\nexec "$$(dirname "$$0")/../mutant/shared_new_token/tests/fence_sim" --expect-violation --seeds 30 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_RWMUT_CHECK)

# Control: the same simulation against the multi_partial mutant (a waiting
# multi-lock first in every queue is granted the names that are free and
# not the held ones: a multi-lock granted partly) must report a violation.
SIM_MMUT_DIR   := $(BUILD)/mutant/multi_partial
SIM_MMUT_BIN   := $(SIM_MMUT_DIR)/tests/fence_sim
SIM_MMUT_CHECK := $(BUILD)/tests/fence_sim_multi_mutant_check.sh

$(SIM_MMUT_BIN): FORCE_SIM_BUG
	+@bash tests/mutants/build.sh multi_partial $(SIM_MMUT_DIR) tests/fence_sim

$(SIM_MMUT_CHECK): $(SIM_MMUT_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: the sim must catch the planted multi-lock bug (tests/mutants/multi_partial.patch)\nexec "$$(dirname "$$0")/../mutant/multi_partial/tests/fence_sim" --expect-violation --seeds 30 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_MMUT_CHECK)

# Control: the renew_unrecorded mutant (the leader answers renewals without
# an entry but forgets to checkpoint every other one: a lease expires before
# the TTL of its last answered renewal ran out, docs/leases.md) must be
# caught by the sim's renewal check.
SIM_RMUT_DIR   := $(BUILD)/mutant/renew_unrecorded
SIM_RMUT_BIN   := $(SIM_RMUT_DIR)/tests/fence_sim
SIM_RMUT_CHECK := $(BUILD)/tests/fence_sim_renew_mutant_check.sh

$(SIM_RMUT_BIN): FORCE_SIM_BUG
	+@bash tests/mutants/build.sh renew_unrecorded $(SIM_RMUT_DIR) tests/fence_sim

$(SIM_RMUT_CHECK): $(SIM_RMUT_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: the sim must catch the planted renewal bug (tests/mutants/renew_unrecorded.patch)\nexec "$$(dirname "$$0")/../mutant/renew_unrecorded/tests/fence_sim" --expect-violation --seeds 90 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_RMUT_CHECK)

# Control: the elect_lost_revision mutant (a leader that leaves takes no
# new election revision: observers would never learn it is gone) must be
# caught by the simulation's election model (sim_model.c).
SIM_EMUT_DIR   := $(BUILD)/mutant/elect_lost_revision
SIM_EMUT_BIN   := $(SIM_EMUT_DIR)/tests/fence_sim
SIM_EMUT_CHECK := $(BUILD)/tests/fence_sim_elect_mutant_check.sh

$(SIM_EMUT_BIN): FORCE_SIM_BUG
	+@bash tests/mutants/build.sh elect_lost_revision $(SIM_EMUT_DIR) tests/fence_sim

$(SIM_EMUT_CHECK): $(SIM_EMUT_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: the sim must catch the planted election bug (tests/mutants/elect_lost_revision.patch)\nexec "$$(dirname "$$0")/../mutant/elect_lost_revision/tests/fence_sim" --expect-violation --seeds 30 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_EMUT_CHECK)

# Control: the observe_wake_dropped mutant (src/server/observe_set.c, the
# parked ELECTION.OBSERVEs' rule fenced and the sim share, wakes one
# observer per poll and leaves the others due in the same turn parked) must
# be caught by the simulation's observers (sim_observe.c).
SIM_OMUT_DIR   := $(BUILD)/mutant/observe_wake_dropped
SIM_OMUT_BIN   := $(SIM_OMUT_DIR)/tests/fence_sim
SIM_OMUT_CHECK := $(BUILD)/tests/fence_sim_observe_mutant_check.sh

$(SIM_OMUT_BIN): FORCE_SIM_BUG
	+@bash tests/mutants/build.sh observe_wake_dropped $(SIM_OMUT_DIR) tests/fence_sim

$(SIM_OMUT_CHECK): $(SIM_OMUT_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: the sim must catch the planted dropped wake-up (tests/mutants/observe_wake_dropped.patch)\nexec "$$(dirname "$$0")/../mutant/observe_wake_dropped/tests/fence_sim" --expect-violation --seeds 30 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_OMUT_CHECK)

# Control: the same simulation with the voter floor switched off
# (FENCE_SIM_NO_FLOOR=1: membership changes remove whatever they pick) must
# report a violation: a removal of the last voter, or below a live quorum,
# leaves a cluster that never settles.  So the floor is what keeps the
# membership runs passing.
SIM_FLOOR_CHECK := $(BUILD)/tests/fence_sim_floor_check.sh
$(SIM_FLOOR_CHECK): $(SIM_BIN) mk/sim.mk
	@mkdir -p $(dir $@)
	@printf '#!/bin/sh\n# control: without the voter floor the sim'"'"'s membership changes must break a cluster\nFENCE_SIM_NO_FLOOR=1 exec "$$(dirname "$$0")/fence_sim" --expect-violation --seeds 300 --duration 15000\n' >$@
	@chmod +x $@

UNIT_TESTS += $(SIM_FLOOR_CHECK)

SEEDS ?= 20
SEED_START ?= 1
SIM_ARGS ?=
sim: $(SIM_BIN)
	$(SIM_BIN) --seeds $(SEEDS) --start $(SEED_START) $(SIM_ARGS)

.PHONY: sim FORCE_SIM_BUG

# Unit test of the voter floor (src/server/voter_floor.c), the pure rule
# that fenced's CLUSTER.REMOVE and the simulation's membership changes share.
VOTER_FLOOR_TEST := $(BUILD)/tests/test_voter_floor
$(VOTER_FLOOR_TEST): $(BUILD)/tests/sim/test_voter_floor.o $(BUILD)/src/server/voter_floor.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)

UNIT_TESTS += $(VOTER_FLOOR_TEST)

# A minimal raft_fixture reproduction of a libraft 0.15 liveness bug the
# simulation found (docs/cluster.md, libraft pitfalls, 5): a leader that does
# not count itself for an entry whose write began while it was a follower.
LIBRAFT_SELFVOTE_TEST := $(BUILD)/tests/test_libraft_selfvote
$(LIBRAFT_SELFVOTE_TEST): $(BUILD)/tests/sim/test_libraft_selfvote.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(SIM_LIBS) $(LDFLAGS)

UNIT_TESTS += $(LIBRAFT_SELFVOTE_TEST)

# The mutant controls above check the simulation, not the code under test
# (a planted bug must be caught): they run in the release variant only.
# Under ASan they built seven more copies of the tree to give the same
# answers; fence_sim, test_leader and the floor control still run there.
ifeq ($(VARIANT),asan)
UNIT_TESTS := $(filter-out $(SIM_BUG_CHECK) $(BUILD)/tests/fence_sim_%_mutant_check.sh,$(UNIT_TESTS))
endif
