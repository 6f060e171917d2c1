#!/usr/bin/env bash
# make bench (client part): start a fresh fenced on a free port in a temp
# dir, run `fencectl bench` against it, print the table, stop fenced by PID.
set -euo pipefail
BUILD=${BUILD:-build/release}
tmp=$(mktemp -d /tmp/fence-bench.XXXXXX)
pid=
cleanup() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT
port=$(/usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BUILD/fenced" --port "$port" --bind 127.0.0.1 --data-dir "$tmp/data" >"$tmp/fenced.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "bench: fenced exited:" >&2; cat "$tmp/fenced.log" >&2; exit 1; }
    sleep 0.05
done
echo "bench: fenced pid $pid on 127.0.0.1:$port, data in $tmp/data"
"$BUILD/fencectl" --server "127.0.0.1:$port" bench "$@"
# The loop's worst lateness during the run (a 10 ms uv timer measuring its
# own lateness; INFO loop_lag_max_us), when redis-cli is at hand.
if command -v redis-cli >/dev/null; then
    info=$(redis-cli -p "$port" INFO 2>/dev/null | tr -d '\r')
    echo "loop lag: max $(echo "$info" | sed -n 's/^loop_lag_max_us://p') us," \
         "ticks later than 20 ms: $(echo "$info" | sed -n 's/^loop_lag_over_20ms://p')"
fi
