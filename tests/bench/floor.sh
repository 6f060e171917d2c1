#!/usr/bin/env bash
# The contended-handoff floor of a running fenced (issue 14): one durable
# log write plus one client round trip per handoff, so
#   floor_per_s = 1e6 / (fsync_p50_us + ping_p50_us)
# with the fsync p50 of DATADIR's disk measured as libraft writes
# (tests/bench/fsync_probe.c) and the 1-client PING round trip to HOST:PORT
# (redis-benchmark, 20,000 inline PINGs).
#
#   tests/bench/floor.sh HOST PORT DATADIR
#   fsync_p50_us=80 fsync_p99_us=240 fsync_max_us=1800 n=2000 mode=direct
#   ping_p50_us=39 floor_per_s=8403
set -euo pipefail
BUILD=${BUILD:-build/release}
if [ $# -ne 3 ]; then
    echo "usage: $0 HOST PORT DATADIR" >&2
    exit 2
fi
host=$1 port=$2 dir=$3
line=$("$BUILD/tests/fsync_probe" "$dir" "${FLOOR_WRITES:-2000}")
echo "$line"
fsync=$(sed -n 's/.*fsync_p50_us=\([0-9]*\).*/\1/p' <<<"$line")
# CSV: "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
ping=$(redis-benchmark -h "$host" -p "$port" -c 1 -n 20000 -t ping_inline --csv 2>/dev/null |
       tail -1 | tr -d '"' | awk -F, '{ printf "%d", $5 * 1000 + 0.5 }')
if [ -z "$ping" ] || [ -z "$fsync" ]; then
    echo "floor.sh: no PING round trip from $host:$port" >&2
    exit 1
fi
echo "ping_p50_us=$ping floor_per_s=$(( 1000000 / (fsync + ping) ))"
