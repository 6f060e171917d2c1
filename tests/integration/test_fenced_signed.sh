#!/usr/bin/env bash
# fenced's signed grants: LOCK ... SIGNED replies with the
# signed token string, ACQUIRE ... SIGNED with [string, lease]; replies
# without SIGNED unchanged; a reentrant LOCK SIGNED gives the same string; a
# fenced without a signing key refuses SIGNED before granting anything; an
# unreadable (0644) signing key stops fenced at start; the HMAC signature
# checks out in Python (an implementation nobody here wrote); fencectl
# acquire/lock --signed print and export it.
here=$(dirname "$0")
if [ -f "$here/../lib/lib.sh" ]; then . "$here/../lib/lib.sh"; else . "$here/../../lib/lib.sh"; fi
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed"
F=$FENCECTL
T=$TEST_TMP
"$F" keygen "$T/ed" --key-id k1 >/dev/null
"$F" keygen "$T/hm" --key-id h1 --scheme hmac-sha256 >/dev/null

# A fenced with an Ed25519 key, one with an HMAC key, one without.
pe=$(free_port); ph=$(free_port); pn=$(free_port)
spawn fe "$FENCED" --port "$pe" --data-dir "$T/fe" --token-signing-key "$T/ed/signing.key"
spawn fh "$FENCED" --port "$ph" --data-dir "$T/fh" --token-signing-key "$T/hm/signing.key"
spawn fn "$FENCED" --port "$pn" --data-dir "$T/fn"
for p in "$pe" "$ph" "$pn"; do
    wait_fenced "$p" 20 || { cat "$T"/f?.log; not_ok "fenced listens on $p"; finish; }
done
rc() { local p=$1; shift; redis-cli -h 127.0.0.1 -p "$p" "$@"; }

lease=$(rc "$pe" LEASE.GRANT 10000)
s=$(rc "$pe" LOCK orders "$lease" SIGNED)
check "LOCK ... SIGNED replies TOKEN.k1.<86 chars>" grep -qE '^[1-9][0-9]*\.k1\.[A-Za-z0-9_-]{86}$' <<<"$s"
tok=${s%%.*}
check_eq "LOCK.INFO shows that token" "$tok" "$(rc "$pe" LOCK.INFO orders | head -n1)"
check_eq "a reentrant LOCK ... SIGNED gives the same string" "$s" "$(rc "$pe" LOCK orders "$lease" SIGNED)"
check_eq "a reentrant LOCK without SIGNED gives the integer" "$tok" "$(rc "$pe" LOCK orders "$lease")"
s2=$(rc "$pe" LOCK other "$lease" WAIT 100 REQID 77 SIGNED)
check "LOCK ... WAIT ms REQID id SIGNED works" grep -qE '^[1-9][0-9]*\.k1\.' <<<"$s2"
check_eq "a retry with the same REQID gets the same signed token" "$s2" \
    "$(rc "$pe" LOCK other "$lease" WAIT 100 REQID 77 SIGNED)"
mapfile -t acq < <(rc "$pe" ACQUIRE job 5000 SIGNED)
check "ACQUIRE ... SIGNED replies [signed token, lease]" \
    [ "${#acq[@]}" = 2 ] && grep -qE '^[1-9][0-9]*\.k1\.[A-Za-z0-9_-]{86}$' <<<"${acq[0]}"
check "the lease is a number" grep -qE '^[1-9][0-9]*$' <<<"${acq[1]}"
mapfile -t el < <(rc "$pe" ELECTION.CAMPAIGN leader "$lease" me SIGNED)
check "ELECTION.CAMPAIGN ... SIGNED replies [signed token, lease]" \
    [ "${#el[@]}" = 2 ] && grep -qE '^[1-9][0-9]*\.k1\.[A-Za-z0-9_-]{86}$' <<<"${el[0]}"
check_eq "... for the leader's token" "${el[0]%%.*}" "$(rc "$pe" ELECTION.LEADER leader | sed -n 2p)"
mapfile -t plain < <(rc "$pe" ACQUIRE job2 5000)
check "ACQUIRE without SIGNED still replies two integers" grep -qE '^[0-9]+$' <<<"${plain[0]}"
out=$(rc "$pe" LOCK orders "$lease" SIGNED EXTRA 2>&1)
check "SIGNED must be the last argument" grep -q "^ERR" <<<"$out"

