#!/usr/bin/python3
"""Shared (read/write) locks against a real fenced (issue 21 section 2):
LOCK/ACQUIRE ... SHARED give the holders of one phase one token; LOCK.INFO
shows the mode and the holders; a queued writer holds back later readers
and gets a higher token when the phase ends; plain UNLOCK of a shared
token names the LEASE form; UNLOCK name token LEASE lease releases one
holder; REQID retries; COMMAND DOCS; the arguments' errors; and the shared
holds survive a restart from snapshot and log."""
import os
import socket
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap, redis  # noqa: E402
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fencetest import binary, wait_for  # noqa: E402

t = Tap()
# Snapshots every few entries (forked; the least trailing fenced allows, 1:
# 0 is refused since it lost acknowledged entries, test_fenced_trailing.py).
f = Fenced("fenced", args=["--snapshot-threshold", "4", "--snapshot-trailing", "1"]).start()
c = f.client()


def err(fn):
    """The error text fn raises, or None."""
    try:
        fn()
    except redis.ResponseError as e:
        return "%s %s" % (type(e).__name__, e)  # NOPERM: NoPermissionError
    return None


# Two readers with their own leases: one phase, one token.
a = c.execute_command("LEASE.GRANT", 60000)
b = c.execute_command("LEASE.GRANT", 60000)
ta = c.execute_command("LOCK", "db", a, "SHARED")
tb = c.execute_command("LOCK", "db", b, "SHARED", "WAIT", 100)
t.eq(ta, tb, "two shared LOCKs of one phase carry one token")
t.eq(ta, c.execute_command("LOCK", "db", a, "SHARED"), "a reentrant shared LOCK: the same token")
info = c.execute_command("LOCK.INFO", "db")
t.check(info is not None and info[0] == ta and info[4] == "shared" and
        [h[0] for h in info[5]] == [a, b] and all(0 < h[1] <= 60000 for h in info[5]),
        "LOCK.INFO: token, \"shared\" and both holders with their time left", info)
# ACQUIRE SHARED joins the phase with a dedicated lease.
acq = c.execute_command("ACQUIRE", "db", 30000, "SHARED")
t.check(acq[0] == ta and acq[1] not in (a, b), "ACQUIRE ... SHARED joins with its own lease", acq)
t.eq(1, c.execute_command("UNLOCK", "db", acq[0], "LEASE", acq[1]),
     "UNLOCK name token LEASE lease releases that holder")
t.check(err(lambda: c.execute_command("LEASE.KEEPALIVE", acq[1])) is not None,
        "... and ends ACQUIRE's dedicated lease")
# Modes do not mix within one lease.
e = err(lambda: c.execute_command("LOCK", "db", a))
t.check(e is not None and "other mode" in e, "an exclusive LOCK of a shared holder's lease: error", e)
# A writer queues; a later reader is held back.
w = c.execute_command("LEASE.GRANT", 60000)
got = {}


def writer():
    wc = f.client()
    got["token"] = wc.execute_command("LOCK", "db", w, "WAIT", 20000)
    wc.close()


th = threading.Thread(target=writer, daemon=True)
th.start()
wait_for(lambda: c.execute_command("LOCK.INFO", "db")[3] == 1)
t.eq(1, c.execute_command("LOCK.INFO", "db")[3], "the writer waits")
d = c.execute_command("LEASE.GRANT", 60000)
t.eq(None, c.execute_command("LOCK", "db", d, "SHARED"),
     "a reader after the queued writer is held back (nil)")
e = err(lambda: c.execute_command("UNLOCK", "db", ta))
t.check(e is not None and "LEASE" in e, "plain UNLOCK of a shared token names the LEASE form", e)
t.eq(0, c.execute_command("UNLOCK", "db", ta, "LEASE", w), "UNLOCK ... LEASE of a non-holder: 0")
t.eq(0, c.execute_command("UNLOCK", "db", ta + 99, "LEASE", a), "UNLOCK ... LEASE, wrong token: 0")
t.eq(1, c.execute_command("UNLOCK", "db", ta, "LEASE", a), "the first reader releases")
t.eq(1, c.execute_command("UNLOCK", "db", ta, "LEASE", b), "the second reader releases")
th.join(20)
t.check(got.get("token", 0) > ta, "the writer is granted a higher token after the phase", got)
t.eq(1, c.execute_command("UNLOCK", "db", got["token"]), "the writer unlocks as usual")
# REQID: a retry answers alike; the same id for the exclusive form is refused.
r1 = c.execute_command("LOCK", "rq", d, "SHARED", "REQID", 41)
t.eq(r1, c.execute_command("LOCK", "rq", d, "SHARED", "REQID", 41), "REQID retry of a shared LOCK")
t.check(err(lambda: c.execute_command("LOCK", "rq", d, "REQID", 41)) is not None,
        "the same REQID without SHARED is another request: error")
