#!/usr/bin/python3
"""fence-store's write-ahead log (docs/fence-store.md, "Durability").

LMDB runs with MDB_NOSYNC and the WAL makes each batch durable, so the
records LMDB lacks after a power cut are replayed at the start.  A power
cut is simulated by putting back an older, consistent copy of data.mdb
(mdb_copy, at a checkpoint or under load) after kill -9: LMDB then lacks
the newest batches, as it would had their pages never reached the disk,
and the WAL must bring back every acknowledged one.

Every start also writes the last checkpoint's LMDB meta pages back
(src/store/ckpt.h), so after a kill -9 LMDB opens at that checkpoint and
the WAL replays everything after it: the same path as after a power cut.

- clean restart: a SIGTERM checkpoints; the next start replays nothing;
- replay: the batches after the older copy come back, marks included;
- torn tail: the last record half-written is dropped, the server starts;
- a flipped byte in a middle record (valid records after it): the server
  refuses to start and says why;
- a damaged lmdb-meta.ckpt (the saved meta pages) refuses the start;
- rollover under load: small WAL files (--wal-size 64k), 16 writers,
  checkpoints on the worker thread, then kill -9: every acknowledged
  write survives;
- replay under load: mdb_copy while 16 writers run, kill -9, the copy put
  back: every acknowledged write is back, in order (each key holds its
  last acknowledged value or the one in flight, marks never lower);
- space reused: a 4 MiB map takes many times its size in page writes to
  500 KB of data without -FULL (a checkpoint every map/8 bytes written
  moves the pin that keeps freed pages from reuse), all of it back after
  kill -9."""
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store_helpers import Store, Tap, TempDir, error_of, need_store, read_log  # noqa: E402
from fencetest import run_group, skip  # noqa: E402

redis = need_store()
MDB_COPY = shutil.which("mdb_copy")
if MDB_COPY is None:
    skip("mdb_copy (lmdb-utils) not installed")
HDR = 4096  # WAL file header bytes


def info(r):
    return r.info()


def client(s):
    return redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)


