#!/usr/bin/env bash
# fencectl sem: the holder of a slot runs its command with the slot's token,
# slot and fence name (NAME#SLOT) in its environment; two holders of a
# 2-slot semaphore get distinct slots, a third waits; a holder killed with
# -9 loses its slot when its lease ends and the waiter gets that slot with a
# higher token, which fence-store then admits while refusing the dead
# holder's; a SIGSTOPped holder's command gets SIGTERM and fencectl exits 79;
# sem --info; WRONGTYPE (another N, a lock's name); --signed (verified at
# NAME#SLOT, refused at another slot); usage errors.
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
waiters_are() { "$F" sem --info "$1" 2>/dev/null | grep -q "^n [0-9]* waiters $2\$"; }

"$F" sem jobs 2 -- sh -c 'env | grep "^FENCE_" | sort >"$0/env1"' "$T"
check_eq "sem exits with the command's status" 0 $?
check "FENCE_TOKEN is set" grep -q "^FENCE_TOKEN=[1-9]" "$T/env1"
check "FENCE_SLOT is the lowest free slot (0)" grep -q "^FENCE_SLOT=0$" "$T/env1"
check "FENCE_LOCK is the slot's fence name jobs#0" grep -q "^FENCE_LOCK=jobs#0$" "$T/env1"
check "FENCE_SEM is the semaphore's name" grep -q "^FENCE_SEM=jobs$" "$T/env1"
check "FENCE_LEASE is set" grep -q "^FENCE_LEASE=[1-9]" "$T/env1"
check_eq "the slot is released when the command ends" none "$("$F" sem --info jobs)"
"$F" sem jobs 2 -- sh -c 'exit 7'
check_eq "the command's exit status is passed on" 7 $?

# Two holders get distinct slots; the third (N+1th) waits.
hold='echo "$FENCE_SLOT $FENCE_TOKEN" >"$0/$1"; while [ ! -e "$0/go$1" ]; do sleep 0.05; done'
spawn h1 "$F" sem --ttl 1500 jobs 2 -- sh -c "$hold" "$T" a
wait_file "$T/a"
spawn h2 "$F" sem jobs 2 -- sh -c "$hold" "$T" b
wait_file "$T/b"
read -r slot_a tok_a <"$T/a"; read -r slot_b tok_b <"$T/b"
check "two holders hold distinct slots ($slot_a, $slot_b)" [ "$slot_a" != "$slot_b" ]
check "sem --info lists both slots" \
    [ "$("$F" sem --info jobs | grep -c '^slot [01] token [1-9][0-9]* lease [1-9]')" = 2 ]
spawn h3 "$F" sem --wait 20000 jobs 2 -- sh -c "$hold" "$T" c
check "the third holder queues (SEM.INFO waiters 1)" wait_for 10 waiters_are jobs 1
check "and has no slot while both are held" [ ! -e "$T/c" ]
"$F" sem --wait 0 jobs 2 -- true 2>"$T/busy.err"
check_eq "--wait 0 with every slot taken: exit 75" 75 $?
check "it says no slot was free" grep -q "no slot free" "$T/busy.err"

# Kill the first holder's fencectl: its command goes (PDEATHSIG), its lease
# ends, and the waiter gets its slot with a higher token.
{ kill -9 "$(pid_of h1)"; wait "$(pid_of h1)"; } 2>/dev/null
wait_file "$T/c" 15
read -r slot_c tok_c <"$T/c" 2>/dev/null || { slot_c=-1; tok_c=0; }
check_eq "the waiter gets the killed holder's slot" "$slot_a" "$slot_c"
check "with a higher token ($tok_c > $tok_a)" [ "$tok_c" -gt "$tok_a" ]
if [ -x "$FENCE_STORE" ]; then
    sport=$(free_port)
    spawn store "$FENCE_STORE" --port "$sport" --data-dir "$T/store"
    wait_port "$sport" 20
    check_eq "fence-store admits the new holder's token for jobs#$slot_c" OK \
        "$(redis-cli -p "$sport" FENCE.ADMIT "jobs#$slot_c" "$tok_c")"
    check "and refuses the stale holder's token at that slot's fence" \
        grep -q STALE <<<"$(redis-cli -p "$sport" FSET "jobs#$slot_c" "$tok_a" k v)"
    check_eq "the other slot's fence is not raised by it" OK \
        "$(redis-cli -p "$sport" FENCE.ADMIT "jobs#$slot_b" "$tok_b")"
else
    ok "# skip fence-store not built"
fi
touch "$T/gob" "$T/goc"
wait "$(pid_of h2)"
check_eq "the second holder exits 0" 0 $?
wait "$(pid_of h3)"
check_eq "the third holder exits 0" 0 $?
check_eq "every slot is free again" none "$("$F" sem --info jobs)"

