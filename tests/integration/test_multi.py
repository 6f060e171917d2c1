#!/usr/bin/python3
"""LOCK.MULTI and ACQUIRE.MULTI against a real fenced (issue 21, section 4):
all names or none with one token; a waiter holds nothing and is granted
every name at once when the last one frees; UNLOCK of any one name
releases all; two multi-locks over the same names in opposite orders do
not deadlock; bad requests (duplicate names, no names, too many, a name
spelled SIGNED) get clear errors; the ACL checks every name against the
user's ~patterns; COMMAND DOCS lists both; the state survives a restart
(snapshot and log replay)."""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import TMP, Fenced, Tap, redis  # noqa: E402
from fencetest import wait_for  # noqa: E402


def err_of(fn):
    """The error text fn raises (redis-py), or None."""
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        return str(e)
    return None


t = Tap()
f = Fenced("fenced", args=[]).start()
c = f.client()
l1 = c.execute_command("LEASE.GRANT", 60000)
l2 = c.execute_command("LEASE.GRANT", 60000)
l3 = c.execute_command("LEASE.GRANT", 60000)

# All at once, one token at every name.
tok = c.execute_command("LOCK.MULTI", l1, "acct:1", "acct:2", "acct:3")
t.check(isinstance(tok, int) and tok > 0, "LOCK.MULTI replies one token", tok)
infos = [c.execute_command("LOCK.INFO", n) for n in ("acct:1", "acct:2", "acct:3")]
t.check(all(i is not None and i[0] == tok and i[1] == l1 for i in infos),
        "every name is held by the lease with that token", infos)
t.eq(tok, c.execute_command("LOCK.MULTI", l1, "acct:3", "acct:1", "acct:2"),
     "the same set again is reentrant (any order)")
t.eq(None, c.execute_command("LOCK.MULTI", l2, "acct:3", "free:9"),
     "busy without WAIT: nil")
t.eq(None, c.execute_command("LOCK.INFO", "free:9"), "and it took nothing (all or none)")

# A waiter holds nothing; it gets every name when the last one frees.
res = {}


def waiter():
    w = f.client()
    res["tok"] = w.execute_command("LOCK.MULTI", l2, "free:9", "acct:2", "WAIT", 20000)
    w.close()


th = threading.Thread(target=waiter)
th.start()
ok = wait_for(lambda: (lambda i: i is not None and i[3] == 1)(c.execute_command("LOCK.INFO", "acct:2")))
t.check(ok, "the multi-lock waits on acct:2 (LOCK.INFO counts it)")
t.eq(None, c.execute_command("LOCK.INFO", "free:9"), "a waiter holds none of its names")
t.eq(None, c.execute_command("LOCK", "free:9", l3),
     "a free name a multi-lock waits for is kept for it (FIFO): LOCK gets nil")
t.eq(1, c.execute_command("UNLOCK", "acct:1", tok), "UNLOCK of one name with the token")
th.join(30)
t.check(not th.is_alive() and res.get("tok", 0) > tok, "the waiter got a newer token", res)
t.eq(None, c.execute_command("LOCK.INFO", "acct:3"), "UNLOCK released every name of it")
i9, i2 = c.execute_command("LOCK.INFO", "free:9"), c.execute_command("LOCK.INFO", "acct:2")
t.check(i9[0] == i2[0] == res["tok"] and i9[1] == i2[1] == l2,
        "the waiter holds both names with its one token", [i9, i2])
t.eq(0, c.execute_command("UNLOCK", "acct:2", tok), "the old token releases nothing")

# Opposite orders, both waiting: no deadlock.
l4 = c.execute_command("LEASE.GRANT", 60000)
l5 = c.execute_command("LEASE.GRANT", 60000)
out = {}


def take(lease, names, key):
    w = f.client()
    out[key] = w.execute_command("LOCK.MULTI", lease, *names, "WAIT", 20000)
    w.close()


ta = threading.Thread(target=take, args=(l4, ["free:9", "acct:2", "z"], "a"))
tb = threading.Thread(target=take, args=(l5, ["z", "acct:2", "free:9"], "b"))
ta.start()
t.check(wait_for(lambda: c.execute_command("LOCK.INFO", "acct:2")[3] == 1), "the first multi-lock waits")
tb.start()
t.check(wait_for(lambda: c.execute_command("LOCK.INFO", "acct:2")[3] == 2), "the second multi-lock waits too")
c.execute_command("LEASE.REVOKE", l2)
ta.join(30)
t.check(out.get("a", 0) > res["tok"] and "b" not in out, "the first queued is served first",
        out)
c.execute_command("UNLOCK", "z", out["a"])
tb.join(30)
t.check(out.get("b", 0) > out["a"], "then the second: no deadlock", out)

# ACQUIRE.MULTI: a dedicated lease; UNLOCK revokes it too.
tk, lease = c.execute_command("ACQUIRE.MULTI", 5000, "job:a", "job:b")
t.check(tk > out["b"] and lease > 0, "ACQUIRE.MULTI replies [token, lease]", [tk, lease])
t.eq(None, c.execute_command("ACQUIRE.MULTI", 5000, "job:b", "job:c"), "busy: nil")
t.eq(1, c.execute_command("UNLOCK", "job:b", tk), "UNLOCK of one of its names")
t.check(err_of(lambda: c.execute_command("LEASE.INFO", lease)) is not None
        or c.execute_command("LEASE.INFO", lease) is None, "and its lease is gone")

