#!/usr/bin/env bash
# The torture harness's proxy mode (issue 10): 4 workers read-modify-write
# one file on nginx through fence-proxy, with tokens from fenced, while the
# nemesis pauses holders past their lease; the checker must find no
# violation.  Then the control: the same run straight to nginx, where the
# checker must find lost updates.  Random seeds; CI pins them with
# TORTURE_PROXY_SEED.
set -u
BUILD=${BUILD:-build}
PY=/usr/bin/python3
for b in fenced fence-proxy fence-torture torture_proxy.py; do
    [ -x "$BUILD/$b" ] || { echo "# skipped: $BUILD/$b is not built"; exit 77; }
done
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { echo "# skipped: nginx is not installed"; exit 77; }
seed=${TORTURE_PROXY_SEED:-$((RANDOM * 32768 + RANDOM))}
rc=0
if "$PY" "$BUILD/fence-torture" --proxy --bin-dir "$BUILD" --duration 10 --seed "$seed" >"${TMPDIR:-/tmp}/torture-proxy.$$.out" 2>&1; then
    echo "ok - proxy mode (seed $seed): the checker finds no violation"
else
    sed 's/^/#   /' "${TMPDIR:-/tmp}/torture-proxy.$$.out" | tail -60
    echo "not ok - proxy mode (seed $seed): the checker finds no violation"
    rc=1
fi
grep -E "rejected stale|increments acked|final counter|pause" "${TMPDIR:-/tmp}/torture-proxy.$$.out" | sed 's/^/# /'
# The control: up to three seeds, since a run whose pauses all miss the
# window where they matter finds nothing.
found=0
for i in 0 1 2; do
    s=$((seed + i))
    if "$PY" "$BUILD/fence-torture" --proxy --direct --expect-violation --bin-dir "$BUILD" --duration 10 \
        --seed "$s" >"${TMPDIR:-/tmp}/torture-proxy-direct.$$.out" 2>&1; then
        found=1
        break
    fi
done
grep -E "violations:" "${TMPDIR:-/tmp}/torture-proxy-direct.$$.out" | sed 's/^/# /'
if [ "$found" = 1 ]; then
    echo "ok - control straight to nginx (seed $s): the checker finds lost updates"
else
    tail -40 "${TMPDIR:-/tmp}/torture-proxy-direct.$$.out" | sed 's/^/#   /'
    echo "not ok - control straight to nginx: the checker finds lost updates"
    rc=1
fi
rm -f "${TMPDIR:-/tmp}/torture-proxy.$$.out" "${TMPDIR:-/tmp}/torture-proxy-direct.$$.out"
exit $rc
