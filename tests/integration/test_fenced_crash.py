#!/usr/bin/python3
"""kill -9 under load, then restart on the same data dir.

32 clients lock and unlock their own locks (and grant leases) as fast as
they can; fenced is killed with SIGKILL mid-stream and restarted.  Then:
every acknowledged grant that was not (possibly) released afterwards is
still held by the same lease with the same token; every acknowledged
release is still released; every acknowledged lease exists; the next token
is higher than every token ever returned; a lease restarts with its full
TTL (LEADER_START's rebase); and the cycle works twice.  A second server
takes a snapshot every 32 entries, so its restarts go through snapshot
restore plus log replay.  FENCE_CRASH_ROUNDS (default 2) sets the number of
kill/restart rounds per server.
"""
# serial: timing-bound (a lease must age 1.5 s before the kill for the
# restart's rebase of its TTL to show).
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap  # noqa: E402
from fencetest import wait_for  # noqa: E402

t = Tap()
ROUNDS = int(os.environ.get("FENCE_CRASH_ROUNDS", "2"))
N_CLIENTS = 32
LOCKS_PER_CLIENT = 4
LEASE_TTL = 60000

max_token = 0          # highest token ever returned to any client
max_lock = threading.Lock()


class Client(threading.Thread):
    """Locks/unlocks its own locks until the connection breaks."""

    def __init__(self, k):
        super().__init__()
        self.k = k
        self.c = srv.client(socket_timeout=10)
        self.lease = self.c.execute_command("LEASE.GRANT", LEASE_TTL)
        # name -> ("held", token) / ("free", None) / ("unknown", None)
        self.state = {}
        self.leases = [self.lease]  # acknowledged leases
        self.stop = False
        self.ops = 0  # LOCK/UNLOCKs answered

    def run(self):
        global max_token
        names = ["c%d-l%d-r%d" % (self.k, j, round_no) for j in range(LOCKS_PER_CLIENT)]
        for n in names:
            self.state[n] = ("free", None)
        i = 0
        while not self.stop:
            i += 1
            if self.k % 8 == 0 and i % 5 == 0:
                try:
                    self.leases.append(self.c.execute_command("LEASE.GRANT", LEASE_TTL))
                except Exception:
                    return
                continue
            n = names[i % len(names)]
            st, tok = self.state[n]
            try:
                if st == "held":
                    self.state[n] = ("unknown", None)
                    r = self.c.execute_command("UNLOCK", n, tok)
                    assert r == 1, r
                    self.state[n] = ("free", None)
                else:
                    self.state[n] = ("unknown", None)
                    tok = self.c.execute_command("LOCK", n, self.lease)
                    assert isinstance(tok, int), tok
                    with max_lock:
                        max_token = max(max_token, tok)
                    self.state[n] = ("held", tok)
                self.ops += 1
            except AssertionError as e:
                errors.append("client %d: %r" % (self.k, e))
                return
            except Exception:
                return  # the server died: this op's outcome is unknown


def crash_rounds(tag):
    """Load, kill -9, restart and check, ROUNDS times."""
    global errors, round_no  # read by the Client threads
    for round_no in range(ROUNDS):
        errors = []
        clients = [Client(k) for k in range(N_CLIENTS)]
        ttl_probe = clients[0].c.execute_command("LEASE.GRANT", 10000)
        t_probe = time.monotonic()
        for cl in clients:
            cl.start()
        # Killed under load: once every client has been answered 20 times.
        wait_for(lambda: all(cl.ops >= 20 or not cl.is_alive() for cl in clients))
        # The probe lease must have aged (1.5 s) for its rebase to show:
        # this sleep is the thing under test.
        time.sleep(max(0.0, 1.5 - (time.monotonic() - t_probe)))
        before = srv.info()
        srv.stop(signal.SIGKILL)
        for cl in clients:
            cl.stop = True
            cl.join(20)
        t.check(not errors, "%s round %d: no wrong replies under load" % (tag, round_no), errors[:5])
        restarting = time.monotonic()
        srv.start()
        c = srv.client()
        acked = sum(1 for cl in clients for s in cl.state.values() if s[0] != "unknown")
        t.check(int(before["commands_processed"]) > 500,
                "%s round %d: killed under load (%s commands before SIGKILL)"
                % (tag, round_no, before["commands_processed"]))
        lost = []
        for cl in clients:
            for name, (st, tok) in cl.state.items():
                if st == "held":
                    info = c.execute_command("LOCK.INFO", name)
                    if info is None or info[0] != tok or info[1] != cl.lease:
                        lost.append((name, tok, info))
                elif st == "free":
                    info = c.execute_command("LOCK.INFO", name)
                    if info is not None:
                        lost.append((name, "free", info))
        t.check(not lost, "%s round %d: all %d acknowledged lock states survived kill -9"
                % (tag, round_no, acked), lost[:5])
        missing = []
        for cl in clients:
            for le in cl.leases:
                try:
                    c.execute_command("LEASE.INFO", le)
                except Exception as e:
                    missing.append((le, str(e)))
        t.check(not missing, "%s round %d: every acknowledged lease survived"
                % (tag, round_no), missing[:5])
        nl = c.execute_command("LEASE.GRANT", 5000)
        nt = c.execute_command("LOCK", "after-crash-%s-%d" % (tag, round_no), nl)
        t.check(nt > max_token, "%s round %d: next token %d > every token returned (%d)"
                % (tag, round_no, nt, max_token))
        t.check(int(srv.info()["last_token"]) >= max_token,
                "%s round %d: INFO last_token covers every returned token" % (tag, round_no))
        info = c.execute_command("LEASE.INFO", ttl_probe)
        since_restart = (time.monotonic() - restarting) * 1000
        since_grant = (time.monotonic() - t_probe) * 1000
        # Rebased at LEADER_START, after `restarting`: at least this much is
        # left; without the rebase at most 10000 - since_grant would be.
        t.check(info[0] == 10000 and info[1] >= 10000 - since_restart - 20 and
                since_grant - since_restart > 1000,
                "%s round %d: a lease restarts with its full TTL (remaining %d ms, "
                "%.0f ms after restart, %.0f ms after grant)"
                % (tag, round_no, info[1], since_restart, since_grant), info)
        for cl in clients:
            try:
                cl.c.close()
            except Exception:
                pass
        c.close()



srv = Fenced("crash").start()
crash_rounds("log")
t.eq(0, srv.stop(), "clean stop after the crashes")
max_token = 0  # a new server: tokens start again from 1
srv = Fenced("snap", args=["--snapshot-threshold", "32", "--snapshot-trailing", "8"]).start()
crash_rounds("snapshot")
t.check("snapshot taken" in srv.log_text() and "snapshot restored" in srv.log_text(),
        "snapshots were taken and restored")
t.eq(0, srv.stop(), "clean stop after the snapshot crashes")
t.finish()
