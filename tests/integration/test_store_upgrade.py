#!/usr/bin/python3
"""fence-store opens a format-1 store and upgrades it in place (db_layout.c,
migrate): the store is generated here, by code, with mdb_load
(lmdb-utils) from a dump this test writes: format 1 kept each value bare
in "data" and every key's fence in "owners", and had no "meta" database.

After the upgrade every value reads back, every key stays bound to its
fence (a deleted key's binding too), the marks hold, the upgrade is logged
once, the store gets its write-ahead log, and a restart neither upgrades
nor replays anything."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store_helpers import Store, Tap, TempDir, error_of, need_store, read_log  # noqa: E402
from fencetest import skip  # noqa: E402

redis = need_store()
MDB_LOAD = shutil.which("mdb_load")
if MDB_LOAD is None:
    skip("mdb_load (lmdb-utils) not installed")


def dump(name, pairs):
    """One database in mdb_dump's hex format."""
    lines = ["VERSION=3", "format=bytevalue", "database=" + name, "type=btree",
             "HEADER=END"]
    for k, v in sorted(pairs.items()):
        lines.append(" " + k.hex())
        lines.append(" " + v.hex())
    lines.append("DATA=END")
    return "\n".join(lines) + "\n"


def make_format1(path):
    """A format-1 store: k1, k2 and n (a counter) of fence f, k3 of fence
    g, gone (deleted, still bound to g); marks f=5, g=9."""
    os.makedirs(path)
    data = {b"k1": b"v1", b"k2": b"v2" * 100, b"n": b"41", b"k3": b"v3"}
    owners = {b"k1": b"f", b"k2": b"f", b"n": b"f", b"k3": b"g", b"gone": b"g"}
    fences = {b"f": (5).to_bytes(8, "little"), b"g": (9).to_bytes(8, "little")}
    text = dump("data", data) + dump("owners", owners) + dump("fences", fences)
    subprocess.run([MDB_LOAD, path], input=text.encode(), check=True)


def err(r, *args):
    """The code of the error reply to args (its first word), or None."""
    e = error_of(r.execute_command, *args)
    return e.split()[0] if e is not None else None


def main():
    tap = Tap()
    with TempDir() as tmp:
        s = Store(tmp, "old")
        make_format1(s.dir)
        s.start()
        r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)
        tap.check("upgraded to record format 2 (4 keys)" in read_log(s.log),
                  "the format-1 store is upgraded in place, logged", read_log(s.log)[-400:])
        tap.eq([b"v1", b"v2" * 100, b"41", b"v3"],
               [r.execute_command("FGET", k) for k in ("k1", "k2", "n", "k3")],
               "every value reads back")
        tap.eq(5, int(r.execute_command("FENCE.HIGH", "f")), "fence f's mark holds")
        tap.eq(9, int(r.execute_command("FENCE.HIGH", "g")), "fence g's mark holds")
        tap.eq("WRONGFENCE", err(r, "FSET", "g", 10, "k1", "x"), "k1 stays bound to f")
        tap.eq("WRONGFENCE", err(r, "FSET", "f", 10, "k3", "x"), "k3 stays bound to g")
        tap.eq("WRONGFENCE", err(r, "FSET", "f", 10, "gone", "x"),
               "a deleted key stays bound to its fence")
        tap.eq("STALE", err(r, "FSET", "f", 4, "k1", "x"), "a token below the mark is stale")
        tap.eq(42, r.execute_command("FINCR", "f", 5, "n"), "a counter counts on")
        tap.eq(b"OK", r.execute_command("FSET", "f", 6, "k1", "new"), "f writes its key")
        tap.eq(b"OK", r.execute_command("FSET", "g", 9, "gone", "back"), "g rewrites its deleted key")
        tap.check(os.path.exists(os.path.join(s.dir, "wal.0")), "the store got its write-ahead log")
        s.stop()
        s.start()
        r = redis.Redis(host="127.0.0.1", port=s.port, socket_timeout=10)
        tap.eq(1, read_log(s.log).count("upgraded to record format"), "a restart does not upgrade again")
        tap.eq(0, r.info()["wal_recovery_replayed"], "and replays nothing")
        tap.eq([b"new", b"42", b"back"], [r.execute_command("FGET", k) for k in ("k1", "n", "gone")],
               "the writes after the upgrade are there")
        s.stop()
    tap.finish()


if __name__ == "__main__":
    main()
