#!/usr/bin/env bash
# A short torture run against a 3-node fenced cluster (kill -9 of the leader
# or of a follower among the faults; leader changes are logged so the
# checker knows leases were renewed).  The checker must find no violation.
. "$(dirname "$0")/../lib/lib.sh"
for b in fenced fence-store fence-faults fence-torture-worker fence-torture; do
    [ -x "$BUILD/$b" ] || { not_ok "cluster torture: $BUILD/$b is missing"; finish; }
done
args=(--nodes 3 --duration "${TORTURE_DURATION:-30}" --workers 4 --ttl-ms 1000 --out "$TEST_TMP/run"
      --faults pause-holder,pause-waiter,kill-fenced,kill-store,partition,delay,reset)
# A developer's run draws a new fault schedule every time (its seed is
# printed for replay); CI pins one so a landing never hinges on a new draw.
[ -z "${SEED:-}" ] && [ "${CI:-}" = true ] && SEED=1002
[ -n "${SEED:-}" ] && args+=(--seed "$SEED")
if "$PY" "$BUILD/fence-torture" "${args[@]}"; then
    ok "torture (3-node cluster, fencing on): no violations"
else
    KEEP=$(mktemp -d /tmp/fence-torture-failed.XXXXXX)
    cp -r "$TEST_TMP/run/." "$KEEP/" 2>/dev/null
    echo "# histories and logs kept in $KEEP"
    not_ok "torture (3-node cluster, fencing on): no violations"
fi
finish
