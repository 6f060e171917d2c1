#!/usr/bin/python3
"""The metrics and health port under idle sockets, and where it listens
(issue 18, section 5), with real fenced and fence-store processes:

  - it listens on loopback by default, also when --bind is 0.0.0.0
    (checked in /proc/net/tcp); --metrics-bind moves it;
  - with 100 idle sockets open on it, /health still answers at once
    (today nothing answers for 20 s once 32 are open);
  - idle sockets are closed by the daemon within a few seconds;
  - one remote (non-loopback) address holds at most 8 connections; the
    rest are closed at once, and /health still answers (skipped when the
    host has no non-loopback IPv4 address).
"""
# serial: it waits for idle timeouts
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
TMP = make_tmp("fence-metrics-port.")
IDLE = 100
PER_IP = 8

t = Tap()


def listen_addr(port):
    """The local address a LISTEN socket on port has in /proc/net/tcp:
    "127.0.0.1", "0.0.0.0", ... or None."""
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            parts = line.split()
            addr, p = parts[1].split(":")
            if int(p, 16) == port and parts[3] == "0A":
                b = bytes.fromhex(addr)[::-1]
                return ".".join(str(x) for x in b)
    return None


def http_get(host, port, path, timeout=3):
    """(status, seconds) of GET path, or (None, seconds)."""
    t0 = time.monotonic()
    try:
        s = socket.create_connection((host, port), timeout)
        s.settimeout(timeout)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path.encode())
        got = b""
        while b"\r\n" not in got:
            d = s.recv(4096)
            if not d:
                break
            got += d
        s.close()
        status = int(got.split()[1]) if got.startswith(b"HTTP/") else None
    except (OSError, ValueError, IndexError):
        status = None
    return status, time.monotonic() - t0


def start(binpath, name, args):
    port, mport = free_port(), free_port()
    log = os.path.join(TMP, name + ".log")
    proc = spawn([binpath, "--port", str(port), "--data-dir", os.path.join(TMP, name),
                  "--metrics-port", str(mport)] + args, log, stdin=subprocess.DEVNULL)
    state = wait_up(proc, lambda: socket.create_connection(("127.0.0.1", mport), 0.2).close(),
                    20, 0.05)
    if state != "up":
        raise RuntimeError("%s did not start: %s" % (name, read_log(log)))
    return proc, mport


def global_ipv4():
    """A non-loopback IPv4 address of this host, or None."""
    try:
        out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                             capture_output=True, text=True, timeout=5).stdout
    except OSError:
        return None
    for line in out.splitlines():
        w = line.split()
        if "inet" in w:
            return w[w.index("inet") + 1].split("/")[0]
    return None


def scenario(binpath, name):
    # Loopback by default, even with --bind 0.0.0.0.
    proc, mport = start(binpath, name + "-any", ["--bind", "0.0.0.0", "--insecure"])
    t.eq("127.0.0.1", listen_addr(mport), "%s: with --bind 0.0.0.0 the metrics port listens "
         "on loopback by default" % name)
    stop_process(proc)
    proc, mport = start(binpath, name + "-mb", ["--metrics-bind", "0.0.0.0"])
    t.eq("0.0.0.0", listen_addr(mport), "%s: --metrics-bind 0.0.0.0 moves it" % name)
    # Healthy first (fenced: a leader, ready), so that the answer under idle
    # sockets is about the sockets, not about start-up.
    for _ in range(600):
        if http_get("127.0.0.1", mport, "/health")[0] == 200:
            break
        time.sleep(0.05)
    # Idle sockets.
    idle = [socket.create_connection(("127.0.0.1", mport), 5) for _ in range(IDLE)]
    st, secs = http_get("127.0.0.1", mport, "/health")
    t.check(st == 200 and secs < 1.5, "%s: with %d idle sockets open, /health answers at once "
            "(%s in %.2f s)" % (name, IDLE, st, secs))
    t0 = time.monotonic()
    closed = 0
    for s in idle:
        s.settimeout(max(8 - (time.monotonic() - t0), 0.01))
        try:
            if s.recv(100) == b"":
                closed += 1
        except OSError:
            pass
        s.close()
    t.eq(IDLE, closed, "%s: the daemon closes idle sockets within 8 s (all of them in %.1f s)"
         % (name, time.monotonic() - t0))
    ip = global_ipv4()
    if ip is None:
        t.note("no non-loopback IPv4 address: the per-address limit is not checked")
    else:
        socks = []
        for _ in range(PER_IP + 12):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((ip, 0))
            s.settimeout(5)
            s.connect((ip, mport))
            socks.append(s)
        # Refused ones are closed at once (well within the 3 s idle
        # timeout of the accepted ones): collect the EOFs for 1 s.
        refused = set()
        end = time.monotonic() + 1.0
        while time.monotonic() < end and len(refused) < len(socks):
            rd, _, _ = select.select([s for s in socks if s not in refused], [], [],
                                     max(end - time.monotonic(), 0.01))
            for s in rd:
                try:
                    d = s.recv(100)
                except OSError:
                    d = b""
                if d == b"":
                    refused.add(s)
        t.eq(12, len(refused), "%s: one remote address (%s) holds at most %d connections; "
             "the rest are closed at once" % (name, ip, PER_IP))
        st, secs = http_get("127.0.0.1", mport, "/health")
        t.check(st == 200, "%s: /health still answers from loopback meanwhile" % name)
        for s in socks:
            s.close()
    stop_process(proc)


scenario(FENCED, "fenced")
scenario(FENCE_STORE, "fence-store")
t.finish()
