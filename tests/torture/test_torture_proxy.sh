#!/usr/bin/env bash
# The torture harness's proxy mode (issue 10): 4 HTTP workers
# read-modify-write one file on nginx through fence-proxy, with tokens from
# fenced, while the nemesis pauses holders past their lease and kills the
# proxy with SIGKILL; the checker must find no violation.  Then the control:
# the same workload straight to nginx, where the checker must find a
# violation (up to three seeds: a run whose pauses all miss the critical
# window finds nothing).  SEED=n replays; CI pins 1003.  On failure the
# run's files are kept and named.
. "$(dirname "$0")/../lib/lib.sh"
for b in fenced fence-proxy fence-torture torture_proxy.py; do
    [ -x "$BUILD/$b" ] || { not_ok "torture proxy: $BUILD/$b is missing (build it first)"; finish; }
done
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || skip_all "nginx is not installed"
[ -z "${SEED:-}" ] && [ "${CI:-}" = true ] && SEED=1003
seed=${SEED:-$((RANDOM * 32768 + RANDOM))}
dur=${TORTURE_DURATION:-15}
keep() {  # keep DIR: copy a failed run's files somewhere that stays
    local k
    k=$(mktemp -d /tmp/fence-torture-failed.XXXXXX)
    cp -r "$1/." "$k/" 2>/dev/null
    echo "# histories and logs kept in $k"
}
if "$PY" "$BUILD/fence-torture" --proxy --bin-dir "$BUILD" --duration "$dur" --seed "$seed" \
    --out "$TEST_TMP/proxy" >"$TEST_TMP/proxy.out" 2>&1; then
    grep -E "rejected stale|increments acked|final counter|fault " "$TEST_TMP/proxy.out" | sed 's/^/# /'
    ok "torture proxy mode (seed $seed, pauses and kill -9s): no violations"
else
    tail -n 60 "$TEST_TMP/proxy.out" | sed 's/^/#   /'
    keep "$TEST_TMP/proxy"
    not_ok "torture proxy mode (seed $seed, pauses and kill -9s): no violations"
fi
found=
for s in "$seed" $((seed + 1)) $((seed + 2)); do
    if "$PY" "$BUILD/fence-torture" --proxy --direct --expect-violation --bin-dir "$BUILD" \
        --duration "$dur" --seed "$s" >"$TEST_TMP/direct.out" 2>&1; then
        found=$s
        break
    fi
done
grep -E "violations:" "$TEST_TMP/direct.out" | sed 's/^/# /'
if [ -n "$found" ]; then
    ok "control straight to nginx (seed $found): the checker finds lost updates"
else
    tail -n 40 "$TEST_TMP/direct.out" | sed 's/^/#   /'
    not_ok "control straight to nginx (seeds $seed..$((seed + 2))): the checker finds lost updates"
fi
finish