# A SIGSTOPped holder: the next one takes the slot after its lease, and on
# SIGCONT its command gets SIGTERM and fencectl exits 79.
spawn paused "$F" sem --ttl 600 --grace 150 one 1 -- sh -c '
    trap "echo TERM >>\"$0/sig\"; exit 0" TERM
    echo "$FENCE_TOKEN" >"$0/tok_p"; while :; do sleep 0.05; done' "$T"
wait_file "$T/tok_p"
kill -STOP "$(pid_of paused)"
"$F" sem --wait 10000 one 1 -- sh -c 'echo "$FENCE_TOKEN" >"$0/tok_q"' "$T"
tok_p=$(cat "$T/tok_p"); tok_q=$(cat "$T/tok_q" 2>/dev/null || echo 0)
check "the next holder gets the slot once the stopped one's lease ends ($tok_q > $tok_p)" \
    [ "$tok_q" -gt "$tok_p" ]
kill -CONT "$(pid_of paused)"
wait "$(pid_of paused)"
check_eq "the stopped holder exits 79 (lease lost)" 79 "$?"
check "its command got SIGTERM" grep -q TERM "$T/sig"

# The one name space.
spawn wt "$F" sem pool 2 -- sh -c 'echo x >"$0/wt"; while [ ! -e "$0/gowt" ]; do sleep 0.05; done' "$T"
wait_file "$T/wt"
"$F" sem --wait 0 pool 3 -- true 2>"$T/wt.err"
check_eq "another N: exit 1" 1 $?
check "WRONGTYPE names the semaphore's N" grep -q "WRONGTYPE pool is a semaphore of 2 permits" "$T/wt.err"
touch "$T/gowt"
wait "$(pid_of wt)"
"$F" acquire --ttl 5000 alock >/dev/null
"$F" sem --wait 0 alock 2 -- true 2>"$T/wt2.err"
check_eq "a lock's name: exit 1" 1 $?
check "WRONGTYPE says it is a lock" grep -q "WRONGTYPE alock is a lock" "$T/wt2.err"

# --signed: FENCE_SIGNED_TOKEN is signed for the slot's fence name NAME#SLOT,
# so a fence-store that verifies admits it there and refuses it at the other
# slot's fence.
if [ -x "$FENCE_STORE" ]; then
    "$F" keygen "$T/keys" --key-id k1 >/dev/null
    kport=$(free_port); vport=$(free_port)
    spawn fenced_k "$FENCED" --port "$kport" --data-dir "$T/fenced_k" \
        --token-signing-key "$T/keys/signing.key"
    spawn store_v "$FENCE_STORE" --port "$vport" --data-dir "$T/store_v" \
        --token-verify-keys "$T/keys/verify.keys"
    wait_port "$kport" 20 && wait_ready "$kport" 20 && wait_port "$vport" 20
    "$F" --server "127.0.0.1:$kport" sem --signed sg 2 -- sh -c \
        'echo "$FENCE_LOCK $FENCE_SIGNED_TOKEN $FENCE_TOKEN" >"$0/signed"' "$T"
    check_eq "sem --signed exits 0" 0 $?
    read -r sfence stok snum <"$T/signed"
    check_eq "the signed slot's fence name" "sg#0" "$sfence"
    check "the signed token starts with the slot's token" [ "${stok%%.*}" = "$snum" ]
    check_eq "a verifying fence-store admits it at sg#0" OK \
        "$(redis-cli -p "$vport" FENCE.ADMIT sg#0 "$stok")"
    check "and refuses it at the other slot's fence sg#1" \
        grep -q BADTOKEN <<<"$(redis-cli -p "$vport" FENCE.ADMIT sg#1 "$stok")"
    "$F" sem --signed --wait 0 sg 2 -- true 2>"$T/nokey.err"
    check_eq "sem --signed against a server without a key: exit 1" 1 $?
    check "it says the server has no signing key" grep -q "signing" "$T/nokey.err"
else
    ok "# skip fence-store not built"
fi

"$F" sem jobs 2>/dev/null
check_eq "sem without N: usage error (64)" 64 $?
"$F" sem jobs 0 -- true 2>/dev/null
check_eq "N = 0: usage error (64)" 64 $?
"$F" sem jobs 1025 -- true 2>/dev/null
check_eq "N = 1025: usage error (64)" 64 $?
"$F" sem jobs 2 2>/dev/null
check_eq "sem without a command: usage error (64)" 64 $?
"$F" sem --info 2>/dev/null
check_eq "sem --info without a name: usage error (64)" 64 $?
"$F" sem "$(head -c 255 /dev/zero | tr '\0' x)" 10 -- true 2>/dev/null
check_eq "a name whose slot names do not fit 256 bytes: usage error (64)" 64 $?
"$F" sem --help | grep -q "FENCE_SLOT"
check_eq "sem --help documents FENCE_SLOT" 0 $?
finish
