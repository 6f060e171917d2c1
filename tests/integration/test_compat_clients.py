#!/usr/bin/python3
"""What redis-py sends on connect, and transactions, against real fenced
and fence-store processes (issue 13).  Run with /usr/bin/python3.

Both daemons call fence_compat_handle (src/daemon/compat.h) before their
own commands; registered in `make test` by mk/compat.mk.

Checks, for each daemon:
- Redis(client_name=..., db=0) connects; CLIENT GETNAME/ID/LIST/SETINFO,
  HELLO 2, ECHO, TIME, COMMAND COUNT/INFO/DOCS, RESET answer;
- db=1 fails with a clear error; password= fails with AuthenticationError;
  HELLO 4 answers NOPROTO (HELLO 3 is RESP3: test_resp3_node.sh);
- pipeline(transaction=True) raises, and NONE of its commands ran (no lease
  granted, no lock taken, no key written); the connection works afterwards;
- MULTI/DISCARD by hand; pipeline(transaction=False) still works;
- WATCH is refused.
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_fenced_lib import Fenced, Tap, make_tmp, redis  # noqa: E402
import test_store_helpers as sh  # noqa: E402

tap = Tap()


def expect_error(fn, *words):
    """Runs fn(); returns the error text when it raised a redis error whose
    text holds every word, else None."""
    try:
        fn()
    except redis.exceptions.RedisError as e:
        text = str(e)
        return text if all(w in text for w in words) else None
    return None


def handshakes(name, port, own_cmd):
    """Connection commands of one daemon on port; own_cmd is one of its
    commands for COMMAND INFO."""
    r = redis.Redis(host="127.0.0.1", port=port, client_name="py-" + name, db=0,
                    decode_responses=True, socket_timeout=10)
    tap.eq(True, r.ping(), "%s: connects with client_name= and db=0" % name)
    tap.eq("py-" + name, r.client_getname(), "%s: CLIENT GETNAME" % name)
    cid = r.client_id()
    tap.check(isinstance(cid, int) and cid > 0, "%s: CLIENT ID is a positive integer" % name)
    tap.eq("OK", r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "redis-py"),
           "%s: CLIENT SETINFO LIB-NAME" % name)
    lst = r.client_list()
    me = [c for c in lst if int(c["id"]) == cid]
    tap.check(len(me) == 1 and me[0]["name"] == "py-" + name and
              me[0].get("lib-name") == "redis-py",
              "%s: CLIENT LIST shows this connection with its name" % name, lst)
    tap.check(all("addr" in c for c in lst), "%s: CLIENT LIST has addr fields" % name, lst)
    hello = r.execute_command("HELLO", "2")
    tap.check(isinstance(hello, list) and "proto" in hello and
              hello[hello.index("server") + 1] == name,
              "%s: HELLO 2 answers the server array" % name, hello)
    # HELLO 3 switches to RESP3, which redis-py 4 cannot read: test_resp3_*.
    tap.check(expect_error(lambda: r.execute_command("HELLO", "4"), "NOPROTO") is not None,
              "%s: HELLO 4 answers NOPROTO" % name)
    tap.eq("hi there", r.echo("hi there"), "%s: ECHO" % name)
    t = r.time()
    tap.check(abs(t[0] - time.time()) < 60, "%s: TIME is the wall clock" % name, t)
    n = r.execute_command("COMMAND COUNT")
    tap.check(isinstance(n, int) and n > 10, "%s: COMMAND COUNT" % name, n)
    info = r.execute_command("COMMAND INFO", own_cmd)
    tap.check(isinstance(info, list) and info[0][0] == own_cmd.lower(),
              "%s: COMMAND INFO %s" % (name, own_cmd), info)
    docs = r.execute_command("COMMAND DOCS", own_cmd)
    tap.check(isinstance(docs, list) and docs[0] == own_cmd.lower() and "summary" in docs[1],
              "%s: COMMAND DOCS %s" % (name, own_cmd), docs)
    tap.eq("RESET", r.execute_command("RESET"), "%s: RESET" % name)
    tap.eq(None, r.client_getname(), "%s: RESET clears the name" % name)
    r.close()

    bad = redis.Redis(host="127.0.0.1", port=port, db=1, socket_timeout=10)
    err = expect_error(bad.ping, "DB index is out of range")
    tap.check(err is not None, "%s: db=1 fails clearly" % name, err)
    bad.close()
    pw = redis.Redis(host="127.0.0.1", port=port, password="secret", socket_timeout=10)
    try:
        pw.ping()
        tap.check(False, "%s: password= fails (no passwords exist yet)" % name)
    except redis.exceptions.RedisError as e:
        # Redis' own sentence: redis-py 4.3 raises ResponseError with it,
        # newer ones map it to AuthenticationError.
        tap.check("without any password configured" in str(e),
                  "%s: password= fails with Redis' no-password error" % name, repr(e))
    pw.close()


def fenced_transactions(f):
    """MULTI/EXEC on fenced: refused, and nothing of the block ran."""
    r = f.client()
    before = f.info()
    p = r.pipeline(transaction=True)
    p.execute_command("LEASE.GRANT", 10000)
    p.execute_command("LOCK", "tx-lock", 1)
    p.execute_command("ACQUIRE", "tx-acq", 10000)
    try:
        p.execute()
        tap.check(False, "fenced: pipeline(transaction=True) raises")
    except redis.exceptions.ResponseError as e:
        tap.check("MULTI is refused" in str(e) or "EXECABORT" in str(e),
                  "fenced: pipeline(transaction=True) raises", e)
    after = f.info()
    tap.eq(before.get("leases"), after.get("leases"), "fenced: the refused block granted no lease")
    tap.eq(before.get("last_token"), after.get("last_token"),
           "fenced: the refused block granted no token")
    tap.eq(None, r.execute_command("LOCK.INFO", "tx-acq"), "fenced: ACQUIRE inside MULTI did not run")
    # The connection is back to normal.
    lease = r.execute_command("LEASE.GRANT", 10000)
    tap.check(isinstance(lease, int) and lease > 0, "fenced: commands run after the refused block")
    # By hand: MULTI, a command, DISCARD.
    tap.check(expect_error(lambda: r.execute_command("MULTI"), "MULTI is refused") is not None,
              "fenced: MULTI answers an error")
    tap.check(expect_error(lambda: r.execute_command("LOCK", "tx-hand", lease),
                           "not executed") is not None, "fenced: LOCK inside MULTI is refused")
    tap.eq("OK", r.execute_command("DISCARD"), "fenced: DISCARD leaves the refused block")
    tap.eq(None, r.execute_command("LOCK.INFO", "tx-hand"), "fenced: the refused LOCK did not run")
    tok = r.execute_command("LOCK", "tx-hand", lease)
    tap.check(isinstance(tok, int), "fenced: LOCK runs after DISCARD")
    # Non-transactional pipelines are unaffected.
    p = r.pipeline(transaction=False)
    p.execute_command("LOCK.INFO", "tx-hand")
    p.ping()
    res = p.execute()
    tap.check(res[0][0] == tok and res[1] is True, "fenced: pipeline(transaction=False) works", res)
    tap.check(expect_error(lambda: r.execute_command("WATCH", "k"), "WATCH is not supported")
              is not None, "fenced: WATCH is refused")
    tap.check(r.execute_command("UNWATCH") in ("OK", True), "fenced: UNWATCH is a no-op")
    r.close()


def store_transactions(port):
    """MULTI/EXEC on fence-store: nothing of the block is written."""
    r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=10)
    p = r.pipeline(transaction=True)
    p.execute_command("FSET", "f", 5, "k", "v")
    p.execute_command("FENCE.ADMIT", "g", 9)
    try:
        p.execute()
        tap.check(False, "fence-store: pipeline(transaction=True) raises")
    except redis.exceptions.ResponseError as e:
        tap.check(True, "fence-store: pipeline(transaction=True) raises (%s)" % str(e)[:40])
    tap.eq(None, r.execute_command("FGET", "k"), "fence-store: FSET inside MULTI wrote nothing")
    tap.eq(0, r.execute_command("FENCE.HIGH", "g"), "fence-store: FENCE.ADMIT inside MULTI did not run")
    tap.eq("OK", r.execute_command("FSET", "f", 5, "k", "v"), "fence-store: FSET runs afterwards")
    r.close()


def main():
    f = Fenced().start()
    handshakes("fenced", f.port, "LOCK")
    fenced_transactions(f)
    f.stop()

    redis_mod = sh.need_store()
    assert redis_mod is redis
    tmp = make_tmp("fence-compat-store.")
    s = sh.Store(tmp)
    s.start()
    try:
        handshakes("fence-store", s.port, "FSET")
        store_transactions(s.port)
    finally:
        s.stop()
    tap.finish()


if __name__ == "__main__":
    main()
