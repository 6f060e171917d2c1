#!/usr/bin/env bash
# The libfence C API from several threads, built in the asan variant
# (build/asan/tests/test_client_threads, ASan/UBSan) and then in the tsan
# one (build/tsan/tests/test_client_threads), against a real fenced and
# fence-store started here on free ports.  scripts/test.sh builds both
# (make VARIANT=asan unit-tests; make VARIANT=tsan tsan-tests).
. "$(dirname "$0")/../lib/lib.sh"
bin=${ASAN_CLIENT_THREADS:-$ROOT/build/asan/tests/test_client_threads}
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$bin" ] || skip_all "$bin not built"
port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced"
wait_port "$port" 20 || { cat "$TEST_TMP/fenced.log"; not_ok "fenced listens"; finish; }
export FENCE_SERVER=127.0.0.1:$port
if [ -x "$FENCE_STORE" ]; then
    sport=$(free_port)
    spawn store "$FENCE_STORE" --port "$sport" --data-dir "$TEST_TMP/store"
    wait_port "$sport" 20 && export FENCE_STORE_ADDR=127.0.0.1:$sport
fi
# The binary reads $FENCE_STORE as the store's address.
FENCE_STORE=${FENCE_STORE_ADDR:-} ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "$bin"
rc=$?
# The same under ThreadSanitizer (a data race report fails it).
tsan=${TSAN_CLIENT_THREADS:-$ROOT/build/tsan/tests/test_client_threads}
if [ -x "$tsan" ]; then
    echo "# ThreadSanitizer build:"
    FENCE_STORE=${FENCE_STORE_ADDR:-} TSAN_OPTIONS=halt_on_error=1:exitcode=66 "$tsan" |
        sed 's/^ok - /ok - tsan: /; s/^not ok - /not ok - tsan: /'
    trc=${PIPESTATUS[0]}
    [ "$trc" -eq 0 ] || rc=$trc
fi
[ "$rc" -eq 0 ] || { echo "# fenced log:"; tail -n 20 "$TEST_TMP/fenced.log"; }
exit "$rc"
