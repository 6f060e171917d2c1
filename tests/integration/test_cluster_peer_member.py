#!/usr/bin/python3
"""Raft peers over mutual TLS are admitted by membership, not by a certificate.

A 3-node cluster runs with certificates node-1..3 of a test CA (openssl).
Attackers hold a certificate of the same CA and speak the transport's hello
correctly, then send a RequestVote with a huge term and disrupt_leader set
(what deposed a leader when any CA certificate was enough):

- node-9, a CA certificate whose CN matches the id its hello claims, but 9
  is no member: refused on every node ("not a member"), the leader and term
  stay, and fenced_raft_peer_refusals_total{reason="member"} counts it;
- node-2's own certificate and id, but from another loopback address
  (127.0.0.2) or claiming another raft address than the configured one:
  refused ("connects from another host" / "says it is at"), term unchanged;
- a member has at most 4 open connections (a newer one closes its oldest);
- a stranger's address holds at most 4 unfinished handshakes (its oldest
  are evicted), and a connection that sends nothing is dropped;
- a node added by CLUSTER.ADD (node-4, --join) is admitted and catches up,
  and once CLUSTER.REMOVE has taken it out, its certificate and hello are
  refused like node-9's.
Clients keep writing throughout.
"""
import os
import socket
import ssl
import struct
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import (CLUSTERS, Client, Cluster, Load, Node, Tap,  # noqa: E402
                              free_port, read_log, run_main)
from test_cluster_tls import hello, make_ca, make_cert, tls_flags, views  # noqa: E402

HUGE = 1 << 60


def request_vote(candidate, term):
    """A raft_uv RequestVote message (preamble: type 3 and body length as
    little-endian u64) from candidate at term, with a long log and the
    disrupt_leader flag, so a receiver that takes it steps down to term."""
    body = struct.pack("<QQQQQ", term, candidate, 1 << 40, term - 1, 1)
    return struct.pack("<QQ", 3, len(body)) + body


def attack(port, cert, node_id, addr, term, source="127.0.0.1"):
    """TLS with cert from source, the hello claiming (node_id, addr), a
    forged RequestVote; read until the node closes.  Returns the bytes read
    (raft answers a vote request it took)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(cert[0], cert[1])
    got = b""
    try:
        raw = socket.create_connection(("127.0.0.1", port), timeout=2,
                                       source_address=(source, 0))
        with ctx.wrap_socket(raw) as s:
            s.sendall(hello(node_id, addr) + request_vote(node_id, term))
            while True:
                b = s.recv(4096)
                if not b:
                    break
                got += b
    except (OSError, ssl.SSLError):
        pass
    return got


def metric(node, name, label):
    """A labelled counter from node's /metrics (0 when absent)."""
    try:
        text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % node.metrics_port,
                                      timeout=3).read().decode()
    except OSError:
        return -1
    for line in text.splitlines():
        if line.startswith(name + "{") and label in line:
            return int(float(line.split()[-1]))
    return 0


def max_term(cl):
    """The highest term any live node reports."""
    terms = [int(v[1]) for v in views(cl).values() if v and v[1]]
    return max(terms) if terms else -1


def wait_stable(cl, ldr, secs=10):
    """Wait until every live node names ldr as leader; returns the views."""
    end = time.monotonic() + secs
    v = views(cl)
    while time.monotonic() < end:
        v = views(cl)
        if all(x and x[0] == str(ldr.id) for x in v.values()):
            break
        time.sleep(0.05)
    return v


def count(node, text):
    """Occurrences of text in node's log."""
    return read_log(node.log).count(text)


