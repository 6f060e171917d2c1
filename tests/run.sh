#!/usr/bin/env bash
# The test runner:  tests/run.sh [-j N] TEST...
#
# Each argument is an executable test (a C program or a script).  A test
# prints TAP-style lines, "ok - what" and "not ok - what", and exits
# non-zero when anything failed (exit 77: skipped as a whole).
#
# Tests run in parallel, N at a time (-j N; default: the number of cores),
# each in its own process group with a timeout (TEST_TIMEOUT seconds,
# default 300; a script may ask for more with a "# test-timeout: S" line
# in its first 40 lines).  Each test's output goes to
# build/test-logs/<name>.log; a line is printed as each one ends, and for a
# failure the "not ok" lines and the tail of its log follow.
#
# Tests that must not overlap with any other (timing-sensitive ones, or
# ones that use something shared) say so with a "# serial" line in their
# first 40 lines, or are listed in SERIAL below: they run first, one at a
# time, before the parallel ones start.  Beside them, in one more slot
# (with -j 2 or more), only programs of the pure core run (is_quiet: the
# simulation and its mutant checks, the core's unit tests, the fuzz
# corpora replays, the leader module and the voter floor): one process of
# pure CPU, no disk, no socket, no clock.  A serial test must pass on a
# machine whose every core is busy anyway (scripts/test-under-load.sh),
# and one such program leaves it a core.  The rest start longest first,
# by the durations the last run recorded in build/test-logs/.times.
#
# The last line is "N passed, N failed" (counting "ok"/"not ok" lines; a
# program that prints none counts as one), and the exit status is non-zero
# on any failure.
set -u

# Tests that must run alone, as paths relative to the tree (for programs
# that cannot carry a "# serial" line).
# test_client_fake: its redirect-loop and timeout cases race a 300 ms client
# deadline against fake servers (failed once under ASan on a loaded machine).
SERIAL=(build/release/tests/test_client_fake build/asan/tests/test_client_fake)

jobs=$(nproc 2>/dev/null || echo 2)
while getopts "j:" opt; do
    case $opt in
    j) jobs=$OPTARG ;;
    *) echo "usage: tests/run.sh [-j N] TEST..." >&2; exit 64 ;;
    esac
done
shift $((OPTIND - 1))
case $jobs in ''|*[!0-9]*|0) echo "run.sh: -j needs a positive number" >&2; exit 64 ;; esac

timeout_s=${TEST_TIMEOUT:-300}
logdir=build/test-logs
times=$logdir/.times
mkdir -p "$logdir"

# name_of TEST: the log's base name (build/release/tests/x -> release_tests_x).
name_of() { local n=${1#build/}; echo "${n//\//_}"; }

# marker TEST PATTERN: the first line of a script's head matching PATTERN.
marker() {
    case $1 in
    *.sh|*.py) head -n 40 "$1" 2>/dev/null | grep -m1 -E "$2" ;;
    *) return 1 ;;
    esac
}

is_serial() {
    local s
    for s in "${SERIAL[@]}"; do [ "$s" = "$1" ] && return 0; done
    marker "$1" '^# serial\b' >/dev/null
}

# is_quiet TEST: a program of the pure core (see the top), which may run
# beside a serial test.
is_quiet() {
    case $1 in
    build/*/tests/fence_sim|build/*/tests/fence_sim_*_check.sh) return 0 ;;
    build/*/tests/test_core*|build/*/tests/fuzz_*_replay) return 0 ;;
    build/*/tests/test_leader|build/*/tests/test_voter_floor) return 0 ;;
    esac
    return 1
}

timeout_of() {
    local m
    m=$(marker "$1" '^# test-timeout: [0-9]+') && { echo "${m##*: }"; return; }
    echo "$timeout_s"
}

# Durations of the last run (ms), to start the long tests first; a test
# this tree has never timed takes its duration from tests/durations.txt (a
# run's .times kept in the tree, so that a fresh clone starts the long ones
# first too: the long tail of a run is the longest program started last).
declare -A last_ms=() hint_ms=()
if [ -r "$times" ]; then
    while read -r n ms; do last_ms[$n]=$ms; done <"$times"
fi
if [ -r tests/durations.txt ]; then
    while read -r n ms; do
        case $n in ''|'#'*) continue ;; esac
        hint_ms[$n]=$ms
    done <tests/durations.txt
fi

serial=(); parallel=()
for t in "$@"; do
    if is_serial "$t"; then serial+=("$t"); else parallel+=("$t"); fi
