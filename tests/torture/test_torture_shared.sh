#!/usr/bin/env bash
# A short torture run (about 40 s) with half of the workers' iterations
# readers under a shared lock (LOCK ... SHARED: read, hold, read, admit
# again; UNLOCK ... LEASE), the rest writers incrementing the counter, every
# fault kind.  The checker must find no violation: no lost update, no stale
# admit, and every reader's two reads agree while its token is admitted
# (read-stable).  SEED=n replays a fault schedule.
. "$(dirname "$0")/../lib/lib.sh"
for b in fenced fence-store fence-faults fence-torture-worker fence-torture; do
    [ -x "$BUILD/$b" ] || { not_ok "torture: $BUILD/$b is missing (build it first)"; finish; }
done
args=(--duration "${TORTURE_DURATION:-35}" --workers 4 --ttl-ms 1000 --shared-pct 50
      --out "$TEST_TMP/run")
[ -z "${SEED:-}" ] && [ "${CI:-}" = true ] && SEED=1002
[ -n "${SEED:-}" ] && args+=(--seed "$SEED")
if "$PY" "$BUILD/fence-torture" "${args[@]}"; then
    ok "torture with shared readers (single node, fencing on, all fault kinds): no violations"
else
    KEEP=$(mktemp -d /tmp/fence-torture-failed.XXXXXX)
    cp -r "$TEST_TMP/run/." "$KEEP/" 2>/dev/null
    echo "# histories and logs kept in $KEEP"
    not_ok "torture with shared readers (single node, fencing on, all fault kinds): no violations"
fi
finish
