#!/usr/bin/env bash
# Token propagation end to end: the command run by `fencectl lock` writes to
# fence-store with $FENCE_TOKEN (using redis-cli, a client nobody here
# wrote) and is admitted; a write with an older token is rejected STALE; and
# the seed's pause scenario: holder 1 is SIGSTOPped past its lease, holder 2
# takes the lock and writes, holder 1 resumes and its write is rejected.
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
[ -x "$FENCE_STORE" ] || skip_all "$FENCE_STORE not built"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed"
port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced"
sport=$(free_port)
spawn store "$FENCE_STORE" --port "$sport" --data-dir "$TEST_TMP/store"
wait_fenced "$port" 20 || { cat "$TEST_TMP/fenced.log"; not_ok "fenced listens"; finish; }
wait_port "$sport" 20 || { cat "$TEST_TMP/store.log"; not_ok "fence-store listens"; finish; }
export FENCE_SERVER=127.0.0.1:$port
export SPORT=$sport
F=$FENCECTL
T=$TEST_TMP
rc() { redis-cli -h 127.0.0.1 -p "$sport" "$@"; }
wait_file() {
    local i
    for i in $(seq 1 $(( ${2:-5} * 20 ))); do [ -s "$1" ] && return 0; sleep 0.05; done
    return 1
}

# ---- admitted with $FENCE_TOKEN, stale token rejected ---------------------
"$F" lock acct -- sh -c '
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET acct "$FENCE_TOKEN" balance 100 >"$0/w1"
    echo "$FENCE_TOKEN" >"$0/t1"' "$T"
check_eq "first holder's write with \$FENCE_TOKEN is admitted" OK "$(cat "$T/w1")"
t1=$(cat "$T/t1")
"$F" lock acct -- sh -c '
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET acct "$FENCE_TOKEN" balance 200 >"$0/w2"
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET acct "$1" balance 666 >"$0/w3" 2>&1
    echo "$FENCE_TOKEN" >"$0/t2"' "$T" "$t1"
t2=$(cat "$T/t2")
check "second holder has a higher token ($t2 > $t1)" [ "$t2" -gt "$t1" ]
check_eq "second holder's write is admitted" OK "$(cat "$T/w2")"
check "a write with the older token $t1 is rejected STALE" grep -q "STALE $t1 $t2" "$T/w3"
check_eq "the store holds the admitted value" 200 "$(rc FGET balance)"
check_eq "the fence's high-water mark is the newest token" "$t2" "$(rc FENCE.HIGH acct)"

# ---- the pause scenario ------------------------------------------------------
# Holder 1 registers its token (FENCE.ADMIT), then waits for "go" and
# writes.  We SIGSTOP holder 1 (fencectl and its command) past its lease.
rm -f "$T/go" "$T/p1" "$T/out1"
spawn h1 "$F" lock pause --ttl 600 --on-lost ignore -- sh -c '
    redis-cli -h 127.0.0.1 -p "$SPORT" FENCE.ADMIT pause "$FENCE_TOKEN" >/dev/null
    echo "$FENCE_TOKEN" >"$0/p1"
    while [ ! -e "$0/go" ]; do sleep 0.02; done
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET pause "$FENCE_TOKEN" doc "from holder 1" >"$0/out1" 2>&1' "$T"
wait_file "$T/p1"
p1=$(cat "$T/p1")
h1=$(pid_of h1)
child=$(pgrep -P "$h1" | head -n1)
kill -STOP "$h1"; [ -n "$child" ] && kill -STOP -- "-$child"
"$F" lock pause --ttl 5000 --wait 5000 -- sh -c '
    redis-cli -h 127.0.0.1 -p "$SPORT" FSET pause "$FENCE_TOKEN" doc "from holder 2" >"$0/out2"
    echo "$FENCE_TOKEN" >"$0/p2"' "$T"
p2=$(cat "$T/p2")
check "holder 2 got the lock while holder 1 was paused ($p2 > $p1)" [ "$p2" -gt "$p1" ]
check_eq "holder 2's write is admitted" OK "$(cat "$T/out2")"
touch "$T/go"
[ -n "$child" ] && kill -CONT -- "-$child"; kill -CONT "$h1"
wait "$h1"; code=$?
unset "_pids[h1]"
check "holder 1's late write with token $p1 is rejected" grep -q "STALE $p1 $p2" "$T/out1"
check_eq "the store keeps holder 2's data" "from holder 2" "$(rc FGET doc)"
check_eq "holder 1's fencectl reports the lost lease (79)" 79 "$code"
finish
