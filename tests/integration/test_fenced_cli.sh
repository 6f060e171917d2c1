#!/usr/bin/env bash
# fenced with redis-cli (a client nobody here wrote): every command, every
# error code (ERR, NOLEASE, LIMIT, TRYAGAIN, NOTLEADER), inline commands
# over bash's /dev/tcp, the Unix socket, config-file and flag errors,
# --help, and a clean SIGTERM.  Free ports, temp dirs, stop by PID.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli is not installed"
[ -x "$FENCED" ] || skip_all "$FENCED is not built"

# ready PORT: wait until the server on PORT serves writes.
ready() { wait_ready "$1"; }
# inline PORT TEXT: send raw bytes, print the raw reply (connection closed by QUIT).
inline() {
    exec 3<>"/dev/tcp/127.0.0.1/$1"
    printf '%b' "$2" >&3
    timeout 5 cat <&3
    exec 3<&-
}

port=$(free_port)
sock=$TEST_TMP/fenced.sock
spawn main "$FENCED" --port "$port" --data-dir "$TEST_TMP/data" --unix-socket "$sock"
check "fenced listens on a free port" wait_port "$port"
check "fenced becomes leader" ready "$port"
R() { redis-cli -p "$port" "$@"; }

# ---- every command -----------------------------------------------------------
check_eq "PING" "PONG" "$(R PING)"
check_eq "PING msg" "hello world" "$(R PING 'hello world')"
check_eq "LEASE.GRANT returns lease id 1" "1" "$(R LEASE.GRANT 5000)"
check_eq "command names are case-insensitive" "2" "$(R lease.grant 5000)"
check_eq "LEASE.KEEPALIVE returns the TTL" "5000" "$(R LEASE.KEEPALIVE 1)"
li=($(R LEASE.INFO 1))
check_eq "LEASE.INFO: [ttl, remaining, locks]" "5000 0" "${li[0]} ${li[2]}"
check "LEASE.INFO remaining in (0, ttl]" test "${li[1]}" -gt 0 -a "${li[1]}" -le 5000
tok=$(R LOCK res 1)
check_eq "LOCK returns token 1" "1" "$tok"
check_eq "reentrant LOCK returns the same token" "1" "$(R LOCK res 1)"
check_eq "LOCK by another lease without WAIT: nil" "" "$(R LOCK res 2)"
ki=($(R LOCK.INFO res))
check_eq "LOCK.INFO: [token, lease, remaining, waiters]" "1 1 0" "${ki[0]} ${ki[1]} ${ki[3]}"
check_eq "LEASE.INFO counts held locks" "1" "$(R LEASE.INFO 1 | sed -n 3p)"
check_eq "UNLOCK by the holding token" "1" "$(R UNLOCK res "$tok")"
check_eq "UNLOCK again is 0" "0" "$(R UNLOCK res "$tok")"
check_eq "LOCK.INFO of a free lock: nil" "" "$(R LOCK.INFO res)"
check_eq "LOCK WAIT on a free lock" "2" "$(R LOCK res 2 WAIT 1000)"
check_eq "LOCK WAIT that times out: nil" "" "$(R LOCK res 1 WAIT 100)"
acq=($(R ACQUIRE job 5000))
check_eq "ACQUIRE: [token, lease]" "3 3" "${acq[*]}"
check_eq "UNLOCK of an ACQUIRE token" "1" "$(R UNLOCK job 3)"
check_eq "LEASE.REVOKE" "OK" "$(R LEASE.REVOKE 2)"
check_eq "LEASE.REVOKE of an unknown lease is OK too" "OK" "$(R LEASE.REVOKE 999)"
check_eq "revoking the holder frees its lock" "" "$(R LOCK.INFO res)"
check_eq "LEASE.GRANT LOCKDELAY REQID" "4" "$(R LEASE.GRANT 5000 LOCKDELAY 100 REQID 42)"
check_eq "LEASE.GRANT with the same REQID" "4" "$(R LEASE.GRANT 5000 LOCKDELAY 100 REQID 42)"
check_eq "a REQID reused for a different request" \
    "ERR invalid request (a value out of range, or a REQID already used for a different request)" \
    "$(R LEASE.GRANT 6000 REQID 42 2>&1)"
check_eq "ACQUIRE WAIT LOCKDELAY REQID" "4 5" "$(R ACQUIRE j2 5000 WAIT 10 LOCKDELAY 0 REQID 43 | tr '\n' ' ' | sed 's/ $//')"
info=$(R INFO)
for k in version role node_id uptime_s last_token leases locks waiters connections \
         commands_processed fsync_batches leader term commit_index applied_index \
         raft_entries raft_bytes batches avg_batch_size; do
    echo "$info" | grep -q "^$k:" || not_ok "INFO has $k"
done
ok "INFO has every documented field"
check_eq "INFO role" "role:leader" "$(echo "$info" | grep '^role:' | tr -d '\r')"
check_eq "INFO last_token" "last_token:4" "$(echo "$info" | grep '^last_token:' | tr -d '\r')"

