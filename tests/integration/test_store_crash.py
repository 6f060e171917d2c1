#!/usr/bin/python3
"""fence-store durability: kill -9 under write load, restart, and check that
every acknowledged write is present and no mark went lower.

Writer threads (one connection and one fence each) send FSETs and FINCRs
with increasing tokens and record every acknowledged one.  The server is
killed with SIGKILL at a random moment; a write in flight at that moment may
or may not have landed (it was never acknowledged), so each key must hold
its last acknowledged value or the one in flight.  Several rounds on the
same data directory; each round continues from FENCE.HIGH.

Sixteen writers keep the server's group commit busy: their writes share LMDB
transactions (INFO batched_requests > batches is checked), and every one of
them must still survive each kill.  Writer 0 pipelines bursts of FSETs on
one connection (all of a burst in one batch): each acknowledged reply of a
burst counts.

The write-ahead log (docs/fence-store.md, "Durability"): LMDB commits
without a sync and each batch is made durable by its WAL record, so in
every other round (when mdb_copy, lmdb-utils, is installed) a power cut is
simulated: a consistent copy of data.mdb is taken with mdb_copy while the
writers run, the server is killed, and the copy is put back, so LMDB lacks
the newest batches as it would had their pages never reached the disk.
Every acknowledged write must come back from the WAL all the same (INFO
wal_recovery_replayed counts the records replayed)."""
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store_helpers import Store, Tap, TempDir, need_store, stale_tokens  # noqa: E402
from fencetest import wait_for  # noqa: E402

redis = need_store()

WRITERS = 16
ROUNDS = int(os.environ.get("FENCE_STORE_CRASH_ROUNDS", "4"))
KEYS = 25
MDB_COPY = shutil.which("mdb_copy")


class Writer(threading.Thread):
    """Writes with increasing tokens on its own fence until the server dies."""

    def __init__(self, port, idx, start_token):
        super().__init__(daemon=True)
        self.port, self.idx, self.token = port, idx, start_token
        self.fence = "crash-fence-%d" % idx
        self.acked = {}           # key -> value acknowledged last
        self.acked_token = start_token
        self.inflight = None      # (key, value, token) sent, not answered
        self.counter_acked = None  # last acknowledged FINCR result
        self.errors = []
        self.inflight_burst = None  # writer 0: the burst in flight

    def run(self):
        r = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
        rnd = random.Random(self.idx)
        n = 0
        if self.idx == 0:
            return self.run_pipelined(r, rnd)
        while True:
            self.token += 1
            n += 1
            if n % 5 == 0:
                key = "w%d-count" % self.idx
                self.inflight = (key, None, self.token)
                try:
                    v = r.execute_command("FINCR", self.fence, self.token, key)
                except (redis.ConnectionError, redis.TimeoutError):
                    return
                except redis.ResponseError as e:
                    self.errors.append(str(e))
                    return
                self.counter_acked = v
            else:
                key = "w%d-k%d" % (self.idx, rnd.randrange(KEYS))
                val = "%d:%d" % (self.idx, self.token)
                self.inflight = (key, val, self.token)
                try:
                    r.execute_command("FSET", self.fence, self.token, key, val)
                except (redis.ConnectionError, redis.TimeoutError):
                    return
                except redis.ResponseError as e:
                    self.errors.append(str(e))
                    return
                self.acked[key] = val
            self.acked_token = self.token
            self.inflight = None


    def run_pipelined(self, r, rnd):
        """Bursts of 8 FSETs on one pipeline; record every reply received."""
        while True:
            p = r.pipeline(transaction=False)
            burst = []
            for _ in range(8):
                self.token += 1
                key = "w%d-k%d" % (self.idx, rnd.randrange(KEYS))
                val = "%d:%d" % (self.idx, self.token)
                burst.append((key, val, self.token))
                p.execute_command("FSET", self.fence, self.token, key, val)
            # any write of the burst may be in flight; the check allows the
            # in-flight one per key only, so keep keys of a burst distinct
            self.inflight_burst = burst
            try:
                replies = p.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError):
                return
            for (key, val, tok), rep in zip(burst, replies):
                if isinstance(rep, Exception):
                    self.errors.append(str(rep))
                    return
                self.acked[key] = val
                self.acked_token = tok
            self.inflight_burst = None


