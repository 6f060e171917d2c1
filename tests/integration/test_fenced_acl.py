#!/usr/bin/python3
"""Users and permissions, and hostile clients, against real fenced and
fence-store processes (docs/security.md).

Each attack of issue 9 is refused with the right error, and the rightful
user's workflow works, through redis-py (username=/password=, which sends
HELLO/AUTH) and redis-cli (--user/--pass):
  - before login: -NOAUTH; a bad login: -WRONGPASS;
  - LEASE.REVOKE / LEASE.KEEPALIVE / LOCK with another user's lease,
    UNLOCK with another user's (seen) token: -NOPERM; an @admin may;
  - CLUSTER.REMOVE / CLUSTER.TRANSFER by a non-admin: -NOPERM;
  - a lock name outside the user's patterns: -NOPERM;
  - REQIDs are scoped to the user;
  - fence-store: FENCE.ADMIT 2^63-1 and FSET outside the fence patterns:
    -NOPERM; the rightful user's admit and write work;
  - ACL LOAD and SIGHUP apply a changed file; a bad file keeps the old
    users and says why;
  - a non-loopback --bind without --acl-file, or with plain TCP clients
    (not TLS-only), refuses to start unless --insecure; --acl-file with a
    TLS port and --port 0 starts;
  - CLUSTER.INFO shows term and raft addresses only to an @admin;
  - slowloris (an incomplete request) and idle connections are closed;
  - 1,024 idle unauthenticated connections do not lock out a user;
  - the global connection memory budget is enforced;
  - no password appears in any log.
"""
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
from fencetest import (Tap, binary, free_port, make_tmp, need_module, read_log,  # noqa: E402
                       spawn, stop_process, wait_for, wait_up)

redis = need_module("redis", "python3-redis")
FENCED = binary("fenced", env="FENCED")
FENCE_STORE = binary("fence-store", env="FENCE_STORE")
TMP = make_tmp("fence-acl.")
PASSWORDS = ["adm1n-pw-x", "al1ce-pw-x", "b0b-pw-x", "newpass-x", "v1ewer-pw-x"]

ACL = """# test users
user admin on >adm1n-pw-x ~* +@all
user alice on >al1ce-pw-x ~orders:* +@all -@admin
user bob on >b0b-pw-x ~* +@all -@admin
user off on >x ~* +@all off
user viewer on >v1ewer-pw-x ~* +@read
"""

t = Tap()
# 1,100 client sockets of our own: raise the soft open-file limit.
_soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if _soft < 4096:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, _hard), _hard))


def start(binpath, name, args, wait=True):
    """Start a daemon on a free port; returns (proc, port, log)."""
    port = free_port()
    log = os.path.join(TMP, name + ".log")
    d = os.path.join(TMP, name)
    proc = spawn([binpath, "--port", str(port), "--data-dir", d] + args, log,
                 stdin=subprocess.DEVNULL)
    if wait:
        state = wait_up(proc, lambda: socket.create_connection(("127.0.0.1", port), 0.2).close(),
                        15, 0.05)
        if state != "up":
            raise RuntimeError("%s did not start: %s" % (name, read_log(log)))
    return proc, port, log


def cli(port, user=None, pw=None, *args):
    """redis-cli, optionally logged in; returns its output, stripped."""
    cmd = ["redis-cli", "-p", str(port)]
    if user is not None:
        cmd += ["--user", user, "--pass", pw, "--no-auth-warning"]
    out = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=30)
    return (out.stdout + out.stderr).strip()


def err_of(fn):
    """The error text fn raises (redis-py), or None."""
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        return str(e)
    except redis.exceptions.AuthenticationError as e:
        return "AUTH " + str(e)
    except redis.exceptions.ConnectionError as e:
        return "CONN " + str(e)
    return None


def user(port, name, pw):
    return redis.Redis(host="127.0.0.1", port=port, username=name, password=pw,
                       decode_responses=True, socket_timeout=30)


def wait_leader(port):
    def ready():
        try:
            info = user(port, "admin", "adm1n-pw-x").execute_command("INFO")
        except Exception:  # noqa: BLE001 - not up yet
            return False
        if isinstance(info, dict):  # redis-py parses INFO itself
            return str(info.get("leader_ready")) == "1"
        return "leader_ready:1" in info
    return bool(wait_for(ready))