# ---- error codes ----------------------------------------------------------------
err() { R "$@" 2>&1 | head -n 1; }
check_eq "unknown command" "ERR unknown command 'FOO'" "$(err FOO bar)"
check_eq "wrong arity" "ERR wrong number of arguments for 'lock' command" "$(err LOCK a)"
check_eq "bad number" "ERR ttl_ms must be an integer in 10..604800000" "$(err LEASE.GRANT abc)"
check_eq "TTL below the minimum" "ERR ttl_ms must be an integer in 10..604800000" "$(err LEASE.GRANT 1)"
check_eq "negative lease" "ERR lease must be an integer in 0..9223372036854775807" "$(err LOCK a -1)"
check_eq "unknown option" "ERR syntax error: unexpected 'FOO'" "$(err LOCK a 1 FOO 1)"
check_eq "option twice" "ERR syntax error: option given twice" "$(err LOCK a 1 WAIT 1 WAIT 2)"
check_eq "WAIT 0 refused" "ERR WAIT must be an integer in 1..86400000" "$(err LOCK a 1 WAIT 0)"
long=$(head -c 257 /dev/zero | tr '\0' x)
check_eq "name longer than 256 bytes" "ERR lock name must be 1..256 bytes" "$(err LOCK "$long" 1)"
check_eq "empty name" "ERR lock name must be 1..256 bytes" "$(err LOCK.INFO '')"
check_eq "256-byte name is fine" "" "$(err LOCK.INFO "${long:1}")"
check_eq "NOLEASE on KEEPALIVE" "NOLEASE the lease is unknown, expired or revoked" "$(err LEASE.KEEPALIVE 999)"
check_eq "NOLEASE on LOCK" "NOLEASE the lease is unknown, expired or revoked" "$(err LOCK a 999)"
check_eq "NOLEASE on LEASE.INFO" "NOLEASE the lease is unknown, expired or revoked" "$(err LEASE.INFO 999)"
check_eq "server still answers" "PONG" "$(R PING)"

# ---- inline commands and the Unix socket -------------------------------------------
check_eq "inline PING" "+PONG" "$(inline "$port" 'PING\r\nQUIT\r\n' | head -n 1 | tr -d '\r')"
check_eq "inline with a bare LF and lower case" ":5000" \
    "$(inline "$port" 'lease.keepalive 4\nQUIT\n' | head -n 1 | tr -d '\r')"
check_eq "inline quoted argument" "\$5
a b c" "$(inline "$port" 'PING "a b c"\r\nQUIT\r\n' | head -n 2 | tr -d '\r')"
check_eq "inline pipeline of three" "+PONG +PONG +OK" \
    "$(inline "$port" 'PING\r\nPING\r\nQUIT\r\n' | tr -d '\r' | tr '\n' ' ' | sed 's/ $//')"
check_eq "Unix socket PING" "PONG" "$(redis-cli -s "$sock" PING)"
check_eq "Unix socket LEASE.GRANT" "6" "$(redis-cli -s "$sock" LEASE.GRANT 1000)"

stop main TERM
check "SIGTERM removes the Unix socket" test ! -e "$sock"
check "SIGTERM: exit logged" grep -q "stopped" "$TEST_TMP/main.log"

# ---- LIMIT ------------------------------------------------------------------------
port2=$(free_port)
spawn lim "$FENCED" --port "$port2" --data-dir "$TEST_TMP/lim" --max-leases 2 --max-locks 1 \
    --max-waiters 1
wait_port "$port2"; ready "$port2"
R2() { redis-cli -p "$port2" "$@" 2>&1; }
R2 LEASE.GRANT 5000 >/dev/null; R2 LEASE.GRANT 5000 >/dev/null
check_eq "LIMIT when max-leases are live" \
    "LIMIT a configured limit is full (max-leases, max-locks, max-waiters or max-dedup, or this user's maxleases or maxlocks)" \
    "$(R2 LEASE.GRANT 5000)"
R2 LOCK l1 1 >/dev/null
check_eq "LIMIT when max-locks are held" "LIMIT" "$(R2 LOCK l2 1 | cut -d' ' -f1)"
stop lim

# ---- TRYAGAIN and NOTLEADER (a cluster of three with one node missing) -------------
pa=$(free_port); pb=$(free_port); pc=$(free_port)
ra=$(free_port); rb=$(free_port); rc=$(free_port)
peers="1=127.0.0.1:$pa/$ra,2=127.0.0.1:$pb/$rb,3=127.0.0.1:$pc/$rc"
spawn n1 "$FENCED" --port "$pa" --data-dir "$TEST_TMP/n1" --node-id 1 --peers "$peers"
wait_port "$pa"
check_eq "TRYAGAIN while no leader is elected" "TRYAGAIN" \
    "$(redis-cli -p "$pa" LEASE.GRANT 5000 2>&1 | cut -d' ' -f1)"
