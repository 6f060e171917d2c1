#!/usr/bin/env bash
# fenced's shared front end (src/daemon): --version, the shared log line
# format (time, pid, level word), the deprecated --obuf-max spelling, and
# SIGHUP: after a logrotate-style mv, kill -HUP leaves fenced running (it
# used to kill it) and the log goes on in a new file at the same path.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli is not installed"
[ -x "$FENCED" ] || skip_all "$FENCED is not built"

alive() { kill -0 "$(pid_of "$1")" 2>/dev/null; }

check_eq "--version" "fenced 0.1.0" "$("$FENCED" --version)"
check "--help lists --version" grep -q -- "--version" <<<"$("$FENCED" --help)"
check "--help marks --obuf-max as deprecated" grep -q -- "--obuf-max .*deprecated spelling of --max-obuf" \
    <<<"$("$FENCED" --help)"

port=$(free_port)
spawn f "$FENCED" --port "$port" --data-dir "$TEST_TMP/d" --log-file "$TEST_TMP/fenced.log" \
    --log-level debug --obuf-max 65536
check "fenced starts (with the deprecated --obuf-max)" wait_port "$port"
check "and serves writes" wait_ready "$port"
pid=$(pid_of f)
check "log line: time, pid, level word, message" \
    grep -Eq "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z $pid info listening on 127.0.0.1:$port\$" \
    "$TEST_TMP/fenced.log"
check_eq "max-obuf took the alias's value" "1" "$(redis-cli -p "$port" LEASE.GRANT 5000)"
mv "$TEST_TMP/fenced.log" "$TEST_TMP/fenced.log.1"
kill -HUP "$pid"
wait_log "$TEST_TMP/fenced.log" "SIGHUP: log file reopened"
check "SIGHUP leaves fenced running" alive f
check_eq "and serving" "2" "$(redis-cli -p "$port" LEASE.GRANT 5000)"
check "the new log file gets the lines" grep -q "SIGHUP: log file reopened" "$TEST_TMP/fenced.log"
check "including later ones" grep -q "debug conn .*: accepted" "$TEST_TMP/fenced.log"
check "the rotated file keeps the old ones" grep -q "listening on" "$TEST_TMP/fenced.log.1"
kill -HUP "$pid"; kill -HUP "$pid"
# Two signals sent at once may arrive as one: wait for the second reopen.
wait_log "$TEST_TMP/fenced.log" "SIGHUP: log file reopened" 30 2
redis-cli -p "$port" PING >/dev/null
check "repeated SIGHUPs are harmless" alive f
stop f TERM
check "SIGTERM is logged to the new file" grep -q "signal 15: shutting down" "$TEST_TMP/fenced.log"
check "nothing went to stderr" test ! -s "$TEST_TMP/f.log"

# Without --log-file, SIGHUP still does not stop it.
port=$(free_port)
spawn g "$FENCED" --port "$port" --data-dir "$TEST_TMP/g"
wait_port "$port"
kill -HUP "$(pid_of g)"
# A reply after the signal: the signal was delivered (its default action
# would have ended fenced before it answered).
redis-cli -p "$port" PING >/dev/null
check "SIGHUP without --log-file leaves fenced running" alive g
stop g TERM
finish
