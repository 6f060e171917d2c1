#!/usr/bin/env bash
# `fencectl keygen DIR`: both files with their modes and one key line each,
# key ids given or generated with the scheme's prefix, no overwrite without
# --force, bad ids and schemes refused (exit 64) without touching DIR.
# No daemon needed.
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
F=$FENCECTL
D=$TEST_TMP/keys

out=$("$F" keygen "$D" --key-id k1)
check_eq "keygen exits 0" 0 $?
check "it names the key id" grep -q "key id k1 (ed25519)" <<<"$out"
check_eq "signing.key is 0600" 600 "$(stat -c %a "$D/signing.key")"
check_eq "verify.keys (ed25519) is 0644" 644 "$(stat -c %a "$D/verify.keys")"
check "signing.key holds one k1 ed25519 line" \
    [ "$(grep -v '^#' "$D/signing.key" | grep -cE '^k1 ed25519 [A-Za-z0-9_-]{43}$')" = 1 ]
check "verify.keys holds one k1 ed25519 line" \
    [ "$(grep -v '^#' "$D/verify.keys" | grep -cE '^k1 ed25519 [A-Za-z0-9_-]{43}$')" = 1 ]
check "the public key is not the secret" \
    [ "$(grep ^k1 "$D/signing.key")" != "$(grep ^k1 "$D/verify.keys")" ]
before=$(cat "$D/signing.key")
"$F" keygen "$D" 2>"$TEST_TMP/err"
check_eq "a second keygen without --force exits 1" 1 $?
check "it says why" grep -q "exists; not replacing it without --force" "$TEST_TMP/err"
check_eq "and the key is unchanged" "$before" "$(cat "$D/signing.key")"
"$F" keygen "$D" --force --scheme hmac-sha256 >/dev/null
check_eq "--force replaces" 0 $?
check "generated hmac key id starts with h" grep -qE '^h[0-9a-f]{8} hmac-sha256 ' "$D/signing.key"
check_eq "verify.keys of an HMAC key is 0600 (it is the secret)" 600 "$(stat -c %a "$D/verify.keys")"
check "an HMAC verify key is the signing key" \
    [ "$(grep -v '^#' "$D/signing.key")" = "$(grep -v '^#' "$D/verify.keys")" ]
"$F" keygen "$TEST_TMP/bad" --scheme hmac-sha256 --key-id k3 2>/dev/null
check_eq "an ed25519 key id for an hmac key exits 64" 64 $?
check "and creates nothing" [ ! -e "$TEST_TMP/bad" ]
"$F" keygen "$TEST_TMP/bad" --scheme rsa 2>/dev/null
check_eq "an unknown scheme exits 64" 64 $?
"$F" keygen "$TEST_TMP/bad" --key-id 'k.1' 2>/dev/null
check_eq "a key id with a dot exits 64" 64 $?
"$F" keygen 2>/dev/null
check_eq "no DIR exits 64" 64 $?
"$F" keygen --help | grep -q "usage: fencectl keygen"
check "keygen --help" [ $? -eq 0 ]
"$F" --help | grep -q "keygen DIR"
check "top-level --help lists keygen" [ $? -eq 0 ]
"$F" lock --help | grep -q -- "--signed"
check "lock --help lists --signed" [ $? -eq 0 ]
finish
