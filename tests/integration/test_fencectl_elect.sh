#!/usr/bin/env bash
# fencectl elect: the elected process runs its command with the leader's
# token in FENCE_TOKEN; a second candidate waits, and is elected with a
# higher token when the first command ends (fencectl resigns); a SIGSTOPped
# leader loses its lease, the next candidate takes over, and on SIGCONT the
# old command's group gets SIGTERM (exit 79); `elect --observe` prints each
# leader as it changes; usage errors.
# serial (lease expiry is timed)
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced"
wait_port "$port" 20 && wait_ready "$port" 20 || { cat "$TEST_TMP/fenced.log"; not_ok "fenced listens"; finish; }
export FENCE_SERVER=127.0.0.1:$port
F=$FENCECTL
T=$TEST_TMP

wait_file() {
    local i
    for i in $(seq 1 $(( ${2:-5} * 20 ))); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}
wait_lines() { # FILE N [SECONDS]
    local i
    for i in $(seq 1 $(( ${3:-5} * 20 ))); do
        [ "$(wc -l <"$1" 2>/dev/null || echo 0)" -ge "$2" ] && return 0; sleep 0.05
    done
    return 1
}

# An observer from the start.
spawn observer "$F" elect --observe db --count 4
wait_log "$TEST_TMP/observer.log" '^rev 0 no leader$' 10
"$F" elect db host-a -- sh -c 'env | grep "^FENCE_" | sort >"$0/env1"' "$T"
check_eq "elect exits with the command's status" 0 $?
check "FENCE_TOKEN is set" grep -q "^FENCE_TOKEN=[1-9]" "$T/env1"
check "FENCE_ELECTION is the name" grep -q "^FENCE_ELECTION=db$" "$T/env1"
tok1=$(sed -n 's/^FENCE_TOKEN=//p' "$T/env1")

# Two candidates: the second waits for the first, then leads with a higher token.
spawn first "$F" elect db host-b -- sh -c 'echo "$FENCE_TOKEN" >"$0/tok_b"; while [ ! -e "$0/go" ]; do sleep 0.05; done' "$T"
wait_file "$T/tok_b"
spawn second "$F" elect db host-c -- sh -c 'echo "$FENCE_TOKEN" >"$0/tok_c"' "$T"
wait_log "$TEST_TMP/second.log" 'campaigning' 10
check "the second candidate waits while the first leads" [ ! -e "$T/tok_c" ]
touch "$T/go"
wait_file "$T/tok_c" 10
tok_b=$(cat "$T/tok_b"); tok_c=$(cat "$T/tok_c" 2>/dev/null || echo 0)
check "each leader's token is higher than the one before ($tok1 < $tok_b < $tok_c)" \
    [ "$tok_b" -gt "$tok1" ] && [ "$tok_c" -gt "$tok_b" ]

# A SIGSTOPped leader: its lease runs out, the next candidate is elected,
# and the old leader's command is stopped when fencectl runs again.
rm -f "$T/sig"
spawn paused "$F" elect --ttl 600 --grace 150 db host-p -- sh -c '
    trap "echo TERM >>\"$0/sig\"; exit 0" TERM
    echo "$FENCE_TOKEN" >"$0/tok_p"; while :; do sleep 0.05; done' "$T"
wait_file "$T/tok_p"
kill -STOP "$(pid_of paused)"
"$F" elect --ttl 5000 db host-q -- sh -c 'echo "$FENCE_TOKEN" >"$0/tok_q"' "$T"
tok_p=$(cat "$T/tok_p"); tok_q=$(cat "$T/tok_q" 2>/dev/null || echo 0)
check "the next candidate is elected once the stopped leader's lease ends ($tok_q > $tok_p)" \
    [ "$tok_q" -gt "$tok_p" ]
kill -CONT "$(pid_of paused)"
wait "$(pid_of paused)"
check_eq "the stopped leader exits 79 (leadership lost)" 79 "$?"
check "its command got SIGTERM" grep -q TERM "$T/sig"

# The observer printed each leader as it changed (4 lines, then it exits).
wait_exit "$(pid_of observer)" 10
out=$(cat "$TEST_TMP/observer.log" | grep '^rev ')
check_eq "the observer printed 4 states" 4 "$(echo "$out" | wc -l)"
check "the first is 'no leader' at revision 0" [ "$(echo "$out" | head -1)" = "rev 0 no leader" ]
check "then host-a with its token" grep -q "token $tok1 lease [0-9]* host-a" <<<"$out"

"$F" elect db 2>/dev/null
check_eq "elect without a command: usage error (64)" 64 $?
"$F" elect --observe 2>/dev/null
check_eq "elect --observe without a name: usage error (64)" 64 $?
"$F" elect lk v -- true >/dev/null 2>&1 # fine: an election named lk
"$F" acquire plain.lock >/dev/null
"$F" elect plain.lock v -- true 2>"$T/wt"
check "elect on a lock's name fails with WRONGTYPE" grep -q WRONGTYPE "$T/wt"
finish
