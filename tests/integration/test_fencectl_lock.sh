#!/usr/bin/env bash
# fencectl lock: a SIGSTOPped fencectl loses its lease, the lock goes to
# another client with a higher token, and on SIGCONT its child's process
# group gets SIGTERM (exit 79); SIGKILL after --grace for a child that
# ignores SIGTERM; the child's environment and process group; exit codes.
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced"
wait_port "$port" 20 || { cat "$TEST_TMP/fenced.log"; not_ok "fenced listens"; finish; }
export FENCE_SERVER=127.0.0.1:$port
F=$FENCECTL
T=$TEST_TMP

# wait_file FILE [SECONDS]: until FILE is non-empty.
wait_file() {
    local i
    for i in $(seq 1 $(( ${2:-5} * 20 ))); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}
# gone PID [SECONDS]: until the process no longer exists.
gone() {
    local i
    for i in $(seq 1 $(( ${2:-5} * 20 ))); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.05; done
    return 1
}

# ---- the child's environment and process group -----------------------------
"$F" lock env.lock --ttl 2000 -- sh -c 'env | grep "^FENCE_" | sort >"$0/env"; ps -o pgid= -p $$ | tr -d " " >"$0/pgid"; echo $$ >"$0/pid"; "$1" info env.lock >"$0/info"' "$T" "$F"
check_eq "lock exits 0 after a successful command" 0 $?
tok=$(sed -n 's/^FENCE_TOKEN=//p' "$T/env")
lease=$(sed -n 's/^FENCE_LEASE=//p' "$T/env")
check_eq "FENCE_LOCK is the lock name" "FENCE_LOCK=env.lock" "$(grep FENCE_LOCK "$T/env")"
check_eq "FENCE_SERVER is the server" "FENCE_SERVER=127.0.0.1:$port" "$(grep FENCE_SERVER "$T/env")"
check_eq "FENCE_TOKEN and FENCE_LEASE are what the server says" \
    "token=$tok lease=$lease" "$(cut -d' ' -f1,2 "$T/info")"
check_eq "the command runs in its own process group" "$(cat "$T/pid")" "$(cat "$T/pgid")"
"$F" lock fd.lock -- sh -c 'ls -l /proc/$$/fd/ | grep -c socket: >"$0/socks"' "$T"
check_eq "the command inherits no connection of fencectl's" 0 "$(cat "$T/socks")"

# ---- SIGSTOP: the lease is lost, the lock moves on, the child is stopped ---
rm -f "$T/sig" "$T/sig2" "$T/tok1" "$T/gc"
spawn stopped "$F" lock pause.lock --ttl 600 --grace 150 -- sh -c '
    trap "echo TERM >>\"$0/sig\"; exit 0" TERM
    sh -c "trap \"echo TERM >>$0/sig2; exit 0\" TERM; echo \$\$ >$0/gc; while :; do sleep 0.05; done" &
    echo "$FENCE_TOKEN" >"$0/tok1"; echo $$ >"$0/child1"
    while :; do sleep 0.05; done' "$T"
wait_file "$T/tok1"
wait_file "$T/gc"
tok1=$(cat "$T/tok1"); child1=$(cat "$T/child1")
kill -STOP "$(pid_of stopped)"
t0=$(date +%s%N)
read -r tok2 lease2 < <("$F" acquire pause.lock --ttl 15000 --wait 5000)
waited=$(( ($(date +%s%N) - t0) / 1000000 ))
check "another client gets the lock of the stopped holder (after ${waited} ms)" [ -n "${tok2:-}" ]
check "with a higher token ($tok2 > $tok1)" [ "${tok2:-0}" -gt "$tok1" ]
check "the stopped holder's child still runs: only fencing protects the resource now" \
    kill -0 "$child1"
kill -CONT "$(pid_of stopped)"
wait_file "$T/sig" 5
check_eq "on SIGCONT the child's process group gets SIGTERM" TERM "$(head -n1 "$T/sig" 2>/dev/null)"
wait_file "$T/sig2" 5
check_eq "so does a grandchild in the group" TERM "$(head -n1 "$T/sig2" 2>/dev/null)"
wait "$(pid_of stopped)"; rc=$?
unset "_pids[stopped]"
check_eq "fencectl lock exits 79 (lease lost)" 79 "$rc"
check "the child is gone" gone "$child1" 2
check_eq "the new holder still holds it" "token=$tok2" "$("$F" info pause.lock | cut -d' ' -f1)"
"$F" release pause.lock "$tok2" >/dev/null

# ---- lease revoked behind its back; the child ignores SIGTERM: SIGKILL -----
rm -f "$T/tok3" "$T/child3"
spawn stubborn "$F" lock revoke.lock --ttl 900 --grace 200 -- sh -c '
    trap "" TERM; echo "$FENCE_LEASE" >"$0/tok3"; echo $$ >"$0/child3"
    while :; do sleep 0.05; done' "$T"
wait_file "$T/tok3"
t0=$(date +%s%N)
"$F" lease revoke "$(cat "$T/tok3")" >/dev/null
check "the SIGTERM-ignoring child is SIGKILLed after the grace period" gone "$(cat "$T/child3")" 5
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "# child gone ${ms} ms after the revoke"
wait "$(pid_of stubborn)"; rc=$?
unset "_pids[stubborn]"
check_eq "exit 79 after a revoked lease" 79 "$rc"

# ---- the command exits on SIGTERM, a grandchild ignores it: SIGKILL ------
rm -f "$T/l5" "$T/gc5"
spawn orphan "$F" lock orphan.lock --ttl 900 --grace 200 -- sh -c '
    sh -c "trap \"\" TERM; echo \$\$ >$0/gc5; while :; do sleep 0.05; done" &
    echo "$FENCE_LEASE" >"$0/l5"; wait' "$T"
