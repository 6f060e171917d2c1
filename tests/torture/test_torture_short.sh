#!/usr/bin/env bash
# A short torture run (about a minute) against a single-node fenced and
# fence-store with fencing on: every fault kind, 4 workers.  The checker must
# find no violation.  SEED=n replays a fault schedule; TORTURE_DURATION=s
# changes the length.  On failure the run's files are kept and named.
. "$(dirname "$0")/../lib/lib.sh"
for b in fenced fence-store fence-faults fence-torture-worker fence-torture; do
    [ -x "$BUILD/$b" ] || { not_ok "torture: $BUILD/$b is missing (build it first)"; finish; }
done
args=(--duration "${TORTURE_DURATION:-50}" --workers 4 --ttl-ms 1000 --out "$TEST_TMP/run")
# A developer's run draws a new fault schedule every time (its seed is
# printed for replay); CI pins one so a landing never hinges on a new draw.
[ -z "${SEED:-}" ] && [ "${CI:-}" = true ] && SEED=1001
[ -n "${SEED:-}" ] && args+=(--seed "$SEED")
if "$PY" "$BUILD/fence-torture" "${args[@]}"; then
    ok "torture (single node, fencing on, all fault kinds): no violations"
else
    KEEP=$(mktemp -d /tmp/fence-torture-failed.XXXXXX)
    cp -r "$TEST_TMP/run/." "$KEEP/" 2>/dev/null
    echo "# histories and logs kept in $KEEP"
    not_ok "torture (single node, fencing on, all fault kinds): no violations"
fi
finish
