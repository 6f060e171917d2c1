#!/usr/bin/python3
"""A TLS client's real peer address (issue 20): CLIENT INFO / CLIENT LIST
show addr=127.0.0.1:<its port> (not unix:0) and laddr=127.0.0.1:<TLS port>
on fenced and fence-store, and LEASE.LIST shows the owner address of a
lease granted over TLS as 127.0.0.1:<port> (not unix); a TLS client that
sent HELLO 3 shows resp=3.  Certificates are made with openssl
(tls_certs.py).  Run with /usr/bin/python3 (python3-redis)."""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fencetest  # noqa: E402
from fencetest import (Tap, binary, free_port, make_tmp, need_module,  # noqa: E402
                       read_log, skip, spawn, stop_process, wait_port)
import tls_certs  # noqa: E402

redis = need_module("redis", "python3-redis")
FENCED = binary("fenced", env="FENCED")
STORE = binary("fence-store", env="FENCE_STORE")
if shutil.which("openssl") is None:
    skip("openssl is not installed")

TMP = make_tmp("fence-resp3-tls.")
CERTS = tls_certs.make(os.path.join(TMP, "certs"))
tap = Tap()
fencetest.exit_on_sigterm(1)


def start(prog, name):
    d = os.path.join(TMP, name)
    os.makedirs(d, exist_ok=True)
    port = free_port()
    argv = [prog, "--bind", "127.0.0.1", "--port", "0", "--tls-port", str(port),
            "--tls-cert", CERTS["server.crt"], "--tls-key", CERTS["server.key"],
            "--data-dir", os.path.join(d, "data")]
    log = os.path.join(d, "log")
    proc = spawn(argv, log, stdin=subprocess.DEVNULL)
    if not wait_port(port, step=0.03):
        raise RuntimeError("%s did not listen: %s" % (name, read_log(log)))
    return proc, port, log


def tls_conn(port):
    """A raw TLS socket (so that its local port is known)."""
    ctx = ssl.create_default_context(cafile=CERTS["ca.crt"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=20)
    return ctx.wrap_socket(raw, server_hostname="localhost")


def read_reply(f):
    """One reply from the buffered reader f: bytes for a string, int, list
    (a map as its flat list), None for nil."""
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise EOFError("connection closed: %r" % line)
    t, body = line[:1], line[1:-2]
    if t in (b"+", b"-", b"#", b","):
        return line[:-2]
    if t == b":":
        return int(body)
    if t == b"_":
        return None
    if t in (b"$", b"="):
        n = int(body)
        if n < 0:
            return None
        return f.read(n + 2)[:-2]
    if t in (b"*", b"~", b"%"):
        n = int(body) * (2 if t == b"%" else 1)
        return [read_reply(f) for _ in range(max(n, 0))]
    raise ValueError("bad reply %r" % line)


class Conn:
    """A TLS socket with a reply reader."""

    def __init__(self, port):
        self.sock = tls_conn(port)
        self.f = self.sock.makefile("rb")
        self.last_head = b""

    def call(self, *words):
        self.sock.sendall(b"*%d\r\n" % len(words) + b"".join(
            b"$%d\r\n%s\r\n" % (len(w), w) for w in (x.encode() for x in words)))
        self.last_head = self.f.peek(1)[:1]
        return read_reply(self.f)

    def close(self):
        self.f.close()
        self.sock.close()


def field(line, key):
    for part in line.split():
        if part.startswith(key + "="):
            return part[len(key) + 1:]
    return None


def client_info_checks(tag, port):
    s = Conn(port)
    me = "127.0.0.1:%d" % s.sock.getsockname()[1]
    info = s.call("CLIENT", "INFO").decode()
    tap.eq(me, field(info, "addr"), "%s: CLIENT INFO over TLS shows the peer address" % tag)
    tap.eq("127.0.0.1:%d" % port, field(info, "laddr"),
           "%s: CLIENT INFO over TLS shows the local address" % tag)
    hello = s.call("HELLO", "3")
    tap.check(s.last_head == b"%" and isinstance(hello, list) and len(hello) == 14,
              "%s: HELLO 3 over TLS answers a map" % tag, hello)
    other = redis.Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=CERTS["ca.crt"],
                        decode_responses=True, socket_timeout=20)
    lines = other.execute_command("CLIENT", "LIST")
    if isinstance(lines, list):  # redis-py parses CLIENT LIST itself
        mine = [c for c in lines if c.get("addr") == me]
        resp = mine[0].get("resp") if mine else None
    else:
        mine = [ln for ln in lines.splitlines() if field(ln, "addr") == me]
        resp = field(mine[0], "resp") if mine else None
    tap.check(len(mine) == 1, "%s: CLIENT LIST shows the TLS client by its address" % tag, lines)
    tap.eq("3", resp, "%s: CLIENT LIST shows resp=3 after HELLO 3" % tag)
    other.close()
    return s, me


fp, fport, flog = start(FENCED, "fenced")
sp, sport, slog = start(STORE, "store")
try:
    s, me = client_info_checks("fenced", fport)
    # LEASE.GRANT needs the leader: retry while it starts.
    lease = None
    r = None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until it leads (TRYAGAIN before)
        r = s.call("LEASE.GRANT", "30000")
        if isinstance(r, int):
            lease = r
            break
        time.sleep(0.05)
    tap.check(lease is not None, "fenced: LEASE.GRANT over TLS", r)
    c = redis.Redis(host="127.0.0.1", port=fport, ssl=True, ssl_ca_certs=CERTS["ca.crt"],
                    decode_responses=True, socket_timeout=20)
    lst = c.execute_command("LEASE.LIST")
    rows = [row for row in lst[1] if int(row[0]) == lease] if lease else []
    tap.check(len(rows) == 1 and rows[0][6] == me,
              "fenced: LEASE.LIST shows the TLS owner's address %s" % me, lst)
    c.close()
    s.close()
    s2, _ = client_info_checks("fence-store", sport)
    s2.close()
finally:
    tap.check(stop_process(fp) == 0, "fenced stops cleanly", read_log(flog)[-2000:])
    tap.check(stop_process(sp) == 0, "fence-store stops cleanly", read_log(slog)[-2000:])
tap.finish()
