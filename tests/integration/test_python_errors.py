#!/usr/bin/python3
"""The Python client's errors: every error code fenced and fence-store send
reaches the caller as its own class (fenced.CODES), with ``code`` set and
the server's own sentence in ``message`` and in ``str(error)``.

Each code is produced by real processes this test starts (127.0.0.1, free
ports, temp dirs, stopped by PID):
- fenced with an ACL file: NOAUTH (no login), WRONGPASS, NOPERM (a name
  outside the user's ~patterns, a command outside its categories, another
  user's lease), LIMIT (--max-leases), NOLEASE, ERR, NOPROTO (HELLO 4), WRONGTYPE (SEM.ACQUIRE of a lock),
  EXECABORT (MULTI with a refused command);
- a 3-node cluster with one node up: TRYAGAIN (no leader) and UNAVAILABLE
  (HEALTH); with two up, NOTLEADER from a follower (no redirects allowed);
- fence-store with an ACL file, --max-value and a tiny --map-size: STALE,
  WRONGFENCE, BADTOKEN, LIMIT, FULL, NOPERM, NOAUTH, WRONGPASS;
- redis-py's own classes (NoPermissionError, AuthenticationError,
  ExecAbortError) from a plain redis-py connection to the same servers map
  back to the same codes (fenced.errors.from_redis).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_fenced_lib import TMP, Fenced, Tap, free_port, redis  # noqa: E402,F401
import test_store_helpers as sh  # noqa: E402

PYSRC = os.path.join(HERE, "..", "..", "clients", "python", "src")
sys.path.insert(0, PYSRC)
import fenced  # noqa: E402
from fenced.errors import from_redis  # noqa: E402

tap = Tap()
PW = "Py-Err-Pw-31"


def error(fn, *a, **kw):
    """The exception fn raised (any class), or None."""
    try:
        fn(*a, **kw)
    except Exception as e:  # noqa: BLE001 - the test looks at the class
        return e
    return None


def expect(cls, code, e, what, words=()):
    """e is a cls with this code, a non-empty message that is the server's
    (it contains each of words), and str(e) holds "CODE message"."""
    ok = (isinstance(e, cls) and e.code == code and bool(e.message)
          and (code + " " + e.message) in str(e)
          and all(w in e.message for w in words))
    tap.check(ok, "%s -> %s (code %s)" % (what, cls.__name__, code),
              "%s: %r code=%r message=%r" % (type(e).__name__, str(e), getattr(e, "code", None),
                                            getattr(e, "message", None)))
    return ok


def fenced_codes():
    acl = os.path.join(TMP, "fenced.acl")
    with open(acl, "w") as f:
        f.write("user app on >%s ~app:* +@all -@admin\n" % PW)
        f.write("user other on >%s ~* +@all -@admin\n" % PW)
        f.write("user reader on >%s ~* +@read\n" % PW)
    f = Fenced(name="fenced-acl", args=["--acl-file", acl, "--max-leases", "2"]).start(
        wait_ready=False)
    addr = "127.0.0.1:%d" % f.port
    anon = fenced.Client(addr, timeout_ms=2000)
    expect(fenced.AuthRequired, "NOAUTH", error(anon.lease_grant, 1000),
           "fenced: a request without a login")
    tap.check(isinstance(error(anon.lease_grant, 1000), fenced.AuthFailed),
              "fenced: AuthRequired is an AuthFailed")
    bad = fenced.Client(addr, timeout_ms=2000, username="app", password="wrong")
    e = error(bad.lease_grant, 1000)
    expect(fenced.WrongPass, "WRONGPASS", e, "fenced: a wrong password")
    tap.check(PW not in str(e) and "wrong" not in str(e).split(), "fenced: the password is not in the error", e)
    app = fenced.Client(addr, timeout_ms=5000, username="app", password=PW)  # retries TRYAGAIN
    lease = app.lease_grant(10000)
    expect(fenced.PermissionDenied, "NOPERM", error(app.lock_lease, "orders", lease),
           "fenced: a lock name outside the user's ~patterns")
    reader = fenced.Client(addr, timeout_ms=3000, username="reader", password=PW)
    expect(fenced.PermissionDenied, "NOPERM", error(reader.lease_grant, 1000),
           "fenced: a command outside the user's categories")
    other = fenced.Client(addr, timeout_ms=3000, username="other", password=PW)
    expect(fenced.PermissionDenied, "NOPERM", error(other.lease_revoke, lease),
           "fenced: another user's lease", ["another user"])
    app.lease_grant(10000)
    expect(fenced.LimitReached, "LIMIT", error(app.lease_grant, 10000),
           "fenced: --max-leases full", ["max-leases"])
    expect(fenced.LeaseLost, "NOLEASE", error(app.lease_keepalive, 987654321),
           "fenced: LEASE.KEEPALIVE of an unknown lease", ["lease"])
    expect(fenced.ServerError, "ERR", error(app.call, "LEASE.GRANT", "x"),
           "fenced: a malformed request")
    expect(fenced.ServerError, "ERR", error(app.call, "NO.SUCH.COMMAND"),
           "fenced: an unknown command")
    expect(fenced.ProtocolNotSupported, "NOPROTO", error(app.call, "HELLO", "4"),
           "fenced: HELLO 4")
    app.lock_lease("app:l", lease)
    expect(fenced.WrongType, "WRONGTYPE", error(app.call, "SEM.ACQUIRE", "app:l", 2, lease),
           "fenced: SEM.ACQUIRE of a lock's name", ["app:l"])
    expect(fenced.ServerError, "ERR", error(app.call, "MULTI"), "fenced: MULTI (refused)",
           ["MULTI"])
    error(app.call, "LEASE.GRANT", "x")
    expect(fenced.ExecAborted, "EXECABORT", error(app.call, "EXEC"),
           "fenced: EXEC after a refused command")

    # redis-py's own classes, from a plain redis-py connection.
    r = redis.Redis(host="127.0.0.1", port=f.port, username="reader", password=PW)
    e = error(r.execute_command, "LEASE.GRANT", 1000)
    tap.check(isinstance(e, redis.exceptions.NoPermissionError), "redis-py: NOPERM is its NoPermissionError", e)
    expect(fenced.PermissionDenied, "NOPERM", from_redis(e), "from_redis: NoPermissionError")
    r.close()
    r = redis.Redis(host="127.0.0.1", port=f.port)
    e = error(r.execute_command, "LEASE.GRANT", 1000)
    tap.check(isinstance(e, redis.exceptions.AuthenticationError),
              "redis-py: NOAUTH is its AuthenticationError", e)
    expect(fenced.AuthRequired, "NOAUTH", from_redis(e), "from_redis: AuthenticationError (NOAUTH)")
    r.close()
    r = redis.Redis(host="127.0.0.1", port=f.port, username="app", password=PW)
    e = error(r.execute_command, "HELLO", "4")
    expect(fenced.ProtocolNotSupported, "NOPROTO", from_redis(e), "from_redis: a ResponseError")
    p = r.pipeline(transaction=True)
    p.execute_command("PING")
    e = error(p.execute)
    tap.check(isinstance(e, redis.exceptions.ResponseError), "redis-py: a refused MULTI raises", e)
    if isinstance(e, redis.exceptions.ExecAbortError):
        expect(fenced.ExecAborted, "EXECABORT", from_redis(e), "from_redis: ExecAbortError")
    r.close()
    for c in (anon, bad, app, reader, other):
        c.close()
    f.stop()


def cluster_codes():
    ports = [(free_port(), free_port()) for _ in range(3)]
    peers = ",".join("%d=127.0.0.1:%d/%d" % (i + 1, p, rp) for i, (p, rp) in enumerate(ports))
    nodes = [Fenced(name="node%d" % (i + 1), port=p,
                    args=["--node-id", str(i + 1), "--raft-port", str(rp), "--peers", peers,
                          "--election-timeout-ms", "300"])
             for i, (p, rp) in enumerate(ports)]
    nodes[0].start(wait_ready=False)
    one = fenced.Client("127.0.0.1:%d" % nodes[0].port, timeout_ms=600)
    expect(fenced.TryAgain, "TRYAGAIN", error(one.lease_grant, 1000),
           "cluster: one node of three (no leader)")
    expect(fenced.Unavailable, "UNAVAILABLE", error(one.call, "HEALTH"),
           "cluster: HEALTH of a node without a leader")
    nodes[1].start(wait_ready=False)
    leader = None
    for _ in range(300):
        for n in nodes[:2]:
            try:
                if n.info().get("role") == "leader" and n.info().get("leader_ready") == "1":
                    leader = n
            except Exception:  # noqa: BLE001 - still starting
                pass
        if leader:
            break
        import time
        time.sleep(0.05)
    tap.check(leader is not None, "cluster: two nodes of three elect a leader")
    if leader:
        follower = nodes[1] if leader is nodes[0] else nodes[0]
        fc = fenced.Client("127.0.0.1:%d" % follower.port, timeout_ms=2000, max_redirects=0)
        e = error(fc.lease_grant, 1000)
        expect(fenced.NotLeader, "NOTLEADER", e, "cluster: a follower, no redirects allowed")
        tap.eq("127.0.0.1:%d" % leader.port, getattr(e, "leader", None),
               "cluster: NotLeader.leader names the leader")
        fc.close()
    one.close()
    for n in nodes[:2]:
        n.stop()


def store_codes():
    acl = os.path.join(TMP, "store.acl")
    with open(acl, "w") as f:
        f.write("user app on >%s ~app:* +@all -@admin\n" % PW)
    s = sh.Store(TMP, name="store-acl", flags=["--acl-file", acl, "--max-value", "65536",
                                                "--map-size", "1048576"])
    s.start()
    addr = "127.0.0.1:%d" % s.port
    anon = fenced.Store(addr, timeout_ms=2000)
    expect(fenced.AuthRequired, "NOAUTH", error(anon.high, "app:f"), "store: no login")
    bad = fenced.Store(addr, timeout_ms=2000, username="app", password="nope")
    expect(fenced.WrongPass, "WRONGPASS", error(bad.high, "app:f"), "store: a wrong password")
    st = fenced.Store(addr, timeout_ms=3000, username="app", password=PW)
    st.fset("app:f", 5, "app:k", "v")
    e = error(st.fset, "app:f", 4, "app:k", "old")
    expect(fenced.StaleToken, "STALE", e, "store: a token below the mark", ["older"])
    tap.check(getattr(e, "token", None) == 4 and getattr(e, "highest", None) == 5,
              "store: StaleToken keeps .token and .highest", e)
    expect(fenced.WrongFence, "WRONGFENCE", error(st.fset, "app:g", 9, "app:k", "x"),
           "store: a key written through another fence", ["belongs to fence"])
    expect(fenced.BadToken, "BADTOKEN", error(st.fset, "app:f", "6.notasignature", "app:k", "x"),
           "store: a malformed signed token")
    expect(fenced.LimitReached, "LIMIT", error(st.fset, "app:f", 6, "app:k", "x" * 65537),
           "store: a value over --max-value", ["max-value"])
    expect(fenced.PermissionDenied, "NOPERM", error(st.fset, "orders", 6, "orders:k", "x"),
           "store: a fence outside the user's ~patterns")
    expect(fenced.ServerError, "ERR", error(st.fincr, "app:f", 6, "app:k"),
           "store: FINCR of a value that is not an integer")
    e = None
    for i in range(64):  # a 1 MiB map holds fewer than 16 values of 64 KiB
        e = error(st.fset, "app:f", 6, "app:full%02d" % i, "y" * 65536)
        if e is not None:
            break
    expect(fenced.StoreFull, "FULL", e, "store: writes past --map-size")
    for c in (anon, bad, st):
        c.close()
    s.stop()


def mapping_table():
    # The table names every code the daemons send (docs/python.md lists them).
    want = {"NOTLEADER", "TRYAGAIN", "NOLEASE", "LIMIT", "WRONGPASS", "NOAUTH", "NOPERM", "STALE",
            "WRONGFENCE", "BADTOKEN", "FULL", "UNAVAILABLE", "EXECABORT", "NOPROTO", "ERR",
            "WRONGTYPE"}
    tap.eq(want, set(fenced.CODES), "CODES: one class for every code fenced and fence-store send")
    e = fenced.errors.from_reply("SOMENEWCODE a sentence")
    tap.check(isinstance(e, fenced.ServerError) and e.code == "SOMENEWCODE" and e.message == "a sentence",
              "an unknown code is a ServerError with that code", e)
    e = fenced.errors.from_reply("wrong number of arguments")  # redis-py took "ERR " off
    tap.check(isinstance(e, fenced.ServerError) and e.code == "ERR", "a stripped ERR is ERR", e)
    # Any reply text a server (or a man in the middle of a plaintext
    # connection) sends: from_reply never raises, keeps the whole text.
    import random
    rnd = random.Random(20)
    words = list(fenced.CODES) + ["", " ", "STALE x y", "STALE 1", "NOTLEADER", "\x00", "é", "9"]
    bad = []
    for _ in range(5000):
        text = "".join(rnd.choice(words) + rnd.choice(["", " ", "  ", "\r", "1 2 ", "\x7f"])
                       for _ in range(rnd.randint(0, 5)))
        try:
            e = fenced.errors.from_reply(text)
            if not isinstance(e, fenced.FencedError) or text not in str(e) or e.code is None:
                bad.append(text)
        except Exception as x:  # noqa: BLE001 - the check is that nothing raises
            bad.append((text, x))
    tap.check(not bad, "from_reply: 5000 random reply texts map without raising, text kept",
              bad[:5])


def main():
    for group in (mapping_table, fenced_codes, store_codes, cluster_codes):
        try:
            group()
        except Exception as e:  # noqa: BLE001 - one crashed group is one failure
            import traceback
            traceback.print_exc(file=sys.stdout)
            tap.check(False, "a group crashed: %r" % e)
    tap.finish()


if __name__ == "__main__":
    main()
