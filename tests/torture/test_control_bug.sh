#!/usr/bin/env bash
# Control (b): fenced built from the grant_expired mutant
# (tests/mutants/grant_expired.patch, the etcd#11456 bug planted: a waiter
# whose lease expired while queued is not reaped and the hand-off skips the
# liveness check).  Waiters are paused past their
# lease while holders hold long; the checker MUST report a grant to an
# expired lease.  The same schedule against the correct fenced must pass.
. "$(dirname "$0")/../lib/lib.sh"
BUG_FENCED=${BUG_FENCED:-$BUILD/mutant/grant_expired/fenced}
for b in fenced fence-store fence-faults fence-torture-worker fence-torture; do
    [ -x "$BUILD/$b" ] || { not_ok "control planted bug: $BUILD/$b is missing"; finish; }
done
if [ ! -x "$BUG_FENCED" ]; then
    bash "$ROOT/tests/mutants/build.sh" grant_expired "$BUILD/mutant/grant_expired" fenced >"$TEST_TMP/make.log" 2>&1 ||
        { sed 's/^/#   /' "$TEST_TMP/make.log" | tail; not_ok "control planted bug: build $BUG_FENCED"; finish; }
fi
common=(--duration 12 --workers 4 --faults pause-waiter --wait-ms 30000 --long-pct 50 --hold-max-ms 3000)
seeds=${CONTROL_SEEDS:-201 202}
for seed in $seeds; do
    if "$PY" "$BUILD/fence-torture" --seed "$seed" "${common[@]}" --fenced "$BUG_FENCED" \
        --expect-violation >"$TEST_TMP/bug-$seed.log" 2>&1 &&
        grep -q '\[expired-grant\]' "$TEST_TMP/bug-$seed.log"; then
        ok "control planted bug (seed $seed): grant to an expired lease reported"
    else
        sed 's/^/#   /' "$TEST_TMP/bug-$seed.log" | tail -n 30
        not_ok "control planted bug (seed $seed): grant to an expired lease reported"
    fi
done
seed=${seeds%% *}
if "$PY" "$BUILD/fence-torture" --seed "$seed" "${common[@]}" >"$TEST_TMP/good.log" 2>&1; then
    ok "same schedule against the correct fenced: no violations"
else
    sed 's/^/#   /' "$TEST_TMP/good.log" | tail -n 30
    not_ok "same schedule against the correct fenced: no violations"
fi
finish
