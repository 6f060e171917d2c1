#!/usr/bin/python3
"""Key rotation by SIGHUP (issue 18, section 6): fence-store and fence-proxy
read --token-verify-keys again on SIGHUP, and fenced its
--token-signing-key; a broken file keeps the old keys and the log says why.

The steps, with real processes (two fenced, one fence-store, one
fence-proxy in front of a small upstream):
  1. verify.keys lists k1: a k1 token passes both resources.
  2. verify.keys lists k1 and k2, HUP: a k2 token (signed by fenced B after
     its own HUP onto k2) passes; k1 still passes.
  3. verify.keys lists k2 only, HUP: a fresh k1 token is refused BADTOKEN;
     k2 passes.
  4. verify.keys is garbage, then world-writable (listing k1 again), then
     missing, HUP each time: the log names the problem, k2 still passes
     and k1 is still refused.
  5. fenced B's signing key is garbage, HUP: it keeps signing with k2.
On the code before the reload existed, step 2 refuses the k2 token and
step 3 admits the k1 one.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced  # noqa: E402
from test_proxy_lib import (Proxy, SlowUpstream, Tap, binary, make_tmp,  # noqa: E402
                            need_proxy, request, skip)
from test_store_helpers import FENCE_STORE, Store, error_of, need_store  # noqa: E402

redis = need_store()
need_proxy()
FENCECTL = binary("fencectl", env="FENCECTL")
if not os.access(FENCECTL, os.X_OK):
    skip("%s is not built" % FENCECTL)
if not os.access(FENCE_STORE, os.X_OK):
    skip("fence-store is not built")
tap = Tap()
TMP = make_tmp("fence-keys-rotate.")


def keygen(name, key_id):
    """A fresh key pair under TMP/name (signing.key, verify.keys)."""
    d = os.path.join(TMP, name)
    subprocess.run([FENCECTL, "keygen", d, "--key-id", key_id], check=True,
                   stdout=subprocess.DEVNULL)
    return d


def read(path):
    with open(path) as f:
        return f.read()


def write(path, text, mode=0o644):
    """Replace path atomically (as an operator's deploy tool does)."""
    tmp = path + ".new"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def log_count(path, needle):
    try:
        with open(path, errors="replace") as f:
            return f.read().count(needle)
    except OSError:
        return 0


def hup_and_wait(proc, log, needle, secs=10.0):
    """SIGHUP proc (by PID) and wait until log holds one more needle line."""
    before = log_count(log, needle)
    os.kill(proc.pid, signal.SIGHUP)
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if log_count(log, needle) > before:
            return True
        time.sleep(0.02)
    return False


def grant(fd, lock):
    """A fresh signed token for lock from fenced fd (lock released after,
    so the next grant is higher)."""
    r = fd.client(decode_responses=True)
    lease = r.execute_command("LEASE.GRANT", 60000)
    tok = r.execute_command("LOCK", lock, lease, "SIGNED")
    r.execute_command("UNLOCK", lock, int(tok.split(".")[0]))
    r.close()
    return tok


def store_put(st, fence, tok):
    c = redis.Redis(host="127.0.0.1", port=st.port, decode_responses=True, socket_timeout=10)
    try:
        return error_of(c.execute_command, "FSET", fence, tok, "k-" + fence, "v")
    finally:
        c.close()


def proxy_put(px, fence, tok):
    st, _, body = request(px.port, "PUT", "/" + fence, b"x",
                          {"Fencing-Lock": fence, "Fencing-Token": tok})
    return st, body


def both_accept(what, fence, tok):
    err = store_put(store, fence, tok)
    tap.check(err is None, "fence-store: %s is admitted" % what, err)
    st, body = proxy_put(proxy, fence, tok)
    tap.check(st == 200, "fence-proxy: %s is forwarded (%d)" % (what, st), body)


def both_refuse(what, fence, tok):
    err = store_put(store, fence, tok)
    tap.check(err is not None and err.startswith("BADTOKEN"),
              "fence-store: %s is refused BADTOKEN" % what, err)
    st, body = proxy_put(proxy, fence, tok)
    tap.check(st == 403 and body.startswith(b"BADTOKEN"),
              "fence-proxy: %s is refused 403 BADTOKEN (%d)" % (what, st), body)


k1 = keygen("k1", "k1")
k2 = keygen("k2", "k2")
line1 = read(os.path.join(k1, "verify.keys"))
line2 = read(os.path.join(k2, "verify.keys"))
verify = os.path.join(TMP, "verify.keys")
write(verify, line1)
signing_b = os.path.join(TMP, "b-signing.key")
write(signing_b, read(os.path.join(k1, "signing.key")), 0o600)

fa = Fenced(name="fenced-a", args=["--token-signing-key", os.path.join(k1, "signing.key")])
fb = Fenced(name="fenced-b", args=["--token-signing-key", signing_b])
store = Store(TMP, flags=["--token-verify-keys", verify])
up = SlowUpstream()
proxy = Proxy(TMP, up.port, args=["--token-verify-keys", verify])
RELOADED = "token-verify-keys reloaded"
KEPT = "token-verify-keys not reloaded"
try:
    fa.start()
    fb.start()
    store.start()
    proxy.start()

    # 1. k1 only.
    tb = grant(fb, "b")
    tap.check(tb.split(".")[1] == "k1", "fenced B signs with k1 at start", tb)
    both_accept("a k1 token", "a", grant(fa, "a"))

    # 2. Add k2 to the resources, then move fenced B onto k2.
    write(verify, line1 + line2)
    tap.check(hup_and_wait(store.proc, store.log, RELOADED), "fence-store logs the reload")
    tap.check(hup_and_wait(proxy.proc, proxy.log, RELOADED), "fence-proxy logs the reload")
    write(signing_b, read(os.path.join(k2, "signing.key")), 0o600)
    tap.check(hup_and_wait(fb.proc, fb.log, "token-signing-key reloaded"),
              "fenced logs the signing key reload")
    tb = grant(fb, "b")
    tap.check(tb.split(".")[1] == "k2", "fenced B signs with k2 after its HUP", tb)
    both_accept("a k2 token after the key was added", "b", tb)
    both_accept("a k1 token while both are listed", "a", grant(fa, "a"))

    # 3. Remove k1.
    write(verify, line2)
    tap.check(hup_and_wait(store.proc, store.log, RELOADED), "fence-store reloads again")
    tap.check(hup_and_wait(proxy.proc, proxy.log, RELOADED), "fence-proxy reloads again")
    both_refuse("a k1 token after the key was removed", "a", grant(fa, "a"))
    both_accept("a k2 token", "b", grant(fb, "b"))

    # 4. A broken file, then a missing one: the old keys (k2) stay.
    write(verify, "k3 ed25519 not-base64!\n")
    tap.check(hup_and_wait(store.proc, store.log, KEPT),
              "fence-store: a broken verify.keys is not loaded, and logged")
    tap.check(hup_and_wait(proxy.proc, proxy.log, KEPT),
              "fence-proxy: a broken verify.keys is not loaded, and logged")
    tap.check("line 1" in read(store.log).split(KEPT)[-1].splitlines()[0],
              "fence-store's log line names the bad line")
    both_accept("a k2 token after the broken file", "b", grant(fb, "b"))
    both_refuse("a k1 token after the broken file", "a", grant(fa, "a"))
    write(verify, line1 + line2, 0o666)
    tap.check(hup_and_wait(store.proc, store.log, "may be written by any user"),
              "fence-store: a world-writable verify.keys is refused, and logged")
    tap.check(hup_and_wait(proxy.proc, proxy.log, "may be written by any user"),
              "fence-proxy: a world-writable verify.keys is refused, and logged")
    both_refuse("a k1 token offered by a world-writable file", "a", grant(fa, "a"))
    os.unlink(verify)
    tap.check(hup_and_wait(store.proc, store.log, KEPT), "fence-store: a missing file is logged")
    tap.check(hup_and_wait(proxy.proc, proxy.log, KEPT), "fence-proxy: a missing file is logged")
    both_accept("a k2 token after the file vanished", "b", grant(fb, "b"))

    # 5. A broken signing key: fenced keeps k2.
    write(signing_b, "garbage\n", 0o600)
    tap.check(hup_and_wait(fb.proc, fb.log, "token-signing-key not reloaded"),
              "fenced: a broken signing key is not loaded, and logged")
    tb = grant(fb, "b")
    tap.check(tb.split(".")[1] == "k2", "fenced B still signs with k2", tb)
    write(signing_b, read(os.path.join(k1, "signing.key")), 0o644)
    tap.check(hup_and_wait(fb.proc, fb.log, "token-signing-key not reloaded"),
              "fenced: a signing key readable by others is refused at reload too")
    both_accept("fenced B's token after the refused reloads", "b", grant(fb, "b"))
    tap.check(store.proc.poll() is None and proxy.alive(), "fence-store and fence-proxy are up")
finally:
    for p in (proxy, store, fb, fa):
        try:
            p.stop()
        except Exception:  # noqa: BLE001 - best-effort cleanup
            pass
    up.close()
tap.finish()
