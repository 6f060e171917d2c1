#!/usr/bin/python3
"""Before login, almost nothing (issue 18, section 5), against real fenced
and fence-store processes with --acl-file.

  - N connections that have not logged in each send most of a big request
    (fenced: 60 bulks of 65,000 bytes, 3.9 MB; fence-store: an FSET with a
    1 MB value): each is refused at once with -NOAUTH naming the pre-login
    limit, the daemon's peak RSS (VmHWM in /proc/PID/status) stays within
    a bound of its RSS before, and once they close the RSS is back near
    where it was;
  - a user who logs in still sends big requests, also pipelined right
    behind its AUTH in one write;
  - 300 connections not logged in, each holding a read buffer, under a
    --max-conn-memory of 4 MiB (their share: 256 KiB), do not keep a user
    from logging in: the oldest of them make room;
  - HELLO before login says nothing about the server: -NOAUTH for HELLO
    and HELLO 2; HELLO 2 AUTH user pass and HELLO after AUTH answer the
    full map (server name and version).
"""
# serial: it measures the daemons' memory
import os
import select
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from fencetest import Tap, binary, free_port, make_tmp, read_log, spawn, stop_process, wait_up  # noqa: E402

FENCED = binary("fenced", env="FENCED")
FENCE_STORE = binary("fence-store", env="FENCE_STORE")
TMP = make_tmp("fence-prelogin.")
N = 200                     # unauthenticated connections
N_USERS = 50                # logged-in connections with big buffers
RSS_BOUND = 64 << 20        # peak growth allowed while they attack
RSS_AFTER = 32 << 20        # growth left once they closed
ACL = "user admin on >adm1n-pw-x ~* +@all\n"

t = Tap()


