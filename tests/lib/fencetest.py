"""Shared helpers for the Python tests (imported, never run as a test).

A test (or an area's helper module such as test_fenced_lib.py) imports it
by a path relative to its own file:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
    import fencetest

What is here, standard library only (redis and psycopg2 are the tests' own
business; need_module() imports them or skips):
- ROOT, BUILD (env BUILD, relative to ROOT when relative), binary().
- Tap: "ok - ..." / "not ok - ..." lines for tests/run.sh, counted
  (thread-safe), and a summary line; run_group() runs a group of checks so
  that a crash is one failure and the rest still run.
- skip() / need_module(): exit 77 with a "# skipped: ..." line.
- Temp dirs: make_tmp() (removed at exit) and TempDir (removed when the
  with-block ends); both are kept with KEEP_TMP=1.
- Processes: spawn() starts one with its output appended to a log file and
  remembers it; every process spawned (or track()ed) is killed by PID at
  exit; stop_process() signals one by PID and reaps it; wait_up() polls a
  probe until the process serves, exits or time runs out; read_log().
- free_port(), wait_port() and encode_command() (a RESP2 command), from
  tools/fenceproto.py, which ships with the torture tools.
- Waiting on conditions, never on the clock: wait_for(pred) polls until
  pred() holds, wait_log(path, regex) until a log line appears,
  wait_info(port, field, value) until fenced's INFO says so, wait_exit(proc)
  until a process has exited.  Their timeouts only bound a hang (generous,
  30 s): they return the value (or None / False) and the caller's check
  decides, so a slow machine makes a test slower, not red.
"""
import atexit
import importlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build", "release"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)

# fenceproto.py (RESP and ports) ships with the torture tools, in tools/.
sys.path.insert(0, os.path.join(ROOT, "tools"))
from fenceproto import Resp, RespError, encode_command, free_port, wait_port  # noqa: E402,F401

_procs = []       # every process spawned or tracked, killed by PID at exit
_exit_hooks = []  # functions to run at exit, after the kill, last first
_tmp_dirs = []    # directories made by make_tmp(), removed at exit


def binary(name, env=None):
    """Returns the path of a built program: the environment variable env
    when it is set, else BUILD/name."""
    if env and os.environ.get(env):
        return os.environ[env]
    return os.path.join(BUILD, name)


def skip(reason):
    """Prints "# skipped: reason" and exits 77, which tests/run.sh counts as
    a skipped test program."""
    print("# skipped: " + reason, flush=True)
    sys.exit(77)


def need_module(name, package):
    """Imports and returns the module name, or skips the whole test when it
    is missing (package names the Debian package that provides it)."""
    try:
        return importlib.import_module(name)
    except ImportError:
        skip("%s is not installed (run this with /usr/bin/python3)" % package)


class Tap:
    """Counts and prints TAP-style result lines; safe to use from several
    threads (a line and its detail are printed together)."""

    def __init__(self):
        self.passed = 0                # "ok" lines printed
        self.failed = 0                # "not ok" lines printed
        self._mu = threading.Lock()    # keeps one check's lines together

    def check(self, cond, what, detail=None):
        """Prints "ok - what" when cond holds, else the detail (when given,
        each of its lines as a "#" comment) and "not ok - what"; returns
        cond."""
        with self._mu:
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

    def eq(self, expected, actual, what, detail=None):
        """Checks expected == actual, showing both (and detail, when
        given) when they differ."""
        text = "expected: %r\nactual:   %r" % (expected, actual)
        if detail:
            text += "\n%s" % (detail,)
        return self.check(expected == actual, what, text)

    def note(self, text):
        """Prints a comment line (measurements, progress)."""
        print("# " + text, flush=True)

    def summary(self):
        """Prints the "# N passed, N failed in <program>" comment line."""
        print("# %d passed, %d failed in %s" % (self.passed, self.failed,
                                                os.path.basename(sys.argv[0])), flush=True)

    def finish(self):
        """Prints the summary and exits, non-zero on any failure."""
        self.summary()
        sys.exit(1 if self.failed else 0)


