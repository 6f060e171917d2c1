#!/usr/bin/python3
"""Failed logins (issue 18, section 5), against real fenced and fence-store
processes with --acl-file:

  - one connection guessing passwords as fast as it can gets a handful of
    -WRONGPASS answers, each later than the one before, and is closed
    after FENCE_AUTH_FAILS_MAX (5) failures (today: tens of thousands of
    guesses a second on one connection);
  - many connections from one address guessing at once are answered one
    after the other, not all at once;
  - the right password from the same address still logs in at once;
  - the failures are counted (fenced_auth_failures_total,
    fence_store_auth_failures_total on /metrics), logged with the user
    name and source address but never the password, and listed by
    ACL LOG (Redis's reply shape) to an @admin user, -NOPERM to others;
    ACL LOG RESET clears it;
  - an address beyond the 256 the failure table remembers does not start
    afresh: cycling through more addresses resets no delay.
"""
# serial: it measures answer delays
import os
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from fencetest import Tap, binary, free_port, make_tmp, read_log, spawn, stop_process, wait_up  # noqa: E402

FENCED = binary("fenced", env="FENCED")
FENCE_STORE = binary("fence-store", env="FENCE_STORE")
TMP = make_tmp("fence-authfail.")
WRONG = "guess-Pw-7f3a"        # the wrong password; must never reach a log
ACL = ("user admin on >adm1n-pw-x ~* +@all\n"
       "user alice on >al1ce-pw-x ~* +@all -@admin\n")
FAILS_MAX = 5

t = Tap()


def start(binpath, name):
    port, mport = free_port(), free_port()
    log = os.path.join(TMP, name + ".log")
    acl = os.path.join(TMP, name + ".acl")
    with open(acl, "w") as f:
        f.write(ACL)
    proc = spawn([binpath, "--port", str(port), "--data-dir", os.path.join(TMP, name),
                  "--acl-file", acl, "--metrics-port", str(mport)], log,
                 stdin=subprocess.DEVNULL)
    state = wait_up(proc, lambda: login(port, "admin", "adm1n-pw-x").close(), 20, 0.05)
    if state != "up":
        raise RuntimeError("%s did not start: %s" % (name, read_log(log)))
    return proc, port, mport, log


def read_reply(s):
    """One whole RESP reply (simple, error, integer, bulk or nested array)
    from socket s; b"" when the peer closed first."""
    buf = b""

    def need(pred):
        nonlocal buf
        while not pred():
            d = s.recv(65536)
            if not d:
                raise EOFError
            buf += d

    def parse(i):
        need(lambda: buf.find(b"\r\n", i) >= 0)
        j = buf.find(b"\r\n", i)
        kind, head = buf[i:i + 1], buf[i + 1:j]
        if kind in (b"+", b"-", b":"):
            return j + 2
        n = int(head)
        if kind == b"$":
            if n < 0:
                return j + 2
            need(lambda: len(buf) >= j + 2 + n + 2)
            return j + 2 + n + 2
        k = j + 2
        for _ in range(max(n, 0)):
            k = parse(k)
        return k

    try:
        end = parse(0)
    except EOFError:
        return b""
    return buf[:end]


