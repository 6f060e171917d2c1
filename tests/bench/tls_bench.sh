#!/usr/bin/env bash
# make bench (TLS row): one fresh fenced with a plain and a TLS listener
# (certificates made here with openssl, in a temp dir), then
# LEASE.GRANT/LOCK/UNLOCK/LEASE.REVOKE cycles at CLIENTS (64) connections,
# ROUNDS (3) alternating rounds of SECS (3) seconds, plain and TLS, in the
# same run (tests/bench/tls_cycles.c); prints the medians and the ratio.
set -euo pipefail
BUILD=${BUILD:-build/release}
CLIENTS=${CLIENTS:-64}
SECS=${SECS:-3}
tmp=$(mktemp -d /tmp/fence-bench-tls.XXXXXX)
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
/usr/bin/python3 -c 'import sys; sys.path.insert(0, "tests/integration"); import tls_certs; tls_certs.make(sys.argv[1])' "$tmp/certs"
read -r port tport < <(/usr/bin/python3 -c 'import socket
a = socket.socket(); a.bind(("127.0.0.1", 0)); b = socket.socket(); b.bind(("127.0.0.1", 0))
print(a.getsockname()[1], b.getsockname()[1])')
"$BUILD/fenced" --port "$port" --tls-port "$tport" --bind 127.0.0.1 --data-dir "$tmp/data" \
    --tls-cert "$tmp/certs/server.crt" --tls-key "$tmp/certs/server.key" >"$tmp/fenced.log" 2>&1 &
pid=$!
for _ in $(seq 1 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || { echo "bench-tls: fenced exited:" >&2; cat "$tmp/fenced.log" >&2; exit 1; }
    sleep 0.05
done
sleep 0.5
# ROUNDS alternating rounds (plain, TLS, plain, TLS, ...) so that load from
# elsewhere on the machine hits both alike; the median of each is shown.
ROUNDS=${ROUNDS:-3}
ps=() ts=()
for _ in $(seq 1 "$ROUNDS"); do
    out=$("$BUILD/tests/tls_cycles" "$port" "$CLIENTS" "$SECS"); ps+=("${out##*cycles_per_s=}")
    out=$("$BUILD/tests/tls_cycles" "$tport" "$CLIENTS" "$SECS" "$tmp/certs/ca.crt"); ts+=("${out##*cycles_per_s=}")
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
p=$(median "${ps[@]}")
t=$(median "${ts[@]}")
echo "bench-tls: fenced pid $pid, plain 127.0.0.1:$port, TLS 127.0.0.1:$tport, $CLIENTS clients, $ROUNDS alternating rounds of ${SECS}s (median)"
echo "bench-tls: rounds plain ${ps[*]}, TLS ${ts[*]}"
printf '%-34s %12s\n' "grant/lock/unlock/revoke cycles" "cycles/s"
printf '%-34s %12s\n' "plain TCP, $CLIENTS clients" "$p"
printf '%-34s %12s\n' "TLS 1.3, $CLIENTS clients" "$t"
awk -v p="$p" -v t="$t" 'BEGIN { r = p > 0 ? 100 * t / p : 0;
    printf "%-34s %11.0f%% (target >= 80%%)\n", "TLS / plain", r }'