def run_group(tap, fn, *args):
    """Runs fn(*args), one group of checks; an exception prints its
    traceback and counts as one failure, so the other groups still run."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - any crash is a failure with its reason
        import traceback
        traceback.print_exc(file=sys.stdout)
        tap.check(False, "%s crashed: %r" % (fn.__name__, e))


def run_threads(target, n, daemon=True):
    """Runs target(i) for i in 0..n-1, each in its own thread started
    together, and returns when all have ended."""
    threads = [threading.Thread(target=target, args=(i,), daemon=daemon) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def keep_tmp():
    """Whether temp dirs are kept for a post-mortem (KEEP_TMP=1)."""
    return os.environ.get("KEEP_TMP") == "1"


def remove_tmp(path):
    """Removes a temp dir unless KEEP_TMP=1."""
    if not keep_tmp():
        shutil.rmtree(path, ignore_errors=True)


def make_tmp(prefix):
    """Returns a new temp dir, removed at exit (kept with KEEP_TMP=1)."""
    path = tempfile.mkdtemp(prefix=prefix)
    _tmp_dirs.append(path)
    return path


class TempDir:
    """A with-block's temp dir (the with-target is its path), removed when
    the block ends (kept with KEEP_TMP=1)."""

    def __init__(self, prefix="fence-test."):
        self.prefix = prefix  # mkdtemp prefix, names the test in /tmp
        self.path = None      # the directory, while the block runs

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix=self.prefix)
        return self.path

    def __exit__(self, *exc):
        remove_tmp(self.path)


def at_exit(fn):
    """Runs fn at exit, after the processes are killed (last added first)."""
    _exit_hooks.append(fn)


def exit_on_sigterm(code):
    """Makes SIGTERM (the runner's timeout) exit with code through the
    normal exit path, so that finally blocks and the at-exit cleanup run."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(code))


def track(proc):
    """Remembers a process to kill (by PID) at exit; returns it."""
    _procs.append(proc)
    return proc


def spawn(argv, log, env=None, header=None, stdin=None):
    """Starts argv with stdout and stderr appended to the file log (after
    the line header, when given) and tracks it; returns the Popen."""
    logf = open(log, "ab")
    try:
        if header is not None:
            logf.write(header.encode())
            logf.flush()
        return track(subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                                      stdin=stdin, env=env))
    finally:
        logf.close()


def stop_process(proc, sig=signal.SIGTERM, timeout=10):
    """Sends sig to proc by PID when it still runs and reaps it, with
    SIGKILL after timeout seconds; returns its exit status."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def wait_up(proc, probe, secs, step, errors=(OSError,)):
    """Calls probe() every step seconds until it returns without raising
    one of errors.  Returns "up" then, "exited" as soon as proc has
    exited, or "timeout" after secs seconds."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if proc.poll() is not None:
            return "exited"
        try:
            probe()
            return "up"
        except errors:
            time.sleep(step)
    return "timeout"


WAIT_S = 30.0  # what a wait allows before it gives up: bounds a hang only


def wait_for(pred, timeout=WAIT_S, step=0.02, errors=(OSError, RespError, ConnectionError)):
    """Calls pred() every step seconds until it returns a true value, and
    returns that value; the last (false) value after timeout seconds.  A
    call that raises one of errors counts as false.  Giving up is noted on
    stderr, so that a wait that costs its whole timeout shows in the log."""
    end = time.monotonic() + timeout
    while True:
        try:
            v = pred()
        except errors:
            v = None
        if v:
            return v
        if time.monotonic() >= end:
            code = getattr(pred, "__code__", None)
            sys.stderr.write("# wait_for: gave up after %g s (%s)\n" % (
                timeout, "%s:%d" % (os.path.basename(code.co_filename), code.co_firstlineno)
                if code else pred))
            return v
        time.sleep(step)


def wait_log(path, regex, timeout=WAIT_S, start=0, count=1):
    """Waits until the file path holds count lines matching regex (from
    character start on); returns the last match, None on timeout."""
    rx = re.compile(regex, re.M)

    def found():
        ms = list(rx.finditer(read_log(path)[start:]))
        return ms[count - 1] if len(ms) >= count else None
    return wait_for(found, timeout)


def info_field(port, field, host="127.0.0.1"):
    """The value (a str) of field in fenced's INFO on port, None when it
    is not there."""
    r = Resp(host, port, timeout=5)
    try:
        text = r.call("INFO")
    finally:
        r.close()
    text = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep and k == field:
            return v.strip()
    return None


def wait_info(port, field, value, timeout=WAIT_S, host="127.0.0.1"):
    """Waits until INFO's field on port equals value (compared as str) or,
    when value is callable, until value(field's str) is true; returns
    whether it did."""
    def ok():
        v = info_field(port, field, host)
        if v is None:
            return False
        return value(v) if callable(value) else v == str(value)
    return bool(wait_for(ok, timeout))


def wait_exit(proc, timeout=WAIT_S):
    """Waits until proc (a Popen) has exited; its status, None on timeout."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def read_log(path, tail=None):
    """A log file's text (its last tail characters when given), "" when
    it cannot be read."""
    try:
        with open(path, "r", errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return text if tail is None else text[-tail:]


def _cleanup():
    """Kills every process started (by PID), runs the exit hooks and
    removes the temp dirs (unless KEEP_TMP=1)."""
    for p in _procs:
        if p.poll() is None:
            try:
                p.kill()
                p.wait(timeout=10)
            except Exception:  # noqa: BLE001 - clean up what we can
                pass
    for hook in reversed(_exit_hooks):
        try:
            hook()
        except Exception:  # noqa: BLE001
            pass
    for path in _tmp_dirs:
        remove_tmp(path)


atexit.register(_cleanup)