done
# Longest first; a test without a recorded time or hint counts as 30 s,
# and equal times keep the order given.
if [ ${#parallel[@]} -gt 0 ]; then
    mapfile -t parallel < <(
        i=0
        for t in "${parallel[@]}"; do
            n=$(name_of "$t")
            ms=${last_ms[$n]:-${hint_ms[$n]:-30000}}
            printf '%s\t%s\t%s\n' "$ms" "$i" "$t"
            i=$((i + 1))
        done | sort -t $'\t' -k1,1nr -k2,2n | cut -f3-)
fi

passed=0; failed=0; skipped=0; failed_names=()
declare -A pid_test=() pid_start=()
running=0
start_all=$(date +%s%N)

# start TEST: run it in the background (timeout makes its own process group).
start() {
    local t=$1 log
    log="$logdir/$(name_of "$t").log"
    timeout --kill-after=10 "$(timeout_of "$t")" "$t" >"$log" 2>&1 </dev/null &
    pid_test[$!]=$t
    pid_start[$!]=$(date +%s%N)
    running=$((running + 1))
}

# report TEST RC MS: count the result and print its line.
report() {
    local t=$1 rc=$2 ms=$3 log ok nok secs
    log="$logdir/$(name_of "$t").log"
    secs="$((ms / 1000)).$(( (ms % 1000) / 100 ))"
    echo "$(name_of "$t") $ms" >>"$times.new"
    ok=$(grep -c '^ok ' "$log" || true)
    nok=$(grep -c '^not ok ' "$log" || true)
    if [ "$rc" -eq 77 ] && [ "$nok" -eq 0 ]; then
        skipped=$((skipped + 1))
        printf 'SKIP %-48s %s\n' "$t" "$(tail -n 1 "$log")"
        return
    fi
    if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then
        nok=1   # crashed, timed out or failed without saying what
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            echo "not ok - timed out after $(timeout_of "$t")s" >>"$log"
        else
            echo "not ok - exited with status $rc" >>"$log"
        fi
    fi
    [ "$ok" -eq 0 ] && [ "$nok" -eq 0 ] && ok=1   # a test that says nothing but exits 0
    passed=$((passed + ok)); failed=$((failed + nok))
    if [ "$nok" -eq 0 ]; then
        printf 'PASS %-48s %4d ok  %6ss\n' "$t" "$ok" "$secs"
    else
        printf 'FAIL %-48s %4d ok %3d not ok  %6ss  (log: %s)\n' "$t" "$ok" "$nok" "$secs" "$log"
        grep '^not ok' "$log" | head -n 10 | sed 's/^/     /'
        tail -n 15 "$log" | sed 's/^/     | /'
        failed_names+=("$t")
    fi
}

# reap: wait for one running test to end and report it (its pid in
# reaped, empty if what ended was no test of ours).
reaped=
reap() {
    local pid rc
    reaped=
    wait -n -p pid
    rc=$?
    [ -n "${pid:-}" ] && [ -n "${pid_test[$pid]+set}" ] || return 0
    reaped=$pid
    running=$((running - 1))
    report "${pid_test[$pid]}" "$rc" $(( ($(date +%s%N) - ${pid_start[$pid]}) / 1000000 ))
    unset "pid_test[$pid]" "pid_start[$pid]"
}

# Ctrl-C or the caller's timeout: stop every running test's process group.
stop_all() {
    local pid
    for pid in "${!pid_test[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null; done
    exit 130
}
trap stop_all INT TERM

: >"$times.new"
# The serial tests, one after another; beside them the quiet programs,
# one at a time, longest first.
declare -A started=()
si=0; qi=0; serial_pid=
while [ "$si" -lt ${#serial[@]} ] || [ -n "$serial_pid" ]; do
    if [ -z "$serial_pid" ] && [ "$si" -lt ${#serial[@]} ]; then
        start "${serial[$si]}"
        serial_pid=$!
        si=$((si + 1))
    fi
    while [ "$jobs" -ge 2 ] && [ "$running" -lt 2 ] && [ "$qi" -lt ${#parallel[@]} ]; do
        t=${parallel[$qi]}
        qi=$((qi + 1))
        if is_quiet "$t"; then
            start "$t"
            started[$t]=1
        fi
    done
    reap
    [ "$reaped" = "$serial_pid" ] && serial_pid=
done
for t in "${parallel[@]}"; do
    [ -n "${started[$t]+set}" ] && continue
    while [ "$running" -ge "$jobs" ]; do reap; done
    start "$t"
done
while [ "$running" -gt 0 ]; do reap; done

# Keep the durations of tests that did not run this time.
for n in "${!last_ms[@]}"; do
    grep -q "^$n " "$times.new" || echo "$n ${last_ms[$n]}" >>"$times.new"
done
mv "$times.new" "$times"

total_ms=$(( ($(date +%s%N) - start_all) / 1000000 ))
echo
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
[ "$skipped" -gt 0 ] && echo "skipped programs: $skipped"
echo "# $# programs in $((total_ms / 1000)).$(( (total_ms % 1000) / 100 ))s, $jobs at a time"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
