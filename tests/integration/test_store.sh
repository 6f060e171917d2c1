#!/usr/bin/env bash
# fence-store with redis-cli: every command, the fencing rule (stale
# rejection with both tokens, equal tokens, FENCE.ADMIT then a stale FSET),
# limits (oversized values lose nothing, bad tokens, names, keys), protocol
# garbage, slow readers, max clients, flags, the data-dir lock, restart, and
# the --ignore-tokens control mode.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed"
[ -x "$FENCE_STORE" ] || skip_all "$FENCE_STORE not built"

# start_store NAME PORT DIR [FLAGS...]: start fence-store and wait for it.
start_store() {
    local name=$1 port=$2 dir=$3; shift 3
    spawn "$name" "$FENCE_STORE" --port "$port" --data-dir "$dir" "$@"
    wait_port "$port" 10 || { echo "# $name did not start:"; cat "$TEST_TMP/$name.log"; return 1; }
}
# rc PORT ARGS...: one redis-cli command (raw output, no trailing newline).
rc() { local p=$1; shift; redis-cli --no-raw -p "$p" "$@" 2>&1; }
# send PORT BYTES: send raw bytes, print everything the server answers.
send() {
    "$PY" - "$1" "$2" <<'PYEOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(sys.argv[2].encode("latin-1").decode("unicode_escape").encode("latin-1"))
out = b""
try:
    while True:
        d = s.recv(65536)
        if not d:
            out += b"<closed>"
            break
        out += d
except socket.timeout:
    out += b"<open>"
sys.stdout.write(out.decode("latin-1").replace("\r\n", "|"))
PYEOF
}

P=$(free_port)
D=$TEST_TMP/data
start_store s1 "$P" "$D" --max-value 1000 --obuf-max 65536 --max-clients 8 || { not_ok "fence-store starts"; finish; }
ok "fence-store starts on 127.0.0.1:$P"

# ---- every command ---------------------------------------------------------
check_eq "PING" "PONG" "$(rc "$P" PING)"
check_eq "PING message" '"hi there"' "$(rc "$P" PING "hi there")"
check_eq "FENCE.HIGH of an unseen fence is 0" "(integer) 0" "$(rc "$P" FENCE.HIGH orders)"
check_eq "FGET of a missing key is nil" "(nil)" "$(rc "$P" FGET k)"
check_eq "FSET with token 33" "OK" "$(rc "$P" FSET orders 33 k v33)"
check_eq "FGET returns the value" '"v33"' "$(rc "$P" FGET k)"
check_eq "FENCE.HIGH is 33" "(integer) 33" "$(rc "$P" FENCE.HIGH orders)"
check_eq "FSET with token 34" "OK" "$(rc "$P" FSET orders 34 k v34)"
check_eq "stale FSET (33 < 34) names both tokens first" \
    "(error) STALE 33 34 token 33 is older than the highest token admitted for this fence (34); nothing was written" \
    "$(rc "$P" FSET orders 33 k stale)"
check_eq "stale write left the value alone" '"v34"' "$(rc "$P" FGET k)"
check_eq "equal token is admitted" "OK" "$(rc "$P" FSET orders 34 k v34b)"
check_eq "equal token wrote" '"v34b"' "$(rc "$P" FGET k)"
check_eq "FINCR creates 1" "(integer) 1" "$(rc "$P" FINCR orders 34 n)"
check_eq "FINCR counts" "(integer) 2" "$(rc "$P" FINCR orders 35 n)"
check_eq "stale FINCR" "STALE 34 35" "$(rc "$P" FINCR orders 34 n | cut -d' ' -f2-4)"
check_eq "stale FINCR did not count" '"2"' "$(rc "$P" FGET n)"
check_eq "FINCR of a non-integer" "(error) ERR value is not an integer; nothing was written" "$(rc "$P" FINCR orders 35 k)"
check_eq "FDEL existing key" "(integer) 1" "$(rc "$P" FDEL orders 35 n)"
check_eq "FDEL missing key" "(integer) 0" "$(rc "$P" FDEL orders 35 n)"
check_eq "stale FDEL" "STALE 1 35" "$(rc "$P" FDEL orders 1 k | cut -d' ' -f2-4)"
check_eq "stale FDEL kept the key" '"v34b"' "$(rc "$P" FGET k)"
check_eq "other fences are independent" "OK" "$(rc "$P" FSET other 1 k2 x)"

