#!/usr/bin/env bash
# Control run: the multi-lock tests must catch a multi-lock granted partly.
# Builds test_core_multi against the multi_partial mutant
# (tests/mutants/multi_partial.patch: a waiting multi-lock first in every
# queue gets the free names and not the held ones) with
# tests/mutants/build.sh, and expects it to FAIL.  A patch that no longer
# applies fails this control loudly.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
# The release build: its mutant directories are the ones the simulation's
# controls use (mk/sim.mk), so the core is compiled once per mutant.
BUILD=${BUILD:-$ROOT/build/release}
cd "$ROOT" || exit 1
command -v "${CC:-cc}" >/dev/null || { echo "# skipped: no C compiler"; exit 77; }
out=$BUILD/mutant/multi_partial
log=$(mktemp /tmp/fence-multictl.XXXXXX)
trap 'rm -f "$log"' EXIT
if ! bash tests/mutants/build.sh multi_partial "$out" tests/test_core_multi >"$log" 2>&1; then
    sed 's/^/# /' "$log" | tail -n 20
    echo "not ok - the multi_partial mutant builds (tests/mutants/build.sh)"
    exit 1
fi
"$out/tests/test_core_multi" >"$log" 2>&1
rc=$?
if [ "$rc" -ne 0 ] && grep -q '^not ok' "$log"; then
    echo "ok - test_core_multi detects the planted bug: $(grep -c '^not ok' "$log") cases fail, e.g. $(grep -m1 '^not ok' "$log" | sed 's/^not ok - //')"
else
    tail -n 5 "$log" | sed 's/^/# /'
    echo "not ok - test_core_multi passes against the planted bug (exit $rc)"
    exit 1
fi
