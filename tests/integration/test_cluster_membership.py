#!/usr/bin/python3
"""fenced cluster membership at run time, through `fencectl cluster`:

- CLUSTER.* argument errors are clear ERR replies; followers redirect;
- remove a follower (it leaves the configuration; the rest goes on);
- add a fresh node started with --join 1 (it never bootstraps a configuration
  of its own; raft brings it the log/snapshot) and it becomes a voter that
  counts: with it, the cluster survives losing the leader;
- transfer leadership to the added node; NOTLEADER redirects on the old
  members point to its client address (carried in raft's configuration);
- snapshot catch-up: with --snapshot-threshold 32, a node that was down
  while many entries were written catches up by snapshot (its log says
  "snapshot restored"; its snapshot index and applied index advance);
- a retried CLUSTER.ADD of the same node is idempotent (OK);
- the voter floor (docs/cluster.md): with a voter dead, removing a live one
  (which would leave too few live voters for a quorum) is refused, removing
  the dead one works; removing the leader itself works while a live voter
  remains (the leader transfers leadership first and redirects; the new
  leader removes it as a follower); removing the last voter is refused, and the cluster keeps
  granting (before the floor, these removals left zero voters, no leader
  and terms climbing forever).
"""
# serial: timing-bound (the voter floor reads contact flags that fenced does not
# show: the test lets election timeouts pass, and then checks that nothing moved).
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import (CLUSTERS, Client, Cluster, Node, Tap, fencectl,  # noqa: E402
                              run_main)


def raw(node, *args):
    """Send one command to node; returns the reply or the error text."""
    c = node.client()
    try:
        return c.execute_command(*args)
    except Exception as e:  # noqa: BLE001
        return "ERROR " + str(e)
    finally:
        c.close()


