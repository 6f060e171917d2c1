#!/usr/bin/python3
"""The Python client (clients/python) over TLS and with a login: fenced and
fence-store each with a TLS port, a plaintext port and an ACL file,
certificates made here with openssl (tls_certs.py).

- Client(tls=True, tls_ca_file=..., username=..., password=...): a lock
  held through the with-block (its keepalive thread connects the same way),
  a lease owned by the logged-in user;
- Store over TLS with a login: fset, stale refusal, fget;
- mutual TLS with a client certificate;
- a wrong password and a missing login raise AuthFailed, a certificate from
  an untrusted CA raises Unreachable naming the certificate, both without
  retrying for the whole timeout (a long timeout would only end in
  Unreachable/TryAgain);
- fenced.aio over TLS with a login: a lock renewed past its TTL by its task,
  Store writes and a stale refusal, WrongPass for a wrong password;
- option mistakes raise ValueError;
- fenced-lock --tls --cacert --user with $FENCE_PASSWORD.
"""
# serial: timing-bound (a lock held past its TTL: time passing is the thing tested).
import asyncio
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
from fencetest import (Tap, binary, free_port, make_tmp, read_log, skip,  # noqa: E402
                       spawn, stop_process, wait_port)
import tls_certs  # noqa: E402

PYSRC = os.path.join(HERE, "..", "..", "clients", "python", "src")
sys.path.insert(0, PYSRC)
import fenced  # noqa: E402
import fenced.aio  # noqa: E402

FENCED = binary("fenced", env="FENCED")
STORE = binary("fence-store", env="FENCE_STORE")
SECRET = "Py-Tls-Secret-77"


def raises(cls, fn, *a, **kw):
    """The exception of class cls that fn raised, or None."""
    try:
        fn(*a, **kw)
    except cls as e:
        return e
    except Exception as e:  # noqa: BLE001 - reported as the wrong class
        return ("wrong class", type(e).__name__, str(e))
    return None


async def aio_tls(addr, saddr, tls):
    """fenced.aio's Client, Lock and Store over TLS with a login; True
    when every step did what it should."""
    c = fenced.aio.Client(addr, **tls)
    st = fenced.aio.Store(saddr, **tls)
    async with c.lock("py-aio-tls", ttl_ms=1500) as lk:
        await asyncio.sleep(2.0)  # past the TTL: the renewal task renews over TLS
        info = await c.lock_info("py-aio-tls")
        ok = lk.held and info is not None and info.token == lk.token
        await st.fset("py-aio-tls", lk.token, "aio-k", "v")
        try:
            await st.fset("py-aio-tls", lk.token - 1, "aio-k", "old")
            ok = False
        except fenced.StaleToken:
            pass
    bad = fenced.aio.Client(addr, timeout_ms=60000, **dict(tls, password="nope-nope"))
    try:
        await bad.lease_grant(1000)
        ok = False
    except fenced.WrongPass as e:
        ok = ok and SECRET not in str(e)
    await c.close()
    await st.close()
    await bad.close()
    return ok


def start(prog, name, tmp, certs, acl, extra=()):
    port, tls_port = free_port(), free_port()
    log = os.path.join(tmp, name + ".log")
    proc = spawn([prog, "--bind", "127.0.0.1", "--port", str(port), "--tls-port", str(tls_port),
                  "--tls-cert", certs["server.crt"], "--tls-key", certs["server.key"],
                  "--acl-file", acl, "--data-dir", os.path.join(tmp, name)] + list(extra), log)
    if not (wait_port(port) and wait_port(tls_port)):
        raise RuntimeError("%s did not listen: %s" % (name, read_log(log)))
    return proc, port, tls_port, log