acl_path = os.path.join(TMP, "users.acl")
with open(acl_path, "w") as f:
    f.write(ACL)

# ---- safe defaults ------------------------------------------------------------------
# A non-loopback bind needs users AND TLS-only clients, or --insecure.  The
# accepted cases bind 0.0.0.0 on a free port; the test only ever connects to
# 127.0.0.1.
def bind_case(b, name, args):
    """Start b bound to 0.0.0.0 with args: (started, stderr text)."""
    d = os.path.join(TMP, "bind-%s-%d" % (name, free_port()))
    log = d + ".log"
    tls_port = None
    if "--tls-port" in args:
        tls_port = int(args[args.index("--tls-port") + 1])
    proc = spawn([b, "--bind", "0.0.0.0", "--data-dir", d] + args, log,
                 stdin=subprocess.DEVNULL)
    probe_port = tls_port if tls_port else int(args[args.index("--port") + 1])
    state = wait_up(proc, lambda: socket.create_connection(("127.0.0.1", probe_port),
                                                           0.2).close(), 15, 0.05)
    if state == "up":
        stop_process(proc)
        return True, read_log(log)
    stop_process(proc)
    return False, read_log(log)


have_openssl = shutil.which("openssl") is not None
if have_openssl:
    import tls_certs  # noqa: E402
    CERTS = tls_certs.make(os.path.join(TMP, "certs"))
for b, name in ((FENCED, "fenced"), (FENCE_STORE, "fence-store")):
    out = subprocess.run([b, "--bind", "0.0.0.0", "--port", str(free_port()),
                          "--data-dir", os.path.join(TMP, "nobind-" + name)],
                         capture_output=True, text=True, timeout=20)
    t.check(out.returncode != 0 and "--insecure" in out.stderr and "--acl-file" in out.stderr,
            "%s: non-loopback --bind without --acl-file refuses to start" % name, out.stderr)
    out = subprocess.run([b, "--bind", "0.0.0.0", "--port", str(free_port()),
                          "--acl-file", acl_path,
                          "--data-dir", os.path.join(TMP, "noTLS-" + name)],
                         capture_output=True, text=True, timeout=20)
    t.check(out.returncode != 0 and "--insecure" in out.stderr and "TLS" in out.stderr,
            "%s: non-loopback --bind with --acl-file but plain TCP refuses to start" % name,
            out.stderr)
    up, text = bind_case(b, name, ["--port", str(free_port()), "--insecure"])
    t.check(up, "%s: non-loopback, no users, --insecure: starts" % name, text[-800:])
    up, text = bind_case(b, name, ["--port", str(free_port()), "--acl-file", acl_path,
                                   "--insecure"])
    t.check(up, "%s: non-loopback, users, plain TCP, --insecure: starts" % name, text[-800:])
    if not have_openssl:
        t.note("%s: TLS cases of the bind matrix skipped (no openssl)" % name)
        continue
    tls = ["--tls-port", str(free_port()), "--tls-cert", CERTS["server.crt"],
           "--tls-key", CERTS["server.key"]]
    out = subprocess.run([b, "--bind", "0.0.0.0", "--port", "0",
                          "--data-dir", os.path.join(TMP, "noacl-" + name)] + tls,
                         capture_output=True, text=True, timeout=20)
    t.check(out.returncode != 0 and "--acl-file" in out.stderr,
            "%s: non-loopback, TLS-only but no --acl-file refuses to start" % name, out.stderr)
    out = subprocess.run([b, "--bind", "0.0.0.0", "--port", str(free_port()),
                          "--acl-file", acl_path,
                          "--data-dir", os.path.join(TMP, "tlsplain-" + name)] + tls,
                         capture_output=True, text=True, timeout=20)
    t.check(out.returncode != 0 and "TLS" in out.stderr,
            "%s: non-loopback, users, TLS beside a plain port refuses to start" % name,
            out.stderr)
    up, text = bind_case(b, name, ["--port", "0", "--acl-file", acl_path] + tls)
    t.check(up, "%s: non-loopback, users and TLS-only: starts" % name, text[-800:])

# ---- fenced ------------------------------------------------------------------------
proc, port, log = start(FENCED, "fenced", ["--acl-file", acl_path, "--auth-timeout-ms", "60000",
                                           "--request-timeout-ms", "1500",
                                           "--idle-timeout-ms", "0", "--max-clients", "64"])
