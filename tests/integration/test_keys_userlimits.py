#!/usr/bin/python3
"""Per-user limits in the ACL (issue 18, section 6): maxleases=N,
maxlocks=N and maxconns=N.  Before them one user took every lease of
fenced (or every connection) and everyone else got -LIMIT.

With real processes (fenced with --acl-file and --max-leases 40, and
fence-store with the same ACL):
  - alice (maxleases=5) gets 5 leases, then -LIMIT; bob still gets leases;
    revoking one of alice's makes room;
  - alice (maxlocks=3) holds 3 locks, then -LIMIT (with any of her leases);
    a reentrant LOCK still answers her token; an UNLOCK makes room; bob
    still gets locks (waits count too: tests/unit/test_core_quota.c);
  - alice (maxconns=3): a 4th connection gets -LIMIT and is closed, on
    fenced and on fence-store; bob still connects; closing one makes room;
  - ACL LIST shows the rules; a bad rule in ACL LOAD is refused with the
    line and the old limits stay;
  - the limits survive a restart (the log replays the quota carried in
    each command; the counts are rebuilt from the leases).
On the code before the rules existed the ACL file does not even load
("unknown rule"); with the rules parsed but not enforced, alice's 6th
lease, 4th lock and 4th connection would succeed.
"""
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import TMP, Fenced, Tap, redis  # noqa: E402
from test_store_helpers import FENCE_STORE, Store, need_store  # noqa: E402

need_store()
tap = Tap()

ACL = os.path.join(TMP, "users.acl")
ACL_TEXT = ("user default off\n"
            "user admin on >adminpw ~* +@all\n"
            "user alice on >apw ~* +@all -@admin maxleases=5 maxlocks=3 maxconns=3\n"
            "user bob on >bpw ~* +@all -@admin\n")
with open(ACL, "w") as f:
    f.write(ACL_TEXT)
os.chmod(ACL, 0o600)


def login(port, user, pw):
    c = redis.Redis(host="127.0.0.1", port=port, username=user, password=pw,
                    decode_responses=True, socket_timeout=10)
    c.ping()
    return c


def bye(c):
    """Really close a client (redis-py 4.3's close() only releases the
    connection to its pool)."""
    c.close()
    c.connection_pool.disconnect()


def err(fn, *args):
    try:
        fn(*args)
    except redis.RedisError as e:
        return str(e)
    return None