wait_file "$T/l5"; wait_file "$T/gc5"
"$F" lease revoke "$(cat "$T/l5")" >/dev/null
wait "$(pid_of orphan)"; rc=$?
unset "_pids[orphan]"
check_eq "exit 79 when the command is stopped" 79 "$rc"
check "a grandchild that ignores SIGTERM is SIGKILLed too" gone "$(cat "$T/gc5")" 2

# ---- fencectl killed -9: its command gets SIGTERM from the kernel ----------
rm -f "$T/r6" "$T/sig6"
spawn killed "$F" lock killed.lock --ttl 5000 -- sh -c '
    trap "echo TERM >\"$0/sig6\"; exit 0" TERM
    echo ready >"$0/r6"; while :; do sleep 0.05; done' "$T"
wait_file "$T/r6"
stop killed KILL
wait_file "$T/sig6" 5
check_eq "after kill -9 of fencectl its command gets SIGTERM (parent-death signal)" TERM \
    "$(cat "$T/sig6" 2>/dev/null)"

# ---- --on-lost ignore: the child keeps running, exit still 79 -------------
rm -f "$T/l4" "$T/done4"
spawn ignorer "$F" lock ignore.lock --ttl 900 --on-lost ignore -- sh -c '
    echo "$FENCE_LEASE" >"$0/l4"; sleep 1.5; echo done >"$0/done4"' "$T"
wait_file "$T/l4"
"$F" lease revoke "$(cat "$T/l4")" >/dev/null
wait "$(pid_of ignorer)"; rc=$?
unset "_pids[ignorer]"
check_eq "--on-lost ignore lets the command finish" done "$(cat "$T/done4" 2>/dev/null)"
check_eq "--on-lost ignore still exits 79" 79 "$rc"

# ---- signals to fencectl are forwarded; the lock is released --------------
rm -f "$T/fwd" "$T/ready5"
spawn fwd "$F" lock fwd.lock --ttl 2000 -- sh -c '
    trap "echo INT >\"$0/fwd\"; exit 5" INT
    echo ready >"$0/ready5"; while :; do sleep 0.05; done' "$T"
wait_file "$T/ready5"
kill -INT "$(pid_of fwd)"
wait "$(pid_of fwd)"; rc=$?
unset "_pids[fwd]"
check_eq "SIGINT to fencectl reaches the command" INT "$(cat "$T/fwd" 2>/dev/null)"
check_eq "and fencectl exits with the command's status" 5 "$rc"
check_eq "the lock is released" free "$("$F" info fwd.lock)"

# ---- server stopped: the command is stopped before the lease could expire --
# fenced is SIGSTOPped, so renewals time out; fencectl must SIGTERM the
# command --grace before valid-until (= last renewal's send + TTL - margin),
# which is before the server could expire the lease.
rm -f "$T/r7" "$T/sig7"
spawn srvstop "$F" lock srvstop.lock --ttl 2000 -- sh -c '
    trap "date +%s%N >\"$0/sig7\"; exit 0" TERM
    echo ready >"$0/r7"; while :; do sleep 0.05; done' "$T"
wait_file "$T/r7"
sleep 0.3
t0=$(date +%s%N)
kill -STOP "$(pid_of fenced)"
wait_file "$T/sig7" 5
kill -CONT "$(pid_of fenced)"
wait "$(pid_of srvstop)"; rc=$?
unset "_pids[srvstop]"
if [ -s "$T/sig7" ]; then
    ms=$(( ($(cat "$T/sig7") - t0) / 1000000 ))
    echo "# SIGTERM ${ms} ms after the server stopped (TTL 2000)"
    check "with the server stopped, the command got SIGTERM within the TTL" [ "$ms" -lt 2000 ]
else
    not_ok "with the server stopped, the command got SIGTERM"
fi
check_eq "and fencectl exits 79" 79 "$rc"

# ---- exit codes ------------------------------------------------------------
"$F" lock st.lock -- sh -c 'exit 7'
check_eq "the command's exit status passes through" 7 $?
"$F" lock st.lock -- sh -c 'kill -TERM $$'
check_eq "a command killed by SIGTERM gives 143" 143 $?
"$F" lock st.lock -- /nonexistent/command 2>/dev/null
check_eq "a missing command gives 127" 127 $?
read -r htok _ < <("$F" acquire held.lock --ttl 5000)
"$F" lock held.lock --wait 200 -- true 2>"$T/err75"
check_eq "not acquired within --wait gives 75" 75 $?
check "with a message" grep -q "held by someone else" "$T/err75"
spawn waiter "$F" lock held.lock --wait 20000 -- true
_queued() { "$F" info held.lock | grep -q ' waiters=1$'; }
check "the second fencectl lock is queued behind the holder" wait_for 30 _queued
stop waiter TERM
check_eq "a fencectl lock still waiting for the lock is not holding it" "token=$htok" \
    "$("$F" info held.lock | cut -d' ' -f1)"
"$F" release held.lock "$htok" >/dev/null
check_eq "its queued wait died with it: released, the lock is free" free "$("$F" info held.lock)"
dead=$(free_port)
"$F" --server "127.0.0.1:$dead" --timeout 300 lock x -- true 2>"$T/err69"
check_eq "an unreachable server gives 69" 69 $?
check "with a message" grep -q "cannot connect" "$T/err69"
"$F" lock 2>/dev/null
check_eq "a usage error gives 64" 64 $?
"$F" lock x --ttl 1 -- true 2>/dev/null
check_eq "a bad --ttl gives 64" 64 $?
finish
