#!/usr/bin/env bash
# fenced's and fence-store's integration tests again, against ASan/UBSan
# builds of the servers (build/asan/fenced and build/asan/fence-store, built
# by scripts/test.sh).  Every sanitizer report is
# written to a file; any report fails this test, whatever the inner test
# said.  Leak checking is off: a kill -9 or an abort on purpose (crash tests)
# leaves memory behind by design.
. "$(dirname "$0")/../lib/lib.sh"
ASAN_FENCED=${ASAN_FENCED:-$ROOT/build/asan/fenced}
ASAN_STORE=${ASAN_STORE:-$ROOT/build/asan/fence-store}
for b in "$ASAN_FENCED" "$ASAN_STORE"; do
    [ -x "$b" ] || skip_all "$b is not built (make VARIANT=asan $b)"
done
reports=$TEST_TMP/reports
mkdir -p "$reports"
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
for t in test_fenced_clients.py test_fenced_badinput.py test_fenced_review.py \
         test_fenced_crash.py test_fenced_logs.sh test_store.sh test_store_py.py test_store_crash.py \
         test_store_keys.py test_store_logs.sh test_fenced_list.py test_store_batch.py \
         test_store_wal.py test_store_upgrade.py test_store_pipeline_timer.py \
         test_tls.py test_fenced_authfail.py; do
    out=$TEST_TMP/$t.out
    if FENCED=$ASAN_FENCED FENCE_STORE=$ASAN_STORE "$ROOT/tests/integration/$t" >"$out" 2>&1; then
        ok "$t against the ASan/UBSan servers ($(grep -c '^ok' "$out") checks)"
    else
        sed 's/^/#   /' "$out" | grep -v '^#   ok' | tail -n 20
        not_ok "$t against the ASan/UBSan servers"
    fi
done
if compgen -G "$reports/*" >/dev/null; then
    for f in "$reports"/*; do echo "# --- $f"; sed 's/^/#   /' "$f" | head -n 40; done
    not_ok "no sanitizer reports"
else
    ok "no sanitizer reports"
fi
finish
