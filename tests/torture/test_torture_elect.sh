#!/usr/bin/env bash
# The election workload (issue 21 §1): the workers lead the election
# instead of locking (ELECTION.CAMPAIGN ... WAIT, write through fence-store
# with the leader's token, ELECTION.RESIGN), while leaders are paused past
# their lease (pause-holder) and queued candidates too (pause-waiter).
# With fencing on the checker must find no violation; against fence-store
# --ignore-tokens (lease only) it must find one, as for locks.
. "$(dirname "$0")/../lib/lib.sh"
for b in fenced fence-store fence-faults fence-torture-worker fence-torture; do
    [ -x "$BUILD/$b" ] || { not_ok "torture elect: $BUILD/$b is missing (build it first)"; finish; }
done
args=(--elect --duration "${TORTURE_DURATION:-25}" --workers 4 --ttl-ms 1000
      --faults pause-holder,pause-waiter,pause,kill-fenced,reset --out "$TEST_TMP/run")
[ -z "${SEED:-}" ] && [ "${CI:-}" = true ] && SEED=2101
[ -n "${SEED:-}" ] && args+=(--seed "$SEED")
if "$PY" "$BUILD/fence-torture" "${args[@]}" >"$TEST_TMP/fenced.log" 2>&1; then
    ok "torture elect (fencing on, leaders paused past their lease): no violations"
else
    sed 's/^/#   /' "$TEST_TMP/fenced.log" | tail -n 30
    not_ok "torture elect (fencing on, leaders paused past their lease): no violations"
fi
for seed in ${CONTROL_SEEDS:-111 112}; do
    if "$PY" "$BUILD/fence-torture" --elect --seed "$seed" --duration 10 --interval-ms 2000 \
        --workers 4 --faults pause-holder --store-ignore-tokens --expect-violation \
        >"$TEST_TMP/control-$seed.log" 2>&1; then
        ok "control elect lease-only (seed $seed): the checker reports $(grep -m1 -o '^  \[[a-z-]*\]' "$TEST_TMP/control-$seed.log" | tr -d ' ')"
    else
        sed 's/^/#   /' "$TEST_TMP/control-$seed.log" | tail -n 30
        not_ok "control elect lease-only (seed $seed): the checker reports a violation"
    fi
done
finish
