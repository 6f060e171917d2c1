#!/usr/bin/env bash
# make bench's driver (tests/bench/run.py) end to end with tiny cells
# (BENCH_SECONDS=1 BENCH_SMOKE=1: 10k held locks and leases instead of 1M,
# 1,000 keepalive leases on 50 connections).  Checks only that it exits 0,
# that every section printed its rows, and that every row holds a number
# (rate, latency or value).  No timing is checked, so it is not serial:
# the runner overlaps it with other tests (which wait on conditions, and
# the timing-bound ones, marked serial, have all run before).
# test-timeout: 600
. "$(dirname "$0")/../lib/lib.sh"
for b in "$FENCED" "$FENCECTL" "$FENCE_STORE" "$BUILD/fence-proxy" "$BUILD/tests/keepalive_load" \
         "$BUILD/tests/cycle_load" "$BUILD/tests/fsync_probe"; do
    [ -x "$b" ] || skip_all "$b not built"
done
for t in redis-server redis-benchmark redis-cli openssl wrk nginx; do
    command -v "$t" >/dev/null || skip_all "$t not installed"
done
out=$TEST_TMP/table.txt
BUILD=$BUILD BENCH_SECONDS=1 BENCH_SMOKE=1 BENCH_TMPDIR=$TEST_TMP \
    "$PY" "$ROOT/tests/bench/run.py" >"$out" 2>"$TEST_TMP/progress.txt"
rc=$?
check_eq "run.py exits 0" 0 "$rc"
[ "$rc" -eq 0 ] || { tail -n 30 "$TEST_TMP/progress.txt"; cat "$out"; }
check "machine facts on top" grep -q '^machine: .*nproc' "$out"
check "filesystem of the data dirs on top" grep -q '^data dirs: .*filesystem' "$out"
# Every section's rows, in order: row 1 .. 7 of docs/performance.md.
for what in 'fenced uncontended (a lock per client)' 'Redis 7 lock cycle' \
            'fenced uncontended, the same client (cycle_load' 'PING round trip' 'fsync, data dir' 'handoff floor' \
            'fenced one contended lock' 'fence-store FSET' 'Redis 7 SET' \
            'fenced uncontended, 10k locks held' 'memory per held lock' \
            'memory per lease' 'loop lag max during that cell' 'restart to serving' \
            'keepalive load' 'LOCK+UNLOCK on its own lock during that load' 'control: the same probe' \
            '1 node, uncontended' '3-node cluster' 'TLS 1.3' 'signed grants' '/metrics scraped' 'nginx alone' \
            'fence-proxy -> nginx, PUT, same token' 'fence-proxy -> nginx, PUT, a new token' \
            'ELECTION.CAMPAIGN handoff' 'ELECTION.OBSERVE latency of a change'; do
    check "a row: $what" grep -qF "$what" "$out"
done
if [ "$(nproc)" -ge 2 ]; then
    check "a row: the servers pinned apart from the load generator" \
        grep -qF "fenced, the same cycle, fenced on one CPU and cycle_load on another" "$out"
    check "the pinned rows say what each side's own CPU allows" \
        grep -qE "server [0-9.]+ us \(its CPU allows at most [0-9]+/s" "$out"
fi
check "the compared rows say their CPU per cycle and its ceiling" \
    grep -qE "CPU per cycle: server [0-9.]+ us \+ load generator [0-9.]+ us; with all [0-9]+ cores busy at most" "$out"
check "no section failed" bash -c "! grep -q FAILED '$out'"
bad=$("$PY" - "$out" <<'PY'
import re, sys
rows = [l for l in open(sys.argv[1]) if l.startswith("| ")][1:]
bad = 0
for l in rows:
    c = [x.strip() for x in l.strip().strip("|").split("|")]
    what, rate, p50, value = c[0], c[2], c[3], c[6]
    if not any(re.match(r"^(<=? )?[0-9]+(\.[0-9]+)?", x) for x in (rate, p50, value)):
        print("row without a number: " + what, file=sys.stderr)
        bad += 1
print(bad if rows else -1)
PY
)
check_eq "every row printed a number" 0 "$bad"
finish
