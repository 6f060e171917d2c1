#!/usr/bin/python3
"""--snapshot-log-ratio: the snapshot threshold also scales with the
snapshot's bytes (src/server/raft_fsm.c, scale_snapshot_threshold).

The state here is mostly dedup records (every LOCK carries a REQID; the
locks are released, so the live-object rule adds nothing).  With
--snapshot-threshold 16 and the ratio off, a snapshot comes every 16
entries; with the default ratio 2 the log between two snapshots grows to
about 2 times the last snapshot's bytes, so snapshots get rarer as the
dedup table grows.  Counted from the log (in-loop snapshots, so that no
forked child is still encoding when the count is read), never timed.  A
restart after the long log keeps every token: the next one is above all.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap  # noqa: E402

t = Tap()
ROUNDS, PER = 375, 8  # small pipelines: an entry or two each


def run(name, ratio):
    """Load a fenced with --snapshot-log-ratio ratio: (entries, snapshots,
    highest token, the fenced)."""
    srv = Fenced(name, args=["--snapshot-threshold", "16", "--snapshot-fork", "0",
                             "--snapshot-log-ratio", str(ratio), "--log-level", "info"]).start()
    e0 = int(srv.info()["raft_entries"])
    c = srv.client()
    lease = int(c.execute_command("LEASE.GRANT", 600000))
    req = 1
    top = 0
    for rnd in range(ROUNDS):
        pipe = c.pipeline(transaction=False)
        for i in range(PER):
            pipe.execute_command("LOCK", "s%d.%d" % (rnd, i), lease, "REQID", req)
            req += 1
        tokens = [int(x) for x in pipe.execute()]
        top = max([top] + tokens)
        pipe = c.pipeline(transaction=False)
        for i, tok in enumerate(tokens):
            pipe.execute_command("UNLOCK", "s%d.%d" % (rnd, i), tok)
        pipe.execute()
    c.close()
    entries = int(srv.info()["raft_entries"]) - e0
    snaps = srv.log_text().count("snapshot taken")
    return entries, snaps, top, srv


e_off, s_off, _, srv = run("ratio0", 0)
srv.stop()
t.check(e_off >= 256, "ratio 0: the load made hundreds of entries (%d)" % e_off)
t.check(s_off >= e_off // 16 - 2,
        "ratio 0: a snapshot every 16 entries (%d snapshots, %d entries)" % (s_off, e_off))

e_on, s_on, top, srv = run("ratio2", 2)
t.check(e_on >= 256, "ratio 2: the load made hundreds of entries (%d)" % e_on)
t.check(s_on >= 1, "ratio 2: snapshots were still taken (%d)" % s_on)
t.check(s_on * 4 <= max(e_on // 16, 4),
        "ratio 2: snapshots spaced out as the state grew (%d snapshots for %d entries; "
        "ratio 0: %d for %d)" % (s_on, e_on, s_off, e_off))
srv.stop()
srv.start()
c = srv.client()
lease = int(c.execute_command("LEASE.GRANT", 600000))
tok = int(c.execute_command("LOCK", "after", lease))
t.check(tok > top, "after a restart that replays the longer log, the next token %d is above "
        "every token returned (%d)" % (tok, top))
c.close()
srv.stop()
t.finish()
