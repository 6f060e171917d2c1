#!/usr/bin/python3
"""Leader election on a 3-node cluster (issue 21 §1): ELECTION.OBSERVE is
answered by followers from their applied state (no NOTLEADER), a follower's
parked OBSERVE wakes when the leader node applies a change, and the
election (leader, token, value, revision) survives a failover of the raft
leader: the new raft leader reports the same election, and the revision
goes on growing.  ELECTION.LEADER on a follower answers NOTLEADER like
LOCK.INFO (linearizable reads)."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import CLUSTERS, Client, Cluster, Tap, run_main  # noqa: E402


def main():
    t = Tap()
    cl = Cluster(3).start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "3-node cluster elects a raft leader"):
        t.finish()
    c = Client(cl.addrs(), deadline_s=20)
    lease = c.call("LEASE.GRANT", 60000)
    tok, _ = c.call("ELECTION.CAMPAIGN", "svc", lease, "node-a")
    st = c.call("ELECTION.LEADER", "svc")
    t.check(st[0] == "node-a" and int(st[1]) == int(tok), "LEADER through the cluster client", st)
    rev = int(st[3])
    fol = [n for n in cl.live() if n is not ldr]
    f0 = fol[0]
    ok, _ = cl.wait_caught_up(f0)
    t.check(ok, "a follower caught up")
    fc = f0.client(socket_timeout=30)
    now = fc.execute_command("ELECTION.OBSERVE", "svc")
    t.check(now[0] == "node-a" and int(now[3]) == rev,
            "a follower answers OBSERVE from its applied state", now)
    try:
        fc.execute_command("ELECTION.LEADER", "svc")
        t.check(False, "ELECTION.LEADER on a follower: NOTLEADER")
    except Exception as e:  # noqa: BLE001
        t.check(str(e).startswith("NOTLEADER") or "NOTLEADER" in repr(e),
                "ELECTION.LEADER on a follower: NOTLEADER", str(e))
    got = {}

    def watch():
        got["st"] = f0.client(socket_timeout=30).execute_command(
            "ELECTION.OBSERVE", "svc", "AFTER", rev, "WAIT", 20000)

    th = threading.Thread(target=watch)
    th.start()
    rev2 = int(c.call("ELECTION.PROCLAIM", "svc", tok, "node-a:2"))
    th.join(25)
    st = got.get("st")
    t.check(st is not None and st[0] == "node-a:2" and int(st[3]) == rev2,
            "a follower's parked OBSERVE wakes with the leader's PROCLAIM", st)
    # Fail the raft leader over: the election is replicated state.
    ldr.kill()
    ldr2 = cl.wait_leader()
    t.check(ldr2 is not None, "a new raft leader after kill -9")
    c2 = Client(cl.addrs(), deadline_s=20)
    c2.call("LEASE.KEEPALIVE", lease)
    st = c2.call("ELECTION.LEADER", "svc")
    t.check(st is not None and st[0] == "node-a:2" and int(st[1]) == int(tok) and
            int(st[3]) == rev2, "the election survives the failover (leader, value, revision)",
            st)
    rev3 = int(c2.call("ELECTION.PROCLAIM", "svc", tok, "node-a:3"))
    t.check(rev3 > rev2, "and its revision goes on growing", (rev2, rev3))
    t.finish()


if __name__ == "__main__":
    run_main(main, CLUSTERS)
