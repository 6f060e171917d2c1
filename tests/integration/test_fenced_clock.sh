#!/usr/bin/env bash
# Wall-clock jumps change nothing: fenced runs under libfaketime with the
# wall clock moved 2 hours forward, then a day back, while a lease is live
# (the monotonic clock is left alone).  The lease neither expires early nor
# lives longer than its TTL.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli is not installed"
[ -x "$FENCED" ] || skip_all "$FENCED is not built"
lib=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n 1)
[ -n "$lib" ] || skip_all "libfaketime is not installed"
# ASan must be the first library loaded, so LD_PRELOAD cannot add faketime.
ldd "$FENCED" | grep -q libasan && skip_all "$FENCED is a sanitizer build"

ts=$TEST_TMP/faketime
echo "+0" >"$ts"
port=$(free_port)
spawn clock env LD_PRELOAD="$lib" FAKETIME_TIMESTAMP_FILE="$ts" FAKETIME_NO_CACHE=1 \
    FAKETIME_DONT_FAKE_MONOTONIC=1 "$FENCED" --port "$port" --data-dir "$TEST_TMP/data"
wait_port "$port"
for i in $(seq 1 200); do
    redis-cli -p "$port" INFO | grep -q '^leader_ready:1' && break
    sleep 0.05
done
R() { redis-cli -p "$port" "$@" 2>&1; }
lease=$(R LEASE.GRANT 3000)
check_eq "lease granted" "1" "$lease"
check_eq "lock granted" "1" "$(R LOCK j "$lease")"
echo "+2h" >"$ts"
sleep 0.3
rem=$(R LEASE.INFO "$lease" | sed -n 2p)
check "wall clock +2h: the lease is still live ($rem ms left)" test "${rem:-0}" -gt 1500
check_eq "wall clock +2h: the lock is still held" "1" "$(R LOCK.INFO j | head -n 1)"
echo "-1d" >"$ts"
sleep 0.3
rem2=$(R LEASE.INFO "$lease" | sed -n 2p)
check "wall clock -1d: the lease still counts down ($rem2 < $rem)" test "${rem2:-99999}" -lt "$rem"
sleep 2.6
check_eq "the lease expires after its TTL on the monotonic clock" \
    "NOLEASE the lease is unknown, expired or revoked" "$(R LEASE.INFO "$lease")"
check_eq "its lock was released" "" "$(R LOCK.INFO j)"
stop clock
finish
