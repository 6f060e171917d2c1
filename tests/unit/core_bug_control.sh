#!/usr/bin/env bash
# Control run: the core's tests must catch the planted etcd#11456 bug.
# Builds the core and its tests with -DFENCE_BUG_GRANT_EXPIRED (expired
# leases queued as waiters are not reaped, and hand-off skips the liveness
# check) into a temporary directory and expects both test programs to FAIL.
# A test suite that passes against the bug would prove nothing.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
cd "$ROOT" || exit 1
command -v "${CC:-cc}" >/dev/null || { echo "# skipped: no C compiler"; exit 77; }
tmp=$(mktemp -d /tmp/fence-bugctl.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
flags="-std=c11 -D_GNU_SOURCE -O1 -g -Isrc -Iinclude -DFENCE_BUG_GRANT_EXPIRED"
fails=0
for t in test_core test_core_model; do
    # shellcheck disable=SC2086
    if ! ${CC:-cc} $flags -o "$tmp/$t" "tests/unit/$t.c" src/core/*.c src/common/assert.c 2>"$tmp/$t.cc.log"; then
        sed 's/^/# /' "$tmp/$t.cc.log" | tail -n 20
        echo "not ok - $t builds with FENCE_BUG_GRANT_EXPIRED"
        fails=$((fails + 1))
        continue
    fi
    FENCE_SEEDS=300 "$tmp/$t" >"$tmp/$t.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -q '^not ok' "$tmp/$t.log"; then
        echo "ok - $t detects the planted bug: $(grep -m1 '^not ok' "$tmp/$t.log" | sed 's/^not ok - //')"
        grep -m2 '^#   seed' "$tmp/$t.log" || true
    else
        tail -n 5 "$tmp/$t.log" | sed 's/^/# /'
        echo "not ok - $t passes against the planted bug (exit $rc)"
        fails=$((fails + 1))
    fi
done
[ "$fails" -eq 0 ]
