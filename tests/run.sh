#!/usr/bin/env bash
# The test runner.  Each argument is an executable test (a C program or a
# script).  A test prints TAP-style lines, "ok - what" and "not ok - what",
# and exits non-zero when anything failed (exit 77: skipped as a whole).
# Each runs in its own process group with a timeout (TEST_TIMEOUT seconds,
# default 300); its output goes to build/test-logs/.  The last line is
# "N passed, N failed" and the exit status is non-zero on any failure.
set -u
timeout_s=${TEST_TIMEOUT:-300}
logdir=build/test-logs
mkdir -p "$logdir"
passed=0; failed=0; skipped=0; failed_names=()
for t in "$@"; do
    name=$(echo "$t" | sed 's|^build/||; s|/|_|g')
    log="$logdir/$name.log"
    start=$(date +%s%N)
    timeout --kill-after=10 "$timeout_s" "$t" >"$log" 2>&1 </dev/null
    rc=$?
    ms=$(( ($(date +%s%N) - start) / 1000000 )); secs="$((ms / 1000)).$(( (ms % 1000) / 100 ))"
    ok=$(grep -c '^ok ' "$log" || true)
    nok=$(grep -c '^not ok ' "$log" || true)
    if [ "$rc" -eq 77 ] && [ "$nok" -eq 0 ]; then
        skipped=$((skipped + 1))
        printf 'SKIP %-48s %s\n' "$t" "$(tail -n 1 "$log")"
        continue
    fi
    if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then
        nok=1   # crashed, timed out or failed without saying what
        [ "$rc" -eq 124 ] && echo "not ok - timed out after ${timeout_s}s" >>"$log"
        [ "$rc" -ne 124 ] && echo "not ok - exited with status $rc" >>"$log"
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
done
echo
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
[ "$skipped" -gt 0 ] && echo "skipped programs: $skipped"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
