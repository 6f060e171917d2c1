#!/usr/bin/python3
"""Semaphores of slots against a real fenced (issue 21 section 3,
docs/protocol.md SEM.ACQUIRE / SEM.RELEASE / SEM.INFO):
  - the lowest free slot first, tokens from the one counter, nil when full,
    a blocked SEM.ACQUIRE ... WAIT answered with the freed slot and a new
    token, FIFO;
  - N is fixed by the first acquire: another N is WRONGTYPE naming the N;
    LOCK / ACQUIRE / UNLOCK of the semaphore's name or of a slot's name
    (jobs#1) are WRONGTYPE while it exists, and ordinary locks after;
  - the TTL form replies [slot, token, lease] and SEM.RELEASE revokes that
    lease; an expired lease frees its slot for the next waiter;
  - REQID retries; SEM.INFO; bad input answers ERR;
  - the state survives a restart; a user limited to ~orders:* can use
    orders:* semaphores only, and one whose patterns do not cover the slot
    names name#i cannot take the semaphore; COMMAND DOCS lists the three
    commands."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import TMP, Fenced, Tap, redis  # noqa: E402
from fencetest import wait_for  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "clients", "python", "src"))
import fenced  # noqa: E402

t = Tap()


def err(fn, *args):
    """The error text of a call that should fail (None if it did not)."""
    try:
        fn(*args)
    except redis.ResponseError as e:
        return str(e)
    return None


acl = os.path.join(TMP, "users.acl")
with open(acl, "w") as fh:
    fh.write("user default on nopass ~* +@all\n"
             "user alice on >al1ce-pw-x ~orders:* +@all -@admin\n"
             "user bob on >b0b-pw-x ~exact ~both ~both#* +@all -@admin\n")
os.chmod(acl, 0o600)
f = Fenced("fenced", args=["--acl-file", acl, "--snapshot-threshold", "8",
                          "--snapshot-trailing", "2"]).start()
c = f.client()
x = c.execute_command

leases = [x("LEASE.GRANT", 60000) for _ in range(4)]
r0 = x("SEM.ACQUIRE", "jobs", 2, leases[0])
r1 = x("SEM.ACQUIRE", "jobs", 2, leases[1])
t.eq(0, r0[0], "first acquire gets slot 0")
t.eq(1, r1[0], "second acquire gets slot 1")
t.check(r1[1] > r0[1] > 0, "tokens grow", (r0, r1))
t.eq(r0, x("SEM.ACQUIRE", "jobs", 2, leases[0]), "a lease acquiring again gets its slot")
t.eq(None, x("SEM.ACQUIRE", "jobs", 2, leases[2]), "full without WAIT: nil")

# Two waiters, FIFO: the first gets the first freed slot.
got = {}


def wait_for_slot(key, lease):
    cc = f.client()
    got[key] = cc.execute_command("SEM.ACQUIRE", "jobs", 2, lease, "WAIT", 20000)
    cc.close()


th = threading.Thread(target=wait_for_slot, args=("a", leases[2]))
th.start()
info = wait_for(lambda: (lambda i: i if i and i[2] == 1 else None)(x("SEM.INFO", "jobs")))
t.eq(1, info[2] if info else None, "SEM.INFO counts the waiter")
th2 = threading.Thread(target=wait_for_slot, args=("b", leases[3]))
th2.start()
info = wait_for(lambda: (lambda i: i if i and i[2] == 2 else None)(x("SEM.INFO", "jobs")))
t.eq(2, info[0] and info[2] if info else None, "two waiters queued")
t.eq([[0, r0[1], leases[0]], [1, r1[1], leases[1]]],
     [s[:3] for s in info[1]], "SEM.INFO lists slot, token, lease")
t.eq(0, x("SEM.RELEASE", "jobs", 1, r0[1]), "release with another slot's token: 0")
t.eq(1, x("SEM.RELEASE", "jobs", 1, r1[1]), "release slot 1: 1")
th.join(30)
t.check(got.get("a") is not None and got["a"][0] == 1 and got["a"][1] > r1[1],
        "the first waiter gets slot 1 with a new token", got.get("a"))
t.check("b" not in got, "the second still waits")
t.eq(1, x("SEM.RELEASE", "jobs", 0, r0[1]), "release slot 0")
th2.join(30)
t.check(got.get("b") is not None and got["b"][0] == 0 and got["b"][1] > got["a"][1],
        "the second waiter gets slot 0", got.get("b"))

# One name space.
e = err(x, "SEM.ACQUIRE", "jobs", 3, leases[0])
t.check(e is not None and e.startswith("WRONGTYPE") and "2 permits" in e,
        "another N: WRONGTYPE with the current N", e)
for cmd in (("LOCK", "jobs#1", leases[0]), ("LOCK", "jobs#0", leases[0], "WAIT", 100),
            ("LOCK", "jobs", leases[0]), ("ACQUIRE", "jobs#1", 1000),
            ("UNLOCK", "jobs#1", got["a"][1])):
    e = err(x, *cmd)
    t.check(e is not None and e.startswith("WRONGTYPE"), "%s %s: WRONGTYPE" % cmd[:2], e)
# ... and shared locks: LOCK / ACQUIRE ... SHARED and UNLOCK ... LEASE of a semaphore's name
# or slot are WRONGTYPE; SEM.ACQUIRE takes no SHARED (ERR syntax error).
for cmd in (("LOCK", "jobs#1", leases[2], "SHARED"), ("ACQUIRE", "jobs", 1000, "SHARED"),
            ("LOCK", "jobs#0", leases[2], "SHARED", "WAIT", 100),
            ("UNLOCK", "jobs#1", got["a"][1], "LEASE", leases[0])):
    e = err(x, *cmd)
    t.check(e is not None and e.startswith("WRONGTYPE"), "%s %s ... %s: WRONGTYPE" %
            (cmd[0], cmd[1], cmd[3]), e)
e = err(x, "SEM.ACQUIRE", "jobs", 2, leases[2], "SHARED")
t.check(e is not None and "syntax error" in e and "SHARED" in e, "SEM.ACQUIRE ... SHARED: ERR syntax error", e)
# Multi-locks share the name space: a semaphore's name or slot in LOCK.MULTI / ACQUIRE.MULTI
# is WRONGTYPE (naming the offending name) and nothing is taken.
for cmd, bad in ((("LOCK.MULTI", leases[2], "mfree", "jobs#1"),
                  "jobs#1 is a slot of semaphore jobs"),
                 (("ACQUIRE.MULTI", 5000, "jobs", "mfree", "WAIT", 100),
                  "jobs is a semaphore")):
    e = err(x, *cmd)
    t.check(e is not None and e.startswith("WRONGTYPE") and bad in e,
            "%s over a semaphore's name: WRONGTYPE" % cmd[0], e)
t.eq(None, x("LOCK.INFO", "mfree"), "the refused multi-lock took nothing")
# ... and elections: CAMPAIGN of a semaphore or a slot, and SEM.ACQUIRE of an election.
for name, bad in (("jobs", "jobs is a semaphore"), ("jobs#0", "jobs#0 is a slot of semaphore")):
    e = err(x, "ELECTION.CAMPAIGN", name, leases[2], "host")
    t.check(e is not None and e.startswith("WRONGTYPE") and bad in e,
            "ELECTION.CAMPAIGN %s: WRONGTYPE" % name, e)
x("ELECTION.CAMPAIGN", "elected", leases[3], "host")
e = err(x, "SEM.ACQUIRE", "elected", 2, leases[3])
t.check(e is not None and e.startswith("WRONGTYPE"), "SEM.ACQUIRE of an election: WRONGTYPE", e)
t.check(isinstance(x("LOCK", "jobs#2", leases[0]), int), "jobs#2 (not a slot of 2) is a lock")
e = err(x, "SEM.ACQUIRE", "jobs#2", 1, leases[1])
t.check(e is not None and e.startswith("WRONGTYPE"), "a lock's name as a semaphore: WRONGTYPE",
        e)
x("SEM.RELEASE", "jobs", 1, got["a"][1])
x("SEM.RELEASE", "jobs", 0, got["b"][1])
t.eq(None, x("SEM.INFO", "jobs"), "the semaphore goes when its last slot is released")
t.check(isinstance(x("LOCK", "jobs#1", leases[0]), int), "then jobs#1 is an ordinary lock")

# The TTL form; an expired lease frees its slot.
d = x("SEM.ACQUIRE", "ttl", 1, "TTL", 60000)
t.check(isinstance(d, list) and len(d) == 3 and d[0] == 0, "TTL form: [slot, token, lease]", d)
t.check(isinstance(x("LEASE.INFO", d[2]), list), "its lease is live")
t.eq(1, x("SEM.RELEASE", "ttl", 0, d[1]), "release it")
e = err(x, "LEASE.INFO", d[2])
t.check(e is not None and "NOLEASE" in e, "the release revoked the dedicated lease", e)
short = x("LEASE.GRANT", 300)
s0 = x("SEM.ACQUIRE", "exp", 1, short)
w = x("SEM.ACQUIRE", "exp", 1, "TTL", 60000, "WAIT", 20000)
t.check(w[0] == 0 and w[1] > s0[1], "a waiter gets the slot of an expired lease", (s0, w))

# REQID retries answer the same.
a1 = x("SEM.ACQUIRE", "rq", 3, leases[1], "REQID", 991)
a2 = x("SEM.ACQUIRE", "rq", 3, leases[1], "REQID", 991)
t.eq(a1, a2, "a REQID retry gets the same slot and token")

# Bad input.
for bad, what in ((("SEM.ACQUIRE", "b", 0, leases[0]), "n 0"),
                  (("SEM.ACQUIRE", "b", 1025, leases[0]), "n 1025"),
                  (("SEM.ACQUIRE", "b", 2), "no lease"),
                  (("SEM.ACQUIRE", "b", 2, "TTL"), "TTL without ms"),
                  (("SEM.ACQUIRE", "b", 2, leases[0], "LOCKDELAY", 5), "LOCKDELAY with a lease"),
                  (("SEM.ACQUIRE", "b", 2, leases[0], "WAIT"), "WAIT without ms"),
                  (("SEM.RELEASE", "b", 1024, 1), "slot 1024"),
                  (("SEM.RELEASE", "rq", 3, a1[1]), "slot >= N"),
                  (("SEM.INFO",), "SEM.INFO without a name")):
    e = err(x, *bad)
    t.check(e is not None and "WRONGTYPE" not in e and "NOPERM" not in e,
            "bad input (%s): ERR" % what, e)

# COMMAND DOCS.
conn = c.connection_pool.get_connection("COMMAND")
conn.send_command("COMMAND", "DOCS", "SEM.ACQUIRE", "SEM.RELEASE", "SEM.INFO")
docs = conn.read_response()
c.connection_pool.release(conn)
names = [docs[i].lower() for i in range(0, len(docs), 2)] if isinstance(docs, list) else []
t.eq(["sem.acquire", "sem.release", "sem.info"], names, "COMMAND DOCS has the three commands")

# ACL: a user limited to ~orders:* uses orders:* semaphores only.
ca = f.client(username="alice", password="al1ce-pw-x")
al = ca.execute_command("LEASE.GRANT", 60000)
t.check(isinstance(ca.execute_command("SEM.ACQUIRE", "orders:w", 2, al), list),
        "alice: SEM.ACQUIRE orders:w")
e = err(ca.execute_command, "SEM.ACQUIRE", "jobs2", 2, al)
t.check(e is not None and "permission" in e.lower(), "alice: SEM.ACQUIRE jobs2 is NOPERM", e)
e = err(ca.execute_command, "SEM.INFO", "rq")
t.check(e is not None and "permission" in e.lower(), "alice: SEM.INFO rq is NOPERM", e)
e = err(x, "SEM.RELEASE", "orders:w", 0, x("SEM.INFO", "orders:w")[1][0][1])
t.check(e is None, "default (+@all, so @admin) may release alice's slot", e)
ca.close()
# The slot names are keys too: bob may use "exact" but not "exact#0".
cb = f.client(username="bob", password="b0b-pw-x")
bl = cb.execute_command("LEASE.GRANT", 60000)
e = err(cb.execute_command, "SEM.ACQUIRE", "exact", 2, bl)
t.check(e is not None and "permission" in e.lower(),
        "bob (~exact): SEM.ACQUIRE exact is NOPERM, its slot names are not his", e)
t.check(isinstance(cb.execute_command("SEM.ACQUIRE", "both", 2, bl), list),
        "bob (~both ~both#*): SEM.ACQUIRE both")
cb.close()

# The Python client.
pc = fenced.Client("127.0.0.1:%d" % f.port)
pl = pc.lease_grant(60000)
got_py = pc.sem_acquire("py", 2, pl)
t.check(got_py is not None and got_py[0] == 0, "python: sem_acquire gives slot 0", got_py)
si = pc.sem_info("py")
t.check(si is not None and si.permits == 2 and si.slots[0].token == got_py[1] and
        si.waiters == 0, "python: sem_info", si)
try:
    pc.sem_acquire("py", 3, pl)
    t.check(False, "python: another N raises WrongType")
except fenced.WrongType as e:
    t.check("2 permits" in str(e), "python: another N raises WrongType", str(e))
t.check(pc.sem_release("py", 0, got_py[1]), "python: sem_release")
t.eq(None, pc.sem_info("py"), "python: gone after the release")
pc.close()

# A restart restores the last snapshot (taken every few entries here, with
# the semaphore in it) and replays the rest: the semaphore is back as it was.
for _ in range(20):
    x("LEASE.KEEPALIVE", leases[1])
before = x("SEM.INFO", "rq")
c.close()
t.eq(0, f.stop(), "fenced stops cleanly")
f.start()
c = f.client()
after = c.execute_command("SEM.INFO", "rq")
t.eq(before[0], after[0], "after a restart: the same N")
t.eq([s[:3] for s in before[1]], [s[:3] for s in after[1]], "after a restart: the same holders")
t.check("snapshot" in f.log_text().lower(), "the log mentions snapshots")
c.close()
t.eq(0, f.stop(), "fenced stops cleanly again")
t.finish()
