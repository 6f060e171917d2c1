#!/usr/bin/python3
"""Files and warnings at start and at reload (issue 18, section 6):

  - an ACL file any user may write is refused at start (fenced and
    fence-store exit non-zero naming the file and its mode) and at reload
    (SIGHUP and ACL LOAD keep the old users and say why);
  - a TLS key that group or others may read is warned about (fence-store,
    fenced: client TLS); a private one is not;
  - start-up says when a daemon runs without authentication (loopback
    default: one WARN line, every client is 'default' with every right) and
    warns loudly (three lines) for --insecure on a non-loopback bind or raft
    port; the
    non-loopback cases listen on a unix socket only (--port 0), so nothing
    is exposed beyond 127.0.0.1;
  - fence-proxy warns when tokens are not verified.
Each of these loaded or started silently before.
"""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import FENCED, TMP, Fenced, Tap, redis  # noqa: E402
from test_store_helpers import FENCE_STORE, need_store  # noqa: E402
from test_proxy_lib import PROXY, free_port, spawn, stop_process  # noqa: E402
import tls_certs  # noqa: E402

need_store()
tap = Tap()


def log_of(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def wait_log(path, needle, secs=10.0, proc=None):
    """Wait until the file holds needle (or proc exited); returns whether."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if needle in log_of(path):
            return True
        if proc is not None and proc.poll() is not None:
            return needle in log_of(path)
        time.sleep(0.02)
    return False


def run_until_exit(argv, log, secs=10.0):
    """Start argv; its exit status, or None if it kept running (then it is
    stopped by PID)."""
    p = spawn(argv, log)
    try:
        return p.wait(timeout=secs)
    except subprocess.TimeoutExpired:
        stop_process(p)
        return None


def start_and_stop(argv, log, needle):
    """Start argv, wait for needle in its log, stop it by PID; returns the log."""
    p = spawn(argv, log)
    wait_log(log, needle, proc=p)
    stop_process(p)
    return log_of(log)


GOOD = "user default off\nuser admin on >adminpw ~* +@all\n"
acl = os.path.join(TMP, "users.acl")
with open(acl, "w") as f:
    f.write(GOOD)

# 1. A world-writable ACL file is refused at start.
os.chmod(acl, 0o666)
for name, argv in (
        ("fenced", [FENCED, "--port", str(free_port()), "--data-dir",
                    os.path.join(TMP, "d-ww"), "--acl-file", acl]),
        ("fence-store", [FENCE_STORE, "--port", str(free_port()), "--data-dir",
                         os.path.join(TMP, "s-ww"), "--acl-file", acl])):
    log = os.path.join(TMP, name + "-ww.log")
    rc = run_until_exit(argv, log)
    tap.check(rc not in (None, 0), "%s refuses a world-writable ACL file at start (rc %s)"
              % (name, rc))
    tap.check("any user may write it (mode 666)" in log_of(log), "%s says why" % name,
              log_of(log)[-400:])

# 2. ... and at reload: the old users stay.
os.chmod(acl, 0o600)
fd = Fenced(name="fenced-acl", args=["--acl-file", acl])
try:
    fd.start(wait_ready=False)
    c = redis.Redis(host="127.0.0.1", port=fd.port, username="admin", password="adminpw",
                    decode_responses=True, socket_timeout=10)
    tap.check(c.ping(), "fenced starts with a private ACL file")
    with open(acl, "w") as f:
        f.write(GOOD + "user mallory on nopass ~* +@all\n")
    os.chmod(acl, 0o666)
    os.kill(fd.proc.pid, signal.SIGHUP)
    tap.check(wait_log(fd.log, "any user may write it"), "SIGHUP: the reload is refused and logged")
    try:
        e = None
        c.execute_command("ACL", "LOAD")
    except redis.ResponseError as ex:
        e = str(ex)
    tap.check(e is not None and "any user may write it" in e, "ACL LOAD is refused too", e)
    users = c.execute_command("ACL", "USERS")
    tap.check("mallory" not in users and "admin" in users, "the old users stay", users)
    os.chmod(acl, 0o640)
    c.execute_command("ACL", "LOAD")
    tap.check("mallory" in c.execute_command("ACL", "USERS"), "after chmod o-w it loads")
    c.close()
    c.connection_pool.disconnect()
finally:
    fd.stop()

# 3. A TLS key others may read: a warning (fence-store and fenced).
certs = tls_certs.make(os.path.join(TMP, "certs"))
key = certs["server.key"]
for mode, warned in ((0o644, True), (0o600, False)):
    os.chmod(key, mode)
    for name, argv in (
            ("fence-store", [FENCE_STORE, "--port", str(free_port()), "--data-dir",
                             os.path.join(TMP, "s-tls-%o" % mode)]),
            ("fenced", [FENCED, "--port", str(free_port()), "--data-dir",
                        os.path.join(TMP, "d-tls-%o" % mode)])):
        log = os.path.join(TMP, "%s-tls-%o.log" % (name, mode))
        text = start_and_stop(argv + ["--tls-port", str(free_port()), "--tls-cert",
                                      certs["server.crt"], "--tls-key", key],
                              log, "listening for TLS" if name == "fence-store" else "started")
        got = "group or others may read it (mode %03o)" % mode in text
        tap.check(got == warned, "%s: a tls-key of mode %03o is %s" %
                  (name, mode, "warned about" if warned else "not warned about"), text[-300:])

# 4. Start-up lines.
for name, argv, ready in (
        ("fenced", [FENCED, "--port", str(free_port()), "--data-dir",
                    os.path.join(TMP, "d-noauth")], "started"),
        ("fence-store", [FENCE_STORE, "--port", str(free_port()), "--data-dir",
                         os.path.join(TMP, "s-noauth")], "listening on")):
    log = os.path.join(TMP, name + "-noauth.log")
    text = start_and_stop(argv, log, ready)
    line = [ln for ln in text.splitlines() if "authentication is off" in ln]
    tap.check(len(line) == 1 and " warn " in line[0].lower() and "'default' with every right" in line[0],
              "%s without --acl-file: one WARN line says every client is 'default'" % name,
              text[-600:])
    log = os.path.join(TMP, name + "-auth.log")
    text = start_and_stop(argv[:4] + [argv[4] + "-a", "--acl-file", acl], log, ready)
    tap.check("authentication is off" not in text, "%s with --acl-file: no such line" % name)
    sock = os.path.join(TMP, name + ".sock")
    log = os.path.join(TMP, name + "-insecure.log")
    text = start_and_stop([argv[0], "--bind", "0.0.0.0", "--insecure", "--port", "0",
                           "--unix-socket", sock, "--data-dir", argv[4] + "-i"],
                          log, "NOT a loopback")
    loud = [ln for ln in text.splitlines() if "!!! --insecure" in ln and "0.0.0.0" in ln]
    tap.check(len(loud) == 3 and "WITHOUT AUTHENTICATION" in loud[0],
              "%s --insecure on 0.0.0.0: three loud lines" % name, text[-800:])

# fenced --insecure with a raft port off loopback and no peer TLS (192.0.2.1
# is TEST-NET-1: never assigned, so nothing listens there; the start may
# fail after the warning).
log = os.path.join(TMP, "fenced-raft-insecure.log")
cp, rp = free_port(), free_port()
text = start_and_stop([FENCED, "--port", str(cp), "--data-dir", os.path.join(TMP, "d-raft"),
                       "--node-id", "1", "--insecure", "--peers",
                       "1=192.0.2.1:%d/%d,2=127.0.0.1:%d/%d,3=127.0.0.1:%d/%d"
                       % (cp, rp, free_port(), free_port(), free_port(), free_port())],
                      log, "NO MUTUAL TLS")
loud = [ln for ln in text.splitlines() if "!!! --insecure: the raft port 192.0.2.1" in ln]
tap.check(len(loud) == 3, "fenced --insecure with a non-loopback raft port: three loud lines",
          text[-600:])

if os.access(PROXY, os.X_OK):
    log = os.path.join(TMP, "proxy.log")
    port = free_port()
    text = start_and_stop([PROXY, "--listen", "127.0.0.1:%d" % port, "--upstream",
                           "http://127.0.0.1:%d" % free_port(), "--data-dir",
                           os.path.join(TMP, "p")], log, "listening on")
    tap.check("tokens are not verified" in text,
              "fence-proxy without --token-verify-keys: a WARN line", text[-400:])
tap.finish()
