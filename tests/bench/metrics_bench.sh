#!/usr/bin/env bash
# make bench (metrics part): the cost of metrics.  Two fresh fenced
# processes in temp dirs on free ports, one without --metrics-port and one
# with it and a scraper GETting /metrics 10 times a second; `fencectl bench`
# (uncontended, 8 connections) against each, alternately, ROUNDS times
# (default 3, BENCH_METRICS_ROUNDS), in the same run; prints the median
# cycles/s of each and the difference.  Both processes stop by PID.
set -euo pipefail
BUILD=${BUILD:-build/release}
ROUNDS=${BENCH_METRICS_ROUNDS:-3}
DUR=${BENCH_METRICS_DURATION:-3}
tmp=$(mktemp -d /tmp/fence-bench-metrics.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill -TERM "$p" 2>/dev/null || true
    done
    for p in "${pids[@]}"; do
        for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
free_port() {
    /usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_tcp() {
    for _ in $(seq 1 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "bench-metrics: nothing listens on $1" >&2
    return 1
}
pa=$(free_port); pb=$(free_port); pm=$(free_port)
"$BUILD/fenced" --port "$pa" --data-dir "$tmp/a" --log-level warn >"$tmp/a.log" 2>&1 &
pids+=($!)
"$BUILD/fenced" --port "$pb" --metrics-port "$pm" --data-dir "$tmp/b" --log-level warn \
    >"$tmp/b.log" 2>&1 &
pids+=($!)
wait_tcp "$pa"; wait_tcp "$pb"; wait_tcp "$pm"
# The scraper: 10 scrapes a second for as long as the bench runs.
/usr/bin/python3 -c '
import sys, time, urllib.request
url = "http://127.0.0.1:%s/metrics" % sys.argv[1]
while True:
    try:
        urllib.request.urlopen(url, timeout=2).read()
    except OSError:
        pass
    time.sleep(0.1)
' "$pm" &
pids+=($!)
run() {
    "$BUILD/fencectl" --server "127.0.0.1:$1" bench --duration "$DUR" --conns 8 \
        --mode uncontended | awk '$1 ~ /^uncontended/ {print $3}'
}
a=(); b=()
for _ in $(seq 1 "$ROUNDS"); do
    a+=("$(run "$pa")")
    b+=("$(run "$pb")")
done
median() { printf '%s\n' "$@" | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ma=$(median "${a[@]}"); mb=$(median "${b[@]}")
echo "bench-metrics: fencectl bench uncontended, 8 connections, ${DUR}s x $ROUNDS rounds each, alternating"
printf '%-34s %12s\n' "fenced" "cycles/s"
printf '%-34s %12s   (rounds: %s)\n' "without --metrics-port" "$ma" "${a[*]}"
printf '%-34s %12s   (rounds: %s)\n' "with --metrics-port, 10 scrapes/s" "$mb" "${b[*]}"
awk -v a="$ma" -v b="$mb" 'BEGIN { if (a > 0) printf "%-34s %11.1f%%\n", "cost of metrics", (a - b) * 100 / a }'
