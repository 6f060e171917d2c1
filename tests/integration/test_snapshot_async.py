#!/usr/bin/python3
"""Snapshots taken by a forked child (--snapshot-fork 1, the default).

1. Many async snapshots under load: with --snapshot-threshold 16, clients
   lock and unlock while fenced forks child after child (the log says
   "snapshot taken: ... fork"), and FENCED_TEST_SNAPSHOT_CHECK=1 makes the
   loop encode each snapshot's state in place too and compare it with the
   child's bytes ("fork bytes equal inline bytes"; a difference would stop
   the process).  Then SIGTERM under load, restart: every acknowledged lock
   is held with its token, every acknowledged release is released, the next
   token is above every token returned; then kill -9 and the same again.
2. The same data dir restarted with --snapshot-fork 0: the in-loop encoder
   reads what the children wrote, and its own snapshots restore too.
3. Failing children: FENCED_TEST_SNAPSHOT_FAIL=2 makes the first two
   children exit 1; fenced logs "snapshot failed", keeps serving (every
   command meanwhile answered), retries, and a later snapshot is taken.
4. Started with SIGCHLD ignored (inherited through exec from a bash that
   ran `trap '' CHLD`, as a service manager may leave it): fenced restores
   the default, so the kernel does not reap its children before it waits
   for them, and snapshots are taken.
No timings are asserted.
"""
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_fenced_lib  # noqa: E402
from test_fenced_lib import TMP, Fenced, Tap  # noqa: E402

t = Tap()
N_CLIENTS = 12
LOCKS_PER_CLIENT = 4
LEASE_TTL = 60000
SNAP_ARGS = ["--snapshot-threshold", "16", "--snapshot-trailing", "4"]

max_token = 0
max_lock = threading.Lock()
errors = []


class Client(threading.Thread):
    """Locks/unlocks its own locks until told to stop or the server goes."""

    def __init__(self, srv, k, tag):
        super().__init__(daemon=True)
        self.k = k
        self.c = srv.client(socket_timeout=10)
        self.lease = self.c.execute_command("LEASE.GRANT", LEASE_TTL)
        self.names = ["%s-c%d-l%d" % (tag, k, j) for j in range(LOCKS_PER_CLIENT)]
        # name -> ("held", token) / ("free", None) / ("unknown", None)
        self.state = {n: ("free", None) for n in self.names}
        self.ops = 0
        self.stop = False

    def run(self):
        global max_token
        i = 0
        while not self.stop:
            i += 1
            n = self.names[i % len(self.names)]
            st, tok = self.state[n]
            try:
                if st == "held":
                    self.state[n] = ("unknown", None)
                    r = self.c.execute_command("UNLOCK", n, tok)
                    if r != 1:
                        errors.append("client %d: UNLOCK %s %d -> %r" % (self.k, n, tok, r))
                        return
                    self.state[n] = ("free", None)
                else:
                    self.state[n] = ("unknown", None)
                    tok = self.c.execute_command("LOCK", n, self.lease)
                    if not isinstance(tok, int):
                        errors.append("client %d: LOCK %s -> %r" % (self.k, n, tok))
                        return
                    with max_lock:
                        max_token = max(max_token, tok)
                    self.state[n] = ("held", tok)
                self.ops += 1
            except Exception:
                return  # the server went away: this op's outcome is unknown


def load(srv, tag, until):
    """Start N_CLIENTS clients; run until until() is true (or 30 s)."""
    clients = [Client(srv, k, tag) for k in range(N_CLIENTS)]
    for cl in clients:
        cl.start()
    end = time.monotonic() + 30
    while time.monotonic() < end and not until():
        time.sleep(0.05)
    return clients


def stop_clients(clients):
    for cl in clients:
        cl.stop = True
    for cl in clients:
        cl.join(20)
        try:
            cl.c.close()
        except Exception:
            pass


def verify(srv, clients, what):
    """Every acknowledged lock state survived; tokens go on increasing."""
    c = srv.client()
    lost = []
    acked = 0
    for cl in clients:
        for name, (st, tok) in cl.state.items():
            if st == "unknown":
                continue
            acked += 1
            info = c.execute_command("LOCK.INFO", name)
            if st == "held" and (info is None or info[0] != tok or info[1] != cl.lease):
                lost.append((name, tok, info))
            if st == "free" and info is not None:
                lost.append((name, "free", info))
    t.check(not lost, "%s: all %d acknowledged lock states survived" % (what, acked), lost[:5])
    lease = c.execute_command("LEASE.GRANT", 5000)
    nt = c.execute_command("LOCK", "after-%s" % what.replace(" ", "-"), lease)
    t.check(nt > max_token, "%s: next token %d > every token returned (%d)"
            % (what, nt, max_token))
    c.close()


def count(srv, pattern):
    return len(re.findall(pattern, srv.log_text()))


