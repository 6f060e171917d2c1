#!/usr/bin/env bash
# fence-store with
# verify keys: real signed tokens from fenced are admitted; forged ones
# (2^63 with a real signature, a plain 2^63, the number changed, another
# lock's token, another key under the same id, an unlisted key id) get
# -BADTOKEN and leave the mark and the data alone; real holders still write
# afterwards; an old signed token is STALE, not BADTOKEN; rotation by
# restarting fence-store with a longer, then shorter, verify.keys.
here=$(dirname "$0")
if [ -f "$here/../lib/lib.sh" ]; then . "$here/../lib/lib.sh"; else . "$here/../../lib/lib.sh"; fi
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
[ -x "$FENCE_STORE" ] || skip_all "$FENCE_STORE not built"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed"
F=$FENCECTL
T=$TEST_TMP
"$F" keygen "$T/k1" --key-id k1 >/dev/null
"$F" keygen "$T/k1b" --key-id k1 >/dev/null   # another key, same id
"$F" keygen "$T/k2" --key-id k2 >/dev/null
port=$(free_port); port2=$(free_port); sport=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$T/fenced" --token-signing-key "$T/k1/signing.key"
spawn fenced_b "$FENCED" --port "$port2" --data-dir "$T/fenced_b" --token-signing-key "$T/k1b/signing.key"
start_store() {
    spawn store "$FENCE_STORE" --port "$sport" --data-dir "$T/store" --token-verify-keys "$1"
    wait_port "$sport" 20 || { cat "$T/store.log"; not_ok "fence-store listens"; finish; }
}
start_store "$T/k1/verify.keys"
wait_port "$port" 20 && wait_port "$port2" 20 || { cat "$T"/fenced*.log; not_ok "fenced listens"; finish; }
rc() { redis-cli -h 127.0.0.1 -p "$sport" "$@"; }
grant() { # grant PORT LOCK: a signed token for LOCK from the fenced on PORT
    local l; l=$(redis-cli -h 127.0.0.1 -p "$1" LEASE.GRANT 60000)
    redis-cli -h 127.0.0.1 -p "$1" LOCK "$2" "$l" SIGNED
}

s1=$(grant "$port" acct)
t1=${s1%%.*}
check_eq "a real signed token is admitted" OK "$(rc FSET acct "$s1" balance 100)"
check_eq "the mark is its number" "$t1" "$(rc FENCE.HIGH acct)"
rest=${s1#*.}
declare -A forged=(
    ["2^63 with a real signature"]="9223372036854775808.$rest"
    ["a plain 2^63"]="9223372036854775808"
    ["a plain real number"]="$t1"
    ["the number changed"]="$((t1 + 1)).$rest"
    ["another lock's token"]="$(grant "$port" other)"
    ["another key under the same id"]="$(grant "$port2" acct)"
    ["garbage"]="$t1.k1.nope"
)
for what in "${!forged[@]}"; do
    out=$(rc FSET acct "${forged[$what]}" balance 666 2>&1)
    check "FSET with $what: BADTOKEN" grep -q "^BADTOKEN" <<<"$out"
    out=$(rc FENCE.ADMIT acct "${forged[$what]}" 2>&1)
    check "FENCE.ADMIT with $what: BADTOKEN" grep -q "^BADTOKEN" <<<"$out"
done
check_eq "the mark is unchanged" "$t1" "$(rc FENCE.HIGH acct)"
check_eq "the data is unchanged" 100 "$(rc FGET balance)"
check_eq "the real holder still writes" OK "$(rc FSET acct "$s1" balance 101)"
redis-cli -h 127.0.0.1 -p "$port" UNLOCK acct "$t1" >/dev/null
s2=$(grant "$port" acct)
check_eq "a newer holder writes" OK "$(rc FSET acct "$s2" balance 200)"
out=$(rc FSET acct "$s1" balance 1 2>&1)
check "the old signed token is STALE, not BADTOKEN" grep -q "^STALE ${t1} ${s2%%.*}" <<<"$out"

# Rotation.
stop store
cat "$T/k1/verify.keys" "$T/k2/verify.keys" >"$T/both.keys"
start_store "$T/both.keys"
port3=$(free_port)
spawn fenced2 "$FENCED" --port "$port3" --data-dir "$T/fenced2" --token-signing-key "$T/k2/signing.key"
wait_port "$port3" 20 || { cat "$T/fenced2.log"; not_ok "fenced (k2) listens"; finish; }
# (two fenced instances count tokens independently: one fence each)
s3=$(grant "$port" rot_a)
s4=$(grant "$port3" rot_b)
check_eq "old key verifies while listed" OK "$(rc FENCE.ADMIT rot_a "$s3")"
check_eq "new key verifies once listed" OK "$(rc FENCE.ADMIT rot_b "$s4")"
stop store
start_store "$T/k2/verify.keys"
out=$(rc FENCE.ADMIT rot2 "$(grant "$port" rot2)" 2>&1)
check "old key refused after removal" grep -q "^BADTOKEN" <<<"$out"
out=$(rc FENCE.ADMIT rot2 "$(grant "$port3" rot2)" 2>&1)
check_eq "new key still verifies" OK "$out"
finish
