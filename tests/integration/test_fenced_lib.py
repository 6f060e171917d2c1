"""Shared helpers for the fenced integration tests (imported, not run).

- Tap: prints "ok - ..." / "not ok - ..." lines and counts them.
- Fenced: starts build/fenced on a free 127.0.0.1 port in a temp data dir,
  stops it by PID (SIGTERM, or SIGKILL), restarts it on the same data dir.
- Every process started is killed by PID at exit; the temp dir is removed
  (kept with KEEP_TMP=1).
Run the tests with /usr/bin/python3 (Debian's python3-redis).
"""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)
FENCED = os.environ.get("FENCED", os.path.join(BUILD, "fenced"))

try:
    import redis  # noqa: F401
except ImportError:
    print("# skipped: python3-redis is missing (run with /usr/bin/python3)")
    sys.exit(77)

TMP = tempfile.mkdtemp(prefix="fence-test.")
_procs = []


def _cleanup():
    """Kill every process we started (by PID) and remove the temp dir."""
    for p in _procs:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=10)
            except Exception:
                pass
    if os.environ.get("KEEP_TMP") != "1":
        shutil.rmtree(TMP, ignore_errors=True)


atexit.register(_cleanup)


class Tap:
    """Counts and prints TAP-style result lines."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, cond, what, detail=None):
        """Print ok/not ok for cond; show detail on failure."""
        if cond:
            self.passed += 1
            print("ok - " + what, flush=True)
        else:
            self.failed += 1
            if detail is not None:
                for line in str(detail).splitlines():
                    print("#   " + line)
            print("not ok - " + what, flush=True)
        return cond

    def eq(self, expected, actual, what):
        """check(expected == actual) with both shown on failure."""
        return self.check(expected == actual, what,
                          "expected: %r\nactual:   %r" % (expected, actual))

    def finish(self):
        """Print the summary and exit non-zero on any failure."""
        print("# %d passed, %d failed in %s" % (self.passed, self.failed,
                                                os.path.basename(sys.argv[0])))
        sys.exit(1 if self.failed else 0)


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, secs=10.0):
    """Wait until something accepts on 127.0.0.1:port."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.03)
    return False


class Fenced:
    """One fenced process on a free port and a private data dir."""

    def __init__(self, name="fenced", args=(), env=None, port=None):
        self.name = name
        self.port = port or free_port()
        self.dir = os.path.join(TMP, name)
        self.data = os.path.join(self.dir, "data")
        os.makedirs(self.dir, exist_ok=True)
        self.args = list(args)
        self.env = env
        self.proc = None
        self.log = os.path.join(self.dir, "fenced.log")

    def start(self, extra_env=None, wait_ready=True):
        """Start (or restart) the process; wait for the port and leadership."""
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        if extra_env:
            env.update(extra_env)
        logf = open(self.log, "ab")
        cmd = [FENCED, "--port", str(self.port), "--data-dir", self.data] + self.args
        self.proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT,
                                     env=env)
        logf.close()
        _procs.append(self.proc)
        if not wait_port(self.port):
            raise RuntimeError("fenced did not listen on %d; log:\n%s"
                               % (self.port, self.log_text()))
        if wait_ready:
            self.wait_ready()
        return self

    def client(self, **kw):
        """A redis-py client for this server (decoded replies)."""
        kw.setdefault("decode_responses", True)
        kw.setdefault("socket_timeout", 30)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def info(self):
        """INFO as a dict of strings."""
        c = self.client()
        text = c.execute_command("INFO")
        c.close()
        if isinstance(text, dict):  # redis-py parses INFO itself
            return {k: str(v) for k, v in text.items()}
        out = {}
        for line in text.splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def wait_ready(self, secs=10.0):
        """Wait until the server leads and serves writes."""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            try:
                if self.info().get("leader_ready") == "1":
                    return True
            except Exception:
                pass
            time.sleep(0.03)
        raise RuntimeError("fenced never became ready; log:\n" + self.log_text())

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Signal the process (by PID) and wait; returns its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        self.proc = None
        return rc

    def log_text(self):
        """The process log so far."""
        try:
            with open(self.log, "r", errors="replace") as f:
                return f.read()
        except OSError:
            return ""