# Argument errors.
for args, what in [(("LOCK", "x", d, "SHARED", "SHARED"), "SHARED twice"),
                   (("UNLOCK", "x", 1, "LEASE"), "LEASE without a value"),
                   (("UNLOCK", "x", 1, "LAESE", 2), "a misspelt LEASE"),
                   (("UNLOCK", "x", 1, "LEASE", "z"), "a lease that is no number"),
                   (("LEASE.GRANT", 1000, "SHARED"), "SHARED on LEASE.GRANT")]:
    t.check(err(lambda: c.execute_command(*args)) is not None, "error: " + what)
# COMMAND DOCS shows the new arguments.
# (raw: redis-py parses COMMAND replies its own way)
raw = socket.create_connection(("127.0.0.1", f.port), timeout=10)
raw.sendall(b"*4\r\n$7\r\nCOMMAND\r\n$4\r\nDOCS\r\n$4\r\nLOCK\r\n$6\r\nUNLOCK\r\n")
text = b""
while b"pure-token" not in text or b"LEASE" not in text:
    chunk = raw.recv(65536)
    if not chunk:
        break
    text += chunk
raw.close()
text = text.decode("utf-8", "replace")
t.check("SHARED" in text and "LEASE" in text, "COMMAND DOCS: SHARED on LOCK, LEASE on UNLOCK")
# A shared-held lock is held for LOCK.MULTI (multi-locks, issue 21 section 4).
ma = c.execute_command("LEASE.GRANT", 60000)
mb = c.execute_command("LEASE.GRANT", 60000)
mc = c.execute_command("LEASE.GRANT", 60000)
tm = c.execute_command("LOCK", "mx", ma, "SHARED")
t.eq(None, c.execute_command("LOCK.MULTI", mb, "mx", "my"),
     "LOCK.MULTI naming a shared-held lock: nil without WAIT")
t.eq(None, c.execute_command("LOCK.INFO", "my"), "... and it took nothing")
t.check(err(lambda: c.execute_command("LOCK.MULTI", ma, "my", "mx", "WAIT", 100)) is not None,
        "LOCK.MULTI by a shared holder of one of its names: error (it would wait for itself)")
e = err(lambda: c.execute_command("LOCK.MULTI", mb, "mx", "my", "SHARED"))
t.check(e is not None and "SHARED" in e, "LOCK.MULTI ... SHARED: error, not a lock named SHARED", e)
mgot = {}


def multi_waiter():
    mcl = f.client()
    mgot["token"] = mcl.execute_command("LOCK.MULTI", mb, "mx", "my", "WAIT", 20000)
    mcl.close()


th = threading.Thread(target=multi_waiter, daemon=True)
th.start()
wait_for(lambda: c.execute_command("LOCK.INFO", "mx")[3] == 1)
t.eq(None, c.execute_command("LOCK", "mx", mc, "SHARED"),
     "a reader after the queued multi-lock is held back (nil)")
t.eq(None, c.execute_command("LOCK", "my", mc, "SHARED"),
     "a name kept for the queued multi-lock is not free for a reader")
t.eq(1, c.execute_command("UNLOCK", "mx", tm, "LEASE", ma), "the reader releases")
th.join(20)
t.check(mgot.get("token", 0) > tm, "the multi-lock gets both names, token above the phase's", mgot)
t.eq(mgot.get("token"), c.execute_command("LOCK.INFO", "my")[0], "... the same token on the other")
t.eq(1, c.execute_command("UNLOCK", "my", mgot["token"]), "UNLOCK of one name releases it")
t2 = c.execute_command("LOCK", "mx", mc, "SHARED")
t.check(t2 > mgot["token"], "the next shared phase has a higher token", (t2, mgot))
t.eq(1, c.execute_command("UNLOCK", "mx", t2, "LEASE", mc), "and is released")
# One name space: an election's name is no lock, shared or not.
el = c.execute_command("LEASE.GRANT", 60000)
etok = c.execute_command("ELECTION.CAMPAIGN", "el", el, "v")[0]
e = err(lambda: c.execute_command("LOCK", "el", el, "SHARED"))
t.check(e is not None and "WRONGTYPE" in e, "LOCK ... SHARED of an election: WRONGTYPE", e)
e = err(lambda: c.execute_command("UNLOCK", "el", etok, "LEASE", el))
t.check(e is not None and "WRONGTYPE" in e, "UNLOCK ... LEASE of an election: WRONGTYPE", e)
t.check(c.execute_command("ELECTION.RESIGN", "el", etok) in (1, b"OK", "OK"),
        "the election is unchanged and resigns")
