#!/usr/bin/env bash
# The seed's pause
# scenario with signed tokens end to end: `fencectl lock --signed` hands
# the command $FENCE_SIGNED_TOKEN, which it writes with (redis-cli);
# holder 1 is SIGSTOPped past its lease, holder 2 takes the lock and
# writes, holder 1 resumes and its late write is STALE; a third process
# that makes up a huge token ($FENCE_TOKEN-style number or 2^63) is
# BADTOKEN and cannot lock holder 2 out.
here=$(dirname "$0")
if [ -f "$here/../lib/lib.sh" ]; then . "$here/../lib/lib.sh"; else . "$here/../../lib/lib.sh"; fi
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
[ -x "$FENCE_STORE" ] || skip_all "$FENCE_STORE not built"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed"
F=$FENCECTL
T=$TEST_TMP
"$F" keygen "$T/keys" >/dev/null
port=$(free_port); sport=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$T/fenced" --token-signing-key "$T/keys/signing.key"
spawn store "$FENCE_STORE" --port "$sport" --data-dir "$T/store" --token-verify-keys "$T/keys/verify.keys"
wait_fenced "$port" 20 || { cat "$T/fenced.log"; not_ok "fenced listens"; finish; }
wait_port "$sport" 20 || { cat "$T/store.log"; not_ok "fence-store listens"; finish; }
export FENCE_SERVER=127.0.0.1:$port
export SPORT=$sport
rc() { redis-cli -h 127.0.0.1 -p "$sport" "$@"; }
wait_file() {
    local i
    for i in $(seq 1 $(( ${2:-5} * 20 ))); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}

"$F" lock acct --signed -- sh -c '
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET acct "$FENCE_SIGNED_TOKEN" balance 100 >"$0/w1"
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET acct "$FENCE_TOKEN" balance 1 >"$0/w1plain" 2>&1' "$T"
check_eq "a write with \$FENCE_SIGNED_TOKEN is admitted" OK "$(cat "$T/w1")"
check "the plain \$FENCE_TOKEN is BADTOKEN at a verifying store" grep -q "^BADTOKEN" "$T/w1plain"

rm -f "$T/go" "$T/p1" "$T/out1"
spawn h1 "$F" lock pause --signed --ttl 600 --on-lost ignore -- sh -c '
    redis-cli -h 127.0.0.1 -p "$SPORT" FENCE.ADMIT pause "$FENCE_SIGNED_TOKEN" >/dev/null
    echo "$FENCE_TOKEN" >"$0/p1"
    while [ ! -e "$0/go" ]; do sleep 0.02; done
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET pause "$FENCE_SIGNED_TOKEN" doc "from holder 1" >"$0/out1" 2>&1' "$T"
wait_file "$T/p1"
p1=$(cat "$T/p1")
h1=$(pid_of h1)
child=$(pgrep -P "$h1" | head -n1)
kill -STOP "$h1"; [ -n "$child" ] && kill -STOP -- "-$child"
"$F" lock pause --signed --ttl 5000 --wait 5000 -- sh -c '
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET pause "$FENCE_SIGNED_TOKEN" doc "from holder 2" >"$0/out2"
    echo "$FENCE_TOKEN" >"$0/p2"
    echo "$FENCE_SIGNED_TOKEN" >"$0/s2"' "$T"
p2=$(cat "$T/p2")
check "holder 2 got the lock while holder 1 was paused ($p2 > $p1)" [ "$p2" -gt "$p1" ]
check_eq "holder 2's signed write is admitted" OK "$(cat "$T/out2")"
# A rogue writer makes up tokens: none of them moves the mark.
sig2=$(cut -d. -f2- "$T/s2")
for fake in 9223372036854775808 "9223372036854775808.$sig2" "$((p2 + 1000)).$sig2"; do
    out=$(rc FSET pause "$fake" doc rogue 2>&1)
    check "a made-up token ${fake:0:24}... is BADTOKEN" grep -q "^BADTOKEN" <<<"$out"
done
check_eq "the mark is still holder 2's token" "$p2" "$(rc FENCE.HIGH pause)"
touch "$T/go"
[ -n "$child" ] && kill -CONT -- "-$child"; kill -CONT "$h1"
wait "$h1"; code=$?
unset "_pids[h1]"
check "holder 1's late signed write is STALE" grep -q "STALE $p1 $p2" "$T/out1"
check_eq "the store keeps holder 2's data" "from holder 2" "$(rc FGET doc)"
check_eq "holder 1's fencectl reports the lost lease (79)" 79 "$code"
"$F" lock pause --signed --wait 5000 -- sh -c '
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET pause "$FENCE_SIGNED_TOKEN" doc "from holder 3" >"$0/out3"' "$T"
check_eq "after the rogue writes, the next real holder still writes" OK "$(cat "$T/out3")"
finish
