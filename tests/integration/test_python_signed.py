#!/usr/bin/python3
"""The Python client's signed grants (fenced.SignedToken): LOCK/ACQUIRE ...
SIGNED from ``lock_lease_signed``, ``acquire_signed`` and ``lock(...,
signed=True)``, sync and asyncio, against a fenced with a signing key and
two fence-stores (one with ``--token-verify-keys``, one without).

- A signed token is an int (the token) whose ``signed`` string verifies
  (Ed25519 over the message docs/security.md gives, checked here with
  python3-cryptography) for its lock name only; a reentrant LOCK gets the
  same string; SHARED and SIGNED go together.
- Store methods send a SignedToken as its string: the verifying store
  admits it and refuses the bare int (BADTOKEN); the plain store counts it
  by its number.  A stale holder's signed token is refused (STALE) after a
  newer holder wrote, and a token signed for another lock is refused
  (BADTOKEN).
- A server without a key answers ERR to SIGNED and grants nothing; a lock
  taken without signed=True has no ``signed_token``; a reply that is not a
  signed token raises FencedError; a SignedToken pickles.

Every process is started here (127.0.0.1, free ports, temp dirs) and
stopped by PID.
"""
import asyncio
import base64
import os
import pickle
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_fenced_lib import TMP, Fenced, Tap, binary, need_module  # noqa: E402
import test_store_helpers as sh  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import signedtok  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python", "src"))
import fenced  # noqa: E402
import fenced.aio  # noqa: E402
from fenced.client import _as_signed  # noqa: E402

sh.need_store()
ed = need_module("cryptography.hazmat.primitives.asymmetric.ed25519", "python3-cryptography")
FENCECTL = binary("fencectl", env="FENCECTL")
tap = Tap()

KEYS = os.path.join(TMP, "keys")
subprocess.run([FENCECTL, "keygen", KEYS, "--key-id", "k9"], check=True,
               stdout=subprocess.DEVNULL)


PUB = signedtok.ed25519_public_key(os.path.join(KEYS, "verify.keys"), ed)


def verifies(name, tok):
    """tok is a SignedToken for lock name, under key k9, whose signature
    verifies and whose number is the int."""
    try:
        num, kid, sig = tok.signed.split(".")
        PUB.verify(base64.urlsafe_b64decode(sig + "=="), signedtok.message(kid, name, int(num)))
        return (isinstance(tok, fenced.SignedToken) and isinstance(tok, int)
                and kid == "k9" and int(num) == int(tok))
    except Exception:  # noqa: BLE001 (any failure is "does not verify")
        return False


def raises(cls, fn, *a, **kw):
    """The cls exception fn raised, or None."""
    try:
        fn(*a, **kw)
    except cls as e:
        return e
    except Exception:  # noqa: BLE001 (another class is a failure too)
        return None
    return None


f = Fenced("fenced", args=["--token-signing-key", os.path.join(KEYS, "signing.key")]).start()
nokey = Fenced("fenced-nokey").start()
vstore = sh.Store(TMP, "store-verify", flags=["--token-verify-keys",
                                              os.path.join(KEYS, "verify.keys")])
vstore.start()
pstore = sh.Store(TMP, "store-plain")
pstore.start()
ADDR = "127.0.0.1:%d" % f.port
c = fenced.Client(ADDR, timeout_ms=5000)
vs = fenced.Store("127.0.0.1:%d" % vstore.port)
ps = fenced.Store("127.0.0.1:%d" % pstore.port)


def lock_lease_signed():
    lease = c.lease_grant(60000)
    t = c.lock_lease_signed("orders", lease)
    tap.check(verifies("orders", t), "lock_lease_signed: a SignedToken that verifies for its lock",
              repr(getattr(t, "signed", t)))
    tap.check(t.signed.startswith("%d." % t), "its string starts with its number")
    again = c.lock_lease_signed("orders", lease)
    tap.eq((int(t), t.signed), (int(again), again.signed),
           "a reentrant LOCK ... SIGNED gets the same token and string")
    plain = c.lock_lease("plain", lease)
    tap.check(type(plain) is int, "lock_lease without SIGNED still returns a bare int")
    other = c.lease_grant(60000)
    tap.eq(None, c.lock_lease_signed("orders", other), "a busy lock: None (nothing granted)")
    tap.check(c.unlock("orders", t), "unlock takes the SignedToken as its token")
    c.lease_revoke(lease)
    c.lease_revoke(other)


def acquire_signed():
    r = c.acquire_signed("batch", 60000)
    tap.check(r is not None and verifies("batch", r[0]) and type(r[1]) is int and r[1] > 0,
              "acquire_signed: (SignedToken, lease)", repr(r))
    tap.check(c.unlock("batch", r[0]), "its release by token")


def shared_signed():
    a, b = c.lease_grant(60000), c.lease_grant(60000)
    ta = c.lock_lease_signed("report", a, shared=True)
    tb = c.lock_lease_signed("report", b, shared=True)
    tap.check(verifies("report", ta) and verifies("report", tb) and int(ta) == int(tb),
              "SHARED and SIGNED: the readers of a phase share one signed token")
    c.unlock("report", ta, a)
    c.unlock("report", tb, b)
    c.lease_revoke(a)
    c.lease_revoke(b)


