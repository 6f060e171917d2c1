#!/usr/bin/env bash
# Wall-clock jumps change nothing: fenced runs under libfaketime with the
# wall clock moved 2 hours forward, then a day back, while a lease is live
# (the monotonic clock is left alone).  The lease neither expires early nor
# lives longer than its TTL.
# serial: timing-bound (it waits for a lease to run out on the monotonic
# clock, with a second of slack past what fenced says is left).
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
wait_ready "$port"
R() { redis-cli -p "$port" "$@" 2>&1; }
lease=$(R LEASE.GRANT 3000)
check_eq "lease granted" "1" "$lease"
check_eq "lock granted" "1" "$(R LOCK j "$lease")"
echo "+2h" >"$ts"
# libfaketime reads the file at each clock call (FAKETIME_NO_CACHE): the
# next request already sees the jump.
rem=$(R LEASE.INFO "$lease" | sed -n 2p)
check "wall clock +2h: the lease is still live ($rem ms left)" test "${rem:-0}" -gt 1500
check_eq "wall clock +2h: the lock is still held" "1" "$(R LOCK.INFO j | head -n 1)"
echo "-1d" >"$ts"
rem2=$rem
counts_down() { rem2=$(R LEASE.INFO "$lease" | sed -n 2p); [ "${rem2:-99999}" -lt "$rem" ]; }
wait_for 1 counts_down
check "wall clock -1d: the lease still counts down ($rem2 < $rem)" test "${rem2:-99999}" -lt "$rem"
# The lease runs out: what fenced said is left, plus a second of slack.
# (This sleep is the thing under test.)
left=$rem2; [[ "$left" =~ ^[0-9]+$ ]] || left=3000
left=$((left + 1000))
sleep "$((left / 1000)).$(printf %03d $((left % 1000)))"
check_eq "the lease expires after its TTL on the monotonic clock" \
    "NOLEASE the lease is unknown, expired or revoked" "$(R LEASE.INFO "$lease")"
check_eq "its lock was released" "" "$(R LOCK.INFO j)"
stop clock
finish
