#!/usr/bin/env bash
# Control (a): the same workload against fence-store --ignore-tokens (lease
# only), with pauses of lock holders longer than their lease.  The checker
# MUST report lost updates or overlapping writers: a checker that cannot see
# the seed's bug proves nothing.  Several short seeded runs; each must be
# caught (measured: see docs/testing.md, "Torture").
. "$(dirname "$0")/../lib/lib.sh"
for b in fenced fence-store fence-faults fence-torture-worker fence-torture; do
    [ -x "$BUILD/$b" ] || { not_ok "control lease-only: $BUILD/$b is missing"; finish; }
done
for seed in ${CONTROL_SEEDS:-101 102 103}; do
    if "$PY" "$BUILD/fence-torture" --seed "$seed" --duration 10 --interval-ms 2000 --workers 4 \
        --faults pause-holder --store-ignore-tokens --expect-violation >"$TEST_TMP/run-$seed.log" 2>&1; then
        ok "control lease-only (seed $seed): the checker reports $(grep -m1 -o '^  \[[a-z-]*\]' "$TEST_TMP/run-$seed.log" | tr -d ' ')"
    else
        sed 's/^/#   /' "$TEST_TMP/run-$seed.log" | tail -n 30
        not_ok "control lease-only (seed $seed): the checker reports a violation"
    fi
done
finish