# ---- read-modify-write pattern: FENCE.ADMIT then a stale FSET --------------
check_eq "FENCE.ADMIT raises the mark" "OK" "$(rc "$P" FENCE.ADMIT orders 40)"
check_eq "FENCE.ADMIT equal token" "OK" "$(rc "$P" FENCE.ADMIT orders 40)"
check_eq "FENCE.HIGH after admit" "(integer) 40" "$(rc "$P" FENCE.HIGH orders)"
check_eq "old holder's FSET after the new holder's admit is stale" \
    "STALE 35 40" "$(rc "$P" FSET orders 35 k old-holder | cut -d' ' -f2-4)"
check_eq "stale FENCE.ADMIT" "STALE 39 40" "$(rc "$P" FENCE.ADMIT orders 39 | cut -d' ' -f2-4)"
check_eq "new holder writes" "OK" "$(rc "$P" FSET orders 40 k new-holder)"

# ---- INFO ------------------------------------------------------------------
info=$(redis-cli -p "$P" INFO | tr -d '\r')
check_eq "INFO keys" "keys:2" "$(grep '^keys:' <<<"$info")"
check_eq "INFO fences" "fences:2" "$(grep '^fences:' <<<"$info")"
check_eq "INFO admitted" "admitted:11" "$(grep '^admitted:' <<<"$info")"
check_eq "INFO rejected_stale" "rejected_stale:5" "$(grep '^rejected_stale:' <<<"$info")"
check_eq "INFO ignore_tokens" "ignore_tokens:0" "$(grep '^ignore_tokens:' <<<"$info")"

# ---- bad arguments: clear errors, nothing written --------------------------
check_eq "bad token" "(error) ERR invalid token 'abc': a token is a decimal integer 0..9223372036854775807" "$(rc "$P" FSET orders abc k v)"
check_eq "negative token" "ERR invalid token '-5'" "$(rc "$P" FSET orders -5 k v | cut -d' ' -f2-5 | tr -d ':')"
check_eq "token beyond int64" "ERR invalid token '9223372036854775808'" "$(rc "$P" FENCE.ADMIT orders 9223372036854775808 | cut -d' ' -f2-5 | tr -d ':')"
check_eq "wrong arity" "(error) ERR wrong number of arguments for 'FSET' (usage: FSET <fence> <token> <key> <value>)" "$(rc "$P" FSET orders 41 k)"
check_eq "unknown command" "ERR unknown command 'SET'" "$(rc "$P" SET a b | cut -d' ' -f2-5)"
long=$(head -c 257 /dev/zero | tr '\0' f)
check_eq "fence name too long" "(error) ERR fence name must be 1..256 bytes (got 257)" "$(rc "$P" FSET "$long" 1 k v)"
check_eq "empty fence name" "(error) ERR fence name must be 1..256 bytes (got 0)" "$(rc "$P" FENCE.ADMIT "" 1)"
longkey=$(head -c 512 /dev/zero | tr '\0' k)
check_eq "key too long" "(error) ERR key must be 1..511 bytes (got 512)" "$(rc "$P" FSET orders 41 "$longkey" v)"
check_eq "bad requests wrote nothing" "(integer) 40" "$(rc "$P" FENCE.HIGH orders)"
check_eq "commands are case-insensitive" "OK" "$(rc "$P" fset orders 40 k new-holder)"

# ---- oversized value: rejected, connection closed, nothing lost ------------
big=$(head -c 1500 /dev/zero | tr '\0' b)
out=$(rc "$P" FSET orders 41 k "$big")
case $out in *LIMIT*1000*) ok "oversized value rejected with -LIMIT naming --max-value";;
    *) not_ok "oversized value rejected ($out)";; esac
check_eq "oversized write lost nothing" '"new-holder"' "$(rc "$P" FGET k)"
check_eq "oversized write did not raise the mark" "(integer) 40" "$(rc "$P" FENCE.HIGH orders)"
ok_val=$(head -c 1000 /dev/zero | tr '\0' o)
check_eq "a value at the limit is stored" "OK" "$(rc "$P" FSET orders 40 big "$ok_val")"
check_eq "and read back" "1000" "$(redis-cli -p "$P" FGET big | tr -d '\n' | wc -c)"

