"""Shared helpers for the fenced integration tests (imported, not run).

Built on tests/lib/fencetest.py (Tap, ports, processes, temp dirs):
- Tap: prints "ok - ..." / "not ok - ..." lines and counts them.
- Fenced: starts build/fenced on a free 127.0.0.1 port in a temp data dir,
  stops it by PID (SIGTERM, or SIGKILL), restarts it on the same data dir.
- Every process started is killed by PID at exit; the temp dir is removed
  (kept with KEEP_TMP=1).
Run the tests with /usr/bin/python3 (Debian's python3-redis).
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fencetest import (Tap, binary, free_port, make_tmp,  # noqa: E402,F401
                       need_module, read_log, run_threads, spawn, stop_process,
                       wait_port)

FENCED = binary("fenced", env="FENCED")
redis = need_module("redis", "python3-redis")
TMP = make_tmp("fence-test.")


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
        cmd = [FENCED, "--port", str(self.port), "--data-dir", self.data] + self.args
        self.proc = spawn(cmd, self.log, env=env)
        if not wait_port(self.port, step=0.03):
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
        rc = stop_process(self.proc, sig, timeout)
        self.proc = None
        return rc

    def log_text(self):
        """The process log so far."""
        return read_log(self.log)
