#!/usr/bin/env bash
# fence-store's fence_store_connections gauge follows connections that
# open and close (issue 20: it was set only when a request came in, so it
# never went down when clients disconnected).
. "$(dirname "$0")/../lib/lib.sh"

SP=$(free_port); MP=$(free_port)
spawn store "$FENCE_STORE" --port "$SP" --bind 127.0.0.1 --metrics-port "$MP" \
    --data-dir "$TEST_TMP/store"
wait_port "$SP" || { cat "$TEST_TMP/store.log"; not_ok "fence-store starts"; finish; }
wait_port "$MP" || { cat "$TEST_TMP/store.log"; not_ok "fence-store serves metrics"; finish; }

SP=$SP MP=$MP "$PY" - <<'PYEOF'
import os, socket, sys, time, urllib.request

sp, mp = int(os.environ["SP"]), int(os.environ["MP"])
fails = 0

def gauge():
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mp, timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("fence_store_connections "):
            return int(float(line.split()[1]))
    return None

def wait_for(want, secs=5.0):
    end = time.monotonic() + secs
    while True:
        got = gauge()
        if got == want or time.monotonic() > end:
            return got
        time.sleep(0.05)

def check(cond, what):
    global fails
    print(("ok - " if cond else "not ok - ") + what)
    fails += 0 if cond else 1

def ping(s):
    s.sendall(b"*1\r\n$4\r\nPING\r\n")
    return s.recv(64)

conns = [socket.create_connection(("127.0.0.1", sp)) for _ in range(3)]
for s in conns:
    ping(s)
got = wait_for(3)
check(got == 3, "three clients: fence_store_connections 3 (%r)" % got)
conns.pop().close()
got = wait_for(2)
check(got == 2, "one disconnects: 2 (%r)" % got)
for s in conns:
    s.close()
got = wait_for(0)
check(got == 0, "all disconnect: 0 (%r)" % got)
# A client that connects and never sends counts too.
idle = socket.create_connection(("127.0.0.1", sp))
got = wait_for(1)
check(got == 1, "a connection that has sent nothing counts (%r)" % got)
idle.close()
got = wait_for(0)
check(got == 0, "and is gone when it closes (%r)" % got)
sys.exit(1 if fails else 0)
PYEOF
check "fence_store_connections follows opens and closes" test $? -eq 0
finish