t.check(wait_leader(port), "fenced with --acl-file elects itself")

anon = redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=30)
t.check(anon.ping() is True, "PING before login")
t.eq("AUTH Authentication required.", err_of(lambda: anon.execute_command("LEASE.GRANT", 5000)),
     "LEASE.GRANT before login: NOAUTH")
e = err_of(lambda: user(port, "alice", "wrong").ping())
t.check(e is not None and "invalid username-password pair" in e, "bad password: WRONGPASS", e)
e = err_of(lambda: user(port, "off", "x").ping())
t.check(e is not None and "invalid username-password pair" in e, "user off: WRONGPASS", e)

alice, bob, admin = user(port, "alice", "al1ce-pw-x"), user(port, "bob", "b0b-pw-x"), \
    user(port, "admin", "adm1n-pw-x")
t.eq("alice", alice.execute_command("ACL", "WHOAMI"), "redis-py username=/password=: ACL WHOAMI")
lease = alice.execute_command("LEASE.GRANT", 60000)
tok = alice.execute_command("LOCK", "orders:1", lease)
t.check(isinstance(tok, int) and tok > 0, "alice locks orders:1 with her lease")
info = bob.execute_command("LOCK.INFO", "orders:1")
for what, fn in (("LEASE.REVOKE", lambda: bob.execute_command("LEASE.REVOKE", lease)),
                 ("LEASE.KEEPALIVE", lambda: bob.execute_command("LEASE.KEEPALIVE", lease)),
                 ("LOCK with her lease", lambda: bob.execute_command("LOCK", "x", lease)),
                 ("UNLOCK with the seen token",
                  lambda: bob.execute_command("UNLOCK", "orders:1", tok))):
    e = err_of(fn)
    t.check(e is not None and e.startswith("this lease belongs to another user"),
            "bob's %s of alice's lease: NOPERM" % what, e)
t.eq(1, alice.execute_command("LEASE.KEEPALIVE", lease) > 0, "alice keeps her lease alive")
e = err_of(lambda: alice.execute_command("LOCK", "payroll", lease))
t.eq("No permissions to access a key", e, "alice: a name outside ~orders:* is NOPERM")
for c in (("CLUSTER.REMOVE", 2), ("CLUSTER.TRANSFER", 2)):
    e = err_of(lambda: bob.execute_command(*c))
    t.check(e is not None and "has no permissions to run the '%s' command" % c[0].lower() in e,
            "bob's %s: NOPERM" % c[0], e)
# CLUSTER.INFO: term and raft addresses for an @admin only.
ai = admin.execute_command("CLUSTER.INFO")
e = err_of(lambda: bob.execute_command("CLUSTER.INFO"))
t.check(e is not None and "no permissions" in e, "CLUSTER.INFO by a -@admin user: NOPERM", e)
bi = user(port, "viewer", "v1ewer-pw-x").execute_command("CLUSTER.INFO")
t.check("term:" in ai and "raft=" in ai and "node:id=1," in ai,
        "CLUSTER.INFO as @admin shows term and raft addresses", ai)
t.check("term:" not in bi and "raft=" not in bi and "node:id=1,client=" in bi
        and "leader_id:1" in bi and "commit_index:" in bi,
        "CLUSTER.INFO by a +@read user (not @admin): the same reply without term and "
        "raft addresses", bi)
e = err_of(lambda: bob.execute_command("ACL", "LIST"))
t.check(e is not None and "no permissions" in e, "ACL LIST needs @admin", e)
lines = admin.execute_command("ACL", "LIST")
t.check(len(lines) == 5 and all("pw-x" not in l for l in lines) and "#" in lines[1],
        "ACL LIST shows hashes, never passwords", lines)
t.eq(["admin", "alice", "bob", "off", "viewer"], admin.execute_command("ACL", "USERS"),
     "ACL USERS")
# REQIDs are scoped to the user.
la = alice.execute_command("LEASE.GRANT", 60000, "REQID", 77)
lb = bob.execute_command("LEASE.GRANT", 60000, "REQID", 77)
t.check(la != lb, "the same REQID for two users makes two leases", (la, lb))
t.eq(la, alice.execute_command("LEASE.GRANT", 60000, "REQID", 77), "alice's retry gets hers")
# redis-cli --user/--pass: the rightful workflow.
t.eq("1", cli(port, "alice", "al1ce-pw-x", "UNLOCK", "orders:1", str(tok)),
     "redis-cli --user/--pass: alice unlocks")
