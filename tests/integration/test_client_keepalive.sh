#!/usr/bin/env bash
# Keepalive holds a lock well past its TTL: `fencectl lock --ttl 500` holds
# for 3 s while another client cannot take it; after release it can, with a
# higher token.  Control: without keepalive (`fencectl acquire`), the same
# lock is free again after its TTL.
# serial: timing-bound (time passing past the TTL is what it tests: tries
# 0.5 s apart while the lock is held, and a lease left to run out).
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced"
wait_port "$port" 20 || { cat "$TEST_TMP/fenced.log"; not_ok "fenced listens"; finish; }
export FENCE_SERVER=127.0.0.1:$port
F=$FENCECTL

# The command holds until the test says done (at most 30 s).
spawn holder "$F" lock ka --ttl 500 --wait 0 -- \
    sh -c 'echo "$FENCE_TOKEN" >"$0/tok"
        i=0; while [ ! -e "$0/done" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done' "$TEST_TMP"
wait_for 30 test -s "$TEST_TMP/tok"
tok=$(cat "$TEST_TMP/tok" 2>/dev/null)
check "holder got a token" [ -n "$tok" ]

busy=0 same=0
for i in 1 2 3 4 5; do
    sleep 0.5 # time passing is the test: 2.5 s is five TTLs
    "$F" acquire ka --ttl 500 --wait 0 >/dev/null 2>&1
    [ $? -eq 75 ] && busy=$((busy + 1))
    info=$("$F" info ka)
    case "$info" in "token=$tok "*) same=$((same + 1)) ;; esac
done
check_eq "another client could not take it for 2.5 s (5 tries, exit 75)" 5 "$busy"
check_eq "the holder's token stayed the same (5 LOCK.INFO)" 5 "$same"
touch "$TEST_TMP/done"

wait "$(pid_of holder)"; rc=$?
unset "_pids[holder]"
check_eq "fencectl lock exits with the command's status" 0 "$rc"
check_eq "released when the command exits" free "$("$F" info ka)"
read -r tok2 lease2 < <("$F" acquire ka --ttl 500 --wait 0)
check "the next acquirer gets a higher token ($tok2 > $tok)" [ "${tok2:-0}" -gt "$tok" ]

# Control: no keepalive, the 500 ms lease runs out and the lock is free.
sleep 1.5 # the thing under test: three TTLs, generous for a busy machine
read -r tok3 _ < <("$F" acquire ka --ttl 500 --wait 0)
check "without keepalive the lock is free after the TTL ($tok3 > $tok2)" [ "${tok3:-0}" -gt "${tok2:-0}" ]
"$F" release ka "$tok3" >/dev/null
finish