# HMAC: check the signature independently.
lh=$(rc "$ph" LEASE.GRANT 10000)
sh_tok=$(rc "$ph" LOCK "a b/c" "$lh" SIGNED)
check "the HMAC fenced signs with its key id" grep -qE '^[1-9][0-9]*\.h1\.[A-Za-z0-9_-]{43}$' <<<"$sh_tok"
verdict=$(/usr/bin/python3 - "$T/hm/signing.key" "a b/c" "$sh_tok" <<'PY'
import base64, hashlib, hmac, struct, sys
line = [l for l in open(sys.argv[1]).read().splitlines() if l and not l.startswith("#")][0]
kid, scheme, k = line.split()
key = base64.urlsafe_b64decode(k + "=")
name = sys.argv[2].encode()
tok, tkid, sig = sys.argv[3].split(".")
msg = (b"fenced-token-v1\x00" + bytes([len(tkid)]) + tkid.encode() + struct.pack(">H", len(name))
       + name + struct.pack(">Q", int(tok)))
want = base64.urlsafe_b64encode(hmac.new(key, msg, hashlib.sha256).digest()).rstrip(b"=").decode()
print("good" if hmac.compare_digest(want, sig) and tkid == kid else "bad")
PY
)
check_eq "Python's HMAC-SHA256 over the documented message matches" good "$verdict"

# No signing key: SIGNED refused, nothing granted.
ln=$(rc "$pn" LEASE.GRANT 10000)
out=$(rc "$pn" LOCK x "$ln" SIGNED 2>&1)
check "fenced without a key refuses LOCK ... SIGNED with ERR" grep -q "^ERR" <<<"$out"
check_eq "and grants nothing" "" "$(rc "$pn" LOCK.INFO x)"
out=$(rc "$pn" ACQUIRE y 5000 SIGNED 2>&1)
check "and refuses ACQUIRE ... SIGNED" grep -q "^ERR" <<<"$out"
check_eq "without granting" "" "$(rc "$pn" LOCK.INFO y)"

# A signing key others can read stops fenced at start, naming the file.
cp "$T/ed/signing.key" "$T/open.key"; chmod 644 "$T/open.key"
pb=$(free_port)
timeout 10 "$FENCED" --port "$pb" --data-dir "$T/fb" --token-signing-key "$T/open.key" >"$T/fb.log" 2>&1
code=$?
check "fenced refuses a 0644 signing key (exit $code)" [ "$code" -ne 0 ] && [ "$code" -ne 124 ]
check "and says chmod 600" grep -q "chmod 600" "$T/fb.log"

# fencectl.
read -r t l st < <("$F" --server "127.0.0.1:$pe" acquire fc --signed --wait 0)
check "fencectl acquire --signed prints TOKEN LEASE SIGNED" [ "${st%%.*}" = "$t" ]
eval "$("$F" --server "127.0.0.1:$pe" acquire fc2 --signed --env --wait 0)"
check "acquire --signed --env sets FENCE_SIGNED_TOKEN" [ "${FENCE_SIGNED_TOKEN%%.*}" = "$FENCE_TOKEN" ]
"$F" --server "127.0.0.1:$pe" lock fc3 --signed -- sh -c 'echo "$FENCE_TOKEN $FENCE_SIGNED_TOKEN" >"$0/env"' "$T"
read -r a b <"$T/env"
check "fencectl lock --signed exports FENCE_SIGNED_TOKEN beside FENCE_TOKEN" [ "${b%%.*}" = "$a" ]
"$F" --server "127.0.0.1:$pe" lock fc4 -- sh -c 'echo "${FENCE_SIGNED_TOKEN-unset}" >"$0/env2"' "$T"
check_eq "without --signed it is not set" unset "$(cat "$T/env2")"
"$F" --server "127.0.0.1:$pn" lock fc5 --signed -- true 2>"$T/err5"
check_eq "lock --signed against a fenced without a key exits 1" 1 $?
finish
