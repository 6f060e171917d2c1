#!/usr/bin/python3
"""fenced cluster health: /health, HEALTH and `fencectl status` follow quorum.

A 3-node cluster on 127.0.0.1, each node with --metrics-port:
- once a leader is ready, /health answers 200 on every node (the leader:
  "leader, ready"; followers: they know the leader), HEALTH agrees, and
  `fencectl status` exits 0;
- fenced_is_leader is 1 on exactly one node;
- with two nodes killed, the survivor loses quorum: its /health turns 503
  within a few election timeouts, HEALTH answers -UNAVAILABLE, and
  `fencectl status` against it exits 69;
- with one node back, quorum returns and /health is 200 again.
"""
# test-timeout: 180
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from test_cluster_lib import CLUSTERS, FENCECTL, Cluster, Tap, free_port, run_main  # noqa: E402
import promtest  # noqa: E402


def health(port):
    """(status, body) of /health, (None, error) when unreachable."""
    try:
        return promtest.http_get(port, "/health", timeout=3)
    except OSError as e:
        return None, repr(e)


def wait_health(port, want, secs):
    """Polls /health until its status is want; returns (ok, last)."""
    end = time.monotonic() + secs
    last = None
    while time.monotonic() < end:
        last = health(port)
        if last[0] == want:
            return True, last
        time.sleep(0.1)
    return False, last


def status_rc(node):
    """`fencectl status` against one node: (exit status, output)."""
    p = subprocess.run([FENCECTL, "--server", node.addr, "--timeout", "3000", "status"],
                       capture_output=True, timeout=30)
    return p.returncode, (p.stdout + p.stderr).decode(errors="replace")


def main():
    t = Tap()
    cl = Cluster(3, args=["--election-timeout-ms", "400"])
    mports = {}
    for i, n in cl.nodes.items():
        mports[i] = free_port()
        n.start(extra=["--metrics-port", str(mports[i])])
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "3-node cluster elects a leader"):
        t.finish()
    for i, n in cl.nodes.items():
        ok, last = wait_health(mports[i], 200, 10)
        t.check(ok, "node %d: /health is 200 with a ready leader (%s)" %
                (i, "leader" if n is ldr else "follower"), last)
        t.check(not isinstance(n.client().execute_command("HEALTH"), Exception),
                "node %d: HEALTH answers +..." % i)
        rc, out = status_rc(n)
        t.eq(0, rc, "node %d: fencectl status exits 0" % i, out)
    leaders = 0
    for i in cl.nodes:
        text = promtest.http_get(mports[i], "/metrics")[1]
        leaders += promtest.value(text, "fenced_is_leader") or 0
    t.eq(1, leaders, "fenced_is_leader is 1 on exactly one node")

    survivor = [n for n in cl.nodes.values() if n is not ldr][0]
    for n in list(cl.nodes.values()):
        if n is not survivor:
            n.kill()
    ok, last = wait_health(mports[survivor.id], 503, 15)
    t.check(ok, "the survivor's /health turns 503 without quorum", last)
    t.check(last[1].startswith("unavailable"), "its body says why", last)
    try:
        survivor.client().execute_command("HEALTH")
        t.check(False, "HEALTH answers -UNAVAILABLE without quorum")
    except Exception as e:  # noqa: BLE001 - redis.ResponseError
        t.check(str(e).startswith("UNAVAILABLE") or "UNAVAILABLE" in repr(e),
                "HEALTH answers -UNAVAILABLE without quorum", repr(e))
    rc, out = status_rc(survivor)
    t.eq(69, rc, "fencectl status exits 69 without quorum", out)
    text = promtest.http_get(mports[survivor.id], "/metrics")[1]
    t.eq(0, promtest.value(text, "fenced_healthy"), "fenced_healthy is 0 on the survivor")

    back = [n for n in cl.nodes.values() if n is not survivor][0]
    back.start(extra=["--metrics-port", str(mports[back.id])])
    ok, last = wait_health(mports[survivor.id], 200, 20)
    t.check(ok, "with a second node back, the survivor's /health is 200 again", last)
    ok, last = wait_health(mports[back.id], 200, 20)
    t.check(ok, "and the restarted node's too", last)
    t.finish()


run_main(main, CLUSTERS)
