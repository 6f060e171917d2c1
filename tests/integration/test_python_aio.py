#!/usr/bin/python3
# serial -- renewals of a 1.5 s lease and a 500 ms lease that must run out are timing-bound
"""fenced.aio, the asyncio client, against real fenced and fence-store
processes (127.0.0.1, free ports, temp dirs, stopped by PID):

- locks: ``async with``, token, valid_until, LOCK.INFO, release and revoke,
  increasing tokens, NotAcquired after wait_ms, a queued waiter (async
  on_wait with the holder's LockInfo), a token read before acquiring;
- keepalive: a 1.5 s lease held through a 4.7 s wait and 4.7 s more (a task
  renews it every TTL/3);
- lease loss: revoked from outside -> the lost event, an async on_lost,
  LeaseLost at the end of ``async with``;
- the blocked loop: the holder's event loop does not run (a blocking call)
  past its 500 ms lease; meanwhile another client takes the lock and writes;
  once the loop runs again the old holder is not ``held``, its lease is
  marked lost, and its write with the old token is refused (StaleToken);
  the same for a holder process SIGSTOPped past its lease;
- a cancelled request drops its connection: a LOCK ... WAIT cancelled by
  asyncio.wait_for leaves no reply behind for the next request;
- typed errors (LIMIT, NOLEASE, ERR), Store's calls;
- the kinds: semaphores (sem_acquire, a waiter, sem_release, sem_info),
  shared locks (lock_lease/acquire shared=True), lock_multi;
- NOTLEADER redirects, a reset and TRYAGAIN retried with the same REQID,
  TRYAGAIN until the timeout, a refused connection failing at once, against
  a scripted fake server;
- failover: a 3-node cluster whose leader is killed (SIGKILL) while an
  asyncio lock is held: the renewals reach the new leader, the lock keeps
  its token, and a new grant gets a higher one.
"""
import asyncio
import os
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_fenced_lib import TMP, Fenced, Tap, free_port, redis  # noqa: E402,F401
import test_store_helpers as sh  # noqa: E402
from test_python_client import FakeServer  # noqa: E402

PYSRC = os.path.join(HERE, "..", "..", "clients", "python", "src")
sys.path.insert(0, PYSRC)
import fenced  # noqa: E402
import fenced.aio  # noqa: E402

tap = Tap()


async def araises(cls, coro):
    """The exception of class cls that the awaitable raised, or None (or
    ("wrong class", ...) for another exception)."""
    try:
        await coro
    except cls as e:
        return e
    except Exception as e:  # noqa: BLE001 - reported as the wrong class
        return ("wrong class", type(e).__name__, str(e))
    return None


