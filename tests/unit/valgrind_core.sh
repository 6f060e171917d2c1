#!/usr/bin/env bash
# Run the core's unit tests under valgrind (memcheck, leak check, into the
# forked test cases).  Any memory error or leak fails the run.  Skipped
# (exit 77) when valgrind is not installed.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
command -v valgrind >/dev/null || { echo "# skipped: valgrind is not installed"; exit 77; }
t=$BUILD/tests/test_core
[ -x "$t" ] || { echo "not ok - $t is not built"; exit 1; }
log=$(mktemp /tmp/fence-valgrind.XXXXXX)
trap 'rm -f "$log"' EXIT
valgrind --quiet --error-exitcode=1 --trace-children=yes --leak-check=full \
    --errors-for-leak-kinds=definite,indirect,possible "$t" >"$log" 2>&1
rc=$?
# Pass the cases through, prefixed so the runner counts this program's
# verdict once per case.
sed -n 's/^\(not ok\|ok\) - /\1 - valgrind: /p' "$log"
if [ "$rc" -ne 0 ]; then
    grep -v '^ok ' "$log" | tail -n 40 | sed 's/^/# /'
    echo "not ok - valgrind reported errors (exit $rc)"
    exit 1
fi
echo "ok - valgrind: test_core ran clean (no errors, no leaks)"
