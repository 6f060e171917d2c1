#!/usr/bin/python3
"""fenced cluster over the mutual-TLS raft transport (--peer-tls-*).

A test CA and one certificate per node (CN node-<id>) are made with openssl,
plus a second, unrelated CA.  A 3-node cluster runs with them and must:

- elect a leader, replicate and serve locks under load from 8 clients;
- keep its leader and term while a stranger connects to every raft port
  and sends garbage, a forged plaintext raft handshake followed by a 72-byte
  TimeoutNow and a RequestVote with a huge term, a TLS client without a
  certificate and a TLS client with a certificate of the other CA; every
  attempt is refused and logged ("raft peer ... refused: ...");
- fail over after kill -9 of the leader, under TLS;
- refuse the killed node when it comes back with a certificate of the other
  CA (it cannot rejoin, nor disturb the term), and take it back, caught up,
  with its own certificate;
- refuse to start with only some of the peer-tls files.
"""
import os
import signal
import socket
import ssl
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import (CLUSTERS, FENCED, TMP, Client, Cluster, Load, Tap,  # noqa: E402
                              read_log, run_main)
from fencetest import wait_for  # noqa: E402


def openssl(*args):
    """Run the openssl command line tool quietly."""
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_ca(name):
    """A self-signed CA (EC P-256) in TMP; returns (cert, key)."""
    crt, key = os.path.join(TMP, name + ".crt"), os.path.join(TMP, name + ".key")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=" + name)
    return crt, key


def make_cert(ca, cn, name):
    """A certificate with common name cn signed by ca; returns (cert, key)."""
    crt, key = os.path.join(TMP, name + ".crt"), os.path.join(TMP, name + ".key")
    csr = os.path.join(TMP, name + ".csr")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=" + cn)
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
            "-out", crt, "-days", "2")
    return crt, key


def tls_flags(cert, ca):
    """The --peer-tls-* flags for one node."""
    return ["--peer-tls-cert", cert[0], "--peer-tls-key", cert[1], "--peer-tls-ca", ca[0]]


def send_raw(port, data):
    """Connect to 127.0.0.1:port, send data, read until the peer closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=3)
    try:
        s.sendall(data)
        while s.recv(4096):
            pass
    except OSError:
        pass
    finally:
        s.close()


def forged(leader_id, addr, huge_term=False):
    """raft_uv_tcp's plaintext handshake claiming leader_id, then a
    TimeoutNow (or a RequestVote with a huge term): what moved or deposed a
    leader over the old transport."""
    a = addr.encode() + b"\0"
    a += b"\0" * (-len(a) % 8)
    hs = struct.pack("<QQQ", 1, leader_id, len(a)) + a
    if huge_term:  # RequestVote: term, candidate, last index, last term, flags
        body = struct.pack("<QQQQQ", 1 << 60, leader_id, 1 << 40, 1 << 59, 0)
        hdr = struct.pack("<BBHIQ", 1, 2, 0, 0, len(body))
    else:  # TimeoutNow: term, last log index, last log term
        body = struct.pack("<QQQ", 1 << 20, 1 << 40, 1 << 20)
        hdr = struct.pack("<BBHIQ", 6, 1, 0, 0, len(body))
    return hs + hdr + body


def hello(node_id, addr):
    """The transport's hello (inside TLS) claiming node_id."""
    a = addr.encode()
    return b"FNCR" + struct.pack(">IQH", 1, node_id, len(a)) + a


def tls_try(port, cert=None, payload=b"hello raft\n" * 4):
    """A TLS 1.3 client (verifying nothing) with an optional certificate:
    handshake, send payload, read until closed.  Returns what it read."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert[0], cert[1])
    got = b""
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=3)
        with ctx.wrap_socket(raw) as s:
            s.sendall(payload)
            while True:
                b = s.recv(4096)
                if not b:
                    break
                got += b
    except (OSError, ssl.SSLError):
        pass
    return got


def refusals(node):
    """Number of "refused" lines in a node's log."""
    return read_log(node.log).count("refused:")