l2 = cli(port, "alice", "al1ce-pw-x", "LEASE.GRANT", "60000")
t.check(l2.isdigit(), "redis-cli: alice grants a lease", l2)
t.check(cli(port, "bob", "b0b-pw-x", "LEASE.REVOKE", l2).startswith("NOPERM"),
        "redis-cli: bob's revoke of it is NOPERM")
t.eq("OK", cli(port, "admin", "adm1n-pw-x", "LEASE.REVOKE", l2), "an @admin may revoke it")
# HELLO 2 AUTH, by hand.
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"HELLO 2 AUTH bob b0b-pw-x\r\nACL WHOAMI\r\n")
s.settimeout(30)
data = b""
while not data.endswith(b"\r\nbob\r\n"):  # both replies, or EOF
    try:
        d = s.recv(65536)
    except socket.timeout:
        break
    if not d:
        break
    data += d
s.close()
t.check(b"fenced" in data and data.endswith(b"$3\r\nbob\r\n"), "HELLO 2 AUTH user pass logs in",
        data)

# ---- reload -------------------------------------------------------------------------
with open(acl_path, "w") as f:
    f.write(ACL.replace(">b0b-pw-x", ">newpass-x"))
t.eq("OK", admin.execute_command("ACL", "LOAD"), "ACL LOAD of a changed file")
e = err_of(lambda: user(port, "bob", "b0b-pw-x").ping())
t.check(e is not None and "invalid" in e, "bob's old password is refused after ACL LOAD", e)
t.eq("bob", user(port, "bob", "newpass-x").execute_command("ACL", "WHOAMI"),
     "bob's new password works")
with open(acl_path, "w") as f:
    f.write(ACL + "user broken on +@nosuch\n")
e = err_of(lambda: admin.execute_command("ACL", "LOAD"))
t.check(e is not None and "users.acl:7: word 4: unknown category" in e,
        "ACL LOAD of a bad file: file:line: reason", e)
t.eq("bob", user(port, "bob", "newpass-x").execute_command("ACL", "WHOAMI"),
     "a bad file keeps the old users")
with open(acl_path, "w") as f:
    f.write(ACL.replace("user alice on", "user alice off"))
os.kill(proc.pid, signal.SIGHUP)
e = wait_for(lambda: err_of(lambda: user(port, "alice", "al1ce-pw-x").ping()))
t.check(e is not None and "invalid" in e, "SIGHUP reloads: alice turned off", e)
e = err_of(lambda: alice.execute_command("LEASE.GRANT", 5000))
t.check(e is not None and "Authentication required" in e,
        "alice's open connection is logged out by the reload", e)

# ---- hostile clients ----------------------------------------------------------------
slow = socket.create_connection(("127.0.0.1", port))
slow.sendall(b"*2\r\n$4\r\nPING\r\n$5\r\nab")  # never finished
slow.settimeout(20)
t0 = time.monotonic()
try:
    got = slow.recv(4096)
    while got and not got.endswith(b"\r\n"):
        got += slow.recv(4096)
    rest = slow.recv(4096)
except OSError:
    got, rest = b"", b"x"
t.check(b"request-timeout-ms" in got and rest == b"",
        "slowloris: an incomplete request is answered and closed", (got, rest))
t.note("slowloris closed after %.1f s (--request-timeout-ms 1500)" % (time.monotonic() - t0))
slow.close()
stop_process(proc)

# Idle connections; 1,024 idle unauthenticated connections; memory budget.
proc, port, log2 = start(FENCED, "fenced2", ["--acl-file", acl_path, "--max-clients", "1024",
                                             "--idle-timeout-ms", "1000",
                                             "--auth-timeout-ms", "600000",
                                             "--max-conn-memory", str(8 << 20)])
t.check(wait_leader(port), "second fenced elects itself")
idle = socket.create_connection(("127.0.0.1", port))
idle.sendall(b"AUTH admin adm1n-pw-x\r\n")
idle.settimeout(20)
first = idle.recv(100)
try:
    closed = idle.recv(100)
except OSError:
    closed = b""