async def until(pred, secs=5.0, step=0.02):
    """Wait until the coroutine function pred() is true (or secs pass)."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if await pred():
            return True
        await asyncio.sleep(step)
    return False


async def locks(f):
    addr = "127.0.0.1:%d" % f.port
    c = fenced.aio.Client(addr)
    lk = c.lock("aio-a", ttl_ms=5000)
    e = None
    try:
        lk.token
    except fenced.NotAcquired as err:
        e = err
    tap.check(e is not None and not lk.acquired, "lock: token before acquiring raises NotAcquired", e)
    async with lk:
        tap.check(isinstance(lk.token, int) and lk.token > 0, "lock: token is a positive int")
        tap.check(lk.valid_until > time.monotonic() + 4.0, "lock: valid_until ~ TTL - margin ahead")
        tap.check(lk.held and lk.acquired, "lock: held inside async with")
        info = await c.lock_info("aio-a")
        tap.check(info is not None and info.token == lk.token and info.lease == lk.lease,
                  "lock: LOCK.INFO names this token and lease", info)
        first = lk.token
    tap.eq(None, await c.lock_info("aio-a"), "lock: released at the end of async with")
    tap.eq(None, await c.lease_info(lk.lease), "lock: its lease is revoked too")
    async with c.lock("aio-a") as lk2:
        tap.check(lk2.token > first, "lock: the next grant has a higher token")

    holder = await c.lock("aio-b", ttl_ms=5000).acquire()
    c2 = fenced.aio.Client([addr])
    t0 = time.monotonic()
    e = await araises(fenced.NotAcquired, c2.lock("aio-b", wait_ms=300).acquire())
    took = time.monotonic() - t0
    tap.check(isinstance(e, fenced.NotAcquired) and 0.25 < took < 2.0,
              "lock: NotAcquired after wait_ms (%.2fs)" % took, e)
    seen = []

    async def on_wait(info):
        seen.append(info)

    async def release_when_queued():
        await until(lambda: _waiters(c, "aio-b"))
        await holder.release()
    rel = asyncio.ensure_future(release_when_queued())
    async with c2.lock("aio-b", ttl_ms=5000, wait_ms=5000, on_wait=on_wait) as lk3:
        tap.check(lk3.token > holder.token, "lock: a queued waiter gets the lock when it is released")
    await rel
    tap.check(len(seen) == 1 and seen[0] is not None and seen[0].lease == holder.lease,
              "lock: async on_wait saw the holder's lease", seen)
    await c.close()
    await c2.close()


async def _waiters(c, name):
    info = await c.lock_info(name)
    return info is not None and info.waiters > 0


async def keepalive(f):
    addr = "127.0.0.1:%d" % f.port
    c = fenced.aio.Client(addr)
    c2 = fenced.aio.Client(addr)
    holder = await c.lock("aio-c", ttl_ms=5000).acquire()
    t0 = time.monotonic()

    async def release_later():
        await asyncio.sleep(4.7)  # the wait under test: longer than three TTLs
        await holder.release()
    rel = asyncio.ensure_future(release_later())
    # (1.5 s: a durable renewal must land within TTL - margin even when
    # other tests load the shared disk.)
    async with c2.lock("aio-c", ttl_ms=1500, wait_ms=10000) as lk:
        tap.check(time.monotonic() - t0 > 4.5 and lk.token > holder.token,
                  "keepalive: a 4.7 s wait under a 1.5 s lease succeeds (renewed while queued)")
        await asyncio.sleep(4.7)  # more than three TTLs
        info = await c.lock_info("aio-c")
        tap.check(lk.held and info is not None and info.token == lk.token,
                  "keepalive: the renewal task keeps a 1.5 s lease alive for 4.7 s")
    await rel
    await c.close()
    await c2.close()


async def lost(f):
    addr = "127.0.0.1:%d" % f.port
    c = fenced.aio.Client(addr)
    calls = []

    async def on_lost(lock, err):
        calls.append(err)
    lk = c.lock("aio-lost", ttl_ms=600, on_lost=on_lost)
    e = None
    try:
        async with lk:
            await fenced.aio.Client(addr).lease_revoke(lk.lease)
            try:
                await asyncio.wait_for(lk.lost.wait(), 2.0)
            except asyncio.TimeoutError:
                pass
            tap.check(lk.lost.is_set(), "lost: the lost event is set after an outside revoke")
    except fenced.LeaseLost as err:
        e = err
    tap.check(e is not None, "lost: async with raises LeaseLost at its end", e)
    tap.check(len(calls) == 1 and isinstance(calls[0], fenced.LeaseLost) and calls[0].code == "NOLEASE",
              "lost: the async on_lost ran once with the NOLEASE error", calls)
    tap.check(not lk.held, "lost: no longer held")
    await c.close()


async def blocked_loop(f, store_port):
    """A holder whose loop does not run past its lease: its write is refused."""
    addr = "127.0.0.1:%d" % f.port
    saddr = "127.0.0.1:%d" % store_port
    c = fenced.aio.Client(addr)
    st = fenced.aio.Store(saddr, decode=True)
    lk = await c.lock("aio-pause", ttl_ms=500).acquire()
    old = lk.token
    await st.fset("aio-pause", old, "aio-k", "from-old-holder-1")
    done = threading.Event()
    newtok = []

    def new_holder():
        sc = fenced.Client(addr)
        ss = fenced.Store(saddr)
        with sc.lock("aio-pause", ttl_ms=5000, wait_ms=8000) as nl:
            ss.fset("aio-pause", nl.token, "aio-k", "from-new-holder")
            newtok.append(nl.token)
            done.set()
        sc.close()
        ss.close()
    th = threading.Thread(target=new_holder, daemon=True)
    th.start()
    done.wait(15)  # blocks the event loop: no renewal can run
    tap.check(len(newtok) == 1 and newtok[0] > old,
              "blocked loop: the lock went to a new holder with a higher token", newtok)
    tap.check(not lk.held, "blocked loop: the old holder is past valid_until (not held)")
    e = await araises(fenced.StaleToken, st.fset("aio-pause", old, "aio-k", "from-old-holder-2"))
    tap.check(isinstance(e, fenced.StaleToken) and e.token == old and newtok and e.highest == newtok[0],
              "blocked loop: the old holder's write raises StaleToken(token, highest)", e)
    tap.eq("from-new-holder", await st.fget("aio-k"), "blocked loop: fence-store kept the new value")
    try:
        await asyncio.wait_for(lk.lost.wait(), 3.0)
    except asyncio.TimeoutError:
        pass
    tap.check(lk.lost.is_set() and isinstance(lk.lost_error, fenced.LeaseLost),
              "blocked loop: the renewal task marks the lease lost once the loop runs", lk.lost_error)
    await lk.release()
    th.join(10)
    await c.close()
    await st.close()


PAUSED_HOLDER = r"""
import asyncio, sys
sys.path.insert(0, sys.argv[1])
import fenced, fenced.aio