def stores():
    with c.lock("orders", ttl_ms=5000, signed=True) as lock:
        tap.check(verifies("orders", lock.token), "lock(signed=True): lock.token is signed")
        tap.eq(lock.token.signed, lock.signed_token, "lock.signed_token is its string")
        first = lock.token
        vs.fset("orders", lock.token, "k", "v1")
        tap.eq(b"v1", vs.fget("k"), "the verifying store admits the SignedToken (sent signed)")
        e = raises(fenced.BadToken, vs.fset, "orders", int(lock.token), "k", "bare")
        tap.check(e is not None, "the verifying store refuses the bare int (BADTOKEN)", repr(e))
        ps.fset("orders", lock.token, "k", "p1")
        tap.eq(int(lock.token), ps.high("orders"),
               "the plain store counts the signed token by its number")
        vs.admit("orders", lock.token)
        tap.eq(2, vs.fincr("orders", lock.token, "n") + 1, "fincr with the SignedToken")
        tap.check(vs.fdel("orders", lock.token, "n"), "fdel with the SignedToken")
    with c.lock("orders", ttl_ms=5000, signed=True) as newer:
        tap.check(int(newer.token) > int(first), "the next holder's token is higher")
        vs.fset("orders", newer.token, "k", "v2")
        e = raises(fenced.StaleToken, vs.fset, "orders", first, "k", "stale")
        tap.check(e is not None, "the stale holder's signed token is refused (STALE)", repr(e))
        e = raises(fenced.BadToken, vs.fset, "invoices", newer.token, "k2", "x")
        tap.check(e is not None, "a token signed for another lock is refused (BADTOKEN)", repr(e))
    tap.eq(b"v2", vs.fget("k"), "only the newer holder's write is there")
    with c.lock("unsigned", ttl_ms=5000) as lock:
        e = raises(fenced.FencedError, lambda: lock.signed_token)
        tap.check(e is not None and "signed=True" in str(e),
                  "signed_token of a lock taken without signed=True raises", repr(e))
    unacquired = c.lock("never", ttl_ms=5000, signed=True)
    tap.check(raises(fenced.NotAcquired, lambda: unacquired.signed_token) is not None,
              "signed_token before acquiring raises NotAcquired")


def no_key():
    n = fenced.Client("127.0.0.1:%d" % nokey.port)
    lease = n.lease_grant(60000)
    e = raises(fenced.ServerError, n.lock_lease_signed, "orders", lease)
    tap.check(e is not None and "SIGNED" in str(e) and "signing key" in str(e),
              "a server without a signing key: ERR naming SIGNED", repr(e))
    tap.eq(None, n.lock_info("orders"), "and nothing was granted")
    e = raises(fenced.ServerError, n.acquire_signed, "orders", 60000)
    tap.check(e is not None, "acquire_signed there too", repr(e))
    tap.eq(None, n.lock_info("orders"), "still nothing granted")
    n.close()


def replies():
    for bad in (5, b"abc", b"0.k9.sig", b"-1.k9.s", b"9223372036854775808.k9.s", b"1" * 2000,
                b"\xff1.k9.s", "", None, [b"1.k9.s"], b"12"):
        tap.check(raises(fenced.FencedError, _as_signed, bad, "LOCK") is not None,
                  "a reply that is not a signed token raises: %r" % (bad if not isinstance(
                      bad, bytes) or len(bad) < 40 else bad[:10] + b"..."))
    t = _as_signed(b"42.k9.abc", "LOCK")
    tap.eq((42, "42.k9.abc"), (int(t), t.signed), "a well-formed reply parses")
    back = pickle.loads(pickle.dumps(t))
    tap.check(isinstance(back, fenced.SignedToken) and back == 42 and back.signed == t.signed,
              "a SignedToken pickles")
    tap.eq("42", str(t), "str() is the number")


async def aio_signed():
    a = fenced.aio.Client(ADDR)
    store = fenced.aio.Store("127.0.0.1:%d" % vstore.port)
    lease = await a.lease_grant(60000)
    t = await a.lock_lease_signed("aio", lease)
    tap.check(verifies("aio", t), "aio lock_lease_signed verifies")
    r = await a.acquire_signed("aio2", 60000)
    tap.check(r is not None and verifies("aio2", r[0]), "aio acquire_signed verifies")
    await a.unlock("aio", t)
    await a.unlock("aio2", r[0])
    async with a.lock("aio", ttl_ms=5000, signed=True) as lock:
        tap.check(verifies("aio", lock.token) and lock.signed_token == lock.token.signed,
                  "aio lock(signed=True)")
        await store.fset("aio", lock.token, "ak", "av")
        tap.eq(b"av", await store.fget("ak"), "aio Store sends the signed string")
        e = None
        try:
            await store.fset("aio", int(lock.token), "ak", "bare")
        except fenced.BadToken as x:
            e = x
        tap.check(e is not None, "aio: the bare int is refused there (BADTOKEN)")
    await a.lease_revoke(lease)
    await a.close()
    await store.close()


for group in (lock_lease_signed, acquire_signed, shared_signed, stores, no_key, replies):
    try:
        group()
    except Exception as e:  # noqa: BLE001 - a crashed group is one failure
        import traceback
        traceback.print_exc(file=sys.stdout)
        tap.check(False, "%s crashed: %r" % (group.__name__, e))
try:
    asyncio.run(aio_signed())
except Exception as e:  # noqa: BLE001
    import traceback
    traceback.print_exc(file=sys.stdout)
    tap.check(False, "aio_signed crashed: %r" % e)
c.close()
vstore.stop()
pstore.stop()
nokey.stop()
f.stop()
tap.finish()