def views(cl):
    """(leader_id, term) as every live node reports it."""
    out = {}
    for n in cl.live():
        f, _ = n.cinfo()
        out[n.id] = (f.get("leader_id"), f.get("term")) if f else None
    return out


def main():
    """Run the scenario; see the module docstring."""
    t = Tap()
    ca = make_ca("cluster-ca")
    evil = make_ca("other-ca")
    certs = {i: make_cert(ca, "node-%d" % i, "node%d" % i) for i in (1, 2, 3)}
    stranger = make_cert(ca, "node-9", "stranger9")
    evil_cert = {i: make_cert(evil, "node-%d" % i, "evil%d" % i) for i in (1, 2, 3)}

    # Only some of the files: a configuration error, not a plaintext cluster.
    p = subprocess.run([FENCED, "--peer-tls-cert", certs[1][0], "--raft-port", "1"],
                       capture_output=True, text=True, timeout=10)
    t.check(p.returncode != 0 and "go together" in p.stderr,
            "fenced refuses --peer-tls-cert without the key and CA", p.stderr)

    # A raft port on a non-loopback address without mutual TLS: refused
    # (any TCP client could speak raft to it) unless --insecure.
    peers = "1=10.77.9.1:7700/7800,2=10.77.9.2:7700/7800,3=10.77.9.3:7700/7800"
    p = subprocess.run([FENCED, "--node-id", "1", "--peers", peers, "--data-dir",
                        os.path.join(TMP, "raft-bind")],
                       capture_output=True, text=True, timeout=10)
    t.check(p.returncode != 0 and "peer-tls-cert" in p.stderr and "--insecure" in p.stderr,
            "a non-loopback raft port without peer TLS is refused, naming the fix", p.stderr)

    cl = Cluster(3, args=["--election-timeout-ms", "1000"])
    for i, n in cl.nodes.items():
        n.args = tls_flags(certs[i], ca)
    cl.start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "mTLS 3-node cluster elects a leader"):
        t.finish()
    t.check(all("mutual TLS on" in read_log(n.log) for n in cl.live()),
            "every node logs its raft transport as mutual TLS")
    t.check(all("authenticated" in read_log(n.log) for n in cl.live()),
            "peers log each other as authenticated")

    c = Client(cl.addrs())
    lease = c.call("LEASE.GRANT", 120000)
    tok = int(c.call("LOCK", "tls.a", lease))
    t.check(tok > 0, "a lock is granted through the TLS cluster (token %d)" % tok)
    for n in cl.live():
        cl.wait_caught_up(n)
    load = Load(cl.addrs(), n=8, ttl_ms=8000).start()
    wait_for(lambda: load.ops >= 8)  # the clients are at work

    # Stable state before the attacks: every node names the leader.
    v0 = {}

    def stable():
        v0.clear()
        v0.update(views(cl))
        return all(x and x[0] == str(ldr.id) for x in v0.values())
    wait_for(stable)
    term0 = v0[ldr.id][1]
    before = {n.id: refusals(n) for n in cl.live()}

    attacks = 0
    for rnd in range(3):
        for n in cl.live():
            send_raw(n.raft_port, os.urandom(512))
            send_raw(n.raft_port, b"GET / HTTP/1.0\r\n\r\n")
            send_raw(n.raft_port, forged(ldr.id, ldr.raft_addr))
            send_raw(n.raft_port, forged(ldr.id, ldr.raft_addr, huge_term=True))
            got_nocert = tls_try(n.raft_port)
            got_evil = tls_try(n.raft_port, evil_cert[ldr.id])
            # A good-CA certificate whose CN names another node than the
            # one its hello claims is refused too (the name check).
            tls_try(n.raft_port, stranger, hello(ldr.id, ldr.raft_addr) + os.urandom(72))
            attacks += 7
            if rnd == 0 and n is ldr:
                t.eq(b"", got_nocert, "a TLS client without a certificate gets no bytes")
                t.eq(b"", got_evil, "a TLS client with another CA's certificate gets no bytes")
        # The next round once this one's refusals are logged everywhere.
        wait_for(lambda: all(refusals(n) - before[n.id] >= 7 * (rnd + 1) for n in cl.live()))

    # Refusals are logged (each attempt once, on the node attacked).
    got = {}

    def all_logged():
        got.clear()
        got.update({n.id: refusals(n) - before[n.id] for n in cl.live()})
        return all(g >= 21 for g in got.values())
    wait_for(all_logged)
    t.check(all(g >= 21 for g in got.values()),
            "every node logs each of its 21 refused connections", got)
    text = read_log(ldr.log)
    t.check("does not name node-%d" % ldr.id in text,
            "a cluster certificate for node-9 claiming node %d is refused" % ldr.id)
    t.check("refused: certificate" in text or "certificate required" in text
            or "peer did not return a certificate" in text,
            "a missing client certificate is named in the log")
    t.check("unknown ca" in text or "certificate verify failed" in text
            or "unable to get local issuer" in text,
            "a certificate of another CA is named in the log")

    v1 = views(cl)
    t.eq(v0, v1, "leader and term unchanged by the attacks (term %s)" % term0)
    with load.lock:
        ops_mid = load.ops
    wait_for(lambda: load.ops > ops_mid, timeout=10)
    with load.lock:
        ops_after = load.ops
    t.check(ops_after > ops_mid, "clients keep making progress (%d -> %d ops)"
            % (ops_mid, ops_after))
    info = c.call("LOCK.INFO", "tls.a")
    t.check(isinstance(info, list) and str(info[0]) == str(tok),
            "the first lock is still held with its token", info)

    # kill -9 of the leader still fails over under TLS.
    ldr.kill()
    new = cl.wait_leader(among=cl.live())
    t.check(new is not None and new.id != ldr.id,
            "kill -9 of the leader: a new leader is elected over TLS")
    ops_fail = load.ops
    wait_for(lambda: load.ops >= ops_fail + 8)  # the clients go on after it
    load.stop()
    t.eq([], load.errors, "no client errors through attacks and failover")
    t.check(load.ops > 0, "%d lock operations done" % load.ops)
    c2 = Client(cl.addrs())
    lease2 = c2.call("LEASE.GRANT", 5000)
    t.check(int(c2.call("LOCK", "tls.after", lease2)) > tok,
            "the new leader grants with a larger token")

    # The killed node comes back with another CA's certificate: refused
    # both ways, and it cannot move the survivors' term.
    vb = views(cl)
    r_before = {n.id: refusals(n) for n in cl.live()}
    ldr.args = tls_flags(evil_cert[ldr.id], evil)
    ldr.start()
    survivors = [n for n in cl.live() if n is not ldr]
    # Several of its election timeouts: each survivor refused it 3 times
    # (pre-vote: its term does not move, its attempts do), and it refused them.
    wait_for(lambda: all(refusals(n) >= r_before[n.id] + 3 for n in survivors)
             and ldr.log_since_start().count("refused:") > 0)
    t.check(all(refusals(n) > r_before[n.id] for n in survivors),
            "the survivors refuse the node with another CA's certificate")
    t.check(refusals(ldr) > 0, "that node refuses the survivors too")
    va = views(cl)
    t.eq({i: vb[i] for i in vb}, {i: va[i] for i in vb},
         "its elections do not disturb the survivors' leader and term")
    f, _ = ldr.cinfo()
    t.check(f is not None and f.get("leader_id") != str(new.id),
            "it never hears from the leader", f)
    ldr.kill()

    # With its own certificate it rejoins and catches up.
    ldr.args = tls_flags(certs[ldr.id], ca)
    ldr.start()
    ok, f = cl.wait_caught_up(ldr)
    t.check(ok, "back with its own certificate, it catches up", f)

    # A clean stop closes the TLS transport (pending connects cancelled,
    # every handle closed) and exits 0.
    codes = {}
    for n in cl.live():
        n.proc.send_signal(signal.SIGTERM)
        try:
            codes[n.id] = n.proc.wait(20)
        except subprocess.TimeoutExpired:
            codes[n.id] = "hung"
        n.proc = None
    t.eq({i: 0 for i in codes}, codes, "SIGTERM: every TLS node exits 0")
    t.finish()


if __name__ == "__main__":
    run_main(main, CLUSTERS)
