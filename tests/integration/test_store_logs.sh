#!/usr/bin/env bash
# fence-store's shared front end (src/daemon): --version, --config with
# file:line errors, the shared log line format (time, pid, level word),
# --log-level words (and the old digits, deprecated), --log-file reopened
# on SIGHUP after a logrotate-style mv (the store stays up, the new file
# gets the lines), and a full file system: logged as "no space left on
# device", answered -FULL, nothing lost, the store still serving.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed"
[ -x "$FENCE_STORE" ] || skip_all "$FENCE_STORE not built"

rc() { local p=$1; shift; redis-cli -p "$p" "$@" 2>&1; }
alive() { kill -0 "$(pid_of "$1")" 2>/dev/null; }

# ---- --version, --help ---------------------------------------------------------
check_eq "--version" "fence-store 0.1.0" "$("$FENCE_STORE" --version)"
help=$("$FENCE_STORE" --help)
for f in --config --log-file --log-level --max-obuf --obuf-max --max-pipeline --unix-socket --version; do
    grep -q -- "$f" <<<"$help" || not_ok "--help documents $f"
done
ok "--help documents the shared options"
check "--help marks --obuf-max as deprecated" grep -q -- "--obuf-max .*deprecated spelling of --max-obuf" <<<"$help"

# ---- --config --------------------------------------------------------------------
printf '# store\nmax-value 1000\nmax-clients nope\n' >"$TEST_TMP/bad.conf"
out=$("$FENCE_STORE" --config "$TEST_TMP/bad.conf" 2>&1); code=$?
check_eq "bad directive exits 2" "2" "$code"
check_eq "and names file, line and directive" \
    "fence-store: $TEST_TMP/bad.conf:3: max-clients: 'nope' is not a number in 1..100000" "$out"
check_eq "an unknown log level is refused" \
    "fence-store: --log-level: 'loud' is not debug, info, warn or error" \
    "$("$FENCE_STORE" --log-level loud 2>&1)"

# ---- log format, --log-file, SIGHUP ------------------------------------------------
P=$(free_port)
printf 'port %s\ndata-dir %s\nlog-level debug\nlog-file %s\nobuf-max 2m\n' \
    "$P" "$TEST_TMP/d1" "$TEST_TMP/store.log" >"$TEST_TMP/s.conf"
spawn s1 "$FENCE_STORE" --config "$TEST_TMP/s.conf"
check "starts from a config file (with the deprecated obuf-max)" wait_port "$P"
check_eq "serves" "PONG" "$(rc "$P" PING)"
pid=$(pid_of s1)
check "log line: time, pid, level word, message" \
    grep -Eq "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}\.[0-9]{3}Z $pid info listening on 127.0.0.1:$P\$" \
    "$TEST_TMP/store.log"
check "log-level debug logs connections" grep -q " debug conn 1: accepted" "$TEST_TMP/store.log"
check "nothing went to stderr" test ! -s "$TEST_TMP/s1.log"
mv "$TEST_TMP/store.log" "$TEST_TMP/store.log.1"
kill -HUP "$pid"
wait_log "$TEST_TMP/store.log" "SIGHUP: log file reopened"
check "SIGHUP leaves fence-store running" alive s1
check_eq "and serving" "PONG" "$(rc "$P" PING)"
check "the new log file gets the lines" grep -q "SIGHUP: log file reopened" "$TEST_TMP/store.log"
check "including later ones" grep -q "conn .*: accepted" "$TEST_TMP/store.log"
check "the rotated file keeps the old ones" grep -q "listening on" "$TEST_TMP/store.log.1"
stop s1 TERM
check "SIGTERM is logged to the new file" grep -q "signal 15: stopping" "$TEST_TMP/store.log"

P=$(free_port)
spawn s2 "$FENCE_STORE" --port "$P" --data-dir "$TEST_TMP/d2" --log-level 0
wait_port "$P"
rc "$P" PING >/dev/null
stop s2 TERM
check "deprecated --log-level 0 means errors only" bash -c "! grep -q ' info ' '$TEST_TMP/s2.log'"

