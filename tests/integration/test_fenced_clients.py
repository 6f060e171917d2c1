#!/usr/bin/python3
"""fenced with a real client library nobody here wrote (Debian python3-redis).

Pipelining, 64 concurrent clients and group commit, FIFO waiters, LOCK WAIT
timeout, lease expiry while waiting, ACQUIRE, REQID retries, the seed's
flow (token N, the paused holder's lease expires, N+1 to the next client,
the stale holder's UNLOCK refused) and lock-delay.  One fenced per test
file (two for the --lock-delay-ms default), free ports, temp dirs.
"""
# serial: timing-bound (a lease kept alive by KEEPALIVEs 0.3 s apart past
# its 1 s TTL: time passing is the thing tested).
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from test_fenced_lib import Fenced, Tap, run_threads  # noqa: E402
from fencetest import wait_for  # noqa: E402

t = Tap()
srv = Fenced("main").start()
c = srv.client()
c.set_response_callback("PING", lambda r, **kw: r)  # keep PING's raw reply


def err_of(fn):
    """The text of the ResponseError fn raises, or None."""
    try:
        fn()
    except redis.ResponseError as e:
        return str(e)
    return None


# ---- pipelining -------------------------------------------------------------
p = c.pipeline(transaction=False)
for i in range(100):
    p.execute_command("LEASE.GRANT", 30000)
leases = p.execute()
t.check(all(isinstance(x, int) for x in leases) and
        leases == list(range(leases[0], leases[0] + 100)),
        "pipelined LEASE.GRANT x100: ids consecutive, replies in order", leases[:5])
p = c.pipeline(transaction=False)
for i, le in enumerate(leases):
    p.execute_command("LOCK", "pipe%d" % i, le)
    p.execute_command("LOCK.INFO", "pipe%d" % i)
    p.execute_command("PING", "m%d" % i)
out = p.execute()
tokens = out[0::3]
infos = out[1::3]
pings = out[2::3]
t.check(all(tokens[i] < tokens[i + 1] for i in range(99)),
        "pipelined LOCKs: tokens strictly increase in request order", tokens[:5])
t.check(all(infos[i][0] == tokens[i] and infos[i][1] == leases[i] for i in range(100)),
        "pipelined LOCK.INFO reads the connection's own earlier LOCK", infos[:2])
t.eq(["m%d" % i for i in range(100)], pings, "PING replies interleave in order")
p = c.pipeline(transaction=False)
for i, tok in enumerate(tokens):
    p.execute_command("UNLOCK", "pipe%d" % i, tok)
t.eq([1] * 100, p.execute(), "pipelined UNLOCK x100 all release")

# ---- 64 concurrent clients: group commit --------------------------------------
before = srv.info()
N_CLIENTS, OPS = 64, 15
results = [None] * N_CLIENTS
errors = []
go = threading.Barrier(N_CLIENTS)


def worker(k):
    """Grant a lease, then lock/unlock its own lock OPS times."""
    try:
        cc = srv.client()
        le = cc.execute_command("LEASE.GRANT", 30000)
        go.wait()
        toks = []
        for j in range(OPS):
            tok = cc.execute_command("LOCK", "conc%d" % k, le)
            toks.append(tok)
            if cc.execute_command("UNLOCK", "conc%d" % k, tok) != 1:
                errors.append("unlock %d/%d" % (k, j))
        results[k] = toks
        cc.close()
    except Exception as e:  # reported below
        errors.append(repr(e))


run_threads(worker, N_CLIENTS, daemon=False)
after = srv.info()
all_toks = [x for r in results if r for x in r]
t.check(not errors, "64 clients: no errors", errors[:5])
t.eq(N_CLIENTS * OPS, len(set(all_toks)), "64 clients: every token distinct")
t.check(all(r == sorted(r) for r in results if r), "64 clients: each client's tokens increase")
d_batches = int(after["batches"]) - int(before["batches"])
d_cmds = int(after["batch_commands"]) - int(before["batch_commands"])
t.check(d_cmds >= N_CLIENTS * (2 * OPS + 1) and d_batches < d_cmds,
        "group commit: %d commands in %d raft entries (avg batch %s)"
        % (d_cmds, d_batches, after["avg_batch_size"]),
        "batches %d commands %d" % (d_batches, d_cmds))