t.check(first == b"+OK\r\n" and (b"idle" in closed or closed == b""),
        "an idle connection is closed (--idle-timeout-ms)", (first, closed))
idle.close()
hogs = []
for _ in range(1100):
    try:
        hogs.append(socket.create_connection(("127.0.0.1", port)))
    except OSError:
        break
t.note("%d unauthenticated connections opened" % len(hogs))
ok = False
try:
    ok = user(port, "admin", "adm1n-pw-x").execute_command("ACL", "WHOAMI") == "admin"
except Exception as ex:  # noqa: BLE001
    t.note("login failed: %r" % ex)
t.check(ok, "1,024+ idle unauthenticated connections do not lock out a user")
for h in hogs:
    h.close()
# Memory budget: several clients each send most of a big request (never
# finished); together they pass 8 MiB, so some are refused.
big = []
refused = 0
for _ in range(8):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"AUTH admin adm1n-pw-x\r\n")
    s.recv(100)
    payload = b"*2\r\n$4\r\nPING\r\n$3000000\r\n" + b"x" * 2000000
    try:
        s.sendall(payload)
    except OSError:
        refused += 1
    big.append(s)
# Until the server has refused one (an error or EOF to read); the rest are
# then read with a timeout each, as before.
wait_for(lambda: select.select(big, [], [], 0)[0])
for s in big:
    s.settimeout(2)
    try:
        d = s.recv(4096)
        if d.startswith(b"-") or d == b"":
            refused += 1
    except socket.timeout:
        pass
    except OSError:
        refused += 1
    s.close()
t.check(refused > 0, "--max-conn-memory: connections past the global budget are refused",
        refused)
t.check(user(port, "admin", "adm1n-pw-x").ping(), "the server still serves after the budget hit")
stop_process(proc)

# ---- fence-store ----------------------------------------------------------------------
with open(acl_path, "w") as f:
    f.write(ACL)
sproc, sport, slog = start(FENCE_STORE, "store", ["--acl-file", acl_path])
sa, sb = user(sport, "alice", "al1ce-pw-x"), user(sport, "bob", "b0b-pw-x")
anon = redis.Redis(host="127.0.0.1", port=sport, decode_responses=True, socket_timeout=30)
t.eq("AUTH Authentication required.", err_of(lambda: anon.execute_command("FENCE.ADMIT", "orders:1",
                                                                      2 ** 63 - 1)),
     "fence-store: FENCE.ADMIT before login: NOAUTH")
t.eq("No permissions to access a key",
     err_of(lambda: sa.execute_command("FENCE.ADMIT", "payroll", 2 ** 63 - 1)),
     "fence-store: FENCE.ADMIT 2^63-1 outside the user's fences: NOPERM")
t.eq("No permissions to access a key",
     err_of(lambda: sa.execute_command("FSET", "payroll", 5, "k", "v")),
     "fence-store: FSET through a fence outside the patterns: NOPERM")
t.check(sa.execute_command("FENCE.ADMIT", "orders:1", 5) is not None,
        "fence-store: alice admits a token on her fence")
t.eq("OK", sa.execute_command("FSET", "orders:1", 5, "k1", "v1"), "fence-store: alice writes")
t.eq(0, sb.execute_command("FENCE.HIGH", "payroll"), "fence-store: payroll's mark never moved")
t.eq("v1", sb.execute_command("FGET", "k1"), "fence-store: bob (~*) reads alice's key")
bb = user(sport, "bob", "b0b-pw-x")
t.eq("OK", bb.execute_command("FSET", "payroll", 3, "pk", "secret-v"), "fence-store: bob writes payroll")
t.eq("No permissions to access a key", err_of(lambda: sa.execute_command("FGET", "pk")),
     "fence-store: FGET of a key bound to a fence outside the patterns: NOPERM")
t.eq(None, sa.execute_command("FGET", "never-written"), "fence-store: FGET of an unbound key: nil")
t.eq("1", cli(sport, "alice", "al1ce-pw-x", "FDEL", "orders:1", "5", "k1"),
     "fence-store: redis-cli --user/--pass works")
stop_process(sproc)

# ---- no password in any log ------------------------------------------------------------
for lg in (log, log2, slog):
    text = read_log(lg)
    bad = [p for p in PASSWORDS if p in text]
    t.check(not bad, "no password in %s" % os.path.basename(lg), bad)
t.finish()