# ---- a full file system -------------------------------------------------------------
# fill_until_full PORT VALUE MAX [TOKEN]: FSET k1, k2, ... (token i for ki,
# or TOKEN) until a reply is not OK; sets acked (the last key answered OK)
# and full (the first other reply).
fill_until_full() {
    acked=0; full=""
    local i out
    for i in $(seq 1 "$3"); do
        out=$(redis-cli -p "$1" -x FSET f "${4:-$i}" "k$i" <<<"$2" 2>&1)
        if [ "$out" = "OK" ]; then acked=$i; else full=$out; break; fi
    done
}
# readable PORT N BYTES: how many of k1..kN read back as BYTES bytes (the
# value plus redis-cli's newlines).
readable() {
    local n=0 i
    for i in $(seq 1 "$2"); do
        [ "$(redis-cli -p "$1" FGET "k$i" | wc -c | tr -d ' ')" = "$3" ] && n=$((n + 1))
    done
    echo "$n"
}
if [ "$(id -u)" = 0 ] && unshare --mount --propagation private true 2>/dev/null; then
    P=$(free_port)
    mkdir -p "$TEST_TMP/small"
    spawn full unshare --mount --propagation private sh -c \
        'mount -t tmpfs -o size=640k tmpfs "$1" && exec "$2" --port "$3" --data-dir "$1/d" --map-size 64m --max-value 100k' \
        sh "$TEST_TMP/small" "$FENCE_STORE" "$P"
    wait_port "$P"
    val=$(head -c 60000 /dev/zero | tr '\0' 'v')
    fill_until_full "$P" "$val" 40
    check "a write on a full disk is answered -FULL" grep -q "^FULL no space left" <<<"$full"
    check "it is logged as no space left on device" grep -q "no space left on device" "$TEST_TMP/full.log"
    check "not as an I/O error" bash -c "! grep -qi 'input/output error' '$TEST_TMP/full.log'"
    check "fence-store is still up" alive full
    check "some writes were acknowledged first" test "$acked" -gt 0
    check_eq "every acknowledged write is readable (value + redis-cli's newlines)" "$acked" \
        "$(readable "$P" "$acked" 60002)"
    check_eq "small writes still get a clear answer" "FULL" \
        "$(redis-cli -p "$P" -x FSET f 999 big <<<"$val" 2>&1 | cut -d' ' -f1)"
    stop full TERM

    # Small writes on a full disk: each batch's log record fits, and LMDB's
    # deferred commit of the answered batches is what finds no room (db_defer.c,
    # "Deferred commits"). They stay readable, writes are refused, and once
    # space is freed (a file in the same tmpfs, seen through the server's
    # mount namespace) writes are accepted again.
    P=$(free_port)
    mkdir -p "$TEST_TMP/small2"
    spawn full2 unshare --mount --propagation private sh -c \
        'mount -t tmpfs -o size=1m tmpfs "$1" && head -c 200000 /dev/zero >"$1/filler" && exec "$2" --port "$3" --data-dir "$1/d" --map-size 64m' \
        sh "$TEST_TMP/small2" "$FENCE_STORE" "$P"
    wait_port "$P"
    val=$(head -c 3000 /dev/zero | tr '\0' 'v')
    fill_until_full "$P" "$val" 1000 1
    check "small writes on a full disk end in -FULL" grep -q "^FULL no space left" <<<"$full"
    sleep 1.2 # the timer's commit of what is pending finds no room either
    check_eq "every acknowledged write is readable meanwhile ($acked)" "$acked" \
        "$(readable "$P" "$acked" 3002)"
    nsenter -t "$(pid_of full2)" -m rm "$TEST_TMP/small2/filler"
    sleep 1.2 # the timer retries the commit
    check_eq "once space is freed writes are accepted again" "OK" \
        "$(redis-cli -p "$P" -x FSET f 1 more <<<"x" 2>&1)"
    # Said when LMDB's deferred commit was what found no room (it may also
    # have been a forced commit of the log's, which says nothing here).
    check "the log says so when writes were held back" bash -c \
        "! grep -q 'cannot take' '$TEST_TMP/full2.log' || grep -q 'writes are accepted again' '$TEST_TMP/full2.log'"
    check_eq "and every acknowledged write is still there" "$acked" "$(readable "$P" "$acked" 3002)"
    stop full2 TERM
else
    ok "# SKIP full file system: needs root and unshare --mount"
fi
finish
