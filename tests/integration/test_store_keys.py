#!/usr/bin/python3
"""fence-store binds a key to one fence (issue 15, part 1).

A holder whose token is stale for fence F must not be able to write F's
keys through another fence G (any token is admitted for a fence never used,
whose mark is 0).  So the first FSET/FINCR of a key binds it to that
write's fence, and every later FSET, FDEL or FINCR of the key through
another fence is refused with -WRONGFENCE naming the owner, nothing written
(no value, no mark raised).  The binding survives a restart and an FDEL.
The control run (--ignore-tokens, lease only) shows the write-around the
rule prevents."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store_helpers import Store, Tap, TempDir, error_of, need_store  # noqa: E402

redis = need_store()


def client(port):
    return redis.Redis(host="127.0.0.1", port=port, socket_timeout=10)


def main():
    tap = Tap()
    with TempDir() as tmp:
        s = Store(tmp, "keys")
        s.start()
        try:
            r = client(s.port)
            x = r.execute_command
            tap.check(x("FSET", "acct", 100, "balance", "10") == b"OK",
                      "the first write binds balance to fence acct")
            err = error_of(x, "FSET", "acct", 99, "balance", "stale")
            tap.check(err is not None and err.startswith("STALE"),
                      "a stale token for acct is refused", err)
            err = error_of(x, "FSET", "otherfence", 0, "balance", "around")
            tap.check(err is not None and err.startswith(
                "WRONGFENCE key 'balance' belongs to fence 'acct'"),
                "a write through another fence is refused with WRONGFENCE "
                "naming the owner", err)
            tap.eq(b"10", x("FGET", "balance"), "and nothing was written")
            tap.eq(0, x("FENCE.HIGH", "otherfence"),
                   "and the other fence's mark was not raised")
            err = error_of(x, "FINCR", "otherfence", 5, "balance")
            tap.check(err is not None and err.startswith("WRONGFENCE"),
                      "FINCR through another fence is refused", err)
            err = error_of(x, "FDEL", "otherfence", 5, "balance")
            tap.check(err is not None and err.startswith("WRONGFENCE"),
                      "FDEL through another fence is refused", err)
            tap.eq(b"10", x("FGET", "balance"), "the value is still there")
            tap.eq(11, x("FINCR", "acct", 101, "balance"),
                   "the owning fence still writes")
            tap.eq(1, x("FINCR", "otherfence", 1, "hits"),
                   "another key binds to the other fence")
            err = error_of(x, "FSET", "acct", 200, "hits", "1")
            tap.check(err is not None and
                      "key 'hits' belongs to fence 'otherfence'" in err,
                      "whichever fence wrote first owns the key", err)
            tap.eq(1, x("FDEL", "acct", 101, "balance"), "the owner deletes its key")
            err = error_of(x, "FSET", "otherfence", 9, "balance", "recreate")
            tap.check(err is not None and err.startswith("WRONGFENCE"),
                      "a deleted key stays bound: no recreation through another fence",
                      err)
            tap.eq(0, x("FDEL", "otherfence", 9, "never-written"),
                   "FDEL of a key never written binds nothing")
            tap.eq(b"OK", x("FSET", "acct", 101, "never-written", "v"),
                   "so acct may still create it")
            tap.check(x("FSET", "acct", 101, "balance", "20") == b"OK",
                      "the owner recreates its deleted key")
            info = x("INFO")
            tap.check(info.get("rejected_wrongfence") == 5,
                      "INFO counts the refused writes", str(info))
        finally:
            s.stop()

        s.start()  # same data dir
        try:
            x = client(s.port).execute_command
            err = error_of(x, "FSET", "otherfence", 77, "balance", "after-restart")
            tap.check(err is not None and err.startswith("WRONGFENCE"),
                      "the binding survives a restart", err)
            tap.eq(b"20", x("FGET", "balance"), "and the value with it")
        finally:
            s.stop()

        c = Store(tmp, "keys-control", ["--ignore-tokens"])
        c.start()
        try:
            x = client(c.port).execute_command
            x("FSET", "acct", 100, "balance", "10")
            tap.check(error_of(x, "FSET", "otherfence", 0, "balance", "around") is None,
                      "control (--ignore-tokens): the write-around goes through")
            tap.eq(b"around", x("FGET", "balance"),
                   "control: so a stale holder could overwrite the key")
        finally:
            c.stop()
    tap.finish()


if __name__ == "__main__":
    main()
