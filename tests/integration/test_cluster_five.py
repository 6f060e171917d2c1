#!/usr/bin/python3
"""fenced cluster of 5 on 127.0.0.1: a majority is needed, and enough.

- 5 nodes elect a leader; kill -9 the leader, then the next leader: with 3
  of 5 alive the cluster still grants, and a lock held since the start keeps
  its token (its holder renews through whoever leads);
- kill a third node: 2 of 5 cannot elect a leader and grant nothing (every
  write answers TRYAGAIN or times out);
- restart one killed node: 3 of 5 again, a leader, grants resume with a
  higher token, and the held lock is still held.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import CLUSTERS, Client, Cluster, Tap, run_main  # noqa: E402


def main():
    """Run the scenario; see the module docstring."""
    t = Tap()
    cl = Cluster(5).start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "5-node cluster elects a leader"):
        t.finish()
    holder = Client(cl.addrs(), deadline_s=20)
    lease = holder.call("LEASE.GRANT", 8000)
    tok = int(holder.call("LOCK", "five", lease))
    tokens = [tok]

    killed = []
    for round_ in (1, 2):
        ldr = cl.wait_leader()
        ldr.kill()
        killed.append(ldr)
        holder.call("LEASE.KEEPALIVE", lease)
        c = Client(cl.addrs(), deadline_s=20)
        tk = int(c.call("LOCK", "five.%d" % round_, c.call("LEASE.GRANT", 5000)))
        t.check(tk > max(tokens), "with %d of 5 alive the cluster grants (token %d)"
                % (5 - len(killed), tk))
        tokens.append(tk)
        info = c.call("LOCK.INFO", "five")
        t.check(info is not None and int(info[0]) == tok,
                "the lock held since the start keeps its token", info)

    # A third node down: 2 of 5 cannot do anything.
    third = next(n for n in cl.live())
    third.kill()
    killed.append(third)
    minority = cl.live()
    granted, answers = [], {}
    end = time.monotonic() + 3.0
    while time.monotonic() < end:
        for n in minority:
            try:
                r = n.client(socket_timeout=1).execute_command("LEASE.GRANT", 5000)
                granted.append((n.id, r))
            except Exception as e:  # noqa: BLE001
                code = str(e).split()[0] if str(e) else type(e).__name__
                answers[code] = answers.get(code, 0) + 1
        time.sleep(0.1)
    t.check(not granted, "2 of 5 grant nothing (answers: %s)" % answers, granted)
    t.check(cl.leader(minority) is None, "2 of 5 have no ready leader")

    # One comes back: a majority again.
    back = killed[0]
    back.start()
    ldr = cl.wait_leader()
    t.check(ldr is not None, "with 3 of 5 again, a leader is elected")
    c = Client(cl.addrs(), deadline_s=20)
    tk = int(c.call("LOCK", "five.back", c.call("LEASE.GRANT", 5000)))
    t.check(tk > max(tokens), "grants resume with a higher token (%d)" % tk)
    info = c.call("LOCK.INFO", "five")
    t.check(info is not None and int(info[0]) == tok,
            "the lock held since the start is still held (its lease restarted at full TTL "
            "on each new leader)", info)
    t.finish()


if __name__ == "__main__":
    run_main(main, CLUSTERS)
