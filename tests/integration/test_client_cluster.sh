#!/usr/bin/env bash
# libfence and fencectl against a 3-node fenced cluster: a client that only
# knows a follower is redirected (NOTLEADER) to the leader; `fencectl lock`
# given all three keeps its lock through a kill -9 of the leader (keepalive
# reconnects, follows the new leader, the lease is rebased there) and its
# command is not signalled; tokens keep increasing after the failover.
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
for _ in $(seq 1 100); do L=$(leader); [ -n "$L" ] && break; sleep 0.1; done
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
rm -f "$T/sig" "$T/tok1"
spawn holder "$F" --server "$all" lock c.failover --ttl 8000 -- sh -c '
    trap "echo TERM >>\"$0/sig\"; exit 1" TERM
    echo "$FENCE_TOKEN" >"$0/tok1"; sleep 5' "$T"
for _ in $(seq 1 100); do [ -s "$T/tok1" ] && break; sleep 0.05; done
tok1=$(cat "$T/tok1" 2>/dev/null)
check "the holder got a token" [ -n "$tok1" ]
sleep 0.5
stop "node$L" KILL
t0=$(date +%s%N)
N=
for _ in $(seq 1 100); do N=$(leader); [ -n "$N" ] && break; sleep 0.1; done
echo "# new leader node $N after $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check "a new leader is elected" [ -n "$N" ]
wait "$(pid_of holder)"; rc=$?
unset "_pids[holder]"
check_eq "fencectl lock kept the lock through the failover (exit 0)" 0 "$rc"
check "its command was not signalled" [ ! -e "$T/sig" ]
rest="127.0.0.1:${cport[$N]}"
check_eq "the lock was released on the new leader" free "$("$F" --server "$rest" info c.failover)"
read -r tok2 _ < <("$F" --server "$all" acquire c.failover --ttl 2000 --wait 0)
check "tokens keep increasing after the failover ($tok2 > $tok1)" [ "${tok2:-0}" -gt "${tok1:-0}" ]
finish