# ---- protocol garbage: error reply, then close; the server lives on --------
check_eq "bad multibulk count" "-ERR Protocol error" "$(send "$P" '*abc\r\n' | cut -d: -f1)"
case $(send "$P" '*1\r\n$x\r\n') in -ERR\ Protocol\ error*'<closed>') ok "bad bulk length: error then close";;
    *) not_ok "bad bulk length: error then close";; esac
case $(send "$P" '*99999\r\n') in -LIMIT*'<closed>') ok "huge multibulk count: -LIMIT then close";;
    *) not_ok "huge multibulk count: -LIMIT then close ($(send "$P" '*99999\r\n'))";; esac
case $(send "$P" '*2\r\n$4\r\nFGET\r\n$999999999\r\n') in -LIMIT*'<closed>') ok "huge bulk length: -LIMIT then close";;
    *) not_ok "huge bulk length: -LIMIT then close";; esac
case $(send "$P" 'PING\r\n*1\r\n$4\r\nPING\r\n\x00\x01\x02garbage\r\n') in +PONG\|+PONG\|-ERR*) ok "pipelined requests then garbage: answers, then error";;
    *) not_ok "pipelined requests then garbage";; esac
check_eq "inline commands work" "+OK|:40|+OK|<closed>" "$(send "$P" 'FSET orders 40 k inline\r\nFENCE.HIGH orders\r\nQUIT\r\n')"
check_eq "quoted inline arguments" '$5|a b c|+OK|<closed>' "$(send "$P" 'PING "a b c"\r\nQUIT\r\n')"
check_eq "QUIT closes" "+OK|<closed>" "$(send "$P" 'QUIT\r\n')"
"$PY" - "$P" <<'PYEOF' && ok "a half-closed client still gets every reply" || not_ok "a half-closed client still gets every reply"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(b"*2\r\n$4\r\nFGET\r\n$3\r\nbig\r\n" * 50)   # 50 x 1000-byte replies
s.shutdown(socket.SHUT_WR)
got = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    got += d
assert got.count(b"$1000\r\n") == 50, len(got)
PYEOF
"$PY" - "$P" <<'PYEOF' && ok "random garbage never kills the server" || not_ok "random garbage never kills the server"
import random, socket, sys
port = int(sys.argv[1]); rnd = random.Random(1)
for i in range(200):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    junk = bytes(rnd.choice(b"*$\r\n0123456789-+:FSETGPING \x00\xff") for _ in range(rnd.randint(1, 300)))
    try:
        s.sendall(junk); s.shutdown(socket.SHUT_WR); s.recv(4096)
    except OSError:
        pass
    s.close()
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.sendall(b"PING\r\n"); assert s.recv(100) == b"+PONG\r\n"
PYEOF

# ---- slow reader: pipelined FGETs never read are cut off ------------------
"$PY" - "$P" <<'PYEOF' && ok "a slow reader is disconnected; others unaffected" || not_ok "a slow reader is disconnected"
import re, socket, sys, time
port = int(sys.argv[1])
def slow_closed():
    """INFO's slow_readers_closed, over a connection of its own."""
    u = socket.create_connection(("127.0.0.1", port), timeout=5)
    u.sendall(b"INFO\r\n")
    buf = b""
    while not re.search(rb"slow_readers_closed:(\d+)\r\n", buf):
        d = u.recv(65536)
        if not d:
            break
        buf += d
    u.close()
    m = re.search(rb"slow_readers_closed:(\d+)\r\n", buf)
    return int(m.group(1)) if m else -1
before = slow_closed()
s = socket.create_connection(("127.0.0.1", port), timeout=5)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.sendall(b"*5\r\n$4\r\nFSET\r\n$1\r\nf\r\n$1\r\n1\r\n$2\r\nbv\r\n$1000\r\n" + b"x" * 1000 + b"\r\n")
assert s.recv(5) == b"+OK\r\n"
req = b"*2\r\n$4\r\nFGET\r\n$2\r\nbv\r\n" * 20000   # ~20 MB of replies, never read
try:
    s.sendall(req)
except OSError:
    pass
end = time.monotonic() + 30   # until fence-store has cut it off (a bound on a hang)
while slow_closed() <= before and time.monotonic() < end:
    time.sleep(0.05)
