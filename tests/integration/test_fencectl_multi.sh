#!/usr/bin/env bash
# fencectl multi: the holder runs its command with the one token of the
# multi-lock (LOCK.INFO shows it at every name) and the names in
# FENCE_LOCKS; a second multi over an overlapping name waits and then gets a
# higher token; a holder killed with -9 loses its names when its lease ends;
# a SIGSTOPped holder's command gets SIGTERM and fencectl exits 79, and
# fence-store refuses its token at a name the next holder took; --signed
# (FENCE_SIGNED_TOKENS, one per name); usage errors.
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
info_tok() { redis-cli -p "$port" LOCK.INFO "$1" | head -1; }
waiters_are() { [ "$(redis-cli -p "$port" LOCK.INFO "$1" | sed -n 4p)" = "$2" ]; }

"$F" multi acct:17 acct:42 -- sh -c 'env | grep "^FENCE_" | sort >"$0/env1"' "$T"
check_eq "multi exits with the command's status" 0 $?
check "FENCE_TOKEN is set" grep -q "^FENCE_TOKEN=[1-9]" "$T/env1"
check "FENCE_LOCKS is the names, space-separated, in order" grep -q "^FENCE_LOCKS=acct:17 acct:42$" "$T/env1"
check "FENCE_LEASE is set" grep -q "^FENCE_LEASE=[1-9]" "$T/env1"
check "FENCE_SERVER is set" grep -q "^FENCE_SERVER=127.0.0.1:$port$" "$T/env1"
check_eq "no FENCE_SIGNED_TOKENS without --signed" 0 "$(grep -c "^FENCE_SIGNED_TOKENS=" "$T/env1")"
check_eq "both names are free when the command ends (acct:17)" "" "$(info_tok acct:17)"
check_eq "and acct:42" "" "$(info_tok acct:42)"
"$F" multi a b -- sh -c 'exit 7'
check_eq "the command's exit status is passed on" 7 $?

# Both names held with one token; an overlapping multi waits, then gets a
# higher token.
hold='echo "$FENCE_TOKEN" >"$0/$1"; while [ ! -e "$0/go$1" ]; do sleep 0.05; done'
spawn h1 "$F" multi --ttl 1500 x y -- sh -c "$hold" "$T" a
wait_file "$T/a"
tok_a=$(cat "$T/a")
check_eq "LOCK.INFO x shows the multi-lock's token" "$tok_a" "$(info_tok x)"
check_eq "LOCK.INFO y shows the same token" "$tok_a" "$(info_tok y)"
spawn h2 "$F" multi --wait 20000 y z -- sh -c "$hold" "$T" b
check "the overlapping multi queues at y (waiters 1)" wait_for 10 waiters_are y 1
check "and holds nothing meanwhile" [ ! -e "$T/b" ]
"$F" multi --wait 0 z y -- true 2>"$T/busy.err"
check_eq "--wait 0 with a name taken: exit 75" 75 $?
check_eq "and z is not held after it" "" "$(info_tok z)"
touch "$T/goa"
wait "$(pid_of h1)"
check_eq "the first holder exits 0" 0 $?
wait_file "$T/b" 10
tok_b=$(cat "$T/b" 2>/dev/null || echo 0)
check "the waiter gets y and z with a higher token ($tok_b > $tok_a)" [ "$tok_b" -gt "$tok_a" ]
check_eq "x is free (the first holder unlocked every name)" "" "$(info_tok x)"
check_eq "LOCK.INFO z shows the waiter's token" "$tok_b" "$(info_tok z)"
touch "$T/gob"
wait "$(pid_of h2)"
check_eq "the second holder exits 0" 0 $?

# A kill -9'd fencectl: its command goes (PDEATHSIG); its names come back
# after its lease.
spawn h3 "$F" multi --ttl 800 k1 k2 -- sh -c "$hold" "$T" c
wait_file "$T/c"
tok_c=$(cat "$T/c")
{ kill -9 "$(pid_of h3)"; wait "$(pid_of h3)"; } 2>/dev/null
"$F" multi --wait 10000 k2 k1 -- sh -c 'echo "$FENCE_TOKEN" >"$0/d"' "$T"
check_eq "a multi over the killed holder's names gets them after its lease" 0 $?
tok_d=$(cat "$T/d" 2>/dev/null || echo 0)
check "with a higher token ($tok_d > $tok_c)" [ "$tok_d" -gt "$tok_c" ]

# A SIGSTOPped holder: the next one takes a name after its lease; on
# SIGCONT its command gets SIGTERM and fencectl exits 79; fence-store
# refuses its token at that name.
spawn paused "$F" multi --ttl 600 --grace 150 p1 p2 -- sh -c '
    trap "echo TERM >>\"$0/sig\"; exit 0" TERM
    echo "$FENCE_TOKEN" >"$0/tok_p"; while :; do sleep 0.05; done' "$T"
