#!/usr/bin/env bash
# libfence through a TCP fault proxy (build/fence-faults): connections reset
# while a lock request is queued (the retry with the same REQID gets the
# cancelled wait's nil; the client asks again for the time left and gets the
# lock), and while `fencectl lock` holds a lock (the keepalive reconnects;
# the command is not disturbed).
. "$(dirname "$0")/../lib/lib.sh"
PROXY=$BUILD/fence-faults
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
[ -x "$PROXY" ] || skip_all "$PROXY not built"
port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced"
wait_fenced "$port" 20 || { not_ok "fenced listens"; finish; }
pport=$(free_port)
mkfifo "$TEST_TMP/ctl"
exec 7<>"$TEST_TMP/ctl"   # read-write: opening never blocks, and stays open
# Not through spawn: a background job's stdin would be /dev/null.
"$PROXY" "$pport" 127.0.0.1 "$port" <&7 >>"$TEST_TMP/proxy.log" 2>&1 &
_pids[proxy]=$!
wait_port "$pport" 20 || { cat "$TEST_TMP/proxy.log"; not_ok "proxy listens"; finish; }
F=$FENCECTL
D=127.0.0.1:$port
P=127.0.0.1:$pport
T=$TEST_TMP
resets=0
# reset: tell the proxy to reset every connection; wait until it has.
reset() {
    echo reset >&7
    resets=$((resets + 1))
    wait_log "$T/proxy.log" '^ok reset$' 30 "$resets"
}
# info_field NAME FIELD: a field of `fencectl info NAME` (direct to fenced).
info_field() { "$F" --server "$D" info "$1" 2>/dev/null | sed -n "s/.* $2=\([0-9]*\).*/\1/p"; }
waiters_are() { [ "$(info_field "$1" waiters)" = "$2" ]; }
# renewals: fenced's INFO renewals_local (renewals it answered itself; a
# lock's remaining_ms is counted on the state machine's clock, so it does
# not show a renewal between two entries).
renewals() { redis-cli -p "$port" INFO 2>/dev/null | tr -d '\r' | sed -n 's/^renewals_local://p'; }
renewed_since() { local r; r=$(renewals); [ -n "$r" ] && [ "$r" -gt "$1" ]; }

# ---- reset while queued -------------------------------------------------------
read -r tok _ < <("$F" --server "$D" acquire q.lock --ttl 5000 --wait 0)
spawn waiter sh -c "'$F' --server '$P' acquire q.lock --ttl 10000 --wait 8000 >'$T/waited'"
wait_for 30 waiters_are q.lock 1   # queued
reset
wait_for 30 waiters_are q.lock 1   # queued again (or not yet seen to go)
"$F" --server "$D" release q.lock "$tok" >/dev/null
wait "$(pid_of waiter)"; rc=$?
unset "_pids[waiter]"
check_eq "a waiter whose connection was reset still gets the lock (exit 0)" 0 "$rc"
read -r tok2 _ <"$T/waited"
check "with a higher token (${tok2:-none} > $tok)" [ "${tok2:-0}" -gt "$tok" ]
"$F" --server "$D" release q.lock "${tok2:-0}" >/dev/null 2>&1

# ---- resets while fencectl lock holds ------------------------------------------
rm -f "$T/sig" "$T/held" "$T/done"
# The command runs until the test says done (at most 30 s).
spawn holder "$F" --server "$P" lock k.lock --ttl 1500 -- sh -c '
    trap "echo TERM >>\"$0/sig\"; exit 1" TERM; echo held >"$0/held"
    i=0; while [ ! -e "$0/done" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done' "$T"
wait_for 30 test -s "$T/held"
# Five resets, each followed by a renewal over a new connection (fenced
# answers one more renewal), so the lock is held through more than one
# TTL of resets.
renewed=0
for _ in 1 2 3 4 5; do
    reset
    r0=$(renewals)
    wait_for 30 renewed_since "${r0:-99999999}" && renewed=$((renewed + 1))
done
touch "$T/done"
wait "$(pid_of holder)"; rc=$?
unset "_pids[holder]"
check_eq "fencectl lock kept its lock through 5 connection resets (exit 0)" 0 "$rc"
check "its command was not signalled" [ ! -e "$T/sig" ]
check_eq "a renewal came over a new connection after each reset" 5 "$renewed"
check_eq "and released it" free "$("$F" --server "$D" info k.lock)"
echo quit >&7
exec 7>&-
finish
