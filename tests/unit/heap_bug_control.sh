#!/usr/bin/env bash
# Control run: the core's tests must catch the planted heap_stale bug
# (tests/mutants/heap_stale.patch: the early key a renewal leaves in the
# deadline heap, src/core/heap.h, is taken for the deadline, so a renewed
# lease expires too soon): test_core_checkpoint and test_core_model must
# FAIL against it.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/bug_control.sh"
bug_control heap_stale test_core_checkpoint test_core_model
