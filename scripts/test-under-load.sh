#!/usr/bin/env bash
# Runs the tests while CPU hogs keep every core busy, to show that no test
# waits on the clock where it should wait on a condition (issue 19).
#
#   scripts/test-under-load.sh            make test, under the hogs
#   scripts/test-under-load.sh TEST...    tests/run.sh TEST..., under the hogs
#
# HOGS (default 2, the cores of the reference machine) is how many
# `yes > /dev/null` run meanwhile.  They are stopped by PID when the run
# ends (or the script is interrupted); the exit status is the test run's.
# Not for CI: it needs the machine to itself, and takes longer than a
# plain run.
set -u
cd "$(dirname "$0")/.." || exit 1

n=${HOGS:-2}
case $n in ''|*[!0-9]*) echo "test-under-load: HOGS must be a number" >&2; exit 64 ;; esac
hogs=()
stop_hogs() {
    local p
    for p in "${hogs[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${hogs[@]}"; do wait "$p" 2>/dev/null; done
    hogs=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

echo "# test-under-load: $n CPU hogs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for _ in $(seq 1 "$n"); do
    yes >/dev/null &
    hogs+=("$!")
done
start=$(date +%s)
if [ $# -eq 0 ]; then
    make test
else
    bash tests/run.sh "$@"
fi
rc=$?
stop_hogs
echo "# test-under-load: $(( $(date +%s) - start )) s with $n hogs, exit status $rc"
exit "$rc"
