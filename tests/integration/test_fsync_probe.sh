#!/usr/bin/env bash
# tests/bench/fsync_probe.c (make bench's disk floor): each mode prints its
# one line of keys, the probe file is gone afterwards, bad arguments exit 1.
# No timings are checked.
. "$(dirname "$0")/../lib/lib.sh"
P=$BUILD/tests/fsync_probe
[ -x "$P" ] || skip_all "$P not built"
D=$TEST_TMP/disk
mkdir -p "$D"
for mode in direct append buffered aio; do
    out=$("$P" "$D" 20 $mode)
    check_eq "mode $mode exits 0" 0 $?
    check "mode $mode prints p50, p99, max, n and the mode" \
        grep -qE '^fsync_p50_us=[0-9]+ fsync_p99_us=[0-9]+ fsync_max_us=[0-9]+ n=20 mode=[a-z-]+$' <<<"$out"
done
check "the default is libraft's pattern (direct, or dsync without O_DIRECT)" \
    grep -qE 'mode=(direct|dsync)$' <<<"$("$P" "$D" 5)"
check_eq "the probe file is removed" "" "$(ls -A "$D")"
"$P" "$D" 0 2>/dev/null
check_eq "N=0 exits 1" 1 $?
"$P" "$D" 10 sideways 2>/dev/null
check_eq "an unknown mode exits 1" 1 $?
"$P" "$D/missing" 10 2>/dev/null
check_eq "a missing directory exits 1" 1 $?
finish