def command(s, *args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    s.sendall(b"".join(out))
    return read_reply(s)


def login(port, user, pw):
    s = socket.create_connection(("127.0.0.1", port), 5)
    if command(s, "AUTH", user, pw) != b"+OK\r\n":
        s.close()
        raise OSError("not logged in")
    return s


def metric(mport, name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def scenario(binpath, name, metric_name):
    proc, port, mport, log = start(binpath, name)
    # One connection guessing as fast as it can until the server closes it
    # (30 s only bounds a hang: the delays add up to about 3 s, more on a
    # loaded machine or under ASan).
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.settimeout(5)
    answers, times, closed = 0, [], False
    t0 = time.monotonic()
    while time.monotonic() - t0 < 30:
        try:
            r = command(s, "AUTH", "alice", WRONG)
        except OSError:
            r = b""
        if r == b"":
            closed = True
            break
        if r.startswith(b"-WRONGPASS"):
            answers += 1
            times.append(time.monotonic() - t0)
    s.close()
    rate = answers / max(time.monotonic() - t0, 0.001)
    t.check(answers <= FAILS_MAX and closed,
            "%s: one connection guessing gets at most %d answers, then is closed "
            "(%d answers, %.1f guesses/s, closed: %s)" % (name, FAILS_MAX, answers, rate, closed))
    gaps = [b - a for a, b in zip([0.0] + times, times)]
    t.check(len(gaps) >= 3 and all(g2 > g1 for g1, g2 in zip(gaps, gaps[1:])) and gaps[0] >= 0.05,
            "%s: each answer to a failed login comes later than the one before" % name,
            ["%.3f" % g for g in gaps])
    # The right password from the same address is not slowed down.
    t1 = time.monotonic()
    adm = login(port, "admin", "adm1n-pw-x")
    t.check(time.monotonic() - t1 < 0.5, "%s: the right password from the same address logs "
            "in at once (%.3f s)" % (name, time.monotonic() - t1))
    # Many connections from one address guessing at once.
    many = [socket.create_connection(("127.0.0.1", port), 5) for _ in range(20)]
    for m in many:
        m.sendall(b"AUTH alice %s\r\n" % WRONG.encode())
    fast = 0
    deadline = time.monotonic() + 2
    for m in many:
        m.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            d = m.recv(100)
            if d.startswith(b"-WRONGPASS"):
                fast += 1
        except OSError:
            pass
        m.close()
    t.check(fast <= 3, "%s: 20 connections from one address guessing at once: at most 3 "
            "answered within 2 s (%d)" % (name, fast))
    # Counted, logged, listed.
    n = metric(mport, metric_name)
    t.check(n is not None and n >= answers + 20, "%s: %s counts the failures (%s)"
            % (name, metric_name, n))
    text = read_log(log)
    t.check("failed login as user 'alice' from 127.0.0.1:" in text,
            "%s: the log names the user and the source address" % name)
    t.check(WRONG not in text, "%s: the wrong password is not in the log" % name)
    r = command(adm, "ACL", "LOG")
    t.check(r.startswith(b"*") and b"$5\r\ncount\r\n" in r and b"$6\r\nreason\r\n$4\r\nauth\r\n" in r
            and b"$8\r\nusername\r\n$5\r\nalice\r\n" in r and b"client-info" in r
            and b"127.0.0.1" in r and WRONG.encode() not in r,
            "%s: ACL LOG shows an @admin the failed logins (user, reason, address)" % name, r[:200])
    r1 = command(adm, "ACL", "LOG", "1")
    t.check(r1.startswith(b"*1\r\n*20\r\n"), "%s: ACL LOG 1: one entry of 10 fields" % name,
            r1[:40])
    al = login(port, "alice", "al1ce-pw-x")
    r = command(al, "ACL", "LOG")
    t.check(r.startswith(b"-NOPERM"), "%s: ACL LOG to a user without @admin: -NOPERM" % name, r)
    al.close()
    t.eq(b"+OK\r\n", command(adm, "ACL", "LOG", "RESET"), "%s: ACL LOG RESET" % name)
    t.eq(b"*0\r\n", command(adm, "ACL", "LOG"), "%s: ACL LOG is empty after RESET" % name)
    many_addresses(port, name)
    adm.close()
    stop_process(proc)


def guess_from(addrs, port):
    """One connection from each source address in addrs (all loopback:
    127/8 reaches 127.0.0.1), each sending one wrong AUTH at once."""
    conns = []
    for a in addrs:
        m = socket.socket()
        m.bind((a, 0))
        m.connect(("127.0.0.1", port))
        m.sendall(b"AUTH alice %s\r\n" % WRONG.encode())
        conns.append(m)
    return conns


def answered_within(conns, secs):
    """How many of conns got -WRONGPASS within secs (the others are closed,
    or still waiting when the time is up)."""
    n = 0
    deadline = time.monotonic() + secs
    for m in conns:
        m.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            if m.recv(100).startswith(b"-WRONGPASS"):
                n += 1
        except OSError:
            pass
        m.close()
    return n


def many_addresses(port, name):
    """More source addresses than the failure table holds (256; 127.0.0.1
    is one already): cycling
    through them must not give fresh addresses a fresh first delay."""
    fill = ["127.0.%d.%d" % (1 + i // 200, 1 + i % 200) for i in range(262)]
    answered_within(guess_from(fill, port), 20)
    fresh = ["127.0.9.%d" % i for i in range(1, 21)]
    fast = answered_within(guess_from(fresh, port), 2)
    t.check(fast <= 3, "%s: after failures from 262 addresses, 20 fresh addresses guessing at "
            "once: at most 3 answered within 2 s (%d)" % (name, fast))


scenario(FENCED, "fenced", "fenced_auth_failures_total")
scenario(FENCE_STORE, "fence-store", "fence_store_auth_failures_total")
t.finish()
