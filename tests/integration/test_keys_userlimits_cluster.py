#!/usr/bin/python3
"""Per-user limits are decided by the replicated state machine (issue 18,
section 6): in a cluster of three, alice (maxleases=5, maxlocks=2) fills her
quota through the leader; after the leader is killed, the new leader (a
former follower, which only applied the log) still refuses her a 6th lease
and a 3rd lock, and bob still gets both.  The killed node restarts and
catches up, and the cluster still refuses her.
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import TMP, Client, Cluster, Tap, redis, run_main, CLUSTERS  # noqa: E402

tap = Tap()
ACL = os.path.join(TMP, "users.acl")
with open(ACL, "w") as f:
    f.write("user default on nopass ~* +@all\n"
            "user alice on >apw ~* +@all -@admin maxleases=5 maxlocks=2\n"
            "user bob on >bpw ~* +@all -@admin\n")
os.chmod(ACL, 0o600)


class UserClient(Client):
    """A cluster client logged in as one user."""

    def __init__(self, addrs, user, pw):
        super().__init__(addrs)
        self.user, self.pw = user, pw

    def _connect(self, addr):
        host, port = addr.rsplit(":", 1)
        self.close()
        self.conn = redis.Redis(host=host, port=int(port), decode_responses=True,
                                username=self.user, password=self.pw,
                                socket_timeout=self.timeout_s, socket_connect_timeout=1.0)
        self.cur = addr


def err(c, *args):
    try:
        c.call(*args)
    except redis.ResponseError as e:
        return str(e)
    return None


def main():
    cl = Cluster(3, args=["--acl-file", ACL])
    cl.start()
    ldr = cl.wait_leader()
    tap.check(ldr is not None, "a leader is elected")
    a = UserClient(cl.addrs(), "alice", "apw")
    leases = [a.call("LEASE.GRANT", 60000) for _ in range(5)]
    tap.eq(5, len(set(leases)), "alice gets 5 leases")
    e = err(a, "LEASE.GRANT", 60000)
    tap.check(e is not None and e.startswith("LIMIT"), "her 6th: -LIMIT", e)
    toks = [a.call("LOCK", "a%d" % i, leases[0]) for i in range(2)]
    tap.check(all(int(t) > 0 for t in toks), "alice holds 2 locks")
    e = err(a, "LOCK", "a2", leases[1])
    tap.check(e is not None and e.startswith("LIMIT"), "her 3rd lock: -LIMIT", e)

    for n in cl.live():
        if n is not ldr:
            ok, _ = cl.wait_caught_up(n)
            tap.check(ok, "node %d has applied the log" % n.id)
    old = ldr
    old.kill(signal.SIGKILL)
    ldr = cl.wait_leader(among=cl.live())
    tap.check(ldr is not None and ldr is not old, "a new leader after the old one is killed")
    a.close()
    a = UserClient(cl.addrs(), "alice", "apw")
    e = err(a, "LEASE.GRANT", 60000)
    tap.check(e is not None and e.startswith("LIMIT"),
              "the new leader refuses alice's 6th lease too (the counts are replicated)", e)
    e = err(a, "LOCK", "a2", leases[1])
    tap.check(e is not None and e.startswith("LIMIT"), "and her 3rd lock", e)
    b = UserClient(cl.addrs(), "bob", "bpw")
    bl = b.call("LEASE.GRANT", 60000)
    tap.check(int(bl) > 0, "bob still gets a lease")
    tap.check(int(b.call("LOCK", "a2", bl)) > 0, "and the lock alice was refused")
    a.call("LEASE.REVOKE", leases[4])
    tap.check(int(a.call("LEASE.GRANT", 60000)) > 0, "a revoke makes room for alice")

    old.start()
    ok, _ = cl.wait_caught_up(old)
    tap.check(ok, "the killed node restarts and catches up")
    a.close()
    b.close()
    a = UserClient(cl.addrs(), "alice", "apw")
    e = err(a, "LEASE.GRANT", 60000)
    tap.check(e is not None and e.startswith("LIMIT"),
              "after the restart the cluster still refuses her (5 of 5)", e)
    a.close()
    for n in cl.live():
        n.kill(signal.SIGTERM)


run_main(main, CLUSTERS)
tap.finish()
