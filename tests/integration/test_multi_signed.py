#!/usr/bin/python3
"""SIGNED multi-locks (issue 21): LOCK.MULTI / ACQUIRE.MULTI ... SIGNED
reply one signed token string per name, in the order of the names, each the
one token signed for that name alone (docs/security.md, "Signed tokens of a
multi-lock").  Against a real fenced with a signing key and a fence-store
that verifies signed tokens: each name's string is admitted at its name; no
string is admitted at another name of the set, at a name outside it, or
altered; a waiting signed multi-lock gets its strings when granted; the
reentrant answer and a REQID retry give the same strings; SIGNED must be
last and is never a name (an ACL user limited to ~acct:* may use it); a
server without a key refuses SIGNED and grants nothing."""
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import TMP, Fenced, Tap, redis  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import fencetest  # noqa: E402
from fencetest import binary, free_port, spawn, wait_port  # noqa: E402

FENCECTL = binary("fencectl", env="FENCECTL")
STORE = binary("fence-store", env="FENCE_STORE")
for p in (FENCECTL, STORE):
    if not os.access(p, os.X_OK):
        fencetest.skip("%s is not built" % p)
t = Tap()
keys = os.path.join(TMP, "keys")
subprocess.run([FENCECTL, "keygen", keys, "--key-id", "k1"], stdout=subprocess.DEVNULL,
               check=True)
acl = os.path.join(TMP, "users.acl")
with open(acl, "w") as fh:
    fh.write("user default on nopass ~* +@all\n"
             "user alice on >al1ce-pw-x ~acct:* +@all -@admin\n")
os.chmod(acl, 0o600)
f = Fenced("fenced", args=["--token-signing-key", os.path.join(keys, "signing.key"),
                          "--acl-file", acl]).start()
plain = Fenced("plain").start()
sport = free_port()
store_proc = spawn([STORE, "--port", str(sport), "--data-dir", os.path.join(TMP, "store"),
                    "--token-verify-keys", os.path.join(keys, "verify.keys")],
                   os.path.join(TMP, "store.log"))
wait_port(sport, 20)
x = f.client().execute_command
st = redis.Redis(host="127.0.0.1", port=sport, decode_responses=True).execute_command


def err(*args, via=None):
    try:
        (via or x)(*args)
    except redis.ResponseError as e:
        return str(e)
    return None


def admit(name, tok):
    try:
        return st("FENCE.ADMIT", name, tok)
    except redis.ResponseError as e:
        return str(e)


lease = x("LEASE.GRANT", 60000)
names = ["acct:42", "acct:17", "acct:99"]
got = x("LOCK.MULTI", lease, *names, "SIGNED")
t.check(isinstance(got, list) and len(got) == 3, "LOCK.MULTI SIGNED: one string per name", got)
tokens = {s.split(".")[0] for s in got}
t.eq(1, len(tokens), "every string carries the one token", got)
token = int(tokens.pop())
t.eq(token, x("LOCK.INFO", "acct:99")[0], "the number is the token every name records")
t.eq(3, len(set(got)), "each name has its own signature")
for name, s in zip(names, got):
    t.eq("OK", admit(name, s), "fence-store admits %s's string at %s" % (name, name))
for i, name in enumerate(names):
    other = names[(i + 1) % 3]
    t.check(admit(other, got[i]).startswith("BADTOKEN"),
            "%s's string is refused at %s (another name of the set)" % (name, other))
    t.check(admit("acct:5", got[i]).startswith("BADTOKEN"),
            "%s's string is refused at acct:5 (outside the set)" % name)
num, kid, sig = got[0].split(".")
t.check(admit(names[0], "%d.%s.%s" % (token + 1, kid, sig)).startswith("BADTOKEN"),
        "a string whose number was raised is refused")
flip = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]
t.check(admit(names[0], "%s.%s.%s" % (num, kid, flip)).startswith("BADTOKEN"),
        "a string whose signature was altered is refused")
t.check(admit(names[0], str(token)).startswith("BADTOKEN"), "the bare number is refused")
# Reentrant: the same names (another order) by the same lease: the same
# token, the strings in this request's order.
again = x("LOCK.MULTI", lease, *reversed(names), "SIGNED")
t.eq(list(reversed(got)), again, "the reentrant answer signs the names in the request's order")
rq = x("LOCK.MULTI", lease, "acct:1", "acct:2", "REQID", 777, "SIGNED")
t.eq(rq, x("LOCK.MULTI", lease, "acct:1", "acct:2", "REQID", 777, "SIGNED"),
     "a REQID retry gets the same strings")

