#!/usr/bin/env bash
# make bench-store: a fresh fence-store on a free 127.0.0.1 port in a temp
# dir, driven by redis-benchmark; prints requests/s per command and client
# count.  Every write is one fsynced LMDB transaction, so writes measure the
# disk's fsync rate.  BENCH_N (default 2000) requests per row.
set -u
BUILD=${BUILD:-build}
N=${BENCH_N:-2000}
command -v redis-benchmark >/dev/null || { echo "bench-store: redis-benchmark (redis-tools) not installed"; exit 1; }
tmp=$(mktemp -d /tmp/fence-store-bench.XXXXXX)
port=$(python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BUILD/fence-store" --port "$port" --data-dir "$tmp/data" --log-level warn >"$tmp/log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
row() {  # row LABEL CLIENTS CMD...
    local label=$1 c=$2; shift 2
    local rps
    rps=$(redis-benchmark -p "$port" -n "$N" -c "$c" -r 100000 --csv "$@" 2>/dev/null |
          tail -n 1 | cut -d, -f2 | tr -d '"')
    printf '| %-34s | %7s | %12s |\n' "$label" "$c" "$rps"
}
echo "fence-store on 127.0.0.1:$port, $N requests per row (every write fsynced)"
echo
echo "| command                            | clients | requests/s   |"
echo "|------------------------------------|---------|--------------|"
row "PING" 1 PING
row "PING" 16 PING
row "FSET (equal token, 16-byte value)" 1 FSET f 1 key:__rand_int__ 0123456789abcdef
row "FSET (equal token, 16-byte value)" 16 FSET f 1 key:__rand_int__ 0123456789abcdef
row "FENCE.ADMIT (equal token)" 16 FENCE.ADMIT f 1
row "FINCR" 16 FINCR f 1 counter
row "FGET" 1 FGET key:__rand_int__
row "FGET" 16 FGET key:__rand_int__
row "FENCE.HIGH" 16 FENCE.HIGH f