# ---- FIFO waiters ---------------------------------------------------------------
holder = c.execute_command("LEASE.GRANT", 30000)
first = c.execute_command("LOCK", "fifo", holder)
order = []
lock = threading.Lock()
N_WAIT = 6


def waiter(k, le):
    """Wait for the lock, record the grant order, release it."""
    cc = srv.client()
    tok = cc.execute_command("LOCK", "fifo", le, "WAIT", 20000)
    with lock:
        order.append((k, tok))
    cc.execute_command("UNLOCK", "fifo", tok)
    cc.close()


wthreads = []
for k in range(N_WAIT):
    le = c.execute_command("LEASE.GRANT", 30000)
    th = threading.Thread(target=waiter, args=(k, le))
    th.start()
    wthreads.append(th)
    wait_for(lambda: c.execute_command("LOCK.INFO", "fifo")[3] >= k + 1)
t.eq(N_WAIT, c.execute_command("LOCK.INFO", "fifo")[3], "LOCK.INFO counts %d waiters" % N_WAIT)
c.execute_command("UNLOCK", "fifo", first)
for th in wthreads:
    th.join(30)
t.eq(list(range(N_WAIT)), [k for k, _ in order], "waiters granted strictly FIFO")
t.check(all(order[i][1] < order[i + 1][1] for i in range(len(order) - 1)) and
        order[0][1] > first, "hand-offs take increasing tokens", order)

# ---- LOCK WAIT timeout, expiry while waiting --------------------------------------
la = c.execute_command("LEASE.GRANT", 30000)
lb = c.execute_command("LEASE.GRANT", 30000)
c.execute_command("LOCK", "busy", la)
t0 = time.monotonic()
r = c.execute_command("LOCK", "busy", lb, "WAIT", 300)
el = time.monotonic() - t0
t.check(r is None and el >= 0.25, "LOCK WAIT 300 on a held lock: nil after %.2fs" % el, r)
t.eq(None, c.execute_command("LOCK", "busy", lb), "LOCK without WAIT on a held lock: nil")
short = c.execute_command("LEASE.GRANT", 300)
e = err_of(lambda: c.execute_command("LOCK", "busy", short, "WAIT", 5000))
t.check(e is not None and e.startswith("NOLEASE"), "lease expires while waiting: NOLEASE", e)
info = c.execute_command("LOCK.INFO", "busy")
t.eq(0, info[3], "expired waiter left the queue")

# ---- ACQUIRE ----------------------------------------------------------------------
n_leases = int(srv.info()["leases"])
tok, le = c.execute_command("ACQUIRE", "acq", 5000)
info = c.execute_command("LOCK.INFO", "acq")
t.check(info[0] == tok and info[1] == le, "ACQUIRE: [token, lease] and LOCK.INFO agrees", info)
t.eq(None, c.execute_command("ACQUIRE", "acq", 5000, "WAIT", 200),
     "ACQUIRE WAIT on a held lock times out: nil")
t.eq(n_leases + 1, int(srv.info()["leases"]), "timed-out ACQUIRE left no lease behind")
t.eq(1, c.execute_command("UNLOCK", "acq", tok), "UNLOCK of the ACQUIRE token")
e = err_of(lambda: c.execute_command("LEASE.INFO", le))
t.check(e is not None and e.startswith("NOLEASE"), "UNLOCK revoked ACQUIRE's lease", e)
holder2 = c.execute_command("LEASE.GRANT", 30000)
tok_h = c.execute_command("LOCK", "acq2", holder2)
got = []
th = threading.Thread(target=lambda: got.append(
    srv.client().execute_command("ACQUIRE", "acq2", 5000, "WAIT", 10000)))
th.start()
wait_for(lambda: c.execute_command("LOCK.INFO", "acq2")[3] == 1)  # queued
c.execute_command("UNLOCK", "acq2", tok_h)
th.join(20)
t.check(got and got[0] and got[0][0] > tok_h, "queued ACQUIRE granted on release", got)