# ACQUIRE.MULTI: [[strings], lease]; a waiting one gets its strings later.
r = x("ACQUIRE.MULTI", 30000, "inv:a", "inv:b", "SIGNED")
t.check(isinstance(r, list) and len(r) == 2 and isinstance(r[0], list) and len(r[0]) == 2
        and isinstance(r[1], int), "ACQUIRE.MULTI SIGNED: [[string per name], lease]", r)
res = {}


def waiter():
    c = f.client()
    res["w"] = c.execute_command("ACQUIRE.MULTI", 30000, "inv:b", "inv:c", "WAIT", 20000,
                                 "SIGNED")


th = threading.Thread(target=waiter)
th.start()
fencetest.wait_for(lambda: x("LOCK.INFO", "inv:b")[3] == 1, timeout=20)
t.eq(1, x("UNLOCK", "inv:a", int(r[0][0].split(".")[0])), "the first multi-lock lets go")
th.join(20)
w = res.get("w")
t.check(isinstance(w, list) and len(w[0]) == 2, "the waiting signed multi-lock is granted", w)
if isinstance(w, list):
    t.eq("OK", admit("inv:b", w[0][0]), "its string for inv:b is admitted at inv:b")
    t.eq("OK", admit("inv:c", w[0][1]), "its string for inv:c is admitted at inv:c")
    t.check(int(w[0][0].split(".")[0]) > int(r[0][0].split(".")[0]), "with a higher token")
    t.check(admit("inv:b", r[0][1]).startswith("STALE"),
            "the first holder's inv:b string is stale there now")

# A client that hangs up while its signed multi-lock waits: the wait is
# cancelled and the names it kept are freed (under ASan: no leak).
import socket  # noqa: E402
from fencetest import encode_command  # noqa: E402
sk = socket.create_connection(("127.0.0.1", f.port))
sk.sendall(encode_command(["ACQUIRE.MULTI", "30000", "inv:b", "inv:z", "WAIT", "20000",
                           "SIGNED"]))
fencetest.wait_for(lambda: x("LOCK.INFO", "inv:b")[3] == 1, timeout=20)
sk.close()
fencetest.wait_for(lambda: x("LOCK.INFO", "inv:b")[3] == 0, timeout=20)
t.eq(0, x("LOCK.INFO", "inv:b")[3], "a hung-up signed waiter leaves the queue")

# SIGNED is an option word: last only, never a name; the ACL sees names only.
e = err("LOCK.MULTI", lease, "acct:7", "SIGNED", "WAIT", 10)
t.check(e is not None and "syntax error" in e, "SIGNED not last: ERR syntax error", e)
t.eq(None, x("LOCK.INFO", "acct:7"), "and nothing was taken")
e = err("LOCK.MULTI", lease, "SIGNED")
t.check(e is not None and "1..64" in e, "SIGNED alone is no name (ERR 1..64 names)", e)
al = f.client()
al.execute_command("AUTH", "alice", "al1ce-pw-x")
al_lease = al.execute_command("LEASE.GRANT", 30000)
r = al.execute_command("LOCK.MULTI", al_lease, "acct:m1", "acct:m2", "SIGNED")
t.check(isinstance(r, list) and len(r) == 2, "alice (~acct:*) may LOCK.MULTI ... SIGNED", r)
e = err("LOCK.MULTI", al_lease, "acct:m3", "other", "SIGNED", via=al.execute_command)
t.check(e is not None and "No permissions" in e, "and not with a name outside her patterns",
        e)

# A server without a key: refused before anything is granted.
px = plain.client().execute_command
pl = px("LEASE.GRANT", 30000)
e = err("LOCK.MULTI", pl, "p:a", "p:b", "SIGNED", via=px)
t.check(e is not None and "signing" in e, "no signing key: LOCK.MULTI SIGNED is refused", e)
e = err("ACQUIRE.MULTI", 5000, "p:a", "SIGNED", via=px)
t.check(e is not None and "signing" in e, "no signing key: ACQUIRE.MULTI SIGNED is refused", e)
t.eq(None, px("LOCK.INFO", "p:a"), "and nothing was taken")
t.eq(pl + 1, px("LEASE.GRANT", 30000), "no dedicated lease was made (the next id is pl + 1)")
t.eq(0, f.stop(), "fenced stops cleanly (under ASan: no leak)")
t.finish()
