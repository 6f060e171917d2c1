#!/usr/bin/env bash
# redis-cli against fenced and fence-store (issue 13): --pipe ends at once
# (ECHO), -n 0 / -n 1 (SELECT), --name (CLIENT SETNAME), -3 (HELLO 3: the
# connection speaks RESP3; more in test_resp3_node.sh), the interactive help built from
# COMMAND DOCS (what redis-cli's hints use), and MULTI/EXEC refusal.
#
# Both daemons call fence_compat_handle; registered by mk/compat.mk.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed (redis-tools)"

FP=$(free_port); SP=$(free_port)
spawn fenced "$FENCED" --port "$FP" --data-dir "$TEST_TMP/fenced"
spawn store "$FENCE_STORE" --port "$SP" --bind 127.0.0.1 --data-dir "$TEST_TMP/store"
wait_fenced "$FP" || { cat "$TEST_TMP/fenced.log"; not_ok "fenced starts"; finish; }
wait_port "$SP" || { cat "$TEST_TMP/store.log"; not_ok "fence-store starts"; finish; }
# Wait for fenced to lead.
for _ in $(seq 1 100); do
    redis-cli -p "$FP" INFO 2>/dev/null | grep -q '^leader_ready:1' && break
    sleep 0.05
done

for target in "fenced $FP LEASE.GRANT 60000" "fence-store $SP FSET f 1 k v"; do
    set -- $target
    name=$1 port=$2; shift 2
    # --pipe: the commands, then redis-cli's ECHO; it must end in seconds.
    start=$(date +%s)
    out=$(printf '%s\r\n' "$*" "$*" "PING" | timeout 20 redis-cli -p "$port" --pipe 2>&1)
    rc=$?
    secs=$(( $(date +%s) - start ))
    check "$name: redis-cli --pipe exits 0" test "$rc" -eq 0
    check "$name: redis-cli --pipe ends in under 5 s (took ${secs}s)" test "$secs" -lt 5
    check "$name: --pipe reports 3 replies, no errors" grep -q 'errors: 0, replies: 3' <<<"$out"
    [ "$rc" -eq 0 ] || echo "# $out"

    check_eq "$name: -n 0 selects database 0" "PONG" "$(redis-cli -p "$port" -n 0 PING 2>&1)"
    out=$(redis-cli -p "$port" -n 1 PING 2>&1)
    check "$name: -n 1 fails clearly" grep -q 'DB index is out of range' <<<"$out"
    check_eq "$name: CLIENT SETNAME / GETNAME" "tour" \
        "$(printf 'CLIENT SETNAME tour\nCLIENT GETNAME\n' | redis-cli -p "$port" | tail -n 1)"
    out=$(redis-cli -3 -p "$port" PING 2>&1)
    check_eq "$name: redis-cli -3 connects (HELLO 3) and runs PING" "PONG" "$out"
    check_eq "$name: ECHO" "hello" "$(redis-cli -p "$port" ECHO hello)"
    check "$name: TIME answers two numbers" \
        test "$(redis-cli -p "$port" TIME | grep -c '^[0-9][0-9]*$')" -eq 2
    # MULTI/EXEC: refused, the queued command not run.
    out=$(printf 'MULTI\n%s\nEXEC\n' "$*" | redis-cli -p "$port" 2>&1)
    check "$name: MULTI answers an error" grep -q 'MULTI is refused' <<<"$out"
    check "$name: the queued command is refused" grep -q 'not executed' <<<"$out"
    check "$name: EXEC answers EXECABORT" grep -q 'EXECABORT' <<<"$out"
done

# The interactive help comes from COMMAND DOCS (the same table gives hints).
# (redis-cli colours its help even into a pipe: strip the escapes.)
nocolor() { sed 's/\x1b\[[0-9;]*m//g'; }
out=$(printf 'help LOCK\nhelp ACQUIRE\n' | redis-cli -p "$FP" 2>&1 | nocolor)
check "fenced: redis-cli help LOCK shows the arguments from COMMAND DOCS" \
    grep -q 'LOCK name lease \[SHARED\] \[WAIT ms\] \[REQID id\]' <<<"$out"
check "fenced: redis-cli help ACQUIRE shows the summary" \
    grep -q 'Grants a lease and locks name' <<<"$out"
[ $_failures -eq 0 ] || echo "# $out"
out=$(printf 'help FSET\n' | redis-cli -p "$SP" 2>&1 | nocolor)
check "fence-store: redis-cli help FSET shows the arguments" \
    grep -q 'FSET fence token key value' <<<"$out"
# Nothing of the refused blocks ran on fenced: no lease was granted.
check_eq "fenced: the refused MULTI granted nothing beyond the --pipe leases" "leases:2" \
    "$(redis-cli -p "$FP" INFO | tr -d '\r' | grep '^leases:')"
finish
