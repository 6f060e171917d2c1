"""Shared helpers for the fence-store Python tests (run with /usr/bin/python3).

Start fence-store on a free 127.0.0.1 port in a temp dir, stop it by PID,
print TAP-like "ok - ..." / "not ok - ..." lines and exit non-zero on any
failure.  Tap, free ports, temp dirs and process handling come from
tests/lib/fencetest.py.
"""
import os
import signal
import socket
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import fencetest  # noqa: E402
from fencetest import (Tap, binary, free_port, need_module, read_log, skip,  # noqa: E402,F401
                       spawn, stop_process)

FENCE_STORE = binary("fence-store", env="FENCE_STORE")


def need_store():
    """Skips the test unless python3-redis is installed and fence-store is
    built; returns the redis module."""
    redis = need_module("redis", "python3-redis")
    if not os.access(FENCE_STORE, os.X_OK):
        skip("fence-store not built")
    return redis


class Store:
    """One fence-store process with its own port and data dir."""

    def __init__(self, tmp, name="store", flags=()):
        self.dir = os.path.join(tmp, name)
        self.log = os.path.join(tmp, name + ".log")
        self.flags = list(flags)
        self.port = free_port()
        self.proc = None

    def start(self):
        self.proc = spawn([FENCE_STORE, "--port", str(self.port), "--bind", "127.0.0.1",
                           "--data-dir", self.dir] + self.flags,
                          self.log, stdin=subprocess.DEVNULL)
        state = fencetest.wait_up(
            self.proc, lambda: socket.create_connection(("127.0.0.1", self.port), 0.2).close(),
            10, 0.05)
        if state != "up":
            raise RuntimeError("fence-store did not start: " + read_log(self.log))

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            stop_process(self.proc, sig, 10)
        self.proc = None

    def stop(self):
        self.kill(signal.SIGTERM)


class TempDir(fencetest.TempDir):
    """A temporary directory removed on exit (kept with KEEP_TMP=1)."""

    def __init__(self):
        super().__init__("fence-store-test.")


def error_of(fn, *args):
    """The error reply text of fn(*args), or None if it succeeded (after
    need_store: redis is importable)."""
    import redis
    try:
        fn(*args)
    except redis.ResponseError as e:
        return str(e)
    return None


def stale_tokens(err):
    """Parse '-STALE <token> <highest> ...' into (token, highest) or None."""
    parts = str(err).split()
    if len(parts) >= 3 and parts[0] == "STALE":
        return int(parts[1]), int(parts[2])
    return None
