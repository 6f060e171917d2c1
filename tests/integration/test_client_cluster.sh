#!/usr/bin/env bash
# libfence and fencectl against a 3-node fenced cluster: a client that only
# knows a follower is redirected (NOTLEADER) to the leader; `fencectl lock`
# given all three keeps its lock through a kill -9 of the leader (keepalive
# reconnects, follows the new leader, the lease is rebased there) and its
# command is not signalled; tokens keep increasing after the failover.
# serial: timing-bound (the 8 s lease must be renewed through an election)
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
"$FENCED" --help 2>&1 | grep -q -- --peers || skip_all "fenced has no cluster mode"
F=$FENCECTL
T=$TEST_TMP
declare -a cport rport
for i in 1 2 3; do cport[$i]=$(free_port); rport[$i]=$(free_port); done
peers="1=127.0.0.1:${cport[1]}/${rport[1]},2=127.0.0.1:${cport[2]}/${rport[2]},3=127.0.0.1:${cport[3]}/${rport[3]}"
for i in 1 2 3; do
    spawn "node$i" "$FENCED" --node-id "$i" --port "${cport[$i]}" --raft-port "${rport[$i]}" \
        --data-dir "$T/n$i" --peers "$peers"
done
for i in 1 2 3; do wait_port "${cport[$i]}" 20 || { not_ok "node $i listens"; finish; }; done
all="127.0.0.1:${cport[1]},127.0.0.1:${cport[2]},127.0.0.1:${cport[3]}"

# leader: print the node number whose INFO says role leader (or nothing).
leader() {
    local i
    for i in 1 2 3; do
        [ -n "${_pids[node$i]:-}" ] || continue
        "$F" --server "127.0.0.1:${cport[$i]}" --timeout 500 status 2>/dev/null |
            grep -Eq '^  role +leader' && { echo "$i"; return; }
    done
}
L=
found_leader() { L=$(leader); [ -n "$L" ]; }
wait_for 60 found_leader
check "a leader is elected" [ -n "$L" ] || finish
follower=$(( L % 3 + 1 ))

# ---- a follower-only client is redirected to the leader ----------------------
read -r tok lease < <("$F" --server "127.0.0.1:${cport[$follower]}" acquire c.redirect --ttl 5000 --wait 0)
check "acquire through a follower (NOTLEADER redirect) gets a token" [ "${tok:-0}" -gt 0 ]
check_eq "the leader holds it" "token=$tok" \
    "$("$F" --server "127.0.0.1:${cport[$L]}" info c.redirect | cut -d' ' -f1)"
check_eq "release through the follower" released \
    "$("$F" --server "127.0.0.1:${cport[$follower]}" release c.redirect "$tok")"

# ---- the lock survives a kill -9 of the leader --------------------------------
rm -f "$T/sig" "$T/tok1" "$T/done"
# The command holds until the test says done (at most 60 s).
spawn holder "$F" --server "$all" lock c.failover --ttl 8000 -- sh -c '
    trap "echo TERM >>\"$0/sig\"; exit 1" TERM
    echo "$FENCE_TOKEN" >"$0/tok1"
    i=0; while [ ! -e "$0/done" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done' "$T"
wait_for 30 test -s "$T/tok1"
tok1=$(cat "$T/tok1" 2>/dev/null)
check "the holder got a token" [ -n "$tok1" ]
# commands NODE: INFO commands_processed on NODE (this INFO counted).
# renewed_on NODE: true once NODE processed a command other than these
# INFOs since the last call: the keepalive's LEASE.KEEPALIVE, the only
# client left.  (A lease's remaining_ms is counted on the state machine's
# clock, which moves only with entries: it does not show every renewal.)
commands() { redis-cli -p "${cport[$1]}" INFO 2>/dev/null | tr -d '\r' | sed -n 's/^commands_processed://p'; }
seen=
renewed_on() {
    local c; c=$(commands "$1")
    [ -n "$c" ] || return 1
    [ -n "$seen" ] && [ "$c" -gt $((seen + 1)) ] && { seen=; return 0; }
    seen=$c; return 1
}
# One renewal on the old leader first (the keepalive runs).
check "the keepalive renews on the leader" wait_for 30 renewed_on "$L"
stop "node$L" KILL
t0=$(date +%s%N)
N=
found_new() { N=$(leader); [ -n "$N" ]; }
wait_for 60 found_new
echo "# new leader node $N after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check "a new leader is elected" [ -n "$N" ]
# The keepalive follows the new leader: the lease is renewed there.
seen=
check "the keepalive renews on the new leader" wait_for 30 renewed_on "$N"
touch "$T/done"
wait "$(pid_of holder)"; rc=$?
unset "_pids[holder]"
check_eq "fencectl lock kept the lock through the failover (exit 0)" 0 "$rc"
check "its command was not signalled" [ ! -e "$T/sig" ]
rest="127.0.0.1:${cport[$N]}"
check_eq "the lock was released on the new leader" free "$("$F" --server "$rest" info c.failover)"
read -r tok2 _ < <("$F" --server "$all" acquire c.failover --ttl 2000 --wait 0)
check "tokens keep increasing after the failover ($tok2 > $tok1)" [ "${tok2:-0}" -gt "${tok1:-0}" ]
finish