def main():
    """Run the scenario; see the module docstring."""
    t = Tap()
    ca = make_ca("member-ca")
    certs = {i: make_cert(ca, "node-%d" % i, "mnode%d" % i) for i in (1, 2, 3, 4)}
    nine = make_cert(ca, "node-9", "mnode9")

    cl = Cluster(3, args=["--election-timeout-ms", "1000"])
    for i, n in cl.nodes.items():
        n.metrics_port = free_port()
        n.args = tls_flags(certs[i], ca) + ["--metrics-port", str(n.metrics_port)]
    cl.start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "mTLS 3-node cluster elects a leader"):
        t.finish()
    load = Load(cl.addrs(), n=4, ttl_ms=8000).start()
    v0 = wait_stable(cl, ldr)
    term0 = int(v0[ldr.id][1])

    # node-9: a good certificate, a hello that matches its CN, no member.
    got = b""
    for k in range(10):
        for n in cl.live():
            got += attack(n.raft_port, nine, 9, "127.0.0.1:%d" % free_port(), HUGE + k)
        time.sleep(0.1)
    t.eq(b"", got, "node-9's connections get no raft bytes back")
    v1 = views(cl)
    t.eq(v0, v1, "10 rounds of node-9 RequestVotes: leader and term unchanged (term %d)"
         % term0)
    t.check(max_term(cl) < HUGE, "no node took node-9's term")
    t.check(all(count(n, "node 9 is not a member") > 0 for n in cl.live()),
            "every node logs node 9 as not a member")
    m = {n.id: metric(n, "fenced_raft_peer_refusals_total", 'reason="member"')
         for n in cl.live()}
    t.check(all(v >= 10 for v in m.values()),
            "fenced_raft_peer_refusals_total{reason=\"member\"} counts them", m)

    # node-2's own certificate, from the wrong address.
    n2 = cl.nodes[2]
    others = [n for n in cl.live() if n is not n2]
    before_host = {n.id: count(n, "connects from another host") for n in others}
    before_addr = {n.id: count(n, "says it is at") for n in others}
    got = b""
    for k in range(5):
        for n in others:
            got += attack(n.raft_port, certs[2], 2, n2.raft_addr, HUGE + 100 + k,
                          source="127.0.0.2")
            got += attack(n.raft_port, certs[2], 2, "127.0.0.1:%d" % free_port(),
                          HUGE + 200 + k)
        time.sleep(0.1)
    t.eq(b"", got, "node-2's certificate from a wrong address gets no raft bytes back")
    t.check(all(count(n, "connects from another host") > before_host[n.id] for n in others),
            "a member's certificate from another host (127.0.0.2) is refused")
    t.check(all(count(n, "says it is at") > before_addr[n.id] for n in others),
            "a member's certificate claiming another raft address is refused")
    t.check(max_term(cl) < HUGE, "no node took the wrong-address RequestVotes' term")
    t.eq(v0, views(cl), "leader and term unchanged by the wrong-address attacks")
    a = {n.id: metric(n, "fenced_raft_peer_refusals_total", 'reason="address"')
         for n in others}
    t.check(all(v >= 10 for v in a.values()), "...counted as reason=\"address\"", a)

    # Handshake slots: a stranger's address (127.0.0.2 is no member's host)
    # keeps at most 4 unfinished handshakes; its older ones are evicted.
    # A silent connection is dropped at the first-byte deadline.
    tgt = cl.nodes[1]
    before_ev = count(tgt, "too many handshakes from its address")
    before_quiet = count(tgt, "sent nothing in time")
    socks = [socket.create_connection(("127.0.0.1", tgt.raft_port), timeout=10,
                                      source_address=("127.0.0.2", 0)) for _ in range(8)]
    end = time.monotonic() + 10
    while time.monotonic() < end and \
            count(tgt, "too many handshakes from its address") - before_ev < 4:
        time.sleep(0.05)
    t.eq(4, count(tgt, "too many handshakes from its address") - before_ev,
         "8 silent connections from a stranger's address: its 4 oldest are evicted")
    for s in socks:
        try:
            s.recv(1)  # returns at the server's close (the 1 s deadline)
        except OSError:
            pass
        s.close()
    t.check(count(tgt, "sent nothing in time") - before_quiet >= 4,
            "the other 4 are dropped for sending nothing in time")

    # Admitted connections are capped per member: eight more of node 2's (its
    # key, its host, its address) make node 1 close node 2's oldest ones.
    tgt = cl.nodes[1]
    before_sup = count(tgt, "superseded: node 2")
    held = []
    for _ in range(8):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        ctx.load_cert_chain(certs[2][0], certs[2][1])
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", tgt.raft_port), timeout=5))
        s.sendall(hello(2, n2.raft_addr))
        held.append(s)
    end = time.monotonic() + 10
    while time.monotonic() < end and count(tgt, "superseded: node 2") - before_sup < 4:
        time.sleep(0.05)
    t.check(count(tgt, "superseded: node 2") - before_sup >= 4,
            "at most 4 open connections per member: 8 more of node 2's close its oldest")
    for s in held:
        s.close()

    # A node added by CLUSTER.ADD is admitted; once removed, it is refused.
    new = Node(cl, 4)
    cl.nodes[4] = new
    new.metrics_port = free_port()
    new.args = tls_flags(certs[4], ca) + ["--metrics-port", str(new.metrics_port)]
    new.start(join=True, peers=",".join(n.peer for n in cl.nodes.values()))
    c = Client(cl.addrs(), deadline_s=30)
    t.eq("OK", c.call("CLUSTER.ADD", 4, new.raft_addr, new.addr),
         "CLUSTER.ADD of node 4 (certificate node-4) succeeds")
    ok, f = cl.wait_caught_up(new)
    t.check(ok, "the added node is admitted and catches up", f)
    t.check("node 4 authenticated" in read_log(cl.leader().log),
            "the leader admits node 4 after the ADD")
    t.eq("OK", c.call("CLUSTER.REMOVE", 4), "CLUSTER.REMOVE of node 4 succeeds")
    new.kill()
    live = cl.live()
    before = {n.id: count(n, "node 4 is not a member") for n in live}
    got = b""
    for n in live:
        got += attack(n.raft_port, certs[4], 4, new.raft_addr, HUGE + 300)
    t.eq(b"", got, "node-4's certificate after the REMOVE gets no raft bytes back")
    t.check(all(count(n, "node 4 is not a member") > before[n.id] for n in live),
            "after the REMOVE, node 4 is refused as not a member")
    t.check(max_term(cl) < HUGE, "no node took the removed node's term")
    load.stop()
    t.eq([], load.errors, "no client errors through the attacks and the membership changes")
    t.check(load.ops > 0, "%d lock operations done meanwhile" % load.ops)
    t.finish()


if __name__ == "__main__":
    run_main(main, CLUSTERS)