def main():
    """Run the scenario; see the module docstring."""
    t = Tap()
    cl = Cluster(3, args=["--snapshot-threshold", "32", "--snapshot-trailing", "8"]).start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "3-node cluster elects a leader"):
        t.finish()
    servers = ",".join(cl.addrs())

    # Bad input: clear errors, nothing changes.
    t.check(str(raw(ldr, "CLUSTER.ADD", "0", "127.0.0.1:1", "127.0.0.1:2")).startswith(
        "ERROR id must be"), "CLUSTER.ADD with id 0 is refused")
    t.check(str(raw(ldr, "CLUSTER.ADD", "9", "localhost:1", "127.0.0.1:2")).startswith(
        "ERROR raft-addr must be"), "CLUSTER.ADD with a non-IPv4 raft address is refused")
    t.check(str(raw(ldr, "CLUSTER.ADD", "9", "127.0.0.1:99999", "127.0.0.1:2")).startswith(
        "ERROR raft-addr must be"), "CLUSTER.ADD with a bad port is refused")
    t.check(str(raw(ldr, "CLUSTER.ADD", "9", "127.0.0.1:5", "127.0.0.1")).startswith(
        "ERROR client-addr must be"), "CLUSTER.ADD without a client port is refused")
    t.check(str(raw(ldr, "CLUSTER.ADD", "9", "127.0.0.1:5")).startswith(
        "ERROR wrong number"), "CLUSTER.ADD with too few arguments is refused")
    t.check(str(raw(ldr, "CLUSTER.REMOVE", "77")).startswith("ERROR node 77 is not"),
            "CLUSTER.REMOVE of an unknown node is refused")
    t.check(str(raw(ldr, "CLUSTER.TRANSFER", "x")).startswith("ERROR id must be"),
            "CLUSTER.TRANSFER with a bad id is refused")
    t.check(str(raw(ldr, "CLUSTER.TRANSFER", str(ldr.id))).startswith("ERROR"),
            "CLUSTER.TRANSFER to the leader itself is refused")
    fol = [n for n in cl.live() if n is not ldr]
    t.eq("ERROR NOTLEADER " + ldr.addr, raw(fol[0], "CLUSTER.REMOVE", str(fol[1].id)),
         "a follower redirects CLUSTER.REMOVE to the leader")
    rc, out, err = fencectl("cluster", "--server", servers, "bogus")
    t.eq(64, rc, "fencectl cluster with an unknown command is a usage error")
    rc, out, err = fencectl("cluster", "--server", servers, "add", "4", "127.0.0.1:1")
    t.eq(64, rc, "fencectl cluster add with too few arguments is a usage error")
    rc, out, err = fencectl("cluster", "remove", "x", "--server", servers)
    t.eq(64, rc, "fencectl cluster remove with a bad id is a usage error")
    rc, out, err = fencectl("--server", "127.0.0.1:1", "--timeout", "200", "cluster", "info")
    t.eq(69, rc, "fencectl cluster info with no reachable server exits 69")

    # Some state before the changes.
    c = Client(cl.addrs())
    lease = c.call("LEASE.GRANT", 60000)
    tok = int(c.call("LOCK", "membership", lease))

    # Remove a follower through fencectl (sent to a follower: it follows
    # the redirect).
    gone = fol[1]
    rc, out, err = fencectl("--server", fol[0].addr, "cluster", "remove", str(gone.id))
    t.eq(0, rc, "fencectl cluster remove %d succeeds (via a redirect)" % gone.id)
    f, nodes = ldr.cinfo()
    t.check(f["voters"] == "2" and gone.id not in [int(n["id"]) for n in nodes],
            "the removed node has left the configuration", (f, nodes))
    gone.kill()
    tok2 = int(c.call("LOCK", "membership2", lease))
    t.check(tok2 > tok, "the 2-node cluster keeps granting")

    # Add a fresh node 4 that joins (no bootstrap of its own).  Adding it
    # before it runs fails with a clear error after raft's catch-up attempt
    # and leaves it a spare; the retry once it runs promotes it.
    new = Node(cl, 4)
    cl.nodes[4] = new
    rc, out, err = fencectl("cluster", "--server", servers, "add", "4", new.raft_addr,
                            new.addr)
    t.check(rc == 1 and "could not be reached" in err,
            "adding a node that does not run fails clearly", (rc, err))
    f, nodes = ldr.cinfo()
    t.check(f["voters"] == "2" and any(n["id"] == "4" and n["role"] == "spare"
                                       for n in nodes),
            "...and leaves it a spare that does not count for quorum", nodes)
    new.start(join=True, peers=",".join(n.peer for n in cl.nodes.values() if n is not gone))
    f4, _ = new.cinfo()
    t.check(f4 is not None and f4["nodes"] == "0" and f4["last_log_index"] == "0",
            "a --join node starts with an empty log and no configuration", f4)
    rc, out, err = fencectl("cluster", "--server", servers, "add", "4", new.raft_addr,
                            new.addr)
    t.eq(0, rc, "fencectl cluster add 4 succeeds once it runs (promotes the spare)", err)
    rc, out, err = fencectl("cluster", "--server", servers, "add", "4", new.raft_addr,
                            new.addr)
    t.eq(0, rc, "a retried add of the same node is idempotent", err)
    rc, out, err = fencectl("cluster", "--server", servers, "add", "4", new.raft_addr,
                            "127.0.0.1:1")
    t.check(rc == 1 and "already in the configuration" in err,
            "adding the same id with another address is refused", err)
    ok, f4 = cl.wait_caught_up(new, 30)
    t.check(ok, "the added node catches up", f4)
    f, nodes = ldr.cinfo()
    row = [n for n in nodes if n["id"] == "4"]
    t.check(f["voters"] == "3" and row and row[0]["role"] == "voter"
            and row[0]["client"] == new.addr,
            "the added node is a voter with its client address", nodes)
    rc, out, err = fencectl("cluster", "--server", new.addr, "info")
    t.check(rc == 0 and "node_id:4" in out and "voters:3" in out,
            "fencectl cluster info on the added node", out + err)

    # Transfer leadership to node 4; the old members redirect to it.
    rc, out, err = fencectl("cluster", "--server", servers, "transfer", "4")
    t.eq(0, rc, "fencectl cluster transfer 4 succeeds", err)
    nl = cl.wait_leader()
    t.check(nl is new, "node 4 leads after the transfer", nl and nl.id)
    t.eq("ERROR NOTLEADER " + new.addr, raw(ldr, "LEASE.GRANT", "1000"),
         "an old member redirects to the added node's client address")
    info = c.call("LOCK.INFO", "membership")
    t.check(info is not None and int(info[0]) == tok,
            "a lock granted before the changes is still held with its token", info)

    # Node 4 counts as a voter: kill the old leader, a leader remains.
    old = ldr
    rc, out, err = fencectl("cluster", "--server", servers + "," + new.addr, "transfer",
                            str(old.id))
    t.eq(0, rc, "transfer back to node %d" % old.id, err)
    cl.wait_leader()
    old.kill()
    nl = cl.wait_leader()
    t.check(nl is not None and nl is not old,
            "with the added voter, the cluster survives losing the leader",
            nl and nl.id)

    # Snapshot catch-up: old stays down while > 8 x threshold entries are
    # written one by one (one entry each), then restarts.
    c = Client(cl.addrs())
    l2 = c.call("LEASE.GRANT", 60000)
    for i in range(300):
        tk = int(c.call("LOCK", "snap.%d" % (i % 10), l2))
        c.call("UNLOCK", "snap.%d" % (i % 10), tk)
    lf, _ = nl.cinfo()
    t.check(int(lf["snapshot_index"]) > 0, "the leader has taken a snapshot (index %s)"
            % lf["snapshot_index"])
    old.start()
    ok, fo = cl.wait_caught_up(old, 30)
    t.check(ok, "the node that was down catches up", fo)
    t.check("snapshot restored" in old.log_since_start(),
            "it caught up by installing the leader's snapshot (log, after start-up: "
            "snapshot restored)")
    t.check(fo is not None and int(fo["snapshot_index"]) > 0,
            "its snapshot index advanced", fo)
    for n in cl.live():
        n.kill()
    voter_floor(t)
    t.finish()


