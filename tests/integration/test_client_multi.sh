#!/usr/bin/env bash
# libfence's multi-lock calls against a real fenced with a signing key and a
# fence-store that verifies signed tokens (tests/integration/
# test_client_multi.c, built in every variant; the asan one is preferred).
. "$(dirname "$0")/../lib/lib.sh"
bin=$ROOT/build/asan/tests/test_client_multi
[ -x "$bin" ] || bin=$BUILD/tests/test_client_multi
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCE_STORE" ] || skip_all "$FENCE_STORE not built"
[ -x "$bin" ] || skip_all "$bin not built"
"$FENCECTL" keygen "$TEST_TMP/keys" --key-id k1 >/dev/null || { not_ok "keygen"; finish; }
port=$(free_port); sport=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced" \
    --token-signing-key "$TEST_TMP/keys/signing.key"
spawn store "$FENCE_STORE" --port "$sport" --data-dir "$TEST_TMP/store" \
    --token-verify-keys "$TEST_TMP/keys/verify.keys"
wait_port "$port" 20 && wait_ready "$port" 20 && wait_port "$sport" 20 ||
    { cat "$TEST_TMP/fenced.log" "$TEST_TMP/store.log"; not_ok "fenced and fence-store listen"; finish; }
FENCE_SERVER=127.0.0.1:$port FENCE_STORE=127.0.0.1:$sport \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$bin"