def main():
    if shutil.which("openssl") is None:
        skip("openssl is not installed")
    t = Tap()
    tmp = make_tmp("py-tls")
    certs = tls_certs.make(os.path.join(tmp, "certs"))
    acl = os.path.join(tmp, "users.acl")
    with open(acl, "w") as f:
        f.write("user app on >%s ~* +@all\n" % SECRET)
    fd, fport, ftls, flog = start(FENCED, "fenced", tmp, certs, acl)
    sd, sport, stls, slog = start(STORE, "store", tmp, certs, acl,
                                  ["--tls-ca", certs["ca.crt"], "--tls-auth-clients", "optional"])
    try:
        tls = dict(tls=True, tls_ca_file=certs["ca.crt"], username="app", password=SECRET)
        c = fenced.Client("127.0.0.1:%d" % ftls, **tls)
        # 4 s TTL held for 5 s: renewals every 1.3 s, each with 3.6 s to land
        # (1.5 s failed under two CPU hogs at load average 20).
        with c.lock("py-tls", ttl_ms=4000) as lk:
            tok = lk.token
            import time
            time.sleep(5.0)  # past the TTL: the keepalive thread renews over TLS
            t.check(lk.held and c.lock_info("py-tls").token == tok,
                    "Client over TLS with a login: a lock held past its TTL (renewed over TLS)")
        t.eq(None, c.lock_info("py-tls"), "and released at the end of the block")
        st = fenced.Store("127.0.0.1:%d" % stls, **tls)
        st.fset("py-tls", tok, "k", "v1")
        e = raises(fenced.StaleToken, st.fset, "py-tls", tok - 1, "k", "v0")
        t.check(isinstance(e, fenced.StaleToken) and st.fget("k") == b"v1",
                "Store over TLS with a login: fset, a stale token refused, fget", e)
        mt = fenced.Store("127.0.0.1:%d" % stls, tls_cert_file=certs["alice.crt"],
                          tls_key_file=certs["alice.key"], **tls)
        t.eq(tok, mt.high("py-tls"), "Store with a client certificate (mutual TLS)")
        t.check(asyncio.run(aio_tls("127.0.0.1:%d" % ftls, "127.0.0.1:%d" % stls, tls)),
                "fenced.aio over TLS with a login: a lock held past its TTL, fset, a stale "
                "token refused, a wrong password is WrongPass")
        for name, kw in (("a wrong password", dict(tls, password="nope-nope")),
                         ("no login", dict(tls=True, tls_ca_file=certs["ca.crt"]))):
            bad = fenced.Client("127.0.0.1:%d" % ftls, timeout_ms=60000, **kw)
            e = raises(fenced.AuthFailed, bad.lease_grant, 1000)
            t.check(isinstance(e, fenced.AuthFailed) and SECRET not in str(e),
                    "Client: %s raises AuthFailed at once" % name, e)
            bad = fenced.Store("127.0.0.1:%d" % stls, timeout_ms=60000, **kw)
            e = raises(fenced.AuthFailed, bad.high, "py-tls")
            t.check(isinstance(e, fenced.AuthFailed), "Store: %s raises AuthFailed" % name, e)
        bad = fenced.Client("127.0.0.1:%d" % ftls, timeout_ms=60000,
                            **dict(tls, tls_ca_file=certs["other-ca.crt"]))
        e = raises(fenced.Unreachable, bad.lease_grant, 1000)
        t.check(isinstance(e, fenced.Unreachable) and "certificate" in str(e),
                "an untrusted server certificate raises Unreachable at once, naming it", e)
        plain = fenced.Client("127.0.0.1:%d" % fport, username="app", password=SECRET)
        t.check(plain.lease_grant(1000) > 0, "a login over the plaintext port works too")
        for what, kw in (("TLS files without tls", dict(tls_ca_file=certs["ca.crt"])),
                         ("a certificate without its key",
                          dict(tls=True, tls_cert_file=certs["alice.crt"])),
                         ("a username without a password", dict(username="app"))):
            e = raises(ValueError, fenced.Client, "127.0.0.1:1", **kw)
            t.check(isinstance(e, ValueError), "Client refuses %s (ValueError)" % what, e)
        env = dict(os.environ, PYTHONPATH=PYSRC, FENCE_PASSWORD=SECRET)
        cmd = [sys.executable, "-m", "fenced.lockcmd", "py-tls-cli", "--server",
               "127.0.0.1:%d" % ftls, "--tls", "--cacert", certs["ca.crt"], "--user", "app", "--",
               "sh", "-c", 'echo "$FENCE_TOKEN"']
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
        t.check(r.returncode == 0 and r.stdout.strip().isdigit(),
                "fenced-lock --tls --cacert --user ($FENCE_PASSWORD) runs CMD with a token",
                (r.returncode, r.stdout, r.stderr))
        r = subprocess.run(cmd, env=dict(env, FENCE_PASSWORD="wrong-pw-1"), capture_output=True,
                           text=True, timeout=60)
        t.check(r.returncode == 1 and "login" in r.stderr, "fenced-lock: a refused login exits 1",
                (r.returncode, r.stderr))
        t.check(SECRET not in read_log(flog) + read_log(slog),
                "the password is in neither daemon's log")
    finally:
        stop_process(fd)
        stop_process(sd)
    t.finish()


if __name__ == "__main__":
    main()