def status_kb(pid, field):
    """A field of /proc/PID/status in bytes (VmRSS, VmHWM)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def start(binpath, name):
    port = free_port()
    log = os.path.join(TMP, name + ".log")
    acl = os.path.join(TMP, name + ".acl")
    with open(acl, "w") as f:
        f.write(ACL)
    proc = spawn([binpath, "--port", str(port), "--data-dir", os.path.join(TMP, name),
                  "--acl-file", acl], log, stdin=subprocess.DEVNULL)
    state = wait_up(proc, lambda: login(port).close(), 20, 0.05)
    if state != "up":
        raise RuntimeError("%s did not start: %s" % (name, read_log(log)))
    return proc, port, log


def recv_reply(s, timeout=10):
    """One line of reply (up to CRLF), b"" when the peer closed first."""
    s.settimeout(timeout)
    got = b""
    while not got.endswith(b"\r\n"):
        d = s.recv(65536)
        if not d:
            break
        got += d
    return got


def login(port):
    s = socket.create_connection(("127.0.0.1", port), 2)
    s.sendall(b"AUTH admin adm1n-pw-x\r\n")
    if recv_reply(s, 2) != b"+OK\r\n":
        s.close()
        raise OSError("not logged in")
    return s


def encode(*args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def flood(port, payload, n=None, first=b""):
    """N connections each send as much of payload as the daemon takes;
    returns the sockets.  Sending stops per socket when it would block
    twice in a row with no progress, or fails."""
    socks = []
    for _ in range(n or N):
        s = socket.create_connection(("127.0.0.1", port))
        if first:
            s.sendall(first)
            recv_reply(s, 5)
        s.setblocking(False)
        socks.append([s, 0, 0])
    view = memoryview(payload)
    active = list(socks)
    end = time.monotonic() + 30
    while active and time.monotonic() < end:
        _, w, _ = select.select([], [x[0] for x in active], [], 0.5)
        nxt = []
        for x in active:
            s = x[0]
            if s not in w:
                x[2] += 1
                if x[2] < 4:
                    nxt.append(x)
                continue
            try:
                n = s.send(view[x[1]:x[1] + 262144])
                x[1] += n
                x[2] = 0
                if x[1] < len(payload):
                    nxt.append(x)
            except BlockingIOError:
                x[2] += 1
                if x[2] < 4:
                    nxt.append(x)
            except OSError:
                pass
        active = nxt
    return [x[0] for x in socks]


def attack(binpath, name, payload):
    proc, port, log = start(binpath, name)
    rss0 = status_kb(proc.pid, "VmRSS")
    t.note("%s: before the attack RSS %.1f MiB, peak so far %.1f MiB"
           % (name, rss0 / 1048576.0, status_kb(proc.pid, "VmHWM") / 1048576.0))
    socks = flood(port, payload)
    replies = []
    for s in socks:
        s.setblocking(True)
        try:
            replies.append(recv_reply(s, 10))
        except OSError:
            replies.append(b"(timeout)")
    hwm = status_kb(proc.pid, "VmHWM")
    refused = [r for r in replies if r.startswith(b"-NOAUTH") and b"before login" in r]
    t.eq(N, len(refused), "%s: %d connections not logged in sending big requests are each "
         "refused with -NOAUTH naming the pre-login limit" % (name, N),
         sorted(set(r[:120] for r in replies))[:3])
    t.check(hwm - rss0 < RSS_BOUND, "%s: peak RSS grows by under %d MiB while they send "
            "(before %.1f MiB, peak %.1f MiB)" % (name, RSS_BOUND >> 20, rss0 / 1048576.0,
                                                  hwm / 1048576.0))
    for s in socks:
        s.close()
    # The memory goes back: wait (bounded) for the RSS to settle near rss0.
    end = time.monotonic() + 10
    rss1 = status_kb(proc.pid, "VmRSS")
    while rss1 - rss0 >= RSS_AFTER and time.monotonic() < end:
        time.sleep(0.1)
        rss1 = status_kb(proc.pid, "VmRSS")
    t.check(rss1 - rss0 < RSS_AFTER, "%s: once they closed, RSS is within %d MiB of before "
            "(%.1f MiB)" % (name, RSS_AFTER >> 20, rss1 / 1048576.0))
    t.note("%s: RSS before %.1f MiB, peak %.1f MiB, after close %.1f MiB"
           % (name, rss0 / 1048576.0, hwm / 1048576.0, rss1 / 1048576.0))
    # Logged-in users may hold big buffers; closed, they are given back.
    socks = flood(port, payload, N_USERS, b"AUTH admin adm1n-pw-x\r\n")
    peak = status_kb(proc.pid, "VmRSS")
    for s in socks:
        s.close()
    end = time.monotonic() + 10
    rss2 = status_kb(proc.pid, "VmRSS")
    while rss2 - rss0 >= RSS_AFTER and time.monotonic() < end:
        time.sleep(0.1)
        rss2 = status_kb(proc.pid, "VmRSS")
    t.check(rss2 - rss0 < RSS_AFTER, "%s: %d logged-in connections with big buffers closed: "
            "RSS is back within %d MiB of before (%.1f MiB; %.1f MiB while open)"
            % (name, N_USERS, RSS_AFTER >> 20, rss2 / 1048576.0, peak / 1048576.0))
    return proc, port, log


def hello_checks(name, port):
    s = socket.create_connection(("127.0.0.1", port), 5)
    for req, what in ((b"HELLO\r\n", "HELLO"), (b"HELLO 2\r\n", "HELLO 2")):
        s.sendall(req)
        r = recv_reply(s)
        t.check(r.startswith(b"-NOAUTH"), "%s: %s before login: -NOAUTH" % (name, what), r)
    s.sendall(encode("HELLO", "2", "AUTH", "admin", "adm1n-pw-x"))
    s.settimeout(5)
    r = b""
    while b"modules" not in r:
        d = s.recv(4096)
        if not d:
            break
        r += d
    t.check(r.startswith(b"*14\r\n") and b"version" in r,
            "%s: HELLO 2 AUTH user pass answers the full map" % name, r[:80])
    s.sendall(b"HELLO\r\n")
    r = b""
    while b"modules" not in r:
        d = s.recv(4096)
        if not d:
            break
        r += d
    t.check(r.startswith(b"*14\r\n"), "%s: HELLO after login answers the full map" % name,
            r[:80])
    s.close()
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.sendall(b"HELLO 3\r\n")
    r = recv_reply(s)
    t.check(r.startswith(b"-NOAUTH"), "%s: HELLO 3 before login: -NOAUTH (no protocol "
            "details)" % name, r)
    s.close()


# ---- fenced --------------------------------------------------------------------------
big = b"*60\r\n" + b"".join(b"$65000\r\n" + b"x" * 65000 + b"\r\n" for _ in range(59)) + \
    b"$65000\r\n" + b"x" * 60000
proc, port, log = attack(FENCED, "fenced", big)
s = login(port)
echo = b"y" * 60000
s.sendall(encode("ECHO", echo))
s.settimeout(10)
r = b""
while len(r) < len(echo) + 10:
    d = s.recv(65536)
    if not d:
        break
    r += d
t.check(r.startswith(b"$60000\r\n"), "fenced: a logged-in user still sends a 60 kB bulk", r[:40])
s.close()
s = socket.create_connection(("127.0.0.1", port), 5)
s.sendall(b"AUTH admin adm1n-pw-x\r\n" + encode("ECHO", echo))
r = b""
while len(r) < len(echo) + 15:
    d = s.recv(65536)
    if not d:
        break
    r += d
t.check(r.startswith(b"+OK\r\n$60000\r\n"), "fenced: a big request pipelined right behind "
        "AUTH in one write is served", r[:40])
s.close()
hello_checks("fenced", port)
stop_process(proc)

# Strangers holding buffers cannot keep a user out: with --max-conn-memory 4 MiB
# (their share 256 KiB), 300 connections not logged in each send one byte of a
# request; the oldest of them make room, and a user still logs in and works.
def crowd(binpath, name):
    port = free_port()
    lg = os.path.join(TMP, name + "-crowd.log")
    acl = os.path.join(TMP, name + "-crowd.acl")
    with open(acl, "w") as f:
        f.write(ACL)
    p = spawn([binpath, "--port", str(port), "--data-dir", os.path.join(TMP, name + "-crowd"),
               "--acl-file", acl, "--max-conn-memory", str(4 << 20)], lg,
              stdin=subprocess.DEVNULL)
    if wait_up(p, lambda: login(port).close(), 20, 0.05) != "up":
        raise RuntimeError("%s did not start: %s" % (name, read_log(lg)))
    hogs = []
    for _ in range(300):
        h = socket.create_connection(("127.0.0.1", port), 5)
        h.sendall(b"P")
        hogs.append(h)
    last = socket.create_connection(("127.0.0.1", port), 5)
    try:
        last.sendall(b"PING\r\n")
        r = recv_reply(last, 5)
    except OSError as e:
        r = repr(e).encode()
    ok = False
    try:
        u = login(port)
        u.sendall(encode("PING"))
        ok = recv_reply(u, 5) == b"+PONG\r\n" and r == b"+PONG\r\n"
        u.close()
    except OSError as e:
        t.note("%s: %r" % (name, e))
    t.check(ok, "%s: 300 connections not logged in holding buffers (--max-conn-memory 4 MiB) "
            "do not keep a user from logging in (the oldest make room)" % name, r)
    rd, _, _ = select.select(hogs, [], [], 1.0)
    t.note("%s: %d of the 300 were closed" % (name, len(rd)))
    for h in hogs:
        h.close()
    last.close()
    stop_process(p)


crowd(FENCED, "fenced")
crowd(FENCE_STORE, "fence-store")

# ---- fence-store ---------------------------------------------------------------------
value = 1000000
big = (b"*5\r\n$4\r\nFSET\r\n$1\r\nf\r\n$1\r\n1\r\n$1\r\nk\r\n$%d\r\n" % value) + b"v" * 900000
sproc, sport, slog = attack(FENCE_STORE, "store", big)
s = login(sport)
s.sendall(encode("FSET", "f", "1", "k", b"v" * value))
t.eq(b"+OK\r\n", recv_reply(s), "fence-store: a logged-in user still writes a 1 MB value")
s.close()
s = socket.create_connection(("127.0.0.1", sport), 5)
s.sendall(b"AUTH admin adm1n-pw-x\r\n" + encode("FSET", "f", "1", "k2", b"w" * value))
r = recv_reply(s)
r += recv_reply(s) if r == b"+OK\r\n" else b""
t.eq(b"+OK\r\n+OK\r\n", r, "fence-store: a 1 MB FSET pipelined right behind AUTH is served")
s.close()
hello_checks("fence-store", sport)
stop_process(sproc)

for lg in (log, slog):
    t.check("adm1n-pw-x" not in read_log(lg), "no password in %s" % os.path.basename(lg))
t.finish()
