#!/usr/bin/env bash
# fence-proxy's integration tests again, against the ASan/UBSan build of
# the proxy (build/asan/fence-proxy, built by `make tests`).  Every
# sanitizer report is written to a file; any report fails this test,
# whatever the inner test said.  Leak checking is off: kill -9 (the crash
# test) and a stop by signal leave memory behind by design.
. "$(dirname "$0")/../lib/lib.sh"
ASAN_PROXY=${ASAN_PROXY:-$ROOT/build/asan/fence-proxy}
[ -x "$ASAN_PROXY" ] || skip_all "$ASAN_PROXY is not built (make BUILD=build/asan SAN=1 $ASAN_PROXY)"
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || skip_all "nginx is not installed"
reports=$TEST_TMP/reports
mkdir -p "$reports"
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=0:abort_on_error=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
for t in test_proxy.py test_proxy_order.py test_proxy_crash.py test_proxy_bypass.py; do
    out=$TEST_TMP/$t.out
    if FENCE_PROXY=$ASAN_PROXY /usr/bin/python3 "$ROOT/tests/integration/$t" >"$out" 2>&1; then
        ok "$t against the ASan/UBSan proxy ($(grep -c '^ok' "$out") checks)"
    else
        sed 's/^/#   /' "$out" | grep -v '^#   ok' | tail -n 20
        not_ok "$t against the ASan/UBSan proxy"
    fi
done
if compgen -G "$reports/*" >/dev/null; then
    for f in "$reports"/*; do echo "# --- $f"; sed 's/^/#   /' "$f" | head -n 40; done
    not_ok "no sanitizer reports"
else
    ok "no sanitizer reports"
fi
finish
