#!/usr/bin/python3
"""Restarts never reissue a lease id or a fencing token, with snapshots
every few entries (forked and in the loop) and the fewest trailing entries.

libraft 0.15's raft_uv takes a snapshot put with 0 trailing entries for an
InstallSnapshot and moves its next append index back to the snapshot's:
with --snapshot-trailing 0 the entries appended while a forked snapshot was
encoded (acknowledged to their clients) were dropped, and after a restart
LEASE.GRANT handed out lease 21 again and LOCK token 1 again (9 restarts in
10).  fenced now refuses 0 (docs/cluster.md, libraft pitfalls); this test
checks the refusal and the restarts.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import FENCED, Fenced, Tap  # noqa: E402

t = Tap()

# 1. --snapshot-trailing 0 is refused with a clear error, before anything runs.
d = Fenced("refuse")
p = subprocess.run([FENCED, "--port", "1", "--data-dir", d.data, "--snapshot-trailing", "0"],
                   capture_output=True, text=True, timeout=30)
t.check(p.returncode != 0, "--snapshot-trailing 0: fenced refuses to start", p.returncode)
t.check("snapshot-trailing" in p.stderr, "the error names the option", p.stderr.strip()[:200])
t.check(not os.path.exists(os.path.join(d.data, "metadata1")), "nothing was written to the data dir")

ROUNDS = 6
for fork in ("1", "0"):
    srv = Fenced("trail-f" + fork, args=["--snapshot-threshold", "4", "--snapshot-trailing", "1",
                                         "--snapshot-fork", fork]).start()
    seen_leases = set()
    seen_tokens = set()
    reissued = []
    for rnd in range(ROUNDS):
        c = srv.client()
        # Pipelined on one connection, as fast as fenced takes them, so that
        # snapshots are taken (and forked children encode) while entries land.
        pipe = c.pipeline(transaction=False)
        for _ in range(20):
            pipe.execute_command("LEASE.GRANT", 600000)
        leases = [int(x) for x in pipe.execute()]
        pipe = c.pipeline(transaction=False)
        for i, lease in enumerate(leases):
            pipe.execute_command("LOCK", "r%d.%d" % (rnd, i), lease)
            pipe.execute_command("LEASE.KEEPALIVE", lease)
        out = pipe.execute()
        tokens = [int(out[k]) for k in range(0, len(out), 2)]
        c.close()
        for x in leases:
            if x in seen_leases:
                reissued.append(("lease", rnd, x))
            seen_leases.add(x)
        for x in tokens:
            if x in seen_tokens:
                reissued.append(("token", rnd, x))
            seen_tokens.add(x)
        srv.stop()
        srv.start()
        # Every acknowledged lease is still there after the restart.
        c = srv.client()
        lost = [x for x in leases if c.execute_command("LEASE.INFO", x) is None]
        c.close()
        t.eq([], lost, "fork %s, restart %d: every acknowledged lease survived" % (fork, rnd + 1))
    t.eq([], reissued, "fork %s: %d restarts, no lease id or token issued twice (%d leases, %d tokens)"
         % (fork, ROUNDS, len(seen_leases), len(seen_tokens)))
    t.check("snapshot taken" in srv.log_text(), "fork %s: snapshots were taken meanwhile" % fork)
    srv.stop()

t.finish()