# Shared holds survive a restart (snapshots every few entries, then the log).
s1 = c.execute_command("LEASE.GRANT", 120000)
s2 = c.execute_command("LEASE.GRANT", 120000)
tk = c.execute_command("LOCK", "keep", s1, "SHARED")
c.execute_command("LOCK", "keep", s2, "SHARED")
for _ in range(10):
    c.execute_command("LEASE.KEEPALIVE", s1)
c.close()
f.stop()
f.start()
c = f.client()
info = c.execute_command("LOCK.INFO", "keep")
t.check(info is not None and info[0] == tk and info[4] == "shared" and
        [h[0] for h in info[5]] == [s1, s2], "after a restart: the same phase and holders",
        (tk, info))
t.eq(tk, c.execute_command("LOCK", "keep", c.execute_command("LEASE.GRANT", 60000), "SHARED"),
     "a new reader joins the restored phase with its token")
cur, page = c.execute_command("LOCK.LIST", "keep")
t.check(page and page[0][1] == tk and page[0][2] == s1, "LOCK.LIST: the phase's token, first holder",
        page)
# The Python client: shared locks as context managers, LOCK.INFO parsed.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "clients", "python", "src"))
import fenced  # noqa: E402

pc = fenced.Client("127.0.0.1:%d" % f.port)
with pc.lock("py", ttl_ms=5000, shared=True) as r1, pc.lock("py", ttl_ms=5000, shared=True) as r2:
    t.eq(r1.token, r2.token, "python: two shared locks of one phase, one token")
    li = pc.lock_info("py")
    t.check(li.shared and [h[0] for h in li.holders] == [r1.lease, r2.lease],
            "python: lock_info shows shared and both holders", li)
t.eq(None, pc.lock_info("py"), "python: leaving both blocks released the shared lock")
with pc.lock("py", ttl_ms=5000) as wl:
    t.check(wl.token > r1.token and not pc.lock_info("py").shared,
            "python: an exclusive lock after the phase, a higher token")
pc.close()
# fencectl lock --shared: two readers run at once with one token.
fencectl = binary("fencectl", env="FENCECTL")
srv = "127.0.0.1:%d" % f.port
# The first reader holds until the test creates its done file (bounded: 60 s).
done = os.path.join(f.dir, "rw-done")
rd = subprocess.Popen([fencectl, "--server", srv, "lock", "fc", "--shared", "--", "sh", "-c",
                       "echo $FENCE_TOKEN; i=0; while [ ! -e \"$0\" ] && [ $i -lt 1200 ]; do "
                       "sleep 0.05; i=$((i + 1)); done", done],
                      stdout=subprocess.PIPE, text=True)
first = rd.stdout.readline().strip()
second = subprocess.run([fencectl, "--server", srv, "lock", "fc", "--shared", "--", "sh", "-c",
                         "echo $FENCE_TOKEN"], capture_output=True, text=True, timeout=30)
t.check(second.returncode == 0 and second.stdout.strip() == first,
        "fencectl lock --shared: a second reader runs at once with the first's token",
        (first, second.stdout, second.stderr))
open(done, "w").close()
rd.wait(30)
c.close()
f.stop()
# ACL: a user limited to ~orders:* takes shared locks on orders:* only, and
# another user cannot release its hold.
acl = os.path.join(f.dir, "users.acl")
with open(acl, "w") as fh:
    fh.write("user alice on >al1ce-pw-x ~orders:* +@all -@admin\n"
             "user bob on >b0b-pw-x ~* +@all -@admin\n")
g = Fenced("acl", args=["--acl-file", acl])
g.env = {"FENCE_PASSWORD": ""}
g.start(wait_ready=False)
alice = g.client(username="alice", password="al1ce-pw-x")
bob = g.client(username="bob", password="b0b-pw-x")
wait_for(lambda: alice.execute_command("LEASE.GRANT", 1000) > 0,
         errors=(OSError, redis.RedisError))  # TRYAGAIN while the leader starts
la = alice.execute_command("LEASE.GRANT", 60000)
tok = alice.execute_command("LOCK", "orders:1", la, "SHARED")
t.check(tok > 0, "acl: alice takes orders:1 shared")
e = err(lambda: alice.execute_command("LOCK", "other:1", la, "SHARED"))
t.check(e is not None and "NoPermission" in e, "acl: alice may not lock other:1 shared", e)
e = err(lambda: alice.execute_command("UNLOCK", "other:1", 1, "LEASE", la))
t.check(e is not None and "NoPermission" in e, "acl: nor UNLOCK ... LEASE it", e)
e = err(lambda: bob.execute_command("UNLOCK", "orders:1", tok, "LEASE", la))
t.check(e is not None and "NoPermission" in e, "acl: bob may not release alice's shared hold", e)
t.eq(1, alice.execute_command("UNLOCK", "orders:1", tok, "LEASE", la), "acl: alice releases it")
alice.close()
bob.close()
g.stop()
t.finish()
