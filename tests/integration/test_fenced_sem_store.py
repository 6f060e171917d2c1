#!/usr/bin/python3
"""A semaphore's slots fence a real resource (docs/recipes.md, "Semaphores of
slots"): fenced and fence-store, the resource guarding each slot as the
fence name#slot.
  - the paused holder of slot 0 (its lease expired while it slept) is
    fenced out of partition 0 by the next holder of slot 0 (STALE), while
    the holder of slot 1 keeps writing partition 1: its fence is another
    name, so the newer token of slot 0 does not touch it;
  - SIGNED: the signed token of a slot is bound to name#slot, so a store
    that verifies tokens admits it for that slot's fence and refuses it
    (BADTOKEN) for another slot's."""
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import TMP, Fenced, Tap, redis  # noqa: E402
import test_store_helpers as sh  # noqa: E402
from fencetest import binary, skip  # noqa: E402

sh.need_store()
FENCECTL = binary("fencectl", env="FENCECTL")
if not os.access(FENCECTL, os.X_OK):
    skip("%s is not built" % FENCECTL)

t = Tap()


def err(fn, *args):
    try:
        fn(*args)
    except redis.ResponseError as e:
        return str(e)
    return None


keys = os.path.join(TMP, "keys")
subprocess.run([FENCECTL, "keygen", keys, "--key-id", "k1"], check=True,
               stdout=subprocess.DEVNULL)
f = Fenced("fenced", args=["--token-signing-key", os.path.join(keys, "signing.key")]).start()
plain = sh.Store(TMP, "store-plain")
plain.start()
signed = sh.Store(TMP, "store-signed",
                  flags=["--token-verify-keys", os.path.join(keys, "verify.keys")])
signed.start()
c = f.client()
x = c.execute_command
st = redis.Redis(host="127.0.0.1", port=plain.port, decode_responses=True)

# Slot 0 for a short lease (the holder that will pause), slot 1 for a long one.
a = x("LEASE.GRANT", 400)
b = x("LEASE.GRANT", 60000)
c_lease = x("LEASE.GRANT", 60000)
sa = x("SEM.ACQUIRE", "jobs", 2, a)
sb = x("SEM.ACQUIRE", "jobs", 2, b)
t.eq([0, 1], [sa[0], sb[0]], "slots 0 and 1 taken")
t.eq("OK", st.execute_command("FSET", "jobs#0", sa[1], "part:0", "a1"), "holder of slot 0 writes")
t.eq("OK", st.execute_command("FSET", "jobs#1", sb[1], "part:1", "b1"), "holder of slot 1 writes")

# A third worker waits for a slot; slot 0's holder "pauses" past its lease.
got = {}


def wait_slot():
    cc = f.client()
    got["c"] = cc.execute_command("SEM.ACQUIRE", "jobs", 2, c_lease, "WAIT", 20000)
    cc.close()


th = threading.Thread(target=wait_slot)
th.start()
th.join(30)
sc = got.get("c")
t.check(sc is not None and sc[0] == 0 and sc[1] > sb[1],
        "the waiter gets slot 0 once its holder's lease expired", sc)
t.eq("OK", st.execute_command("FSET", "jobs#0", sc[1], "part:0", "c1"),
     "the new holder of slot 0 writes partition 0")
e = err(st.execute_command, "FSET", "jobs#0", sa[1], "part:0", "a2")
t.check(e is not None and "STALE" in e.upper(), "the paused holder of slot 0 is fenced out", e)
t.eq("OK", st.execute_command("FSET", "jobs#1", sb[1], "part:1", "b2"),
     "the holder of slot 1 still writes partition 1 (its own fence)")
t.eq("c1", st.execute_command("FGET", "part:0"), "partition 0 has the new holder's value")

# Signed tokens are bound to name#slot.
ss = redis.Redis(host="127.0.0.1", port=signed.port, decode_responses=True)
g = x("SEM.ACQUIRE", "pool", 2, "TTL", 60000, "SIGNED")
t.check(isinstance(g, list) and len(g) == 3 and isinstance(g[1], str) and "." in g[1],
        "SIGNED: [slot, signed token, lease]", g)
mine = "pool#%d" % g[0]
other = "pool#%d" % (1 - g[0])
t.eq("OK", ss.execute_command("FSET", mine, g[1], "pk:%d" % g[0], "v"),
     "the signed token is admitted for its slot's fence")
e = err(ss.execute_command, "FSET", other, g[1], "pk:other", "v")
t.check(e is not None and "BADTOKEN" in e.upper(),
        "the signed token is refused for another slot's fence", e)
t.eq(1, x("SEM.RELEASE", "pool", g[0], int(g[1].split(".")[0])),
     "SEM.RELEASE with the token (the signed string's number)")

st.close()
ss.close()
c.close()
plain.stop()
signed.stop()
t.eq(0, f.stop(), "fenced stops cleanly")
t.finish()