wait_file "$T/tok_p"
kill -STOP "$(pid_of paused)"
"$F" multi --wait 10000 p2 -- sh -c 'echo "$FENCE_TOKEN" >"$0/tok_q"' "$T"
tok_p=$(cat "$T/tok_p"); tok_q=$(cat "$T/tok_q" 2>/dev/null || echo 0)
check "the next holder gets p2 once the stopped one's lease ends ($tok_q > $tok_p)" \
    [ "$tok_q" -gt "$tok_p" ]
kill -CONT "$(pid_of paused)"
wait "$(pid_of paused)"
check_eq "the stopped holder exits 79 (lease lost)" 79 "$?"
check "its command got SIGTERM" grep -q TERM "$T/sig"
if [ -x "$FENCE_STORE" ]; then
    sport=$(free_port)
    spawn store "$FENCE_STORE" --port "$sport" --data-dir "$T/store"
    wait_port "$sport" 20
    check_eq "fence-store admits the stale holder's token at p1 (nobody newer there)" OK \
        "$(redis-cli -p "$sport" FENCE.ADMIT p1 "$tok_p")"
    check_eq "fence-store admits the new holder's token at p2" OK \
        "$(redis-cli -p "$sport" FENCE.ADMIT p2 "$tok_q")"
    check "and refuses the stale holder's token at p2" \
        grep -q STALE <<<"$(redis-cli -p "$sport" FSET p2 "$tok_p" k v)"
else
    ok "# skip fence-store not built"
    ok "# skip fence-store not built"
    ok "# skip fence-store not built"
fi

# --signed: FENCE_SIGNED_TOKENS, one per name in FENCE_LOCKS' order, each
# signed for its own name.
if [ -x "$FENCE_STORE" ]; then
    "$F" keygen "$T/keys" --key-id k1 >/dev/null
    kport=$(free_port); vport=$(free_port)
    spawn fenced_k "$FENCED" --port "$kport" --data-dir "$T/fenced_k" \
        --token-signing-key "$T/keys/signing.key"
    spawn store_v "$FENCE_STORE" --port "$vport" --data-dir "$T/store_v" \
        --token-verify-keys "$T/keys/verify.keys"
    wait_port "$kport" 20 && wait_ready "$kport" 20 && wait_port "$vport" 20
    "$F" --server "127.0.0.1:$kport" multi --signed s1 s2 -- sh -c \
        'echo "$FENCE_TOKEN $FENCE_SIGNED_TOKENS" >"$0/signed"' "$T"
    check_eq "multi --signed exits 0" 0 $?
    read -r snum st1 st2 <"$T/signed"
    check "the first signed token starts with the token" [ "${st1%%.*}" = "$snum" ]
    check "the second too" [ "${st2%%.*}" = "$snum" ]
    check_eq "a verifying fence-store admits the first at s1" OK \
        "$(redis-cli -p "$vport" FENCE.ADMIT s1 "$st1")"
    check_eq "and the second at s2" OK "$(redis-cli -p "$vport" FENCE.ADMIT s2 "$st2")"
    check "and refuses the first at s2" \
        grep -q BADTOKEN <<<"$(redis-cli -p "$vport" FENCE.ADMIT s2 "$st1")"
    "$F" multi --signed --wait 0 s3 s4 -- true 2>"$T/nokey.err"
    check_eq "multi --signed against a server without a key: exit 1" 1 $?
    check "it says the server has no signing key" grep -q "signing" "$T/nokey.err"
else
    for i in 1 2 3 4 5 6 7 8; do ok "# skip fence-store not built"; done
fi

# Usage errors (64), each with a reason.
usage_is() { # description expected-reason args...
    local d=$1 r=$2; shift 2
    "$F" multi "$@" 2>"$T/usage.err"
    local rc=$?
    check_eq "$d: usage error (64)" 64 "$rc"
    check "$d: it says why" grep -q -- "$r" "$T/usage.err"
}
usage_is "no names" "NAME... (1..64 names) is missing" -- true
usage_is "no command" "a command is needed after --" a b
usage_is "no --" "a command is needed after --" a b true
usage_is "a name with a space" "may not hold a space" "a b" c -- true
usage_is "a name with a newline" "may not hold a space" "$(printf 'a\nb')" c -- true
usage_is "an empty name" "1..256 bytes" "" c -- true
usage_is "a 257-byte name" "1..256 bytes" "$(head -c 257 /dev/zero | tr '\0' x)" -- true
usage_is "a name given twice" "given twice" a b a -- true
usage_is "an option word as a name" "option word" a wait -- true
usage_is "65 names" "at most 64" $(seq 1 65) -- true
usage_is "a bad --ttl" "--ttl wants" --ttl 5 a -- true
usage_is "an unknown option" "unknown option" --bogus a -- true
"$F" multi $(seq 1 64) -- true
check_eq "64 names are fine" 0 $?
"$F" multi --help | grep -q "FENCE_LOCKS"
check_eq "multi --help documents FENCE_LOCKS" 0 $?
"$F" --help 2>&1 | grep -q "multi NAME"
check_eq "fencectl --help lists multi" 0 $?
finish
