#!/usr/bin/python3
"""fenced cluster soak (long; skipped unless FENCE_CLUSTER_SOAK=N is set, or
run with `make soak-cluster ROUNDS=N`): 3 nodes under load from 16 clients;
N rounds of kill -9 (the leader 2 times in 3, else a follower), restart and
catch-up, with random pauses.  After every round: every request first sent
after the kill got a token above every token acknowledged before it.  At
the end: no token issued twice, every held lock still held with its token,
every lease holds exactly the locks its client knows of, every node reports
the same last token, and the failover times (median, max) are printed.
FENCE_CLUSTER_SOAK_SEED picks the random choices (printed).
"""
import os
import random
import statistics
import sys
import time

if not os.environ.get("FENCE_CLUSTER_SOAK"):
    print("# skipped: set FENCE_CLUSTER_SOAK=<rounds> (or make soak-cluster ROUNDS=N)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_cluster_lib import CLUSTERS, Client, Cluster, Load, Tap, run_main  # noqa: E402


def main():
    """Run the soak; see the module docstring."""
    rounds = int(os.environ["FENCE_CLUSTER_SOAK"])
    seed = int(os.environ.get("FENCE_CLUSTER_SOAK_SEED", str(int(time.time()))))
    rnd = random.Random(seed)
    t = Tap()
    t.note("seed %d, %d rounds" % (seed, rounds))
    cl = Cluster(3, args=["--snapshot-threshold", "256", "--snapshot-trailing", "64"]).start()
    if not t.check(cl.wait_leader() is not None, "3-node cluster elects a leader"):
        t.finish()
    load = Load(cl.addrs(), n=16, ttl_ms=5000).start()
    failovers = []
    catchups = []
    bad_rounds = []
    for r in range(1, rounds + 1):
        time.sleep(rnd.uniform(0.5, 2.5))
        ldr = cl.wait_leader()
        if ldr is None:
            bad_rounds.append((r, "no leader before the kill"))
            break
        victim = ldr if rnd.random() < 2 / 3 else rnd.choice(
            [n for n in cl.live() if n is not ldr])
        kill_at = time.monotonic()
        victim.kill()
        new = cl.wait_leader(among=cl.live(), step=0.01)
        if victim is ldr:
            failovers.append((time.monotonic() - kill_at) * 1000)
        if new is None:
            bad_rounds.append((r, "no leader after the kill"))
            break
        time.sleep(rnd.uniform(0.2, 1.5))
        with load.lock:
            grants = list(load.grants)
        max_pre = max((g[0] for g in grants if g[2] < kill_at), default=0)
        low = [g[0] for g in grants if g[1] > kill_at and g[0] <= max_pre]
        if low:
            bad_rounds.append((r, "tokens %s not above %d" % (low[:5], max_pre)))
        victim.start()
        started = time.monotonic()
        ok, _ = cl.wait_caught_up(victim, 60)
        catchups.append(time.monotonic() - started)
        if not ok:
            bad_rounds.append((r, "node %d did not catch up" % victim.id))
        t.note("round %d: killed node %d (%s), caught up %.1f s after restart; %d grants so far"
               % (r, victim.id, "leader" if victim is ldr else "follower", catchups[-1],
                  len(grants)))
    load.stop()
    t.check(not bad_rounds, "every round: a leader, increasing tokens, catch-up", bad_rounds)
    t.check(not load.errors, "no client saw an unexpected error", "\n".join(load.errors[:10]))
    t.check(not load.lost_leases, "no client lease was lost", load.lost_leases)
    tokens = [g[0] for g in load.grants]
    t.eq(len(tokens), len(set(tokens)), "no token was issued twice (%d grants)" % len(tokens))
    c = Client(cl.addrs())
    lost, phantom = [], []
    for th, held in load.held.items():
        for name, tok in held.items():
            info = c.call("LOCK.INFO", name)
            if info is None or int(info[0]) != tok:
                lost.append((name, tok, info))
        li = c.call("LEASE.INFO", load.leases[th])
        if li is None or int(li[2]) != len(held):
            phantom.append((th, li, len(held)))
    t.check(not lost, "every held lock is still held with its token", lost[:10])
    t.check(not phantom, "every lease holds exactly the locks its client knows of",
            phantom[:10])
    for n in cl.live():
        cl.wait_caught_up(n, 30)
    last = {}
    for n in cl.live():
        text = n.client().execute_command("INFO")
        if isinstance(text, dict):
            last[n.id] = int(text.get("last_token", -1))
        else:
            last[n.id] = int([ln.split(":", 1)[1] for ln in text.splitlines()
                              if ln.startswith("last_token:")][0])
    t.check(len(set(last.values())) == 1, "every node reports the same last token", last)
    if failovers:
        t.note("failover over %d leader kills: median %.0f ms, max %.0f ms"
               % (len(failovers), statistics.median(failovers), max(failovers)))
    if catchups:
        t.note("catch-up after restart: median %.1f s, max %.1f s"
               % (statistics.median(catchups), max(catchups)))
    t.finish()


if __name__ == "__main__":
    run_main(main, CLUSTERS)
