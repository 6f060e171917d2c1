#!/usr/bin/python3
"""fence-proxy --token-verify-keys (issue 11) in front of a real nginx, with
signed tokens from real fenced processes (LOCK ... SIGNED):

- a real signed token is forwarded;
- forged ones get 403 BADTOKEN and nothing reaches nginx: 2^63 with a
  real signature, a plain 2^63, the plain real number, the number changed,
  another lock's signed token, a token signed by another key under the same
  key id, a token signed by an unlisted key, garbage;
- the mark did not move: an older real token is still 409 STALE with
  Fencing-Highest = the real holder's number;
- the real holder still writes, and so does the next holder.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced  # noqa: E402
from test_proxy_lib import (Nginx, Proxy, Tap, binary, make_tmp, need_nginx,  # noqa: E402
                            need_proxy, request, skip)

need_proxy()
need_nginx()
FENCECTL = binary("fencectl", env="FENCECTL")
if not os.access(FENCECTL, os.X_OK):
    skip("%s is not built" % FENCECTL)
tap = Tap()
TMP = make_tmp("fence-proxy-signed.")


def keygen(name, key_id):
    """A fresh key pair under TMP/name (signing.key, verify.keys)."""
    d = os.path.join(TMP, name)
    subprocess.run([FENCECTL, "keygen", d, "--key-id", key_id], check=True,
                   stdout=subprocess.DEVNULL)
    return d


def grant(fd, lock):
    """A signed token for lock from fenced fd (a fresh lease)."""
    r = fd.client(decode_responses=True)
    lease = r.execute_command("LEASE.GRANT", 60000)
    tok = r.execute_command("LOCK", lock, lease, "SIGNED")
    r.close()
    return tok


def unlock(fd, lock, signed):
    """Release lock held with signed token signed."""
    r = fd.client(decode_responses=True)
    r.execute_command("UNLOCK", lock, int(signed.split(".")[0]))
    r.close()


def put(px, lock, token, body):
    """PUT /acct.txt through the proxy with the fencing headers."""
    return request(px.port, "PUT", "/acct.txt", body,
                   {"Fencing-Lock": lock, "Fencing-Token": str(token)})


k1 = keygen("k1", "k1")
k1b = keygen("k1b", "k1")  # another key, same id
k2 = keygen("k2", "k2")    # a key the proxy does not list
fa = Fenced(name="fenced-a", args=["--token-signing-key", os.path.join(k1, "signing.key")])
fb = Fenced(name="fenced-b", args=["--token-signing-key", os.path.join(k1b, "signing.key")])
fc = Fenced(name="fenced-c", args=["--token-signing-key", os.path.join(k2, "signing.key")])
ng = Nginx(TMP)
px = Proxy(TMP, ng.port, args=["--token-verify-keys", os.path.join(k1, "verify.keys")])
try:
    for p in (fa, fb, fc, ng, px):
        p.start()
    old = grant(fa, "acct")
    unlock(fa, "acct", old)
    s1 = grant(fa, "acct")
    t1 = int(s1.split(".")[0])
    tap.check(t1 > int(old.split(".")[0]), "the second grant has the higher token", (old, s1))
    st, _, _ = put(px, "acct", s1, b"real")
    tap.check(st in (201, 204), "a real signed token is forwarded (%d)" % st)
    tap.eq(b"real", ng.file("acct.txt"), "nginx holds the real holder's content")

    rest = s1.split(".", 1)[1]
    forged = [
        ("2^63 with a real signature", "9223372036854775808." + rest),
        ("a plain 2^63", "9223372036854775808"),
        ("the plain real number", str(t1)),
        ("the number changed", "%d.%s" % (t1 + 1, rest)),
        ("another lock's token", grant(fa, "other")),
        ("another key under the same id", grant(fb, "acct")),
        ("an unlisted key", grant(fc, "acct")),
        ("garbage", "%d.k1.nope" % t1),
    ]
    for what, tok in forged:
        st, _, body = put(px, "acct", tok, b"forged")
        tap.eq(403, st, "%s: 403" % what)
        tap.check(body.startswith(b"BADTOKEN"), "%s: body 'BADTOKEN ...'" % what, body)
    tap.eq(b"real", ng.file("acct.txt"), "nothing forged reached nginx")

    st, hd, body = put(px, "acct", old, b"old")
    tap.eq(409, st, "the older real token is STALE: the mark did not move")
    tap.eq(str(t1), hd.get("fencing-highest"), "Fencing-Highest is still the real holder's")
    st, _, _ = put(px, "acct", s1, b"real again")
    tap.check(st in (201, 204), "the real holder still writes (%d)" % st)
    unlock(fa, "acct", s1)
    s2 = grant(fa, "acct")
    st, _, _ = put(px, "acct", s2, b"next")
    tap.check(st in (201, 204), "the next holder writes (%d)" % st)
    tap.eq(b"next", ng.file("acct.txt"), "nginx holds the next holder's content")
    tap.check(px.alive(), "the proxy is still up")
finally:
    for p in (px, ng, fc, fb, fa):
        try:
            p.stop()
        except Exception:  # noqa: BLE001 - best-effort cleanup
            pass
tap.finish()
