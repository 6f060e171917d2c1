#!/usr/bin/env bash
# Crash-stop on disk errors: with the test hook FENCED_TEST_FAIL_APPEND=N
# the Nth raft log append reports RAFT_IOERR.  fenced must log it and abort
# (SIGABRT) without acknowledging anything in the failed write, and a
# restart on the same data dir must keep every acknowledged grant.
# (Appends 1 and 2 of a fresh node are its barrier and LEADER_START.)
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli is not installed"
[ -x "$FENCED" ] || skip_all "$FENCED is not built"
ulimit -c 0  # the aborts are expected: no core files

ready() { wait_ready "$1"; }
# exit_status NAME: wait for the spawned process; its status goes to
# $status.  It must run in this shell, not in a $(...) subshell: only the
# shell that started the process can wait for it, and a subshell forked
# before the process died gets no status at all (a flaky -1 under load).
exit_status() {
    local pid; pid=$(pid_of "$1")
    wait_exit "$pid"
    wait "$pid" 2>/dev/null
    status=$?
}

# 1. The first client write fails: ten pipelined grants, not one answered.
port=$(free_port)
spawn f1 env FENCED_TEST_FAIL_APPEND=3 "$FENCED" --port "$port" --data-dir "$TEST_TMP/d1"
wait_port "$port"; ready "$port"
reply=$(for i in $(seq 1 10); do printf 'LEASE.GRANT 5000\r\n'; done |
        timeout 10 redis-cli -p "$port" 2>&1 | grep -v -i "error\|refused\|closed" || true)
check_eq "no grant of the failed write is acknowledged" "" "$reply"
exit_status f1
check_eq "fenced aborts (SIGABRT) on the failed append" "134" "$status"
check "the failure is logged" grep -q "raft log append of .* failed.*aborting" "$TEST_TMP/f1.log"

# 2. Two writes succeed, the third fails: the two acknowledged grants survive.
port=$(free_port)
spawn f2 env FENCED_TEST_FAIL_APPEND=5 "$FENCED" --port "$port" --data-dir "$TEST_TMP/d2"
wait_port "$port"; ready "$port"
check_eq "first write acknowledged" "1" "$(redis-cli -p "$port" LEASE.GRANT 60000)"
check_eq "second write acknowledged" "1" "$(redis-cli -p "$port" LOCK r 1)"
third=$(timeout 10 redis-cli -p "$port" LOCK s 1 2>&1)
check "third write (failed append) not acknowledged" test "$third" != "2"
exit_status f2
check_eq "fenced aborts" "134" "$status"
spawn f2b "$FENCED" --port "$port" --data-dir "$TEST_TMP/d2"
wait_port "$port"; ready "$port"
check_eq "after restart the acknowledged lock is held with its token" "1 1" \
    "$(redis-cli -p "$port" LOCK.INFO r | head -n 2 | tr '\n' ' ' | sed 's/ $//')"
next=$(redis-cli -p "$port" LOCK t 1)
check "after restart the next token is higher than every acknowledged one ($next)" \
    test "$next" -gt 1
stop f2b
finish
