#!/usr/bin/env bash
# Control run: the core's tests must catch the planted heap_stale bug.
# Builds test_core_checkpoint (renewals that leave a lease's place in the
# deadline heap, src/core/heap.h) and test_core_model
# against the heap_stale mutant
# (tests/mutants/heap_stale.patch: the early key a renewal leaves in the
# heap is taken for the deadline, so a renewed lease expires too soon) with
# tests/mutants/build.sh, and expects both test programs to FAIL.  A test
# suite that passes against the bug would prove nothing; a patch that no
# longer applies fails this control loudly.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# The release build: its mutant directories are the ones the simulation's
# controls use (mk/sim.mk), so the core is compiled once per mutant.
BUILD=${BUILD:-$ROOT/build/release}
cd "$ROOT" || exit 1
command -v "${CC:-cc}" >/dev/null || { echo "# skipped: no C compiler"; exit 77; }
out=$BUILD/mutant/heap_stale
log=$(mktemp /tmp/fence-bugctl.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! bash tests/mutants/build.sh heap_stale "$out" tests/test_core_checkpoint tests/test_core_model >"$log" 2>&1; then
    sed 's/^/# /' "$log" | tail -n 20
    echo "not ok - the heap_stale mutant builds (tests/mutants/build.sh)"
    exit 1
fi
fails=0
for t in test_core_checkpoint test_core_model; do
    FENCE_SEEDS=300 "$out/tests/$t" >"$log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q '^not ok' "$log"; then
        echo "ok - $t detects the planted bug: $(grep -m1 '^not ok' "$log" | sed 's/^not ok - //')"
        grep -m2 '^#   seed' "$log" || true
    else
        tail -n 5 "$log" | sed 's/^/# /'
        echo "not ok - $t passes against the planted bug (exit $rc)"
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]
