#!/usr/bin/env bash
# libfence's semaphore calls against a real fenced (tests/integration/
# test_client_sem.c, built in every variant; the asan one is preferred).
. "$(dirname "$0")/../lib/lib.sh"
bin=$ROOT/build/asan/tests/test_client_sem
[ -x "$bin" ] || bin=$BUILD/tests/test_client_sem
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$bin" ] || skip_all "$bin not built"
port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced"
wait_port "$port" 20 && wait_ready "$port" 20 || { cat "$TEST_TMP/fenced.log"; not_ok "fenced listens"; finish; }
FENCE_SERVER=127.0.0.1:$port ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$bin"
