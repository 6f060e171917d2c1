#!/usr/bin/python3
"""InstallSnapshot from a snapshot a forked child took (--snapshot-fork 1).

A 3-node cluster with --snapshot-threshold 16 and --snapshot-trailing 4, and
FENCED_TEST_SNAPSHOT_CHECK=1 on every node (each forked snapshot is compared
with the in-loop encoder's bytes for the same state).  One follower is
stopped; clients lock and unlock through the leader (Load, with REQIDs)
until the leader has taken several forked snapshots, so the entries the
follower misses are compacted away.  The follower restarts and must catch
up by InstallSnapshot ("snapshot restored" after its start-up), while the
load goes on.  Then leadership moves to that follower (CLUSTER.TRANSFER):
every lock the clients hold is reported by it with the acknowledged token,
and new tokens are above every token returned.  No timings are asserted.
"""
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import (CLUSTERS, Client, Cluster, Load, Tap,  # noqa: E402
                              run_main)

FORKED = r"snapshot taken: \d+ bytes, fork"


def main():
    """Run the scenario; see the module docstring."""
    t = Tap()
    os.environ["FENCED_TEST_SNAPSHOT_CHECK"] = "1"  # inherited by the nodes
    # --snapshot-log-ratio 0: a snapshot every 16 entries however large the
    # state grows (the ratio would space them out as the dedup table fills).
    cl = Cluster(3, args=["--snapshot-threshold", "16", "--snapshot-trailing", "4",
                          "--snapshot-log-ratio", "0"]).start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "3-node cluster elects a leader"):
        t.finish()
    behind = [n for n in cl.live() if n is not ldr][0]
    behind.kill()
    load = Load(cl.addrs(), n=8, ttl_ms=20000).start()
    end = time.monotonic() + 60
    while time.monotonic() < end and len(re.findall(FORKED, ldr.log_text())) < 6:
        time.sleep(0.1)
    n_forked = len(re.findall(FORKED, ldr.log_text()))
    t.check(n_forked >= 6, "the leader took forked snapshots while a follower was down (%d)"
            % n_forked)
    lf, _ = ldr.cinfo()
    t.check(lf is not None and int(lf["snapshot_index"]) > 0,
            "the leader's snapshot index advanced", lf)
    behind.start()
    ok, fo = cl.wait_caught_up(behind, 60)
    t.check(ok, "the follower that was behind catches up under load", fo)
    t.check("snapshot restored" in behind.log_since_start(),
            "...by InstallSnapshot of the leader's forked snapshot (its log: snapshot restored)")
    load.stop()
    t.check(not load.errors, "no unexpected errors under load", load.errors[:5])
    text = ldr.log_text()
    t.check("differ" not in text and "fork bytes equal inline bytes" in text,
            "the leader's forked snapshots equal the in-loop encoder's bytes")

    # Leadership to the node that installed the snapshot: it must know
    # every acknowledged lock with its token.
    c = Client(cl.addrs())
    c.call("CLUSTER.TRANSFER", str(behind.id))
    nl = cl.wait_leader(among=[behind])
    t.check(nl is behind, "leadership moved to the node that installed the snapshot",
            nl and nl.id)
    c = Client([behind.addr])
    wrong = []
    held = 0
    for th, names in load.held.items():
        for name, tok in names.items():
            held += 1
            info = c.call("LOCK.INFO", name)
            if info is None or int(info[0]) != tok or int(info[1]) != load.leases[th]:
                wrong.append((name, tok, info))
    t.check(not wrong and held > 0,
            "it reports all %d held locks with their acknowledged tokens" % held, wrong[:5])
    top = max((g[0] for g in load.grants), default=0)
    lease = c.call("LEASE.GRANT", 5000)
    nt = int(c.call("LOCK", "after-install", lease))
    t.check(nt > top, "its next token %d is above every token returned (%d)" % (nt, top))
    for n in cl.live():
        n.kill()
    t.finish()


run_main(main, CLUSTERS)