def raw(port, data, timeout=5.0):
    """Send raw RESP on a new socket; what comes back until the peer closes."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(4096)
            except (socket.timeout, ConnectionResetError):
                return out, False
            if not chunk:
                return out, True
            out += chunk
    finally:
        s.close()


def cmd(*words):
    out = b"*%d\r\n" % len(words)
    for w in words:
        w = w.encode() if isinstance(w, str) else w
        out += b"$%d\r\n%s\r\n" % (len(w), w)
    return out


def wait_user_conns(port, user, n, secs=10.0):
    """Wait until the server lists n connections logged in as user (a
    client's close reaches the server asynchronously)."""
    adm = login(port, "admin", "adminpw")
    try:
        end = time.monotonic() + secs
        while time.monotonic() < end:
            text = adm.execute_command("CLIENT", "LIST")
            if isinstance(text, bytes):
                text = text.decode()
            if isinstance(text, list):
                text = "\n".join(" ".join("%s=%s" % kv for kv in d.items()) for d in text)
            got = sum(1 for ln in str(text).splitlines() if (" user=%s " % user) in ln + " ")
            if got == n:
                return True
            time.sleep(0.02)
        return False
    finally:
        bye(adm)


def conn_limit(port, what):
    """alice: 3 connections are fine, a 4th is refused and closed; bob is
    not affected; closing one of alice's makes room."""
    tap.check(wait_user_conns(port, "alice", 0), "%s: alice has no connection yet" % what)
    held = [login(port, "alice", "apw") for _ in range(3)]
    out, closed = raw(port, cmd("AUTH", "alice", "apw") + cmd("PING"))
    tap.check(out.startswith(b"+OK\r\n-LIMIT") and b"maxconns" in out,
              "%s: alice's 4th connection gets -LIMIT ... maxconns" % what, out)
    tap.check(closed, "%s: and is closed" % what)
    b = login(port, "bob", "bpw")
    tap.check(b.ping(), "%s: bob still connects" % what)
    tap.check(all(c.ping() for c in held), "%s: alice's first 3 still work" % what)
    bye(held.pop())
    tap.check(wait_user_conns(port, "alice", 2), "%s: the server saw one close" % what)
    c4 = None
    try:
        c4 = login(port, "alice", "apw")
        ok = c4.ping()
    except redis.RedisError:
        ok = False
    tap.check(ok, "%s: after one closed, alice connects again" % what)
    # One of alice's logs in as bob: it leaves alice's count.
    held[0].execute_command("AUTH", "bob", "bpw")
    tap.check(held[0].ping(), "%s: a connection of alice's logs in as bob" % what)
    c5 = None
    try:
        c5 = login(port, "alice", "apw")
        ok = c5.ping()
    except redis.RedisError:
        ok = False
    tap.check(ok, "%s: that makes room for another of alice's" % what)
    out, closed = raw(port, cmd("AUTH", "alice", "apw") + cmd("PING"))
    tap.check(b"-LIMIT" in out and closed, "%s: and then she is full again" % what, out)
    for c in held + [b] + ([c4] if c4 else []) + ([c5] if c5 else []):
        bye(c)


fd = Fenced(name="fenced-limits", args=["--acl-file", ACL, "--max-leases", "40"])
st = Store(TMP, name="store-limits", flags=["--acl-file", ACL])
try:
    fd.start(wait_ready=False)
    adm = login(fd.port, "admin", "adminpw")
    # Wait until the node leads (INFO as admin).
    end = time.monotonic() + 10
    while time.monotonic() < end:
        text = adm.execute_command("INFO")
        info = text if isinstance(text, dict) else dict(
            ln.split(":", 1) for ln in text.splitlines() if ":" in ln and not ln.startswith("#"))
        if str(info.get("leader_ready")) == "1":
            break
        time.sleep(0.03)
    a = login(fd.port, "alice", "apw")
    b = login(fd.port, "bob", "bpw")

    # maxleases=5
    leases = [a.execute_command("LEASE.GRANT", 60000) for _ in range(5)]
    tap.eq(5, len(set(leases)), "alice gets 5 leases")
    e = err(a.execute_command, "LEASE.GRANT", 60000)
    tap.check(e is not None and e.startswith("LIMIT") and "maxleases" in e,
              "alice's 6th lease: -LIMIT naming maxleases", e)
    e = err(a.execute_command, "ACQUIRE", "acq", 60000)
    tap.check(e is not None and e.startswith("LIMIT"), "alice's ACQUIRE: -LIMIT (leases full)", e)
    bl = [b.execute_command("LEASE.GRANT", 60000) for _ in range(10)]
    tap.eq(10, len(set(bl)), "bob still gets 10 leases")
    a.execute_command("LEASE.REVOKE", leases.pop())
    leases.append(a.execute_command("LEASE.GRANT", 60000))
    tap.check(leases[-1] is not None, "a revoke makes room for alice")
    tap.check(err(a.execute_command, "LEASE.GRANT", 60000) is not None,
              "and alice is full again")

    # maxlocks=3
    la = leases[0]
    toks = [a.execute_command("LOCK", "a%d" % i, la) for i in range(3)]
    tap.eq(3, len(set(toks)), "alice holds 3 locks")
    e = err(a.execute_command, "LOCK", "a3", la)
    tap.check(e is not None and e.startswith("LIMIT"), "alice's 4th lock: -LIMIT", e)
    e = err(a.execute_command, "LOCK", "a3", leases[1])
    tap.check(e is not None and e.startswith("LIMIT"),
              "also with another of her leases (the limit is the user's)", e)
    tap.eq(toks[0], a.execute_command("LOCK", "a0", la), "a reentrant LOCK still answers")
    tb = b.execute_command("LOCK", "b0", bl[0])
    tap.check(int(tb) > 0, "bob still gets a lock")
    a.execute_command("UNLOCK", "a2", toks[2])
    e = err(a.execute_command, "LOCK", "a3", la)
    tap.check(e is None, "an UNLOCK makes room for alice", e)
    e = err(a.execute_command, "LOCK", "a4", la)
    tap.check(e is not None and e.startswith("LIMIT"), "and she is full again", e)
    tap.check(int(b.execute_command("LOCK", "b1", bl[1])) > 0, "bob still locks")

    # ACL LIST shows the rules.
    lst = adm.execute_command("ACL", "LIST")
    line = [x for x in lst if x.startswith("user alice ")]
    tap.check(line and "maxleases=5 maxlocks=3 maxconns=3" in line[0], "ACL LIST shows them",
              line)
    # A bad rule: ACL LOAD refuses it and names the line; old limits stay.
    with open(ACL, "w") as f:
        f.write(ACL_TEXT.replace("maxleases=5", "maxleases=-5"))
    e = err(adm.execute_command, "ACL", "LOAD")
    tap.check(e is not None and ":3:" in e and "maxleases=N" in e,
              "ACL LOAD refuses maxleases=-5 naming line 3", e)
    tap.check(err(a.execute_command, "LEASE.GRANT", 60000) is not None,
              "the old limit stays in force")
    with open(ACL, "w") as f:
        f.write(ACL_TEXT)

    for c in (a, b, adm):
        bye(c)
    conn_limit(fd.port, "fenced")

    # The limits survive a restart: replay rebuilds the counts.
    fd.stop()
    fd.start(wait_ready=False)
    adm = login(fd.port, "admin", "adminpw")
    end = time.monotonic() + 10
    ok = False
    while time.monotonic() < end and not ok:
        text = adm.execute_command("INFO")
        info = text if isinstance(text, dict) else dict(
            ln.split(":", 1) for ln in text.splitlines() if ":" in ln and not ln.startswith("#"))
        ok = str(info.get("leader_ready")) == "1"
        if not ok:
            time.sleep(0.03)
    a = login(fd.port, "alice", "apw")
    e = err(a.execute_command, "LEASE.GRANT", 60000)
    tap.check(e is not None and e.startswith("LIMIT"), "after a restart alice is still full", e)
    b = login(fd.port, "bob", "bpw")
    tap.check(int(b.execute_command("LEASE.GRANT", 60000)) > 0, "and bob still gets a lease")
    for c in (a, b, adm):
        bye(c)

    if os.access(FENCE_STORE, os.X_OK):
        st.start()
        conn_limit(st.port, "fence-store")
    tap.check(fd.proc.poll() is None, "fenced is up")
finally:
    for p in (st, fd):
        try:
            p.stop()
        except Exception:  # noqa: BLE001 - best-effort cleanup
            pass
tap.finish()