def main():
    tap = Tap()
    rnd = random.Random()
    seed = rnd.randrange(1 << 30)
    rnd.seed(seed)
    print("# seed %d" % seed)
    with TempDir() as tmp:
        s = Store(tmp, "crash-store")
        acked = {}            # key -> last acknowledged value, across rounds
        marks = {}            # fence -> last acknowledged token
        counters = {}         # key -> last acknowledged FINCR value
        total = 0
        batched_more = False  # some batch held more than one request
        replayed = 0          # WAL records replayed after the copy rounds
        cut_rounds = 0        # rounds that put back an older data.mdb
        for rnd_i in range(ROUNDS):
            s.start()
            r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)
            starts = [int(r.execute_command("FENCE.HIGH", "crash-fence-%d" % i))
                      for i in range(WRITERS)]
            ws = [Writer(s.port, i, starts[i]) for i in range(WRITERS)]
            for w in ws:
                w.start()
            time.sleep(0.3 + rnd.random() * 0.7)  # killed at a random moment of the load
            info = r.info()
            batched_more = batched_more or \
                info.get("batched_requests", 0) > info.get("batches", 0)
            cut = MDB_COPY is not None and rnd_i % 2 == 1
            if cut:
                snap = os.path.join(tmp, "snap%d" % rnd_i)
                os.mkdir(snap)
                subprocess.run([MDB_COPY, s.dir, snap], check=True)
                # Batches after the copy (the WAL has more than the copy).
                b0 = int(r.info().get("batches", 0))
                wait_for(lambda: int(r.info().get("batches", 0)) > b0)
            s.kill(signal.SIGKILL)
            for w in ws:
                w.join(15)
            if cut:
                shutil.copy(os.path.join(snap, "data.mdb"), os.path.join(s.dir, "data.mdb"))
                cut_rounds += 1
            errors = [e for w in ws for e in w.errors]
            tap.check(not errors, "round %d: no error replies under load" % rnd_i, str(errors[:3]))

            s.start()
            r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)
            if cut:
                replayed += r.info().get("wal_recovery_replayed", 0)
            missing = []
            for w in ws:
                acked.update(w.acked)
                total += len(w.acked)
                marks[w.fence] = w.acked_token
                if w.counter_acked is not None:
                    counters["w%d-count" % w.idx] = w.counter_acked
                # the writes sent and not answered: any of them may have landed
                flight = list(w.inflight_burst or []) + ([w.inflight] if w.inflight else [])
                flight_vals = {(k, v) for k, v, _ in flight}
                flight_tokens = {t for _, _, t in flight}
                # every key this writer acknowledged
                for key, val in w.acked.items():
                    got = r.execute_command("FGET", key)
                    got = got.decode() if got is not None else None
                    ok = got == val or (key, got) in flight_vals
                    if not ok:
                        missing.append((key, val, got))
                    if got is not None:
                        acked[key] = got
                high = int(r.execute_command("FENCE.HIGH", w.fence))
                if high < w.acked_token or \
                        (high != w.acked_token and high not in flight_tokens):
                    missing.append((w.fence, w.acked_token, high))
                if w.acked_token > 0:
                    try:
                        r.execute_command("FENCE.ADMIT", w.fence, w.acked_token - 1)
                        missing.append((w.fence, "admitted a lower token"))
                    except redis.ResponseError as e:
                        st = stale_tokens(e)
                        if st is None or st[1] < w.acked_token:
                            missing.append((w.fence, str(e)))
            for key, val in counters.items():
                got = int(r.execute_command("FGET", key))
                if got < val:
                    missing.append((key, val, got))
            # keys acknowledged in earlier rounds are still there
            for key, val in acked.items():
                got = r.execute_command("FGET", key)
                if got is None:
                    missing.append((key, val, None))
            tap.check(not missing, "round %d: every acknowledged write survived kill -9%s, "
                      "marks never lower (%d acked writes)" %
                      (rnd_i, " and a power cut" if cut else "",
                       sum(len(w.acked) for w in ws)), str(missing[:5]))
            s.stop()
        tap.check(batched_more, "group commit: batches held several requests "
                  "(INFO batched_requests > batches under load)")
        if cut_rounds:
            tap.check(replayed > 0, "power cuts: the WAL replayed the batches LMDB lacked "
                      "(%d records over %d rounds)" % (replayed, cut_rounds))
        tap.check(total > 20, "the load wrote something (%d acknowledged writes)" % total)
    tap.finish()


if __name__ == "__main__":
    main()
