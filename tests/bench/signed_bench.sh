#!/usr/bin/env bash
# make bench-signed (part of `make bench`, mk/signtok.mk): one fenced
# with a signing key and one fence-store with verify keys, on free ports in
# a temp dir; prints, in the same run,
#   1. fencectl bench without and with --signed (grants per second),
#   2. redis-benchmark FENCE.ADMIT on fence-store: a plain token against a
#      store without keys, and a signed token against a store with keys
#      (the same token repeated: the verify cache's cost),
# then stops everything by PID.
set -euo pipefail
BUILD=${BUILD:-build}
SECS=${BENCH_SECONDS:-3}
N=${BENCH_REQUESTS:-200000}
tmp=$(mktemp -d /tmp/fence-signed-bench.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() {
    for _ in $(seq 1 200); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.05; done
    echo "bench: nothing listens on $1" >&2; exit 1
}
"$BUILD/fencectl" keygen "$tmp/keys" >/dev/null
fp=$(free_port); sp=$(free_port); sp0=$(free_port)
"$BUILD/fenced" --port "$fp" --data-dir "$tmp/fenced" \
    --token-signing-key "$tmp/keys/signing.key" >"$tmp/fenced.log" 2>&1 & pids+=($!)
"$BUILD/fence-store" --port "$sp" --data-dir "$tmp/store" \
    --token-verify-keys "$tmp/keys/verify.keys" >"$tmp/store.log" 2>&1 & pids+=($!)
"$BUILD/fence-store" --port "$sp0" --data-dir "$tmp/store0" >"$tmp/store0.log" 2>&1 & pids+=($!)
wait_port "$fp"; wait_port "$sp"; wait_port "$sp0"

echo "== grants: without and with SIGNED (same fenced) =="
"$BUILD/fencectl" --server "127.0.0.1:$fp" bench --duration "$SECS" --mode uncontended
"$BUILD/fencectl" --server "127.0.0.1:$fp" bench --duration "$SECS" --mode uncontended --signed

echo "== fence-store FENCE.ADMIT: plain token (no keys) vs signed token (verify keys) =="
lease=$(redis-cli -p "$fp" LEASE.GRANT 600000)
stok=$(redis-cli -p "$fp" LOCK bench "$lease" SIGNED)
for pipe in 1 16; do
    plain=$(redis-benchmark -p "$sp0" -n "$N" -c 16 -P "$pipe" -q FENCE.ADMIT bench "${stok%%.*}" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -n1 | sed 's/.*: //')
    signed=$(redis-benchmark -p "$sp" -n "$N" -c 16 -P "$pipe" -q FENCE.ADMIT bench "$stok" 2>/dev/null | tr '\r' '\n' | grep 'requests per second' | tail -n1 | sed 's/.*: //')
    echo "pipeline $pipe  plain:  $plain"
    echo "pipeline $pipe  signed: $signed"
done
