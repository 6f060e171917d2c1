#!/usr/bin/python3
"""Randomized soak of one fenced: many clients doing everything at once.

24 clients (python3-redis and raw pipelining sockets) grant short leases,
keep some alive, lock with and without WAIT, unlock, ACQUIRE, revoke, read
LOCK.INFO/LEASE.INFO, and sometimes hang up while queued.  Checks: no
unexpected error, every token is returned once (REQID retries aside) and
tokens never repeat, no reply is misrouted (each raw pipeline gets its
replies in order), and once every lease has run out the server holds no
leases, locks or waiters (nothing leaked: cancelled waits, revoked ACQUIRE
leases).  FENCE_SOAK_SECONDS (default 4) sets the length; FENCE_SOAK_SEED
the seed (printed).
"""
import os
import random
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from test_fenced_lib import Fenced, Tap  # noqa: E402
from fencetest import wait_for  # noqa: E402

t = Tap()
SECONDS = float(os.environ.get("FENCE_SOAK_SECONDS", "4"))
SEED = int(os.environ.get("FENCE_SOAK_SEED", str(random.randrange(1 << 30))))
print("# seed %d (FENCE_SOAK_SEED=%d to replay the choices)" % (SEED, SEED))
srv = Fenced("soak", args=["--max-waiters", "64"]).start()
NAMES = ["s%d" % i for i in range(6)]
MAX_TTL = 800
tokens = []        # every token a client was told it holds
tok_lock = threading.Lock()
problems = []


def note_token(tok):
    """Remember a granted token."""
    with tok_lock:
        tokens.append(tok)


def client_loop(k, end):
    """Random operations with a redis-py client until end."""
    rnd = random.Random(SEED * 1000 + k)
    c = srv.client(socket_timeout=20)
    held = {}
    lease = None
    while time.monotonic() < end:
        op = rnd.random()
        try:
            if lease is None or op < 0.08:
                lease = c.execute_command("LEASE.GRANT", rnd.randrange(100, MAX_TTL))
                held = {}
            elif op < 0.40:
                name = rnd.choice(NAMES)
                args = ["LOCK", name, lease]
                if rnd.random() < 0.6:
                    args += ["WAIT", rnd.randrange(1, 400)]
                tok = c.execute_command(*args)
                if tok is not None:
                    if name not in held:
                        note_token(tok)
                    held[name] = tok
            elif op < 0.60 and held:
                name = rnd.choice(list(held))
                c.execute_command("UNLOCK", name, held.pop(name))
            elif op < 0.70:
                c.execute_command("LEASE.KEEPALIVE", lease)
            elif op < 0.78:
                r = c.execute_command("ACQUIRE", rnd.choice(NAMES), rnd.randrange(50, MAX_TTL),
                                      "WAIT", rnd.randrange(1, 300))
                if r is not None:
                    note_token(r[0])
                    if rnd.random() < 0.5:
                        c.execute_command("UNLOCK", rnd.choice(NAMES), r[0])
            elif op < 0.83:
                c.execute_command("LEASE.REVOKE", lease)
                lease = None
            elif op < 0.93:
                c.execute_command("LOCK.INFO", rnd.choice(NAMES))
                c.execute_command("LEASE.INFO", lease)
            else:
                # Hang up while (maybe) queued: the wait must be cancelled.
                s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
                s.sendall(("LOCK %s %d WAIT 5000\r\n" % (rnd.choice(NAMES), lease)).encode())
                time.sleep(rnd.random() * 0.05)
                s.close()
        except redis.ResponseError as e:
            if not str(e).startswith("NOLEASE"):
                problems.append("client %d: %s" % (k, e))
            lease = None if "NOLEASE" in str(e) else lease
            held = {} if lease is None else held
        except Exception as e:  # noqa: BLE001
            problems.append("client %d: %r" % (k, e))
            return
    c.close()


def pipe_loop(k, end):
    """Raw pipelines: bursts of PING n / LEASE.GRANT, replies checked in order."""
    rnd = random.Random(SEED * 1000 + 500 + k)
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
    f = s.makefile("rb")
    n = 0
    while time.monotonic() < end:
        burst = rnd.randrange(1, 60)
        want = []
        out = []
        for _ in range(burst):
            n += 1
            if rnd.random() < 0.5:
                out.append(b"PING p%d\r\n" % n)
                want.append(b"$")
            else:
                out.append(b"LEASE.GRANT 100\r\n")
                want.append(b":")
        s.sendall(b"".join(out))
        m = n - burst
        for w in want:
            m += 1
            line = f.readline()
            if not line.startswith(w):
                problems.append("pipe %d: got %r" % (k, line))
                return
            if w == b"$":
                body = f.readline()
                if body != b"p%d\r\n" % m:
                    problems.append("pipe %d: PING reply %r for p%d" % (k, body, m))
                    return
    s.close()


end = time.monotonic() + SECONDS
threads = [threading.Thread(target=client_loop, args=(k, end)) for k in range(20)]
threads += [threading.Thread(target=pipe_loop, args=(k, end)) for k in range(4)]
for th in threads:
    th.start()
for th in threads:
    th.join(SECONDS + 60)
t.check(not problems, "no unexpected errors or misrouted replies", "\n".join(problems[:10]))
t.check(len(tokens) > 50, "soak granted %d locks" % len(tokens))
t.eq(len(tokens), len(set(tokens)), "no token was handed out twice")
# Every lease is at most MAX_TTL long: after that (and the waits' 5 s), the
# state must be empty.
info = {}


def all_gone():
    info.clear()
    info.update(srv.info())
    return info["leases"] == "0" and info["locks"] == "0" and info["waiters"] == "0"


wait_for(all_gone)
t.eq(("0", "0", "0"), (info["leases"], info["locks"], info["waiters"]),
     "afterwards: no leases, locks or waiters left")
t.check(int(info["last_token"]) >= max(tokens or [0]), "last_token covers every token")
t.eq(0, srv.stop(), "clean exit")
t.finish()
