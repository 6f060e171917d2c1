#!/usr/bin/env bash
# fencectl and the daemons' papercuts of issue 20:
# - `fencectl --help` lists every subcommand of fencectl.1 (its .SS
#   headings), each on one line with a description (`top` was missing);
# - `fencectl lock` waiting in the queue when the server stops exits 69
#   about 2 s later, saying on stderr that it lost the connection and is
#   reconnecting (it retried refusals for the whole --wait + --timeout:
#   35 s, silently);
# - after its lease is lost while the server is gone, `fencectl lock`
#   exits as soon as CMD has (it lingered --timeout on a release that
#   could not be sent);
# - an unresolvable host is "cannot resolve host 'x': ..." (it was "No
#   route to host");
# - a quoted value in a config file loses its quotes, an unmatched quote is
#   refused with file:line.
# serial (the waits are measured against bounds)
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed (redis-tools)"
# Relative paths a daemon may create (a data-dir that kept its quotes) land
# in the scratch directory.
cd "$TEST_TMP" || exit 1

ms_of() { local s=$1; echo $(( ($(date +%s%N) - s) / 1000000 )); }

# ---- --help lists every subcommand -------------------------------------
help=$("$FENCECTL" --help 2>&1)
n=0
for w in $(sed -n 's/^\.SS "\{0,1\}\([a-z]*\).*/\1/p' "$ROOT/docs/fencectl.1" | sort -u); do
    n=$((n + 1))
    check "--help lists '$w' with a one-line description" \
        grep -Eq "^  $w( [^ ].*)?  +[A-Za-z].*" <<<"$help"
done
check "fencectl.1 has its subcommands ($n)" test "$n" -ge 10

# ---- a queued lock when the server stops -------------------------------
FP=$(free_port)
spawn fenced "$FENCED" --port "$FP" --data-dir "$TEST_TMP/fenced"
wait_fenced "$FP" || { cat "$TEST_TMP/fenced.log"; not_ok "fenced starts"; finish; }
"$FENCECTL" --server "127.0.0.1:$FP" lock q -- sleep 60 >/dev/null 2>"$TEST_TMP/holder.err" &
holder=$!
for _ in $(seq 1 100); do
    [ "$("$FENCECTL" --server "127.0.0.1:$FP" info q 2>/dev/null | grep -c token)" -ge 1 ] && break
    sleep 0.05
done
"$FENCECTL" --server "127.0.0.1:$FP" lock --wait 30000 q -- true >/dev/null \
    2>"$TEST_TMP/waiter.err" &
waiter=$!
# Wait until the waiter is queued (LOCK.INFO's waiters column).
for _ in $(seq 1 100); do
    [ "$(redis-cli -p "$FP" LOCK.INFO q 2>/dev/null | sed -n 4p)" = 1 ] && break
    sleep 0.05
done
check_eq "the waiter is queued" 1 "$(redis-cli -p "$FP" LOCK.INFO q 2>/dev/null | sed -n 4p)"
start=$(date +%s%N)
stop fenced
wait "$waiter"; rc=$?; took=$(ms_of "$start")
check_eq "the queued fencectl lock exits 69 when the server stops" 69 "$rc"
check "it exits within 8 s of the stop, not after --wait + --timeout (35 s): ${took} ms" test "$took" -lt 8000
check "it says the connection was lost and it reconnects" \
    grep -q 'connection to 127.0.0.1:[0-9]* lost during LOCK.*reconnecting' "$TEST_TMP/waiter.err"
sed 's/^/# waiter: /' "$TEST_TMP/waiter.err"
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

# ---- a lease lost while the server is gone -----------------------------
FP=$(free_port)
spawn fenced "$FENCED" --port "$FP" --data-dir "$TEST_TMP/fenced2"
wait_fenced "$FP" || { cat "$TEST_TMP/fenced.log"; not_ok "fenced starts again"; finish; }
# --on-lost ignore: CMD outlives the lease; it ends on its own 2.5 s in,
# when the 1 s lease is long lost.
"$FENCECTL" --server "127.0.0.1:$FP" lock --ttl 1000 --on-lost ignore q2 -- \
    sh -c 'echo up; sleep 2.5; date +%s%N >"$0"' "$TEST_TMP/cmd-exit" \
    >"$TEST_TMP/lost.out" 2>"$TEST_TMP/lost.err" &
lost=$!
for _ in $(seq 1 100); do grep -q up "$TEST_TMP/lost.out" 2>/dev/null && break; sleep 0.05; done
stop fenced
wait "$lost"; rc=$?; end=$(date +%s%N)
check_eq "fencectl lock exits 79 after the lost lease" 79 "$rc"
if [ -s "$TEST_TMP/cmd-exit" ]; then
    after=$(( (end - $(cat "$TEST_TMP/cmd-exit")) / 1000000 ))
    check "it exits within 2 s of CMD's exit, not after --timeout (5 s): ${after} ms" test "$after" -lt 2000
else
    not_ok "CMD ran to its end"
fi
sed 's/^/# lost: /' "$TEST_TMP/lost.err"

# ---- an unresolvable host ----------------------------------------------
start=$(date +%s%N)
"$FENCECTL" --server no-such-host.invalid:7700 --timeout 1500 status >/dev/null 2>"$TEST_TMP/dns.err"
rc=$?; took=$(ms_of "$start")
check_eq "an unresolvable host exits 69" 69 "$rc"
check "it says: cannot resolve host 'no-such-host.invalid'" \
    grep -q "cannot resolve host 'no-such-host.invalid': " "$TEST_TMP/dns.err"
check "not 'No route to host'" eval "! grep -q 'No route to host' '$TEST_TMP/dns.err'"
check "within --timeout (${took} ms)" test "$took" -lt 3000
sed 's/^/# dns: /' "$TEST_TMP/dns.err"

# ---- quoted values in a config file ------------------------------------
FP=$(free_port)
printf 'port %s\ndata-dir "%s/qdir"\nbind '"'"'127.0.0.1'"'"'\n' "$FP" "$TEST_TMP" >"$TEST_TMP/q.conf"
spawn fenced "$FENCED" --config "$TEST_TMP/q.conf"
check "fenced starts with quoted values in its config" wait_port "$FP"
check "data-dir \"DIR\" is DIR (no quotes kept)" test -d "$TEST_TMP/qdir"
check "no directory with the quotes in its name" eval "! ls -d '$TEST_TMP'/'\"'* 2>/dev/null | grep -q ."
stop fenced
printf 'port %s\ndata-dir "%s/qdir\n' "$FP" "$TEST_TMP" >"$TEST_TMP/bad.conf"
out=$(timeout 10 "$FENCED" --config "$TEST_TMP/bad.conf" 2>&1)
rc=$?
check "an unmatched quote is refused (exit $rc)" test "$rc" -ne 0
check "with file:line ($out)" grep -q "bad.conf:2: data-dir: unmatched \" in value" <<<"$out"
finish
