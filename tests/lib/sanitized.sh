# sanitized_run DAEMON_TEST...: run integration tests of fenced and
# fence-store again, against the ASan/UBSan builds of the servers
# (build/asan/fenced and build/asan/fence-store, built by scripts/test.sh),
# one "ok" line per test.  Every sanitizer report is written to a file; any
# report fails, whatever the inner test said.  Leak checking is off: a
# kill -9 or an abort on purpose (crash tests) leaves memory behind by
# design.  Sourced after lib.sh by tests/integration/sanitized_*.sh, which
# split the tests in parts that the runner overlaps.
sanitized_run() {
    local b t out reports
    ASAN_FENCED=${ASAN_FENCED:-$ROOT/build/asan/fenced}
    ASAN_STORE=${ASAN_STORE:-$ROOT/build/asan/fence-store}
    for b in "$ASAN_FENCED" "$ASAN_STORE"; do
        [ -x "$b" ] || skip_all "$b is not built (make VARIANT=asan $b)"
    done
    reports=$TEST_TMP/reports
    mkdir -p "$reports"
    export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=0:abort_on_error=1"
    export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
    for t in "$@"; do
        out=$TEST_TMP/$t.out
        if FENCED=$ASAN_FENCED FENCE_STORE=$ASAN_STORE "$ROOT/tests/integration/$t" >"$out" 2>&1; then
            ok "$t against the ASan/UBSan servers ($(grep -c '^ok' "$out") checks)"
        else
            sed 's/^/#   /' "$out" | grep -v '^#   ok' | tail -n 20
            not_ok "$t against the ASan/UBSan servers"
        fi
    done
    if compgen -G "$reports/*" >/dev/null; then
        for b in "$reports"/*; do echo "# --- $b"; sed 's/^/#   /' "$b" | head -n 40; done
        not_ok "no sanitizer reports"
    else
        ok "no sanitizer reports"
    fi
}
