#!/usr/bin/python3
"""fenced signs grants on its signing thread (src/server/signq.h): replies
still leave in request order when signed grants are pipelined between
unsigned requests, every signature verifies (Ed25519, checked with
python3-cryptography over the message docs/security.md gives) and is the
one a later reentrant LOCK gets (deterministic); a connection that closes
with signed grants still being signed, and a SIGTERM right after many were
queued, leave fenced serving and then stopping with status 0 (under ASan:
no leak, no use after free of the orphaned slots)."""
import base64
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fencetest  # noqa: E402
import signedtok  # noqa: E402
from fencetest import (Resp, Tap, binary, encode_command, free_port, make_tmp,  # noqa: E402
                       need_module, read_log, run_group, spawn, stop_process, wait_port)
from fenceproto import wait_fenced_ready  # noqa: E402

ed = need_module("cryptography.hazmat.primitives.asymmetric.ed25519", "python3-cryptography")
FENCED = binary("fenced", env="FENCED")
FENCECTL = binary("fencectl", env="FENCECTL")
for p in (FENCED, FENCECTL):
    if not os.access(p, os.X_OK):
        fencetest.skip("%s is not built" % p)

TMP = make_tmp("fence-signq.")
tap = Tap()
fencetest.exit_on_sigterm(1)
subprocess.run([FENCECTL, "keygen", os.path.join(TMP, "keys"), "--key-id", "k7"],
               stdout=subprocess.DEVNULL, check=True)


PUB = signedtok.ed25519_public_key(os.path.join(TMP, "keys", "verify.keys"), ed)


def good(name, s):
    """True if s is NAME's signed token under key k7 and verifies."""
    try:
        tok, kid, sig = s.decode().split(".")
        raw = base64.urlsafe_b64decode(sig + "==")
        PUB.verify(raw, signedtok.message(kid, name, int(tok)))
        return kid == "k7"
    except Exception:  # noqa: BLE001 (any failure is "not good")
        return False


def start(name):
    d = os.path.join(TMP, name)
    port = free_port()
    log = os.path.join(TMP, name + ".log")
    proc = spawn([FENCED, "--bind", "127.0.0.1", "--port", str(port), "--data-dir", d,
                  "--token-signing-key", os.path.join(TMP, "keys", "signing.key")], log,
                 stdin=subprocess.DEVNULL)
    if not wait_port(port, step=0.03) or not wait_fenced_ready(port, 30):
        raise RuntimeError("fenced did not serve: %s" % read_log(log))
    return proc, port, log


def pipelined(tap_, port):
    c = Resp("127.0.0.1", port, timeout=20)
    lease = c.call("LEASE.GRANT", 60000)
    cmds = []
    for i in range(40):
        cmds.append(("LOCK", "p.%d" % i, lease, "SIGNED"))
        cmds.append(("PING", "m%d" % i))
        cmds.append(("ACQUIRE", "q.%d" % i, 5000, "SIGNED"))
        cmds.append(("LOCK", "u.%d" % i, lease))
    c.sock.sendall(b"".join(encode_command(*a) for a in cmds))
    replies = [c._reply() for _ in cmds]
    echoed = [r for k, r in enumerate(replies) if cmds[k][0] == "PING"]
    tap_.eq([b"m%d" % i for i in range(40)], echoed,
            "PING replies sit between the signed grants, in request order")
    locks = [(cmds[k][1], r) for k, r in enumerate(replies) if cmds[k][0] == "LOCK"
             and len(cmds[k]) == 4]
    acqs = [(cmds[k][1], r) for k, r in enumerate(replies) if cmds[k][0] == "ACQUIRE"]
    plain = [r for k, r in enumerate(replies) if cmds[k][0] == "LOCK" and len(cmds[k]) == 3]
    tap_.check(all(isinstance(r, bytes) and good(n, r) for n, r in locks),
               "40 pipelined LOCK ... SIGNED replies verify", repr(locks[:2]))
    tap_.check(all(isinstance(r, list) and len(r) == 2 and good(n, r[0]) and isinstance(r[1], int)
                   for n, r in acqs),
               "40 pipelined ACQUIRE ... SIGNED replies are [verifying token, lease]",
               repr(acqs[:2]))
    tap_.check(all(isinstance(r, int) for r in plain), "the unsigned LOCKs between them got integers")
    toks = [int(r.split(b".")[0]) for _, r in locks]
    tap_.check(toks == sorted(toks) and len(set(toks)) == len(toks),
               "their tokens rise in request order")
    again = c.call("LOCK", locks[5][0], lease, "SIGNED")
    tap_.eq(locks[5][1], again, "a reentrant LOCK ... SIGNED gets the same string")
    c.close()


def closing(tap_, port, proc, log):
    # A connection queues many signed grants and hangs up at once: the
    # slots still being signed are orphaned and freed when signed.
    for round_ in range(3):
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        c = Resp("127.0.0.1", port, timeout=20)
        lease = c.call("LEASE.GRANT", 60000)
        s.sendall(b"".join(encode_command("LOCK", "c%d.%d" % (round_, i), lease, "SIGNED")
                           for i in range(300)))
        s.close()
        tap_.check(c.call("PING") == "PONG", "fenced serves after a client hung up on 300 "
                   "signed grants (round %d)" % round_)
        c.close()
    c = Resp("127.0.0.1", port, timeout=20)
    tap_.check(good("after", c.call("LOCK", "after", c.call("LEASE.GRANT", 60000), "SIGNED")),
               "and signs the next grant")
    c.close()
    # SIGTERM with signatures queued: every one ends before the loop does.
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    c = Resp("127.0.0.1", port, timeout=20)
    lease = c.call("LEASE.GRANT", 60000)
    s.sendall(b"".join(encode_command("LOCK", "t.%d" % i, lease, "SIGNED") for i in range(500)))
    c.call("LOCK.INFO", "t.0")  # the batch is in (or being applied)
    code = stop_process(proc, timeout=30)
    s.close()
    c.close()
    tap_.eq(0, code, "SIGTERM with signed grants in flight: exit 0",
            read_log(log, tail=20))
    text = read_log(log)
    tap_.check(all(w not in text for w in ("AddressSanitizer", "LeakSanitizer",
                                           "ThreadSanitizer", "runtime error")),
               "no sanitizer report", text[-2000:])


proc, port, log = start("f1")
run_group(tap, pipelined, tap, port)
run_group(tap, closing, tap, port, proc, log)
tap.finish()