# ---- 1. many forked snapshots under load, compared with the in-loop bytes ----
srv = Fenced("fork", args=SNAP_ARGS, env={"FENCED_TEST_SNAPSHOT_CHECK": "1"}).start()
clients = load(srv, "a", lambda: count(srv, r"snapshot taken: \d+ bytes, fork") >= 20)
n_fork = count(srv, r"snapshot taken: \d+ bytes, fork")
n_equal = count(srv, r"snapshot check: fork bytes equal inline bytes")
t.check(n_fork >= 20, "20+ snapshots taken by forked children under load (%d)" % n_fork)
t.check(n_equal >= n_fork and "differ" not in srv.log_text(),
        "every forked snapshot's bytes equal the in-loop encoder's for the same state "
        "(%d compared)" % n_equal)
t.check(sum(cl.ops for cl in clients) > 200, "clients were served meanwhile (%d ops)"
        % sum(cl.ops for cl in clients))
t.eq(0, srv.stop(), "SIGTERM under load (a child may be running): clean exit")
stop_clients(clients)
t.check(not errors, "no wrong replies under load", errors[:5])
srv.start()
t.check("snapshot restored" in srv.log_text(), "restart restored a forked snapshot")
verify(srv, clients, "restart after SIGTERM")

errors = []
clients = load(srv, "b", lambda: count(srv, r"snapshot taken: \d+ bytes, fork") >= n_fork + 10)
srv.stop(signal.SIGKILL)
stop_clients(clients)
t.check(not errors, "no wrong replies under load (second round)", errors[:5])
srv.start()
verify(srv, clients, "restart after kill -9")
t.eq(0, srv.stop(), "clean stop")

# ---- 2. the same data dir with the in-loop encoder ----
inline = Fenced("fork", args=SNAP_ARGS + ["--snapshot-fork", "0"])
inline.start()
verify(inline, clients, "restart with --snapshot-fork 0")
errors = []
before = count(inline, r"snapshot taken: \d+ bytes, in the loop")
clients = load(inline, "c", lambda: count(inline, r"snapshot taken: \d+ bytes, in the loop")
               >= before + 5)
t.check(count(inline, r"snapshot taken: \d+ bytes, in the loop") >= before + 5,
        "--snapshot-fork 0 takes its snapshots in the loop")
t.eq(0, inline.stop(), "SIGTERM under load: clean exit")
stop_clients(clients)
t.check(not errors, "no wrong replies under load (in-loop snapshots)", errors[:5])
inline.start()
verify(inline, clients, "restart of in-loop snapshots")
t.eq(0, inline.stop(), "clean stop")
srv.start()
verify(srv, clients, "the fork mode restores in-loop snapshots")
t.eq(0, srv.stop(), "clean stop")

# ---- 3. children that fail ----
errors = []
max_token = 0  # a new server: tokens start again from 1
bad = Fenced("failing", args=SNAP_ARGS, env={"FENCED_TEST_SNAPSHOT_FAIL": "2"}).start()
clients = load(bad, "d", lambda: count(bad, r"snapshot taken: \d+ bytes, fork") >= 3)
t.eq(2, count(bad, r"snapshot failed: child test hook"),
     "the two failing children gave two failed snapshots")
t.check(count(bad, r"snapshot taken: \d+ bytes, fork") >= 3,
        "the snapshot was retried and later ones were taken")
t.check(bad.proc.poll() is None, "fenced kept running")
alive = [cl for cl in clients if cl.is_alive()]
t.eq(N_CLIENTS, len(alive), "every client was served throughout")
stop_clients(clients)
t.check(not errors, "no wrong replies while snapshots failed", errors[:5])
t.eq(0, bad.stop(), "clean stop")
bad.start()
verify(bad, clients, "restart after failed snapshots")
t.eq(0, bad.stop(), "clean stop")

# ---- 4. SIGCHLD ignored by whoever started fenced ----
wrapper = os.path.join(TMP, "ignore-sigchld.sh")
with open(wrapper, "w") as f:
    f.write("#!/bin/bash\ntrap '' CHLD\nexec %s \"$@\"\n" % test_fenced_lib.FENCED)
os.chmod(wrapper, 0o755)
test_fenced_lib.FENCED = wrapper  # exec keeps the pid: stopped by PID as usual
errors = []
max_token = 0
ign = Fenced("sigchld", args=SNAP_ARGS).start()
t.check("SIGCHLD was ignored (inherited): restored to default" in ign.log_text(),
        "an inherited SIG_IGN for SIGCHLD is reset at start")
clients = load(ign, "e", lambda: count(ign, r"snapshot taken: \d+ bytes, fork") >= 5)
t.check(count(ign, r"snapshot taken: \d+ bytes, fork") >= 5 and
        count(ign, r"snapshot failed") == 0,
        "...and forked snapshots are taken (none failed)")
stop_clients(clients)
t.check(not errors, "no wrong replies (SIGCHLD case)", errors[:5])
t.eq(0, ign.stop(), "clean stop")
t.finish()