async def main() -> None:
    c = fenced.aio.Client(sys.argv[2])
    s = fenced.aio.Store(sys.argv[3])
    lk = await c.lock("aio-stop", ttl_ms=500).acquire()
    print(lk.token, flush=True)
    sys.stdin.readline()              # the test SIGSTOPs us before answering
    try:
        await s.fset("aio-stop", lk.token, "aio-stop-k", "from-old-holder")
        print("written", flush=True)
    except fenced.StaleToken as e:
        print("stale", e.token, e.highest, flush=True)
    try:
        await asyncio.wait_for(lk.lost.wait(), 3.0)
        print("lost", type(lk.lost_error).__name__, flush=True)
    except asyncio.TimeoutError:
        print("not-lost", flush=True)

asyncio.run(main())
"""


async def stopped(f, store_port):
    """A fenced.aio holder process SIGSTOPped past its lease: its write after
    SIGCONT is refused by fence-store and its lease is marked lost."""
    import subprocess
    p = subprocess.Popen([sys.executable, "-c", PAUSED_HOLDER, PYSRC, "127.0.0.1:%d" % f.port,
                          "127.0.0.1:%d" % store_port],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        loop = asyncio.get_running_loop()
        old = int(await loop.run_in_executor(None, p.stdout.readline))
        os.kill(p.pid, signal.SIGSTOP)
        c = fenced.aio.Client("127.0.0.1:%d" % f.port)
        st = fenced.aio.Store("127.0.0.1:%d" % store_port, decode=True)
        async with c.lock("aio-stop", ttl_ms=5000, wait_ms=5000) as lk:
            tap.check(lk.token > old, "SIGSTOP: the lock went to a new holder with a higher token")
            await st.fset("aio-stop", lk.token, "aio-stop-k", "from-new-holder")
            os.kill(p.pid, signal.SIGCONT)
            p.stdin.write("go\n")
            p.stdin.flush()
            out = (await loop.run_in_executor(None, p.stdout.readline)).split()
            tap.check(out[:1] == ["stale"] and int(out[1]) == old and int(out[2]) == lk.token,
                      "SIGSTOP: the old holder's write raises StaleToken(token, highest)", out)
            out = (await loop.run_in_executor(None, p.stdout.readline)).split()
            tap.eq(["lost", "LeaseLost"], out, "SIGSTOP: the old holder's lease is marked lost")
        tap.eq("from-new-holder", await st.fget("aio-stop-k"),
               "SIGSTOP: fence-store kept the new holder's value")
        await c.close()
        await st.close()
    finally:
        os.kill(p.pid, signal.SIGCONT)
        p.kill()
        p.wait()


async def cancelled(f):
    """A request cancelled while waiting leaves nothing behind."""
    addr = "127.0.0.1:%d" % f.port
    c = fenced.aio.Client(addr)
    holder = await c.lock("aio-cancel", ttl_ms=5000).acquire()
    w = fenced.aio.Client(addr)
    lease = await w.lease_grant(5000)
    e = await araises(asyncio.TimeoutError,
                      asyncio.wait_for(w.lock_lease("aio-cancel", lease, 3000), 0.3))
    tap.check(isinstance(e, asyncio.TimeoutError), "cancel: a LOCK ... WAIT cut short by wait_for", e)
    await holder.release()
    tap.eq(None, await w.lock_info("aio-cancel-other"),
           "cancel: the next request on that client gets its own reply")
    tap.check(await w.ping(), "cancel: and the one after it too")
    await w.lease_revoke(lease)
    await c.close()
    await w.close()


async def store_calls(store_port):
    s = fenced.aio.Store("127.0.0.1:%d" % store_port)
    tap.eq(0, await s.high("aio-f"), "store: high of a new fence is 0")
    await s.admit("aio-f", 10)
    tap.eq(10, await s.high("aio-f"), "store: admit raises the mark")
    await s.fset("aio-f", 10, "aio-sk", b"\x00bytes")
    tap.eq(b"\x00bytes", await s.fget("aio-sk"), "store: fset/fget (bytes)")
    tap.eq(1, await s.fincr("aio-f", 11, "aio-n"), "store: fincr")
    e = await araises(fenced.StaleToken, s.fset("aio-f", 9, "aio-sk", "v"))
    tap.check(isinstance(e, fenced.StaleToken) and e.token == 9 and e.highest == 11,
              "store: StaleToken carries the numbers", e)
    tap.check(await s.fdel("aio-f", 11, "aio-sk") and not await s.fdel("aio-f", 11, "aio-sk"),
              "store: fdel")
    await s.close()


async def errors():
    f = Fenced(name="fenced-aio-limit", args=["--max-leases", "1"]).start()
    c = fenced.aio.Client("127.0.0.1:%d" % f.port)
    await c.lease_grant(10000)
    e = await araises(fenced.LimitReached, c.lease_grant(10000))
    tap.check(isinstance(e, fenced.LimitReached) and e.code == "LIMIT" and "max-leases" in e.message,
              "errors: LimitReached with the server's message", e)
    e = await araises(fenced.LeaseLost, c.lease_keepalive(123456789))
    tap.check(isinstance(e, fenced.LeaseLost) and e.code == "NOLEASE", "errors: NOLEASE is LeaseLost", e)
    e = await araises(fenced.ServerError, c.call("LEASE.GRANT", "x"))
    tap.check(isinstance(e, fenced.ServerError) and e.code == "ERR", "errors: ERR is ServerError", e)
    await c.close()
    f.stop()


async def redirects_and_retries(f):
    real = "127.0.0.1:%d" % f.port
    fake = FakeServer(lambda a, n: b"-NOTLEADER " + real.encode() + b"\r\n")
    c = fenced.aio.Client("127.0.0.1:%d" % fake.port)
    lease = await c.lease_grant(10000)
    tap.check(lease > 0 and c.server == real, "redirect: NOTLEADER is followed to the leader")
    await c.close()
    fake.close()

    def flaky(args, n):
        if n == 1:
            return None                       # reset before replying
        if n == 2:
            return b"-TRYAGAIN no leader is elected yet; retry shortly\r\n"
        return b":42\r\n"
    fake = FakeServer(flaky)
    c = fenced.aio.Client("127.0.0.1:%d" % fake.port)
    tap.eq(42, await c.lease_grant(10000), "retry: a reset and a TRYAGAIN are retried")
    ids = [r[r.index("REQID") + 1] for r in fake.requests]
    tap.check(len(ids) == 3 and len(set(ids)) == 1, "retry: every attempt carries the same REQID", ids)
    await c.close()
    fake.close()

    fake = FakeServer(lambda a, n: b"-TRYAGAIN no quorum\r\n")
    c = fenced.aio.Client("127.0.0.1:%d" % fake.port, timeout_ms=400)
    e = await araises(fenced.TryAgain, c.lease_grant(1000))
    tap.check(isinstance(e, fenced.TryAgain) and isinstance(e, fenced.Unreachable) and e.code == "TRYAGAIN",
              "retry: TRYAGAIN until the timeout raises TryAgain (an Unreachable)", e)
    await c.close()
    fake.close()

    dead = free_port()
    c = fenced.aio.Client("127.0.0.1:%d" % dead, timeout_ms=5000)
    t0 = time.monotonic()
    e = await araises(fenced.Unreachable, c.lease_grant(1000))
    took = time.monotonic() - t0
    tap.check(isinstance(e, fenced.Unreachable) and took < 1.5,
              "unreachable: a refused connection fails at once (%.2fs), not after 5 s" % took, e)


async def failover():
    ports = [(free_port(), free_port()) for _ in range(3)]
    peers = ",".join("%d=127.0.0.1:%d/%d" % (i + 1, p, rp) for i, (p, rp) in enumerate(ports))
    nodes = [Fenced(name="aio-node%d" % (i + 1), port=p,
                    args=["--node-id", str(i + 1), "--raft-port", str(rp), "--peers", peers,
                          "--election-timeout-ms", "300"])
             for i, (p, rp) in enumerate(ports)]
    for n in nodes:
        n.start(wait_ready=False)
    addrs = ["127.0.0.1:%d" % n.port for n in nodes]
    c = fenced.aio.Client(addrs, timeout_ms=10000)
    async with c.lock("aio-fo", ttl_ms=4000) as lk:
        leader = [n for n in nodes if "127.0.0.1:%d" % n.port == c.server]
        tap.check(len(leader) == 1, "failover: the client found the leader", c.server)
        tok = lk.token
        if leader:
            leader[0].stop(signal.SIGKILL)
        others = fenced.aio.Client([a for a in addrs if a != c.server], timeout_ms=10000)
        # Two TTLs after the kill the lock is still this lease's: renewed
        # through the new leader (4 s: an election on a loaded machine must
        # fit in the 3.6 s until valid_until).
        await asyncio.sleep(9.0)
        info = await others.lock_info("aio-fo")
        tap.check(lk.held and not lk.lost.is_set() and info is not None and info.token == tok
                  and info.lease == lk.lease,
                  "failover: the lock keeps its token; its lease renewed through the new leader",
                  (info, lk.lost_error))
        async with others.lock("aio-fo2", ttl_ms=3000) as lk2:
            tap.check(lk2.token > tok, "failover: a grant after failover has a higher token")
        await others.close()
    await c.close()
    for n in nodes:
        n.stop()


async def kinds(f):
    """The kinds the sync client has: semaphores (slots, a waiter, info,
    release), shared locks, multi-locks, elections."""
    addr = "127.0.0.1:%d" % f.port
    c = fenced.aio.Client(addr)
    la = await c.lease_grant(30000)
    lb = await c.lease_grant(30000)
    lc = await c.lease_grant(30000)
    a = await c.sem_acquire("aio-sem", 2, la)
    b = await c.sem_acquire("aio-sem", 2, lb)
    tap.eq((0, 1), (a[0], b[0]), "aio sem: two leases get slots 0 and 1")
    tap.eq(None, await c.sem_acquire("aio-sem", 2, lc), "aio sem: the third gets None")
    c2 = fenced.aio.Client(addr)  # one request at a time per client
    waiter = asyncio.ensure_future(c2.sem_acquire("aio-sem", 2, lc, wait_ms=10000))
    await until(lambda: _sem_waiters(c, "aio-sem"))
    tap.check(await c.sem_release("aio-sem", b[0], b[1]), "aio sem: release frees the slot")
    got = await asyncio.wait_for(waiter, 10)
    tap.check(got[0] == b[0] and got[1] > b[1], "aio sem: the waiter gets it with a higher token",
              got)
    info = await c.sem_info("aio-sem")
    tap.eq(2, info.permits, "aio sem_info: n")
    tap.eq([0, 1], [sl.slot for sl in info.slots], "aio sem_info: the held slots")
    tap.check(not await c.sem_release("aio-sem", b[0], b[1]), "aio sem: a stale release is False")
    ld = await c.lease_grant(30000)
    t1 = await c.lock_lease("aio-rw", la, shared=True)
    t2 = await c.lock_lease("aio-rw", ld, shared=True)
    tap.check(t1 is not None and t1 == t2, "aio shared: two readers share a token", (t1, t2))
    tap.check((await c.lock_info("aio-rw")).shared, "aio shared: LOCK.INFO says shared")
    acq = await c.acquire("aio-rw2", 5000, shared=True)
    tap.check(acq is not None and acq[0] > 0, "aio acquire(shared=True)", acq)
    tm = await c.lock_multi(["aio-m1", "aio-m2"], ld)
    tap.check(tm is not None and (await c.lock_info("aio-m2")).token == tm,
              "aio lock_multi: one token at every name")
    await c.close()
    await c2.close()


async def _sem_waiters(c, name):
    info = await c.sem_info(name)
    return info is not None and info.waiters == 1


async def amain():
    f = Fenced().start()
    s = sh.Store(TMP)
    s.start()
    for group in (lambda: locks(f), lambda: keepalive(f), lambda: lost(f),
                  lambda: blocked_loop(f, s.port), lambda: stopped(f, s.port),
                  lambda: cancelled(f), lambda: kinds(f),
                  lambda: store_calls(s.port), errors, lambda: redirects_and_retries(f),
                  failover):
        try:
            await group()
        except Exception as e:  # noqa: BLE001 - one crashed group is one failure
            import traceback
            traceback.print_exc(file=sys.stdout)
            tap.check(False, "a group crashed: %r" % e)
    s.stop()
    f.stop()


def main():
    asyncio.run(amain())
    tap.finish()


if __name__ == "__main__":
    main()
