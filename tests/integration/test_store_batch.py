#!/usr/bin/python3
"""fence-store group commit: requests that share one batch (one LMDB
transaction, one fsync) get exactly the replies a serial execution gives,
in order; a batch that cannot commit (the map fills up in the middle of it)
is replayed one request at a time, so only the writes that do not fit fail.

Pipelined requests sent in one write reach the server in one read, so they
are run in one loop turn: one batch."""
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store_helpers import Store, Tap, TempDir, need_store  # noqa: E402

redis = need_store()


def enc(*args):
    """One RESP request."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def read_reply(f):
    """One RESP2 reply: bytes for simple/bulk, int, None, or ('ERR', text)."""
    line = f.readline()
    if not line:
        raise EOFError("connection closed")
    t, rest = line[:1], line[1:-2]
    if t == b"+":
        return rest
    if t == b"-":
        return ("ERR", rest.decode())
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:n]
    raise ValueError("unexpected reply %r" % line)


def pipeline(port, reqs):
    """Send every request in one write; read every reply."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    f = s.makefile("rb")
    s.sendall(b"".join(enc(*r) for r in reqs))
    out = [read_reply(f) for _ in reqs]
    s.close()
    return out


def main():
    tap = Tap()
    with TempDir() as tmp:
        s = Store(tmp, "batch")
        s.start()
        reqs = [
            ("FSET", "f", 5, "a", "1"),
            ("FSET", "f", 4, "a", "2"),        # stale: the mark is 5 now
            ("FINCR", "f", 5, "c"),
            ("FINCR", "f", 5, "c"),
            ("FGET", "a"),                     # sees the FSET before it
            ("FSET", "g", 1, "a", "x"),        # a belongs to f
            ("FDEL", "f", 6, "a"),
            ("FGET", "a"),
            ("FSET", "g", 9, "a", "y"),        # still f's after FDEL
            ("FENCE.HIGH", "f"),
            ("FINCR", "f", 6, "a2"),
            ("FSET", "f", 6, "a2", "notint"),
            ("FINCR", "f", 6, "a2"),           # not an integer now
            ("FGET", "c"),
            ("PING",),
        ]
        got = pipeline(s.port, reqs)
        want = [b"OK", "STALE", 1, 2, b"1", "WRONGFENCE", 1, None, "WRONGFENCE",
                6, 1, b"OK", "ERR", b"2", b"PONG"]
        same = len(got) == len(want) and all(
            (isinstance(w, str) and isinstance(g, tuple) and g[1].startswith(w)) or g == w
            for g, w in zip(got, want))
        tap.check(same, "one pipelined batch: the replies of a serial run, in order",
                  "%r" % (got,))
        r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)
        info = r.info()
        tap.check(info.get("batched_requests", 0) > info.get("batches", 0),
                  "requests shared batches (INFO batched_requests %s > batches %s)" %
                  (info.get("batched_requests"), info.get("batches")))
        s.kill()
        s.start()
        r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)
        tap.check(r.execute_command("FGET", "c") == b"2" and
                  r.execute_command("FGET", "a") is None and
                  r.execute_command("FGET", "a2") == b"notint",
                  "the batch's writes survived kill -9")
        s.stop()

        # A map too small for the batch: the replay fails only what does not fit.
        s = Store(tmp, "full", flags=["--map-size", "1m", "--max-value", "64k"])
        s.start()
        val = b"v" * 60000
        reqs = []
        for i in range(30):
            reqs.append(("FSET", "f", 1, "big%d" % i, val))
            reqs.append(("FINCR", "f", 1, "n"))
        got = pipeline(s.port, reqs)
        bad = []
        acked = []
        last_n = 0
        fulls = 0
        for req, rep in zip(reqs, got):
            if isinstance(rep, tuple):
                if not rep[1].startswith("FULL"):
                    bad.append((req[0], req[3], rep))
                fulls += 1
            elif req[0] == "FSET":
                if rep != b"OK":
                    bad.append((req[0], req[3], rep))
                acked.append(req[3])
            else:
                if rep != last_n + 1:   # a serial run counts without gaps
                    bad.append((req[0], rep, last_n))
                last_n = rep
        tap.check(not bad and fulls > 0 and len(acked) >= 3 and last_n >= 3,
                  "a full map mid-batch: each reply is +OK/-FULL, the counter has no gaps "
                  "(%d FSETs acknowledged, %d -FULL, counter %d)" % (len(acked), fulls, last_n),
                  "%r" % (bad[:4],))
        r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)
        tap.check(int(r.info().get("batch_replays", 0)) >= 1,
                  "the batch that did not fit was replayed (INFO batch_replays)")
        s.kill()
        s.start()
        r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=30)
        lost = [k for k in acked if r.execute_command("FGET", k) != val]
        n = r.execute_command("FGET", "n")
        tap.check(not lost and n is not None and int(n) == last_n,
                  "after kill -9: every acknowledged write of the replayed batch is there",
                  "lost %r, counter %r (acked %d)" % (lost[:3], n, last_n))
        s.stop()
    tap.finish()


if __name__ == "__main__":
    main()
