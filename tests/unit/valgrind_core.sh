#!/usr/bin/env bash
# Run the core's unit tests (test_core, test_core_lock) under valgrind
# (memcheck, leak check, into the forked test cases).  Any memory error or leak fails the run.  Skipped
# (exit 77) when valgrind is not installed.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
command -v valgrind >/dev/null || { echo "# skipped: valgrind is not installed"; exit 77; }
log=$(mktemp /tmp/fence-valgrind.XXXXXX)
trap 'rm -f "$log"' EXIT
fails=0
# test_core (snapshots, entries, owners, allocation failures) and
# test_core_lock (the lock and lease commands): the programs split from
# the one test_core.
for name in test_core test_core_lock; do
    t=$BUILD/tests/$name
    if [ ! -x "$t" ]; then
        echo "not ok - $t is not built"
        fails=$((fails + 1))
        continue
    fi
    valgrind --quiet --error-exitcode=1 --trace-children=yes --leak-check=full \
        --errors-for-leak-kinds=definite,indirect,possible "$t" >"$log" 2>&1
    rc=$?
    # Pass the cases through, prefixed so the runner counts this program's
    # verdict once per case.
    sed -n "s/^\(not ok\|ok\) - /\1 - valgrind: $name: /p" "$log"
    if [ "$rc" -ne 0 ]; then
        grep -v '^ok ' "$log" | tail -n 40 | sed 's/^/# /'
        echo "not ok - valgrind reported errors in $name (exit $rc)"
        fails=$((fails + 1))
        continue
    fi
    echo "ok - valgrind: $name ran clean (no errors, no leaks)"
done
[ "$fails" -eq 0 ]
