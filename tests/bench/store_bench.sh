#!/usr/bin/env bash
# make bench-store: a fresh fence-store on a free 127.0.0.1 port in a temp
# dir, driven by redis-benchmark, next to a Redis with appendonly yes and
# appendfsync always on the same disk (when redis-server is installed): one
# table, requests/s and latency p50/p99/max (ms) per command and client
# count.  fence-store commits every loop turn's writes in one LMDB
# transaction and one write-ahead log record with one fdatasync (group
# commit); Redis fsyncs its AOF once per event-loop turn.
# BENCH_N (default 20000) requests per row.
set -u
BUILD=${BUILD:-build}
N=${BENCH_N:-20000}
command -v redis-benchmark >/dev/null || { echo "bench-store: redis-benchmark (redis-tools) not installed"; exit 1; }
tmp=$(mktemp -d /tmp/fence-store-bench.XXXXXX)
free_port() {
    python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
rport=
rpid=
"$BUILD/fence-store" --port "$port" --data-dir "$tmp/data" --log-level warn >"$tmp/log" 2>&1 &
pid=$!
if command -v redis-server >/dev/null; then
    rport=$(free_port)
    mkdir -p "$tmp/redis"
    redis-server --port "$rport" --bind 127.0.0.1 --dir "$tmp/redis" \
        --appendonly yes --appendfsync always --save "" \
        >"$tmp/redis.log" 2>&1 &
    rpid=$!
fi
trap 'kill "$pid" $rpid 2>/dev/null; wait "$pid" $rpid 2>/dev/null; rm -rf "$tmp"' EXIT
wait_port() { for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && break; sleep 0.05; done; }
wait_port "$port"
[ -n "$rport" ] && wait_port "$rport"
row() {  # row PORT LABEL CLIENTS CMD...
    local p=$1 label=$2 c=$3; shift 3
    local line rps p50 p99 max
    line=$(redis-benchmark -p "$p" -n "$N" -c "$c" -r 100000 --csv "$@" 2>/dev/null |
           tail -n 1 | tr -d '"')
    # "name",rps,avg,min,p50,p95,p99,max
    rps=$(echo "$line" | cut -d, -f2)
    p50=$(echo "$line" | cut -d, -f5)
    p99=$(echo "$line" | cut -d, -f7)
    max=$(echo "$line" | cut -d, -f8)
    printf '| %-44s | %7s | %11s | %7s | %7s | %7s |\n' "$label" "$c" "$rps" "$p50" "$p99" "$max"
}
echo "fence-store on 127.0.0.1:$port, $N requests per row (every write durable before its reply)"
echo
echo "| command                                      | clients | requests/s  | p50 ms  | p99 ms  | max ms  |"
echo "|----------------------------------------------|---------|-------------|---------|---------|---------|"
V=0123456789abcdef
row "$port" "PING" 1 PING
row "$port" "PING" 64 PING
row "$port" "FSET (equal token, 16-byte value)" 1 FSET f 1 key:__rand_int__ $V
[ -n "$rport" ] && row "$rport" "Redis SET, appendfsync always" 1 SET key:__rand_int__ $V
row "$port" "FSET (equal token, 16-byte value)" 16 FSET f 1 key:__rand_int__ $V
row "$port" "FSET (equal token, 16-byte value)" 64 FSET f 1 key:__rand_int__ $V
[ -n "$rport" ] && row "$rport" "Redis SET, appendfsync always" 64 SET key:__rand_int__ $V
row "$port" "FENCE.ADMIT (equal token)" 16 FENCE.ADMIT f 1
row "$port" "FINCR" 16 FINCR f 1 counter
row "$port" "FINCR" 64 FINCR f 1 counter
[ -n "$rport" ] && row "$rport" "Redis INCR, appendfsync always" 64 INCR counter
row "$port" "FGET" 1 FGET key:__rand_int__
row "$port" "FGET" 64 FGET key:__rand_int__
row "$port" "FENCE.HIGH" 16 FENCE.HIGH f
exit 0
