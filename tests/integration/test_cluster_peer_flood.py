#!/usr/bin/python3
# serial: counts writes made under a connection flood, each with a deadline
"""A 3-node mutual-TLS cluster keeps its writes while every raft port is
flooded with handshakes that never finish.

The flood (from 127.0.0.1, the members' own host, so no per-address rule can
tell it apart) opens about 100 connections a second to each raft port; every
other one sends a TLS ClientHello and then stalls, the rest send nothing.
Every flood loop stops by itself (a fixed number of connections, at most
FLOOD_MAX_S seconds).  Under it, one follower is restarted and the other is
killed, so the leader and the restarted follower must reconnect to each
other through the flood to make a quorum.  Then a fixed number of writes
(LEASE.GRANT, each given WRITE_DEADLINE_S) is tried and the writes that
succeed are counted; most must.  With handshake slots that a flood could
hold (before the oldest-first eviction), this made no write at all.
The evictions show in fenced_raft_peer_refusals_total{reason="evicted"}.
"""
import collections
import os
import socket
import ssl
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import (CLUSTERS, Client, Cluster, Tap, Unavailable,  # noqa: E402
                              free_port, run_main)
from test_cluster_tls import make_ca, make_cert, tls_flags  # noqa: E402

FLOOD_RATE = 100        # connections a second, per raft port
FLOOD_MAX_S = 90        # a flood loop never runs longer
FLOOD_OPEN_MAX = 300    # sockets a flood loop keeps open (it closes the oldest)
WRITES = 30             # write attempts under the flood
WRITE_DEADLINE_S = 1.0  # each attempt's deadline
WRITES_MIN = 20         # writes that must succeed


def client_hello():
    """The bytes of a TLS ClientHello (made with an in-memory TLS client)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out)
    try:
        obj.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return out.read()


class Flood:
    """One bounded flood loop against 127.0.0.1:port (a thread)."""

    def __init__(self, port, hello):
        self.port = port
        self.hello = hello
        self.stop_ev = threading.Event()
        self.made = 0
        self.th = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        socks = collections.deque()
        end = time.monotonic() + FLOOD_MAX_S
        gap = 1.0 / FLOOD_RATE
        nxt = time.monotonic()
        while not self.stop_ev.is_set() and time.monotonic() < end \
                and self.made < FLOOD_RATE * FLOOD_MAX_S:
            try:
                s = socket.create_connection(("127.0.0.1", self.port), timeout=0.5)
                if self.made % 2 == 0:
                    s.sendall(self.hello)
                socks.append(s)
            except OSError:
                pass
            self.made += 1
            while len(socks) > FLOOD_OPEN_MAX:
                socks.popleft().close()
            nxt += gap
            delay = nxt - time.monotonic()
            if delay > 0:
                self.stop_ev.wait(delay)
        for s in socks:
            s.close()

    def start(self):
        self.th.start()
        return self

    def stop(self):
        self.stop_ev.set()
        self.th.join(30)


def metric(node, name, label):
    """A labelled counter from node's /metrics (-1 when unreachable)."""
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % node.metrics_port,
                                      timeout=3).read().decode()
    except OSError:
        return -1
    for line in text.splitlines():
        if line.startswith(name + "{") and label in line:
            return int(float(line.split()[-1]))
    return 0


def main():
    """Run the scenario; see the module docstring."""
    t = Tap()
    ca = make_ca("flood-ca")
    certs = {i: make_cert(ca, "node-%d" % i, "fnode%d" % i) for i in (1, 2, 3)}
    cl = Cluster(3, args=["--election-timeout-ms", "1000"])
    for i, n in cl.nodes.items():
        n.metrics_port = free_port()
        n.args = tls_flags(certs[i], ca) + ["--metrics-port", str(n.metrics_port)]
    cl.start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "mTLS 3-node cluster elects a leader"):
        t.finish()
    c = Client(cl.addrs())
    t.check(int(c.call("LEASE.GRANT", 5000)) > 0, "a write before the flood")

    hello = client_hello()
    floods = [Flood(n.raft_port, hello).start() for n in cl.nodes.values()]
    try:
        # The slots fill within a second (32 of them, 100 connects/s).
        time.sleep(1.5)
        followers = [n for n in cl.live() if n is not ldr]
        f1, f2 = followers[0], followers[1]
        f1.kill()
        f1.start()
        f2.kill()
        live = [ldr, f1]
        cw = Client([n.addr for n in live], deadline_s=WRITE_DEADLINE_S, timeout_s=1.0)
        ok = 0
        for i in range(WRITES):
            try:
                if int(cw.call("LEASE.GRANT", 5000)) > 0:
                    ok += 1
            except Unavailable:
                pass
        made = sum(f.made for f in floods)
        t.check(all(f.th.is_alive() for f in floods),
                "the flood ran through all the attempts (%d connections so far)" % made)
        t.check(ok >= WRITES_MIN,
                "%d of %d writes succeed under the flood on every raft port, one "
                "follower restarted and the other killed (at least %d needed)"
                % (ok, WRITES, WRITES_MIN))
        ev = {n.id: metric(n, "fenced_raft_peer_refusals_total", 'reason="evicted"')
              for n in live}
        t.check(all(v > 0 for v in ev.values()),
                "the flooded nodes evicted stalled handshakes (reason=\"evicted\")", ev)
    finally:
        for f in floods:
            f.stop()
    t.check(not any(f.th.is_alive() for f in floods), "every flood loop stopped")

    # The killed follower comes back and catches up once the flood is over.
    f2.start()
    okc, f = cl.wait_caught_up(f2)
    t.check(okc, "the killed follower catches up after the flood", f)
    t.finish()


if __name__ == "__main__":
    run_main(main, CLUSTERS)