def records(path):
    """(offset, length, lsn) of the run of records at the start of a WAL
    file (walked by their length fields; the server checks the CRCs)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    off, last = HDR, None
    while off + 24 <= len(data):
        ln, _hcrc, lsn = struct.unpack_from("<IIQ", data, off)
        if lsn == 0 or (last is not None and lsn != last + 1):
            break
        total = (24 + ln + 7) & ~7
        out.append((off, total, lsn))
        last = lsn
        off += total
    return out


def power_cut_setup(tmp, name, n):
    """A store with 3 checkpointed writes (a clean stop, then a start,
    which checkpoints again) and a copy of data.mdb as that checkpoint left
    it (mdb_copy: consistent), then n more writes, one record each, killed
    with -9 and given back the copy: the disk as a power cut leaves it when
    none of the later batches' LMDB pages made it.  Returns the Store
    (stopped)."""
    s = Store(tmp, name)
    s.start()
    r = client(s)
    for i in range(1, 4):
        r.execute_command("FSET", "f", i, "base%d" % i, "v%d" % i)
    s.stop()
    s.start()
    snap = os.path.join(tmp, name + ".snap")
    os.mkdir(snap)
    subprocess.run([MDB_COPY, s.dir, snap], check=True)
    r = client(s)
    for i in range(4, 4 + n):
        r.execute_command("FSET", "f", i, "k%d" % i, "v%d" % i)
    s.kill(signal.SIGKILL)
    shutil.copy(os.path.join(snap, "data.mdb"), os.path.join(s.dir, "data.mdb"))
    return s


def test_clean_restart(tap, tmp):
    s = Store(tmp, "clean")
    s.start()
    r = client(s)
    for i in range(1, 21):
        r.execute_command("FSET", "f", i, "k%d" % i, "v%d" % i)
    st = info(r)
    tap.check(st["wal_syncs"] >= 20, "every write batch is one WAL sync (%d)" % st["wal_syncs"])
    lsn = st["wal_lsn"]
    s.stop()
    s.start()
    st = info(client(s))
    tap.eq(0, st["wal_recovery_replayed"], "restart after a clean shutdown replays nothing")
    tap.eq(lsn, st["wal_lsn"], "the LSN carries over a restart")
    tap.eq(lsn, st["wal_durable_lsn"], "after the start LMDB is durable up to it")
    tap.eq(b"v20", client(s).execute_command("FGET", "k20"), "the data is there")
    s.stop()


def refused(tap, r, code, what, *cmd):
    """Check that cmd gets an error reply starting with code."""
    err = error_of(r.execute_command, *cmd)
    tap.check(err is not None and err.startswith(code), what, err)


def test_replay(tap, tmp):
    s = power_cut_setup(tmp, "replay", 10)
    s.start()
    r = client(s)
    st = info(r)
    tap.eq(10, st["wal_recovery_replayed"], "the 10 batches LMDB lost are replayed")
    got = [r.execute_command("FGET", "k%d" % i) for i in range(4, 14)]
    tap.eq([b"v%d" % i for i in range(4, 14)], got, "every replayed write is there")
    tap.eq(13, int(r.execute_command("FENCE.HIGH", "f")), "the mark is replayed")
    refused(tap, r, "STALE", "a token below the replayed mark is refused",
            "FSET", "f", 12, "k4", "stale")
    refused(tap, r, "WRONGFENCE", "a replayed key stays bound to its fence",
            "FSET", "g", 99, "k4", "x")
    tap.check("replayed 10 write-ahead log records" in read_log(s.log),
              "the replay is logged")
    s.stop()
    s.start()
    tap.eq(0, info(client(s))["wal_recovery_replayed"], "and not replayed again")
    s.stop()


def test_deferred(tap, tmp):
    """The batches logged since LMDB's last commit (db_defer.c, "Deferred
    commits"): readable at once, committed to LMDB by the timer, and
    replayed after kill -9."""
    s = Store(tmp, "deferred")
    s.start()
    r = client(s)
    for i in range(1, 51):
        r.execute_command("FSET", "f", i, "k%d" % i, "v%d" % i)
    st = info(r)
    if st["lmdb_pending_ops"] == 0:  # the once-a-second commit fell just before INFO
        r.execute_command("FSET", "f", 50, "k50", "v50")
        st = info(r)
    tap.check(st["lmdb_pending_ops"] > 0 and st["lmdb_lsn"] < st["wal_lsn"],
              "answered writes wait for LMDB's next commit (%d operations, LSN %d of %d)"
              % (st["lmdb_pending_ops"], st["lmdb_lsn"], st["wal_lsn"]))
    got = [r.execute_command("FGET", "k%d" % i) for i in range(1, 51)]
    tap.eq([b"v%d" % i for i in range(1, 51)], got, "and are readable meanwhile")
    tap.eq(50, int(r.execute_command("FENCE.HIGH", "f")), "the mark too")
    refused(tap, r, "STALE", "a token below a pending mark is refused",
            "FSET", "f", 49, "k1", "stale")
    refused(tap, r, "WRONGFENCE", "a key bound by a pending write stays bound",
            "FSET", "g", 99, "k1", "x")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and info(r)["lmdb_pending_ops"] > 0:
        time.sleep(0.1)
    st = info(r)
    tap.check(st["lmdb_pending_ops"] == 0 and st["lmdb_lsn"] == st["wal_lsn"],
              "the timer commits them to LMDB (%d pending, LSN %d of %d)"
              % (st["lmdb_pending_ops"], st["lmdb_lsn"], st["wal_lsn"]))
    for i in range(51, 61):
        r.execute_command("FSET", "f", i, "k%d" % i, "v%d" % i)
    pending = info(r)["lmdb_pending_ops"]
    if pending == 0:  # the once-a-second commit fell just before INFO
        r.execute_command("FSET", "f", 60, "k60", "v60")
        pending = info(r)["lmdb_pending_ops"]
    tap.check(pending > 0, "later writes are pending again")
    s.kill(signal.SIGKILL)
    s.start()
    r = client(s)
    st = info(r)
    # Replayed: the batches still pending at the kill (10, unless the
    # once-a-second commit fell between the last write and the kill).
    got = [r.execute_command("FGET", "k%d" % i) for i in range(1, 61)]
    tap.eq([b"v%d" % i for i in range(1, 61)], got,
           "after kill -9 every answered write is there (%d batches replayed)"
           % st["wal_recovery_replayed"])
    tap.eq(60, int(r.execute_command("FENCE.HIGH", "f")), "and the mark")
    s.stop()


def test_torn_tail(tap, tmp):
    s = power_cut_setup(tmp, "torn", 6)
    wal = os.path.join(s.dir, "wal.0")
    recs = records(wal)
    tap.check(len(recs) >= 6, "the records are in wal.0 (%d)" % len(recs))
    off, total, lsn = recs[-1]
    with open(wal, "r+b") as f:  # the second half of the last record never made it
        f.seek(off + total // 2)
        f.write(b"\0" * (total - total // 2))
    s.start()
    r = client(s)
    st = info(r)
    tap.eq(5, st["wal_recovery_replayed"], "a torn last record is dropped, the rest replayed")
    tap.eq(b"v8", r.execute_command("FGET", "k8"), "the record before the torn one is there")
    tap.eq(None, r.execute_command("FGET", "k9"), "the torn one is not (never acknowledged "
           "in a real crash: its sync did not finish)")
    s.stop()


def test_flipped_byte(tap, tmp):
    s = power_cut_setup(tmp, "flip", 6)
    wal = os.path.join(s.dir, "wal.0")
    recs = records(wal)
    off, total, lsn = recs[len(recs) // 2]
    with open(wal, "r+b") as f:
        f.seek(off + total - 9)  # a byte of the payload
        b = f.read(1)
        f.seek(off + total - 9)
        f.write(bytes([b[0] ^ 0x40]))
    try:
        s.start()
        up = True
    except RuntimeError:
        up = False
    rc = s.proc.wait(10) if s.proc is not None else None
    log = read_log(s.log)
    tap.check(not up, "a flipped byte in a middle record: fence-store refuses to start",
              "rc=%r" % rc)
    tap.check("is damaged" in log and "refusing to start" in log,
              "and says the write-ahead log is damaged", log[-600:])
    s.kill()


def test_bad_meta_copy(tap, tmp):
    s = Store(tmp, "meta")
    s.start()
    client(s).execute_command("FSET", "f", 1, "k", "v")
    s.kill(signal.SIGKILL)
    path = os.path.join(s.dir, "lmdb-meta.ckpt")
    tap.check(os.path.exists(path), "a running store keeps its checkpoint's meta pages")
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # a flipped bit in each of its two slots
        for at in (100, size // 2 + 100):
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 1]))
    try:
        s.start()
        up = True
    except RuntimeError:
        up = False
    tap.check(not up and "lmdb-meta.ckpt is damaged" in read_log(s.log) and
              "no valid checkpoint" in read_log(s.log),
              "a damaged lmdb-meta.ckpt refuses the start, and says so", read_log(s.log)[-400:])
    s.kill()


class Writer(threading.Thread):
    """FSETs with increasing tokens on its own fence until the server dies;
    remembers the last acknowledged value per key and the one in flight."""

    def __init__(self, port, idx, start):
        super().__init__(daemon=True)
        self.port, self.idx, self.token = port, idx, start
        self.fence = "wal-fence-%d" % idx
        self.acked, self.acked_token, self.inflight, self.errors = {}, start, None, []

    def run(self):
        r = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10)
        while True:
            self.token += 1
            key = "w%d-k%d" % (self.idx, self.token % 7)
            val = "%d:%d" % (self.idx, self.token) + "x" * (self.token % 50)
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


def check_writers(tap, s, ws, what):
    r = client(s)
    bad = []
    for w in ws:
        for key, val in w.acked.items():
            got = r.execute_command("FGET", key)
            got = got.decode() if got is not None else None
            if got != val and not (w.inflight and w.inflight[0] == key and
                                   w.inflight[1] == got):
                bad.append((key, val, got))
        high = int(r.execute_command("FENCE.HIGH", w.fence))
        if high < w.acked_token or (high != w.acked_token and not
                                    (w.inflight and w.inflight[2] == high)):
            bad.append((w.fence, w.acked_token, high))
    errors = [e for w in ws for e in w.errors]
    tap.check(not errors, what + ": no error replies", str(errors[:3]))
    tap.check(not bad, what + ": every acknowledged write is there, the last one per key, "
              "marks exact (%d acked)" % sum(len(w.acked) for w in ws), str(bad[:5]))


def load(s, n=16):
    ws = [Writer(s.port, i, 0) for i in range(n)]
    for w in ws:
        w.start()
    return ws


def test_rollover(tap, tmp):
    s = Store(tmp, "roll", flags=["--wal-size", "64k"])
    s.start()
    ws = load(s)
    r = client(s)
    deadline = time.monotonic() + 60
    st = info(r)
    while st["wal_checkpoints"] < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
        st = info(r)
    tap.eq(65536, st["wal_file_size"], "--wal-size 64k: files of 64 KiB")
    tap.check(st["wal_checkpoints"] >= 4, "checkpoints ran under load (%d, %d stalls)" %
              (st["wal_checkpoints"], st["wal_stalls"]))
    s.kill(signal.SIGKILL)
    for w in ws:
        w.join(15)
    s.start()
    check_writers(tap, s, ws, "rollover then kill -9")
    s.stop()


def test_replay_under_load(tap, tmp):
    s = Store(tmp, "load")
    s.start()
    ws = load(s)
    time.sleep(0.5)
    snap = os.path.join(tmp, "load.snap")
    os.mkdir(snap)
    subprocess.run([MDB_COPY, s.dir, snap], check=True)
    time.sleep(0.2)  # more batches after the copy
    s.kill(signal.SIGKILL)
    for w in ws:
        w.join(15)
    shutil.copy(os.path.join(snap, "data.mdb"), os.path.join(s.dir, "data.mdb"))
    s.start()
    st = info(client(s))
    tap.check(st["wal_recovery_replayed"] > 0, "the batches after the copy were replayed (%d)"
              % st["wal_recovery_replayed"])
    check_writers(tap, s, ws, "mdb_copy, kill -9, copy put back")
    s.stop()


def test_space_reused(tap, tmp):
    s = Store(tmp, "reuse", flags=["--map-size", "4m", "--max-value", "64k"])
    s.start()
    r = client(s)
    val = b"x" * 1000
    last = {}
    full = None
    # At least 300 batches of 20 random keys of 500 (~6,000 page writes
    # without deferred commits) and at least 3.5 s: LMDB commits the logged
    # batches once a second (FENCE_STORE_FLUSH_MS), each commit writes most
    # of the ~170 leaf pages again, and the growth starts checkpoints.
    t0 = time.monotonic()
    b = 0
    while b < 300 or time.monotonic() - t0 < 3.5:
        b += 1
        p = r.pipeline(transaction=False)
        keys = [(b * 7919 + i * 104729) % 500 for i in range(20)]
        for k in keys:
            p.execute_command("FSET", "f", 1, "k%d" % k, val + b"%d" % b)
        for k, res in zip(keys, p.execute(raise_on_error=False)):
            if isinstance(res, Exception):
                full = full or str(res)
            else:
                last[k] = val + b"%d" % b
    tap.check(full is None, "no write refused (%s)" % full)
    st = info(r)
    tap.check(st["wal_checkpoints"] > 2, "checkpoints without a log file switch (%d)"
              % st["wal_checkpoints"])
    tap.check(st["map_used"] < 4 * 1024 * 1024, "the data file stays inside the map (%d)"
              % st["map_used"])
    s.kill()
    s.start()
    r = client(s)
    bad = [k for k, v in last.items() if r.execute_command("FGET", "k%d" % k) != v]
    tap.eq([], bad, "after kill -9 every key holds its last acknowledged value")
    s.stop()


def main():
    tap = Tap()
    with TempDir() as tmp:
        for t in (test_clean_restart, test_replay, test_deferred, test_torn_tail, test_flipped_byte,
                  test_bad_meta_copy, test_rollover, test_replay_under_load,
                  test_space_reused):
            run_group(tap, t, tap, tmp)
    tap.finish()


if __name__ == "__main__":
    main()