t = socket.create_connection(("127.0.0.1", port), timeout=5)
t.sendall(b"PING\r\n"); assert t.recv(100) == b"+PONG\r\n"
# the slow connection must be closed by now: reading drains then hits EOF/reset
got, closed = 0, False
s.settimeout(5)
try:
    while True:
        d = s.recv(1 << 20)
        if not d:
            closed = True; break
        got += len(d)
except ConnectionResetError:
    closed = True
except socket.timeout:
    pass
assert closed, "slow reader still connected"
assert got < 20000 * 1000, got
PYEOF
grep -q "slow reader" "$TEST_TMP/s1.log" && ok "slow reader disconnect is logged" || not_ok "slow reader disconnect is logged"

# ---- max clients -------------------------------------------------------------
"$PY" - "$P" <<'PYEOF' && ok "clients beyond --max-clients get -LIMIT" || not_ok "clients beyond --max-clients get -LIMIT"
import socket, sys
port = int(sys.argv[1]); held = []
for i in range(8):
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    c.sendall(b"PING\r\n"); assert c.recv(100) == b"+PONG\r\n"; held.append(c)
x = socket.create_connection(("127.0.0.1", port), timeout=5)
r = x.recv(200)
assert r.startswith(b"-LIMIT max clients (8)"), r
for c in held: c.close()
PYEOF

# ---- a second server on the same data dir is refused -------------------------
P2=$(free_port)
"$FENCE_STORE" --port "$P2" --data-dir "$D" >"$TEST_TMP/second.log" 2>&1
rc2=$?
check_eq "second fence-store on the same dir exits 1" "1" "$rc2"
grep -q "data-dir $D is in use by another process (pid" "$TEST_TMP/second.log" && ok "and says why" || not_ok "and says why"

# ---- restart keeps data and marks -------------------------------------------
stop s1 TERM
start_store s1b "$P" "$D" --max-value 1000 --obuf-max 65536 || not_ok "restart"
check_eq "data survives restart" '"inline"' "$(rc "$P" FGET k)"
check_eq "marks survive restart" "(integer) 40" "$(rc "$P" FENCE.HIGH orders)"
check_eq "stale after restart" "STALE 39 40" "$(rc "$P" FSET orders 39 k x | cut -d' ' -f2-4)"
stop s1b TERM

# ---- flags -------------------------------------------------------------------
help=$("$FENCE_STORE" --help)
for f in --port --bind --data-dir --max-value --map-size --max-clients --ignore-tokens; do
    grep -q -- "$f" <<<"$help" || not_ok "--help documents $f"
done
grep -q '0..65535, default 7710' <<<"$help" && ok "--help shows bounds and defaults" || not_ok "--help shows bounds and defaults"
"$FENCE_STORE" --port 70000 2>"$TEST_TMP/flag.err"; check_eq "port out of range exits 2" "2" "$?"
grep -q -- "--port: 70000 is out of range 0..65535" "$TEST_TMP/flag.err" && ok "and names the bound" || not_ok "and names the bound"
"$FENCE_STORE" --bogus 2>/dev/null; check_eq "unknown flag exits 2" "2" "$?"
"$FENCE_STORE" --max-value 2m --obuf-max 1m 2>"$TEST_TMP/flag.err"; check_eq "inconsistent limits exit 2" "2" "$?"
"$FENCE_STORE" --port "$(free_port)" --bind 10.0.0.300 --data-dir "$TEST_TMP/b" 2>"$TEST_TMP/flag.err"
check_eq "bad --bind exits 1" "1" "$?"

