#!/usr/bin/python3
"""LOCK.LIST and LEASE.LIST against a real fenced: token order, the glob
filter, COUNT and CURSOR paging to the end (cursor 0), a waiter counted,
bounds (COUNT 0, COUNT above the ceiling, a bad cursor) and a lock granted
again between pages (listed again, never skipped).  Then `fencectl top`
shows the contended lock."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap, redis  # noqa: E402

t = Tap()
f = Fenced("fenced", args=[]).start()
c = f.client()
l1 = c.execute_command("LEASE.GRANT", 60000)
l2 = c.execute_command("LEASE.GRANT", 60000)
names = ["job:%02d" % i for i in range(25)] + ["other", "x\\*y"]
for n in names:
    c.execute_command("LOCK", n, l1)
c2 = f.client()
t.eq(None, c2.execute_command("LOCK", "job:03", l2, "WAIT", 1) or None,
     "a short wait on a held lock times out (nil)")
cur, page = c.execute_command("LOCK.LIST")
t.eq(0, cur, "LOCK.LIST of 27 locks fits the default COUNT (cursor 0)")
t.eq(names, [e[0] for e in page], "locks come in token order")
t.check(all(e[2] == l1 and 0 < e[3] <= 60000 for e in page), "holder and remaining ms")
seen, cur, calls = [], 0, 0
while True:
    cur, page = c.execute_command("LOCK.LIST", "job:*", "COUNT", 10, "CURSOR", cur)
    seen += [e[0] for e in page]
    calls += 1
    if cur == 0 or calls > 10:
        break
t.eq(names[:25], seen, "paging job:* by 10 returns every match once, then cursor 0")
_, page = c.execute_command("LOCK.LIST", "x\\\\\\*y")
t.eq(["x\\*y"], [e[0] for e in page], "backslash quotes * in a pattern")
_, page = c.execute_command("LOCK.LIST", "?ther")
t.eq(["other"], [e[0] for e in page], "? matches one byte")
# A lock granted again between pages moves to the end: listed again.
cur, page = c.execute_command("LOCK.LIST", "COUNT", 5)
tok = page[0][1]
c.execute_command("UNLOCK", page[0][0], tok)
c.execute_command("LOCK", page[0][0], l2)
rest = []
while cur:
    cur, p = c.execute_command("LOCK.LIST", "COUNT", 5, "CURSOR", cur)
    rest += [e[0] for e in p]
t.check(page[0][0] in rest, "a lock regranted between pages is listed again")
cur, leases = c.execute_command("LEASE.LIST", "COUNT", 1)
t.check(cur != 0 and leases[0][0] == l1 and leases[0][3] == len(names) - 1,
        "LEASE.LIST COUNT 1: the first lease, its locks, a cursor", leases)
cur, leases = c.execute_command("LEASE.LIST", "CURSOR", cur)
t.check(cur == 0 and [e[0] for e in leases] == [l2], "then the second lease, cursor 0", leases)
# The owner: the grantee connection's CLIENT SETNAME and address.
oc = f.client()
oc.execute_command("CLIENT", "SETNAME", "worker-7")
l3 = oc.execute_command("LEASE.GRANT", 60000)
_, leases = c.execute_command("LEASE.LIST", "CURSOR", l2)
t.check(len(leases) == 1 and leases[0][0] == l3 and leases[0][5] == "worker-7" and
        leases[0][6].startswith("127.0.0.1:"),
        "LEASE.LIST shows the owner's client name and address", leases)
# A rename: earlier leases keep the name they were granted under; a closed
# grantee's leases keep theirs.
oc.execute_command("CLIENT", "SETNAME", "worker-8")
l4 = oc.execute_command("LEASE.GRANT", 60000)
oc.close()
c.execute_command("PING")
_, leases = c.execute_command("LEASE.LIST", "CURSOR", l2)
t.check([(e[0], e[5]) for e in leases] == [(l3, "worker-7"), (l4, "worker-8")] and
        leases[0][6] == leases[1][6],
        "after CLIENT SETNAME and a close, each lease keeps the name it was granted under",
        leases)
for args, what in ((["COUNT", 0], "COUNT 0"), (["COUNT", 1001], "COUNT above 1000"),
                   (["CURSOR", "x"], "a bad CURSOR"), (["a", "b"], "two patterns")):
    try:
        c.execute_command("LOCK.LIST", *args)
        t.check(False, "LOCK.LIST refuses %s" % what)
    except redis.ResponseError as e:
        t.check(str(e).startswith(("COUNT", "CURSOR", "syntax")), "LOCK.LIST refuses %s" % what,
                str(e))
# fencectl top: a frame with the contended lock, grants, health.
import subprocess  # noqa: E402
import threading  # noqa: E402
from fencetest import binary, wait_for  # noqa: E402
w = threading.Thread(target=lambda: f.client().execute_command("LOCK", "job:07", l2, "WAIT", 3000))
w.start()
wait_for(lambda: c.execute_command("LOCK.INFO", "job:07")[3] == 1)  # queued
p = subprocess.run([binary("fencectl"), "--server", "127.0.0.1:%d" % f.port, "top",
                    "--iterations", "2", "--interval", "100"], capture_output=True, timeout=30)
out = p.stdout.decode()
t.eq(0, p.returncode, "fencectl top exits 0", p.stderr.decode())
t.check("role leader" in out and "health: leader, ready" in out, "top shows role and health", out)
t.check(re.search(r"^job:07 +1 ", out, re.M) is not None, "top lists the contended lock", out)
t.check(out.count("--\n") == 2 and "grants/s" in out, "two frames with grants/s", out)
w.join()
p = subprocess.run([binary("fencectl"), "--server", "127.0.0.1:1", "top", "--iterations", "1"],
                   capture_output=True, timeout=30)
t.eq(69, p.returncode, "fencectl top exits 69 when the server is unreachable")
t.eq(0, f.stop(), "fenced stops cleanly")
t.finish()
