#!/usr/bin/env bash
# The pause demo (make demo / fencectl demo): with fencing the paused
# client's stale write is rejected and client 2's data survives; with the
# lease alone it overwrites client 2's data.  The SVG must be written.
. "$(dirname "$0")/../lib/lib.sh"
for b in fenced fence-store fence-torture-worker fence-demo; do
    [ -x "$BUILD/$b" ] || { not_ok "demo: $BUILD/$b is missing"; finish; }
done
out=$TEST_TMP/demo.out
"$PY" "$BUILD/fence-demo" --svg "$TEST_TMP/demo.svg" >"$out" 2>&1
rc=$?
sed 's/^/#   /' "$out"
check_eq "fence-demo exits 0" 0 "$rc"
check "fencing on: the stale write of client 1 is rejected" grep -q 'client 1  FSET data token [0-9]* -> REJECTED: STALE' "$out"
check "fencing on: the store keeps client 2's data" grep -q "the store holds 'written by client 2'" "$out"
check "lease only: the stale write is accepted" grep -q 'client 1  FSET data token [0-9]* -> ACCEPTED  <-- stale write' "$out"
check "lease only: client 2's data is overwritten" grep -q "the store holds 'written by client 1'" "$out"
check "the SVG timeline is written" grep -q '</svg>' "$TEST_TMP/demo.svg"
check "the SVG marks the rejected write" grep -q 'REJECTED (stale)' "$TEST_TMP/demo.svg"
if [ -x "$FENCECTL" ] && "$FENCECTL" --help 2>&1 | grep -q demo; then
    verdict='verdict: with fencing the stale write was REJECTED'
    "$FENCECTL" demo >"$TEST_TMP/ctl.out" 2>&1
    if ! grep -q "$verdict" "$TEST_TMP/ctl.out"; then
        # Say what went wrong (it once failed in CI without a trace), then
        # give it one more go: this checks the fencectl wrapper, and the
        # demo itself was checked above.
        echo "# fencectl demo, first attempt, did not reach the verdict:"
        sed 's/^/#   /' "$TEST_TMP/ctl.out" | tail -n 30
        "$FENCECTL" demo >"$TEST_TMP/ctl.out" 2>&1
    fi
    check "fencectl demo runs fence-demo" grep -q "$verdict" "$TEST_TMP/ctl.out"
    grep -q "$verdict" "$TEST_TMP/ctl.out" || sed 's/^/#   /' "$TEST_TMP/ctl.out" | tail -n 30
fi
finish