spawn n2 "$FENCED" --port "$pb" --data-dir "$TEST_TMP/n2" --node-id 2 --peers "$peers"
wait_port "$pb"
leader=""
find_leader() {
    redis-cli -p "$pa" INFO | grep -q '^leader_ready:1' && { leader=$pa; follower=$pb; return 0; }
    redis-cli -p "$pb" INFO | grep -q '^leader_ready:1' && { leader=$pb; follower=$pa; return 0; }
    return 1
}
wait_for 30 find_leader
check "a leader is elected with two of three nodes" test -n "$leader"
if [ -n "$leader" ]; then
    check_eq "NOTLEADER names the leader's client address" "NOTLEADER 127.0.0.1:$leader" \
        "$(redis-cli -p "$follower" LEASE.GRANT 5000 2>&1)"
    check_eq "reads on a follower: NOTLEADER too" "NOTLEADER 127.0.0.1:$leader" \
        "$(redis-cli -p "$follower" LOCK.INFO x 2>&1)"
    check_eq "writes on the leader work" "1" "$(redis-cli -p "$leader" LEASE.GRANT 5000)"
    check_eq "reads on the leader (via the log)" "5000" \
        "$(redis-cli -p "$leader" LEASE.INFO 1 | head -n 1)"
    check_eq "INFO on the follower says follower" "role:follower" \
        "$(redis-cli -p "$follower" INFO | grep '^role:' | tr -d '\r')"
fi
stop n1; stop n2

# ---- options and the config file --------------------------------------------------------
help=$("$FENCED" --help)
for o in port bind unix-socket data-dir config lock-delay-ms node-id raft-port peers \
         election-timeout-ms heartbeat-ms snapshot-threshold snapshot-trailing snapshot-log-ratio max-clients \
         max-leases max-locks max-waiters max-bulk max-pipeline max-obuf log-level log-file; do
    echo "$help" | grep -q -- "--$o " || not_ok "--help documents --$o"
done
ok "--help documents every option"
check "--help shows bounds and defaults" grep -q "range 0..65535, default 7700" <<<"$help"
printf '# comment\n\nport 7700\nmax-leases abc\n' >"$TEST_TMP/bad.conf"
out=$("$FENCED" --config "$TEST_TMP/bad.conf" 2>&1); rc=$?
check "bad config value: exit non-zero" test "$rc" -ne 0
check_eq "bad config value: file:line: message" \
    "fenced: $TEST_TMP/bad.conf:4: max-leases: 'abc' is not a number in 1..100000000" "$out"
printf 'no-such-thing 1\n' >"$TEST_TMP/bad2.conf"
check_eq "unknown directive" "fenced: $TEST_TMP/bad2.conf:1: unknown directive 'no-such-thing'" \
    "$("$FENCED" --config "$TEST_TMP/bad2.conf" 2>&1)"
check_eq "unknown flag" "fenced: unknown option '--nope' (see --help)" "$("$FENCED" --nope 1 2>&1)"
check_eq "out-of-range flag" "fenced: --port: 70000 is out of range 0..65535" "$("$FENCED" --port 70000 2>&1)"
check_eq "--port 0 without another listener" "fenced: port: 0 (no plain TCP listener) needs tls-port or unix-socket" "$("$FENCED" --port 0 2>&1)"
check_eq "heartbeat must be below the election timeout" \
    "fenced: heartbeat-ms: 500 must be above 0 and below election-timeout-ms 400" \
    "$("$FENCED" --heartbeat-ms 500 2>&1)"
check_eq "node-id must be in peers" "fenced: peers: node-id 5 is not in the list" \
    "$("$FENCED" --node-id 5 --peers 1=127.0.0.1:1/2 2>&1)"
port3=$(free_port)
printf 'port %s\ndata-dir %s\nlog-level debug  # trailing comment is part of the value\n' \
    "$port3" "$TEST_TMP/cf" >"$TEST_TMP/c.conf"
check "a value with a trailing comment is refused" bash -c "! '$FENCED' --config '$TEST_TMP/c.conf' 2>/dev/null"
printf 'port %s\ndata-dir %s\nlog-level debug\nlog-file %s\n' "$port3" "$TEST_TMP/cf" \
    "$TEST_TMP/cf.out" >"$TEST_TMP/c.conf"
spawn cf "$FENCED" --config "$TEST_TMP/c.conf"
check "config file: port and data-dir applied" wait_port "$port3"
check "config file: data dir created" test -d "$TEST_TMP/cf"
redis-cli -p "$port3" PING >/dev/null
stop cf
check "log-file receives the log" grep -q "listening on 127.0.0.1:$port3" "$TEST_TMP/cf.out"
check "log-level debug logs connections" grep -q "debug conn 1: accepted" "$TEST_TMP/cf.out"
check "SIGTERM is logged" grep -q "signal 15: shutting down" "$TEST_TMP/cf.out"
finish
