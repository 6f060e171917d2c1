#!/usr/bin/python3
"""fence-store with python3-redis: every command through a real client, the
STALE error's two numbers, and the read-modify-write pattern under
concurrency: several processes increment a shared counter with
FENCE.ADMIT (register the token) -> FGET -> FSET, while their "lock grants"
overlap on purpose (tokens from a shared counter, no mutual exclusion, the
way a paused holder overlaps its successor).  With fencing, no acknowledged
increment is lost; the same workload against --ignore-tokens (lease only)
loses updates, which shows the check can fail.  FINCR likewise."""
import multiprocessing as mp
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store_helpers import Store, Tap, TempDir, need_store, stale_tokens  # noqa: E402

redis = need_store()

WORKERS = 6
ITERATIONS = 40


def client(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def rmw_worker(port, next_token, lock, seed, out):
    """Read-modify-write with admit-before-read; report acknowledged
    increments and the tokens admitted.  The "lock service" is a process
    lock plus a token counter; in 30% of the grants the lease "expires"
    right away (the lock is released before the holder is done), so the
    next holder overlaps this one, as with a paused holder."""
    r = client(port)
    rnd = random.Random(seed)
    acked, stale, tokens = 0, 0, []
    for _ in range(ITERATIONS):
        lock.acquire()
        with next_token.get_lock():
            next_token.value += 1
            t = next_token.value
        expired = rnd.random() < 0.3
        if expired:
            lock.release()
        try:
            r.execute_command("FENCE.ADMIT", "counter-lock", t)
            v = int(r.execute_command("FGET", "counter") or b"0")
            time.sleep(rnd.random() * 0.003)  # hold: others get "grants"
            r.execute_command("FSET", "counter-lock", t, "counter", str(v + 1))
            acked += 1
            tokens.append(t)
        except redis.ResponseError as e:
            if stale_tokens(e) is None:
                raise
            stale += 1
        if not expired:
            lock.release()
    out.put((acked, stale, tokens))


def fincr_worker(port, next_token, lock, seed, out):
    r = client(port)
    acked, stale = 0, 0
    for _ in range(ITERATIONS):
        with next_token.get_lock():
            next_token.value += 1
            t = next_token.value
        try:
            r.execute_command("FINCR", "fincr-lock", t, "hits")
            acked += 1
        except redis.ResponseError as e:
            if stale_tokens(e) is None:
                raise
            stale += 1
    out.put((acked, stale, []))


def run_workers(target, port):
    next_token = mp.Value("Q", 0)
    lock = mp.Lock()
    out = mp.Queue()
    procs = []
    for i in range(WORKERS):
        p = mp.Process(target=target, args=(port, next_token, lock, i, out))
        p.start()
        procs.append(p)
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
    acked = sum(a for a, _, _ in results)
    stale = sum(s for _, s, _ in results)
    tokens = [t for _, _, ts in results for t in ts]
    return acked, stale, tokens


def test_commands(tap, port):
    r = client(port)
    tap.check(r.ping(), "PING through redis-py")
    tap.check(r.execute_command("FSET", "f", 33, "k", b"\x00bin\r\nary") == b"OK",
              "FSET with a binary value")
    tap.check(r.execute_command("FGET", "k") == b"\x00bin\r\nary",
              "FGET returns the exact bytes")
    try:
        r.execute_command("FSET", "f", 32, "k", "x")
        tap.check(False, "stale FSET raises ResponseError")
    except redis.ResponseError as e:
        tap.check(stale_tokens(e) == (32, 33),
                  "STALE error carries the token and the highest, first", str(e))
    tap.check(r.execute_command("FSET", "f", 33, "k", "y") == b"OK", "equal token admitted")
    tap.check(r.execute_command("FENCE.HIGH", "f") == 33, "FENCE.HIGH is an integer")
    tap.check(r.execute_command("FENCE.HIGH", "never") == 0, "FENCE.HIGH of an unseen fence is 0")
    tap.check(r.execute_command("FENCE.ADMIT", "f", 50) == b"OK", "FENCE.ADMIT")
    try:
        r.execute_command("FDEL", "f", 49, "k")
        tap.check(False, "FDEL after a newer admit is stale")
    except redis.ResponseError as e:
        tap.check(stale_tokens(e) == (49, 50), "FDEL after a newer admit is stale", str(e))
    tap.check(r.execute_command("FDEL", "f", 50, "k") == 1, "FDEL removes")
    tap.check(r.execute_command("FGET", "k") is None, "FGET of a deleted key is nil")
    tap.check(r.execute_command("FINCR", "f", 50, "n") == 1, "FINCR returns the new value")
    info = r.info()  # redis-py parses the "name:value" lines
    tap.check(info.get("rejected_stale") == 2 and info.get("fences") == 1
              and info.get("ignore_tokens") == 0,
              "INFO counts rejected_stale and fences", str(info))
    # many connections at once, pipelined
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.execute_command("FSET", "g", 1, "p%d" % i, str(i))
    tap.check(all(x == b"OK" for x in p.execute()), "500 pipelined FSETs")
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.execute_command("FGET", "p%d" % i)
    tap.check(p.execute() == [str(i).encode() for i in range(500)],
              "500 pipelined FGETs in order")


def main():
    tap = Tap()
    with TempDir() as tmp:
        s = Store(tmp, "fenced-store")
        s.start()
        try:
            test_commands(tap, s.port)
            acked, stale, tokens = run_workers(rmw_worker, s.port)
            r = client(s.port)
            final = int(r.execute_command("FGET", "counter") or b"0")
            print("# fenced RMW: %d acknowledged, %d stale, counter %d" % (acked, stale, final))
            tap.check(final == acked, "admit-before-read: no acknowledged increment is lost",
                      "counter %d != acknowledged %d" % (final, acked))
            tap.check(acked > 0 and stale > 0,
                      "some increments went through and some were fenced off")
            tap.check(r.execute_command("FENCE.HIGH", "counter-lock") >= max(tokens or [0]),
                      "the mark is at least every admitted token")
            acked, stale, _ = run_workers(fincr_worker, s.port)
            hits = int(r.execute_command("FGET", "hits") or b"0")
            tap.check(hits == acked, "FINCR: every acknowledged increment counted once",
                      "hits %d != acknowledged %d" % (hits, acked))
        finally:
            s.stop()

        c = Store(tmp, "control-store", ["--ignore-tokens"])
        c.start()
        try:
            acked, stale, _ = run_workers(rmw_worker, c.port)
            final = int(client(c.port).execute_command("FGET", "counter") or b"0")
            print("# control (lease only) RMW: %d acknowledged, %d stale, counter %d"
                  % (acked, stale, final))
            tap.check(stale == 0, "control: nothing is rejected")
            tap.check(final < acked, "control: lost updates are detected without fencing",
                      "counter %d, acknowledged %d" % (final, acked))
        finally:
            c.stop()
    tap.finish()


if __name__ == "__main__":
    main()