# ---- REQID retries ---------------------------------------------------------------------
l1 = c.execute_command("LEASE.GRANT", 30000, "REQID", 9001)
l2 = c.execute_command("LEASE.GRANT", 30000, "REQID", 9001)
t.eq(l1, l2, "LEASE.GRANT retried with the same REQID: same lease")
l3 = c.execute_command("LEASE.GRANT", 30000, "REQID", 9002)
t.check(l3 != l1, "a new REQID grants a new lease", (l1, l3))
k1 = c.execute_command("LOCK", "rq", l1, "REQID", 9003)
k2 = c.execute_command("LOCK", "rq", l1, "REQID", 9003)
t.eq(k1, k2, "LOCK retried with the same REQID: same token")
a1 = c.execute_command("ACQUIRE", "rq2", 5000, "REQID", 9004)
a2 = c.execute_command("ACQUIRE", "rq2", 5000, "REQID", 9004)
t.eq(a1, a2, "ACQUIRE retried with the same REQID: same [token, lease]")
t.eq(k1, c.execute_command("LOCK", "rq", l1), "reentrant LOCK by the holder: same token")

# ---- the seed's flow ---------------------------------------------------------------------
c1 = srv.client()
c2 = srv.client()
lease1 = c1.execute_command("LEASE.GRANT", 400)
n_tok = c1.execute_command("LOCK", "storage", lease1)
# Client 1 now "pauses" (no keepalive); client 2 waits for the lock.
t0 = time.monotonic()
n1_tok = c2.execute_command("LOCK", "storage", c2.execute_command("LEASE.GRANT", 10000),
                            "WAIT", 5000)
el = time.monotonic() - t0
t.eq(n_tok + 1, n1_tok, "seed flow: client 2 gets token N+1 once client 1's lease expires")
t.check(el >= 0.3, "seed flow: not granted before the lease ran out (%.2fs)" % el)
t.eq(0, c1.execute_command("UNLOCK", "storage", n_tok), "seed flow: stale UNLOCK N is refused (0)")
e = err_of(lambda: c1.execute_command("LEASE.KEEPALIVE", lease1))
t.check(e is not None and e.startswith("NOLEASE"), "seed flow: paused client's keepalive: NOLEASE", e)
t.eq(n1_tok, c.execute_command("LOCK.INFO", "storage")[0], "seed flow: N+1 holds the lock")

# ---- keepalive ---------------------------------------------------------------------------
kl = c.execute_command("LEASE.GRANT", 1000)
kept = []
for _ in range(4):
    time.sleep(0.3)  # the thing under test: 1.2 s of a 1 s lease
    kept.append(c.execute_command("LEASE.KEEPALIVE", kl))
t.eq([1000] * 4, kept, "KEEPALIVE returns the TTL")
t.eq(1000, c.execute_command("LEASE.INFO", kl)[0], "lease kept alive past its TTL")

# ---- lock-delay ----------------------------------------------------------------------------
dl = c.execute_command("LEASE.GRANT", 200, "LOCKDELAY", 1500)
dtok = c.execute_command("LOCK", "delayed", dl)
other = c.execute_command("LEASE.GRANT", 30000)
wait_for(lambda: err_of(lambda: c.execute_command("LEASE.INFO", dl)))  # expired
t.eq(None, c.execute_command("LOCK", "delayed", other),
     "lock-delay: lock unavailable right after its holder's lease expired")
got = c.execute_command("LOCK", "delayed", other, "WAIT", 6000)
t.check(got is not None and got > dtok, "lock-delay: granted once the delay ends", got)
rl = c.execute_command("LEASE.GRANT", 30000, "LOCKDELAY", 5000)
c.execute_command("LOCK", "revoked", rl)
c.execute_command("LEASE.REVOKE", rl)
t.check(c.execute_command("LOCK", "revoked", other) is not None,
        "lock-delay does not apply to a revoked lease")
c.close()
srv.stop()

# --lock-delay-ms sets the default.
srv2 = Fenced("delay", args=["--lock-delay-ms", "1500"]).start()
c = srv2.client()
dl = c.execute_command("LEASE.GRANT", 200)
c.execute_command("LOCK", "d", dl)
other = c.execute_command("LEASE.GRANT", 30000)
wait_for(lambda: err_of(lambda: c.execute_command("LEASE.INFO", dl)))  # expired
t.eq(None, c.execute_command("LOCK", "d", other), "--lock-delay-ms is the default lock-delay")
t.check(c.execute_command("LOCK", "d", other, "WAIT", 6000) is not None,
        "--lock-delay-ms: granted after the delay")
c.close()
t.eq(0, srv2.stop(), "SIGTERM: exit status 0")
t.finish()
