#!/usr/bin/python3
"""fence-store: a batch opened at the end of a loop turn survives the
flush timer.

With --max-pipeline 4 a long pipeline is parsed four requests at a time:
when a batch's replies go out (batch_flush, then the layer's flush), the
layer parses the next four and they open a new batch, in the check phase,
after this turn's commit.  That batch is committed at the end of the next
turn; the one-second LMDB flush timer runs before that, at the start of
the next turn, and asserted that no batch was open: any client that
pipelined writes could abort the store (it did in test_tls.py under load).
Here several clients pipeline FSETs and FGETs for a few seconds (several
timer ticks, each with a good chance of finding a batch open); the store
must stay up, answer every request in order, and keep the writes.
No ACL file: any client may write (the loopback default)."""
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store_helpers import Store, Tap, TempDir, need_store  # noqa: E402

redis = need_store()

SECONDS = 4.0   # the flush timer ticks every second
CLIENTS = 4
PIPELINE = 400  # requests per pipeline (100 batches of 4)


def enc(*args):
    """One RESP request."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def client(port, n, errors, rounds):
    """Pipelines FSETs (odd) and FGETs (even) on its own fence until the
    time is up; every reply must be +OK or the value just written."""
    try:
        s = socket.create_connection(("127.0.0.1", port), 10)
        s.settimeout(30)
        f = s.makefile("rb")
        token = 0
        deadline = time.monotonic() + SECONDS
        while time.monotonic() < deadline:
            req = b""
            want = []
            for i in range(PIPELINE // 2):
                token += 1
                v = b"v%d" % token
                req += enc("FSET", "pf%d" % n, token, "pk%d" % n, v)
                req += enc("FGET", "pk%d" % n)
                want += [b"+OK\r\n", b"$%d\r\n" % len(v) + v + b"\r\n"]
            s.sendall(req)
            for w in want:
                line = f.readline()
                if not line:
                    raise EOFError("connection closed")
                if line.startswith(b"$"):
                    line += f.readline()
                if line != w:
                    raise ValueError("got %r, want %r" % (line, w))
            rounds[n] += 1
        s.close()
        return token
    except Exception as e:  # noqa: BLE001
        errors.append("client %d: %r" % (n, e))
        return 0


def main():
    tap = Tap()
    with TempDir() as tmp:
        st = Store(tmp, flags=["--max-pipeline", "4"])
        st.start()
        errors = []
        rounds = [0] * CLIENTS
        threads = [threading.Thread(target=client, args=(st.port, n, errors, rounds))
                   for n in range(CLIENTS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        tap.eq([], errors[:3], "pipelined writes over several flush-timer ticks: "
               "every reply in order (%s rounds)" % rounds)
        tap.check(st.proc.poll() is None, "fence-store still running",
                  open(st.log).read()[-2000:])
        if st.proc.poll() is None:
            r = redis.Redis(host="127.0.0.1", port=st.port)
            tap.check(all(r.execute_command("FENCE.HIGH", "pf%d" % n) > 0
                          for n in range(CLIENTS)), "every client's writes are there")
            r.close()
            st.stop()
    tap.finish()


main()
