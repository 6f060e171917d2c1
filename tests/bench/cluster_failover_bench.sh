#!/usr/bin/env bash
# make bench-cluster (part 1): failover time of a 3-node fenced cluster on
# 127.0.0.1.  KILLS times (default 10): kill -9 the leader while 4 clients
# write, measure until (a) another node reports itself a ready leader
# (CLUSTER.INFO polled every 10 ms) and (b) a client's write succeeds again
# through NOTLEADER/TRYAGAIN retries; restart the killed node and wait until
# it has caught up.  Prints each run and the median and max.
# Usage: cluster_failover_bench.sh [KILLS] [ELECTION_TIMEOUT_MS]
set -euo pipefail
# test_cluster_lib.py (the cluster helpers) is in tests/integration.
here=$(cd "$(dirname "$0")/../integration" && pwd)
[ "${1:-10}" -gt 0 ] || exit 0
export BUILD=${BUILD:-build/release}
HERE="$here" exec /usr/bin/python3 - "${1:-10}" "${2:-400}" <<'PY'
import os, statistics, sys, threading, time
sys.path.insert(0, os.environ.get("HERE", "tests/integration"))
from test_cluster_lib import Client, Cluster

kills, eto = int(sys.argv[1]), int(sys.argv[2])
cl = Cluster(3, args=["--election-timeout-ms", str(eto)]).start()
if cl.wait_leader(20) is None:
    sys.exit("no leader")
stop = threading.Event()
last_ok = [time.monotonic()]
gaps = []

def writer(i):
    c = Client(cl.addrs(), deadline_s=60)
    lease = c.call("LEASE.GRANT", 10000)
    n = 0
    while not stop.is_set():
        tok = c.call("LOCK", "bench.%d.%d" % (i, n % 4), lease)
        if tok is not None:
            c.call("UNLOCK", "bench.%d.%d" % (i, n % 4), tok)
        c.call("LEASE.KEEPALIVE", lease)
        last_ok[0] = time.monotonic()
        n += 1

threads = [threading.Thread(target=writer, args=(i,), daemon=True) for i in range(4)]
for th in threads:
    th.start()
time.sleep(1)
elect, serve = [], []
for run in range(1, kills + 1):
    ldr = cl.wait_leader(20)
    time.sleep(0.5)
    t0 = time.monotonic()
    ldr.kill()
    new = cl.wait_leader(30, among=cl.live(), step=0.01)
    t1 = time.monotonic()
    while last_ok[0] < t1 and time.monotonic() - t1 < 30:
        time.sleep(0.005)
    t2 = max(last_ok[0], t1)
    elect.append((t1 - t0) * 1000)
    serve.append((t2 - t0) * 1000)
    print("run %2d: killed node %d; node %s ready after %4.0f ms; writes resumed after %4.0f ms"
          % (run, ldr.id, new.id if new else "-", elect[-1], serve[-1]), flush=True)
    ldr.start()
    ok, _ = cl.wait_caught_up(ldr, 30)
    if not ok:
        print("   (node %d did not catch up in 30 s)" % ldr.id)
stop.set()
for th in threads:
    th.join(timeout=30)
print("failover over %d kills (election timeout %d ms):" % (kills, eto))
print("  new leader ready:  median %4.0f ms, max %4.0f ms" % (statistics.median(elect), max(elect)))
print("  writes resumed:    median %4.0f ms, max %4.0f ms" % (statistics.median(serve), max(serve)))
PY