# ---- map full: a clear -FULL, nothing lost ----------------------------------
P3=$(free_port)
start_store full "$P3" "$TEST_TMP/full" --map-size 1m --max-value 64k || not_ok "small store starts"
"$PY" - "$P3" <<'PYEOF' && ok "a full map gives -FULL and keeps acknowledged data" || not_ok "a full map gives -FULL"
import socket, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
f = s.makefile("rb")
val = b"v" * 60000
acked = []
for i in range(100):
    k = b"k%d" % i
    s.sendall(b"*5\r\n$4\r\nFSET\r\n$1\r\nf\r\n$1\r\n1\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(val), val))
    line = f.readline()
    if line.startswith(b"-FULL"):
        assert b"--map-size" in line, line
        break
    assert line == b"+OK\r\n", line
    acked.append(k)
else:
    raise SystemExit("never got -FULL")
assert len(acked) > 3
for k in acked:
    s.sendall(b"*2\r\n$4\r\nFGET\r\n$%d\r\n%s\r\n" % (len(k), k))
    assert f.readline() == b"$60000\r\n"; assert f.read(60002)[:60000] == val
s.sendall(b"PING\r\n"); assert f.readline() == b"+PONG\r\n"
PYEOF
stop full TERM

# ---- a failed disk write is a crash-stop; nothing acknowledged is lost ----
# The file-size limit (ulimit -f, with SIGXFSZ ignored) makes LMDB's writes
# fail with EFBIG once the data file reaches 256 KiB.
P5=$(free_port)
( trap '' XFSZ; ulimit -c 0; ulimit -f 256; exec "$FENCE_STORE" --port "$P5" --data-dir "$TEST_TMP/efbig" ) >>"$TEST_TMP/efbig.log" 2>&1 &
efbig_pid=$!
if wait_port "$P5" 10; then
    "$PY" - "$P5" "$TEST_TMP/efbig.acked" <<'PYEOF'
import socket, sys
port, out = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
f = s.makefile("rb")
acked = []
try:
    for i in range(400):
        k = b"k%d" % i
        v = b"%d" % i * 800
        s.sendall(b"*5\r\n$4\r\nFSET\r\n$1\r\nf\r\n$%d\r\n%d\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n"
                  % (len(b"%d" % (i + 1)), i + 1, len(k), k, len(v), v))
        line = f.readline()
        if line != b"+OK\r\n":
            break
        acked.append(i)
except OSError:
    pass
open(out, "w").write(" ".join(map(str, acked)))
PYEOF
    { wait "$efbig_pid"; } 2>/dev/null; st=$?
    check_eq "a failed LMDB write aborts the server (SIGABRT)" "134" "$st"
    grep -q "crash-stop" "$TEST_TMP/efbig.log" && ok "and logs why" || { cat "$TEST_TMP/efbig.log"; not_ok "and logs why"; }
    n=$(wc -w <"$TEST_TMP/efbig.acked")
    [ "$n" -gt 5 ] && [ "$n" -lt 400 ] && ok "writes were acknowledged until the disk failed ($n)" || not_ok "writes acknowledged until the disk failed ($n)"
    start_store efbig2 "$P5" "$TEST_TMP/efbig" || not_ok "restart after the disk error"
    "$PY" - "$P5" "$TEST_TMP/efbig.acked" <<'PYEOF' && ok "after restart every acknowledged write is there" || not_ok "after restart every acknowledged write is there"
import socket, sys
port = int(sys.argv[1]); acked = [int(x) for x in open(sys.argv[2]).read().split()]
s = socket.create_connection(("127.0.0.1", port), timeout=10); f = s.makefile("rb")
for i in acked:
    k = b"k%d" % i
    s.sendall(b"*2\r\n$4\r\nFGET\r\n$%d\r\n%s\r\n" % (len(k), k))
    hdr = f.readline(); assert hdr.startswith(b"$"), (i, hdr)
    body = f.read(int(hdr[1:]) + 2)[:-2]; assert body == b"%d" % i * 800, i
s.sendall(b"*2\r\n$10\r\nFENCE.HIGH\r\n$1\r\nf\r\n")
assert int(f.readline()[1:]) >= acked[-1] + 1
PYEOF
    stop efbig2 TERM
else
    not_ok "fence-store under a file-size limit starts"
fi

# ---- --ignore-tokens control mode ------------------------------------------
P4=$(free_port)
start_store ctl "$P4" "$TEST_TMP/ctl" --ignore-tokens || not_ok "control mode starts"
grep -q "FENCING IS OFF" "$TEST_TMP/ctl.log" && ok "--ignore-tokens logs a loud warning" || not_ok "--ignore-tokens logs a loud warning"
check_eq "control: INFO ignore_tokens:1" "ignore_tokens:1" "$(redis-cli -p "$P4" INFO | tr -d '\r' | grep '^ignore_tokens:')"
rc "$P4" FSET f 34 k new >/dev/null
check_eq "control: a stale token is admitted" "OK" "$(rc "$P4" FSET f 33 k stale)"
check_eq "control: and overwrites newer data" '"stale"' "$(rc "$P4" FGET k)"
check_eq "control: the mark keeps the highest token" "(integer) 34" "$(rc "$P4" FENCE.HIGH f)"
stop ctl TERM
finish