def voter_floor(t):
    """The voter floor: see the module docstring."""
    cl = Cluster(3, name="floor-").start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "floor: a second 3-node cluster elects a leader"):
        return
    live, dead = [n for n in cl.live() if n is not ldr]
    dead.kill()
    # The leader's contact flags are cleared once per election timeout
    # (400 ms): wait until the dead node no longer counts as heard from.
    # (fenced does not show the flags: this sleep is the thing under test.)
    time.sleep(1.5)
    r = str(raw(ldr, "CLUSTER.REMOVE", str(live.id)))
    t.check(r.startswith("ERROR refused") and "quorum needs 2" in r,
            "floor: removing a live voter while another is dead is refused", r)
    f, _ = ldr.cinfo()
    t.check(f is not None and f["voters"] == "3" and f["role"] == "leader",
            "floor: ...and nothing changed (3 voters, same leader)", f)
    c = Client([ldr.addr, live.addr], deadline_s=10)
    lease = c.call("LEASE.GRANT", 60000)
    t.check(c.call("LOCK", "floor.1", lease) is not None,
            "floor: ...and the cluster keeps granting")
    t.eq("OK", raw(ldr, "CLUSTER.REMOVE", str(dead.id)),
         "floor: removing the dead voter works")
    # Three voters became two; now remove the leader itself: one remains.
    # The leader hands leadership on first and redirects: the new leader
    # removes it as a follower (with two voters, a leader that removes
    # itself can leave the cluster without a leader; docs/cluster.md).
    t.eq("ERROR NOTLEADER " + live.addr, raw(ldr, "CLUSTER.REMOVE", str(ldr.id)),
         "removing the leader itself: it transfers leadership, then redirects there")
    f, _ = live.cinfo()
    t.check(f is not None and f["role"] == "leader" and f["voters"] == "2",
            "...the other voter leads, and nothing was removed yet", f)
    f, _ = ldr.cinfo()
    t.check(f is not None and f["role"] == "follower", "...the old leader follows", f)
    rc, out, err = fencectl("--server", ldr.addr, "cluster", "remove", str(ldr.id))
    t.check(rc == 0, "floor: fencectl cluster remove of the old leader follows the redirect "
                     "and removes it (one live voter remains)", (rc, out, err))
    nl = cl.wait_leader(among=[live])
    t.check(nl is live, "floor: the remaining voter leads", nl and nl.id)
    f, nodes = live.cinfo()
    t.check(f is not None and f["voters"] == "1", "floor: one voter left", f)
    ldr.kill()
    r = str(raw(live, "CLUSTER.REMOVE", str(live.id)))
    t.check(r.startswith("ERROR refused") and "last voter" in r,
            "floor: removing the last voter is refused", r)
    time.sleep(1.0)  # nothing happens later either (absence: a sleep)
    f, _ = live.cinfo()
    t.check(f is not None and f["voters"] == "1" and f["role"] == "leader"
            and f["leader_ready"] == "1",
            "floor: ...it still leads, with one voter", f)
    c = Client([live.addr], deadline_s=10)
    lease = c.call("LEASE.GRANT", 60000)
    t.check(c.call("LOCK", "floor.2", lease) is not None,
            "floor: ...and grants")
    rc, out, err = fencectl("--server", live.addr, "cluster", "remove", str(live.id))
    t.check(rc != 0 and "last voter" in err,
            "floor: fencectl cluster remove of the last voter fails with the reason",
            (rc, out, err))
    live.kill()
    live.start()
    nl = cl.wait_leader(among=[live])
    t.check(nl is live, "floor: after a restart it leads again", nl and nl.id)


if __name__ == "__main__":
    run_main(main, CLUSTERS)
