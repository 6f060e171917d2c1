"""Shared helpers for the fence-store Python tests (run with /usr/bin/python3).

Start fence-store on a free 127.0.0.1 port in a temp dir, stop it by PID,
print TAP-like "ok - ..." / "not ok - ..." lines and exit non-zero on any
failure.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)
FENCE_STORE = os.environ.get("FENCE_STORE", os.path.join(BUILD, "fence-store"))


class Tap:
    """Counts ok / not ok lines and exits with the right status."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, cond, what, detail=""):
        if cond:
            self.passed += 1
            print("ok - %s" % what, flush=True)
        else:
            self.failed += 1
            if detail:
                print("#   %s" % detail)
            print("not ok - %s" % what, flush=True)
        return cond

    def finish(self):
        print("# %d passed, %d failed in %s" % (self.passed, self.failed,
                                                os.path.basename(sys.argv[0])))
        sys.exit(1 if self.failed else 0)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Store:
    """One fence-store process with its own port and data dir."""

    def __init__(self, tmp, name="store", flags=()):
        self.dir = os.path.join(tmp, name)
        self.log = os.path.join(tmp, name + ".log")
        self.flags = list(flags)
        self.port = free_port()
        self.proc = None

    def start(self):
        logf = open(self.log, "ab")
        self.proc = subprocess.Popen(
            [FENCE_STORE, "--port", str(self.port), "--bind", "127.0.0.1",
             "--data-dir", self.dir] + self.flags,
            stdout=logf, stderr=logf, stdin=subprocess.DEVNULL)
        logf.close()
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        raise RuntimeError("fence-store did not start: " + open(self.log).read())

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            self.proc.wait(10)
        self.proc = None

    def stop(self):
        self.kill(signal.SIGTERM)


class TempDir:
    """A temporary directory removed on exit (kept with KEEP_TMP=1)."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="fence-store-test.")
        return self.path

    def __exit__(self, *exc):
        if os.environ.get("KEEP_TMP") != "1":
            shutil.rmtree(self.path, ignore_errors=True)


def stale_tokens(err):
    """Parse '-STALE <token> <highest> ...' into (token, highest) or None."""
    parts = str(err).split()
    if len(parts) >= 3 and parts[0] == "STALE":
        return int(parts[1]), int(parts[2])
    return None
