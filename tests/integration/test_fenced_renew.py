#!/usr/bin/python3
# serial: timing-bound (a lease ages 3 s to show the checkpoint restarted its TTL)
"""Renewals without a log entry each (docs/leases.md) against a real fenced.

One node:
- LEASE.KEEPALIVE of a lease whose replicated deadline is far ahead is
  answered by the leader itself (INFO renewals_local grows by one per
  renewal, raft_entries grows far less than the renewals), the reply is the
  TTL, and one checkpoint per interval carries the renewals (INFO
  checkpoints, checkpoint_leases); the checkpoint really renews: LEASE.INFO
  shows the TTL restarted after it;
- a renewal too close to the deadline (TTL 100 ms: the margin is 2
  intervals + ttl/4) goes through the log;
- an unknown lease still answers NOLEASE (tests/sim/test_leader.c checks
  that another user's lease still answers NOPERM);
- a lease nobody renews still expires, and a lock held by it goes to the
  next holder with a larger token (fencing is untouched).
A 3-node cluster: a renewal answered by the leader itself replies the TTL
minus the election timeout (the most a leader change can take from it),
and after the leader is killed the lease is still live on the new leader.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap, redis  # noqa: E402
from test_cluster_lib import CLUSTERS, Client, Cluster, run_main  # noqa: E402,F401


def wait_for(cond, secs=10.0):
    """Poll cond() until it is true or secs pass; returns its last value."""
    end = time.monotonic() + secs
    v = cond()
    while not v and time.monotonic() < end:
        time.sleep(0.02)
        v = cond()
    return v


def info_int(f, key):
    return int(f.info().get(key, "0"))


def single(t):
    f = Fenced("renew").start()
    c = f.client()
    lease = int(c.execute_command("LEASE.GRANT", 30000))
    # Checkpoints (one entry per 100 ms interval) may land while the 200
    # renewals are in flight, more of them on a loaded machine: counted
    # around the entries, they are allowed for.
    k0 = info_int(f, "checkpoints")
    e0, l0 = info_int(f, "raft_entries"), info_int(f, "renewals_local")
    p = c.pipeline(transaction=False)
    for _ in range(200):
        p.execute_command("LEASE.KEEPALIVE", lease)
    replies = p.execute()
    t.check(all(r == 30000 for r in replies), "200 renewals answered with the TTL",
            replies[:5])
    e1, l1 = info_int(f, "raft_entries"), info_int(f, "renewals_local")
    k1 = info_int(f, "checkpoints")
    t.eq(200, l1 - l0, "every renewal answered by the leader itself (INFO renewals_local)")
    t.check(e1 - e0 <= 3 + (k1 - k0), "no entry per renewal (%d raft entries for 200, "
            "%d checkpoints meanwhile)" % (e1 - e0, k1 - k0))
    t.check(wait_for(lambda: info_int(f, "checkpoints") >= 1), "a checkpoint was proposed")
    t.check(info_int(f, "checkpoint_leases") >= 200,
            "the checkpoint carried the renewals (%d ids)" % info_int(f, "checkpoint_leases"))

    # A renewal, then a write within the interval: the renewal's checkpoint
    # rides the write's entry (docs/leases.md), no entry of its own.  Tried
    # a few times: on a loaded machine the write may come too late.
    def ride():
        r0, k0 = info_int(f, "checkpoints_rode"), info_int(f, "checkpoint_leases")
        p = c.pipeline(transaction=False)
        p.execute_command("LEASE.KEEPALIVE", lease)
        p.execute_command("LOCK", "renew.ride", lease)
        replies = p.execute()
        return (replies[0] == 30000 and int(replies[1]) > 0 and
                info_int(f, "checkpoints_rode") == r0 + 1 and
                info_int(f, "checkpoint_leases") == k0 + 1)
    t.check(any(ride() for _ in range(5)),
            "a renewal's checkpoint rides the next write's entry (INFO checkpoints_rode)")

    # The checkpoint renews in the replicated state: 3 s later (the lease
    # ages; without the checkpoint it would have about 27 s left) one more
    # renewal, and once its checkpoint is in the remaining TTL is back near
    # 30 s.
    time.sleep(3)
    c.execute_command("LEASE.KEEPALIVE", lease)
    ck = info_int(f, "checkpoints")
    t.check(wait_for(lambda: info_int(f, "checkpoints") > ck), "the next checkpoint came")

    def remaining():
        r = c.execute_command("LEASE.INFO", lease)  # [ttl_ms, remaining_ms, locks_held]
        return int(r[1]) if isinstance(r, list) and len(r) == 3 else None

    # "checkpoints" counts proposals: wait until the proposed one is applied
    # (without it the lease has about 27 s left, and less every moment).
    restarted = wait_for(lambda: (remaining() or 0) > 28500, 30)
    t.check(restarted, "LEASE.INFO shows the TTL restarted (%s ms left)" % remaining())

    # Too close to the deadline: through the log.  On a loaded machine a
    # 100 ms lease may expire before its renewal arrives (NOLEASE): then a
    # new one is tried.
    for attempt in range(20):
        short = int(c.execute_command("LEASE.GRANT", 100))
        l2 = info_int(f, "renewals_local")
        try:
            renewed = int(c.execute_command("LEASE.KEEPALIVE", short))
            break
        except redis.ResponseError as e:
            renewed = str(e)
            if not renewed.startswith("NOLEASE"):
                break
    t.eq(100, renewed, "a 100 ms lease renews (attempt %d)" % (attempt + 1))
    t.eq(l2, info_int(f, "renewals_local"), "... through the log (inside the margin)")

    # Unknown lease.
    try:
        c.execute_command("LEASE.KEEPALIVE", 999999)
        t.check(False, "an unknown lease answers NOLEASE")
    except redis.ResponseError as e:
        t.check(str(e).startswith("NOLEASE"), "an unknown lease answers NOLEASE", e)

    # Nobody renews: the lease expires and the lock moves on with a larger token.
    holder = int(c.execute_command("LEASE.GRANT", 400))
    tok = int(c.execute_command("LOCK", "renew:x", holder))
    other = int(c.execute_command("LEASE.GRANT", 30000))
    got = wait_for(lambda: c.execute_command("LOCK", "renew:x", other), 60)
    t.check(got is not None and int(got) > tok,
            "an unrenewed lease expires; the next holder gets a larger token (%s > %d)"
            % (got, tok))
    f.stop()


def cluster(t):
    cl = Cluster(3, args=["--election-timeout-ms", "400"]).start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "3-node cluster elects a leader"):
        return
    c = Client(cl.addrs(), deadline_s=20)
    lease = int(c.call("LEASE.GRANT", 10000))
    # A first renewal may go through the log (no recent entry of ours yet);
    # those that follow are answered by the leader itself.
    # A leader change (400 ms elections on a loaded machine) sends the next
    # one through the log again: renew until one is answered locally.
    replies = []
    while len(replies) < 5 or (9600 not in replies and len(replies) < 50):
        replies.append(int(c.call("LEASE.KEEPALIVE", lease)))
    t.check(9600 in replies, "a renewal answered by the leader itself replies TTL - "
            "election timeout (%s)" % replies)
    t.check(all(r in (10000, 9600) for r in replies), "every reply is the TTL or TTL - 400")
    ldr.kill()
    t.check(cl.wait_leader() is not None, "a new leader after kill -9")
    t.check(int(c.call("LEASE.KEEPALIVE", lease)) in (10000, 9600),
            "the lease is still live on the new leader")


def main():
    t = Tap()
    single(t)
    cluster(t)
    t.finish()


if __name__ == "__main__":
    run_main(main, CLUSTERS)