# Bad requests.
e = err_of(lambda: c.execute_command("LOCK.MULTI", l3, "d", "e", "d"))
t.check(e is not None and "duplicate lock name 'd'" in e, "a duplicate name: ERR says which", e)
e = err_of(lambda: c.execute_command("LOCK.MULTI", l3, "WAIT", 10))
t.check(e is not None and "1..64" in e, "no names: ERR", e)
e = err_of(lambda: c.execute_command("LOCK.MULTI", l3, *["n%d" % i for i in range(65)]))
t.check(e is not None and "1..64" in e, "65 names: ERR", e)
t.check(isinstance(c.execute_command("LOCK.MULTI", l3, *["n%d" % i for i in range(64)],
                                     "WAIT", 10, "REQID", 5), int), "64 names with options fit")
e = err_of(lambda: c.execute_command("LOCK.MULTI", l3, "a1", "SIGNED"))
t.check(e is not None and "SIGNED" in e, "SIGNED is refused, not taken for a name", e)
e = err_of(lambda: c.execute_command("LOCK.MULTI", 0, "a1"))
t.check(e is not None and e.startswith("NOLEASE"), "lease 0: NOLEASE", e)
e = err_of(lambda: c.execute_command("LOCK.MULTI", l3, "a1", "WAIT", "x"))
t.check(e is not None and "WAIT" in e, "a bad WAIT value: ERR", e)
e = err_of(lambda: c.execute_command("LOCK.MULTI", l3, "acct:7", "n3"))
t.check(e is not None and e.startswith("invalid request"),
        "a set overlapping what the lease holds: ERR (it would wait for itself)", e)

# COMMAND DOCS.
for cmd in ("LOCK.MULTI", "ACQUIRE.MULTI"):
    docs = c.execute_command("COMMAND DOCS", cmd)
    t.check(docs is not None and "multiple" in repr(docs) and "WAIT" in repr(docs),
            "COMMAND DOCS %s: the names repeat, WAIT is an option" % cmd, docs)

# The Python client (clients/python, from the source tree).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "clients", "python", "src"))
import fenced  # noqa: E402

pc = fenced.Client("127.0.0.1:%d" % f.port)
pl = pc.lease_grant(30000)
ptok = pc.lock_multi(["py:1", "py:2"], pl)
t.check(isinstance(ptok, int) and ptok > 0, "Client.lock_multi: one token", ptok)
t.eq(None, pc.lock_multi(["py:2", "py:3"], pc.lease_grant(30000)), "busy: None")
pa = pc.acquire_multi(["py:3", "py:4"], 30000)
t.check(pa is not None and pa[0] > ptok, "Client.acquire_multi: (token, lease)", pa)
t.check(pc.unlock("py:2", ptok) and pc.lock_info("py:1") is None,
        "Client.unlock of one name releases the multi-lock")
pc.close()


async def aio_case():
    ac = fenced.aio.Client("127.0.0.1:%d" % f.port)
    try:
        lease = await ac.lease_grant(30000)
        tok = await ac.lock_multi(["aio:1", "aio:2"], lease)
        got = await ac.acquire_multi(["aio:2", "aio:3"], 30000)
        ok = await ac.unlock("aio:1", tok)
        return tok, got, ok, await ac.lock_info("aio:2")
    finally:
        await ac.close()


import asyncio  # noqa: E402
import fenced.aio  # noqa: E402

atok, agot, aok, ainfo = asyncio.run(aio_case())
t.check(isinstance(atok, int) and agot is None and aok and ainfo is None,
        "fenced.aio: lock_multi, a busy acquire_multi (None), unlock of one name releases both",
        [atok, agot, aok, ainfo])

# The state survives a restart.
before = [c.execute_command("LOCK.INFO", n) for n in ("n0", "n63", "z", "free:9", "py:4")]
c.close()
t.eq(0, f.stop(), "fenced stops cleanly")
f.start()
c = f.client()
after = [c.execute_command("LOCK.INFO", n) for n in ("n0", "n63", "z", "free:9", "py:4")]
t.eq([b[:2] if b else None for b in before], [a[:2] if a else None for a in after],
     "after a restart the multi-locks are held alike")
c.close()
t.eq(0, f.stop(), "fenced stops")

# ACL: every name is a key.
acl = os.path.join(TMP, "users.acl")
with open(acl, "w") as fh:
    fh.write("user default on nopass ~* +@all\n"
             "user alice on >al1ce-pw-x ~orders:* +@all -@admin\n")
g = Fenced("acl", args=["--acl-file", acl]).start()
a = g.client(username="alice", password="al1ce-pw-x")
la = a.execute_command("LEASE.GRANT", 60000)
t.check(isinstance(a.execute_command("LOCK.MULTI", la, "orders:1", "orders:2", "WAIT", 5), int),
        "alice may lock orders:* names together")
e = err_of(lambda: a.execute_command("LOCK.MULTI", la, "orders:3", "billing:1"))
t.check(e is not None and "No permissions to access a key" in e,
        "one name outside ~orders:* refuses the whole request", e)
e = err_of(lambda: a.execute_command("ACQUIRE.MULTI", 5000, "billing:1", "orders:4"))
t.check(e is not None and "No permissions" in e, "ACQUIRE.MULTI too, whatever the position", e)
t.check(a.execute_command("LOCK.INFO", "orders:3") is None, "and nothing was taken")
a.close()
t.eq(0, g.stop(), "fenced (ACL) stops cleanly")
t.finish()
