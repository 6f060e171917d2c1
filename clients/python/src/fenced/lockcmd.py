"""``fenced-lock NAME [options] -- CMD [ARGS...]``: hold a lock while CMD
runs, the Python equivalent of ``fencectl lock``.

CMD runs in its own process group with FENCE_TOKEN, FENCE_LEASE,
FENCE_LOCK and FENCE_SERVER in its environment; the lease is renewed every
third of its TTL.  When the lease is lost (NOLEASE, or no renewal before
valid_until - grace) CMD's process group gets SIGTERM and, ``--grace`` ms
later, SIGKILL (``--on-lost kill``: SIGKILL at once; ``ignore``: only
report).  Exit status as fencectl's: CMD's own (128+N for signal N), 64
usage, 69 unreachable (TRYAGAIN included), 75 not acquired within
``--wait``, 79 lease lost, 126/127 CMD not executable / not found.
"""
import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Dict, List, Optional, Sequence

from .client import Client, Lock, LockInfo
from .errors import (FencedError, LeaseLost, LimitReached, NotAcquired, Unreachable)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 64
EXIT_UNREACHABLE = 69
EXIT_NOT_ACQUIRED = 75
EXIT_LEASE_LOST = 79

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)


def exit_code(err: BaseException) -> int:
    """fencectl's exit status for an error."""
    if isinstance(err, NotAcquired):
        return EXIT_NOT_ACQUIRED
    if isinstance(err, LeaseLost):
        return EXIT_LEASE_LOST
    if isinstance(err, Unreachable):  # TryAgain is one
        return EXIT_UNREACHABLE
    if isinstance(err, LimitReached):
        return EXIT_ERROR
    return EXIT_ERROR


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 64 (EX_USAGE) on a usage error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        sys.stderr.write("fenced-lock: %s\n" % message)
        sys.exit(EXIT_USAGE)


def _parse(argv: Sequence[str]) -> argparse.Namespace:
    """Options before "--", CMD after it."""
    argv = list(argv)
    if "--" in argv:
        i = argv.index("--")
        opts, cmd = argv[:i], argv[i + 1:]
    else:
        opts, cmd = argv, []
    p = _Parser(prog="fenced-lock", description="Hold a fenced lock while CMD runs "
                "(the Python equivalent of `fencectl lock`).",
                usage="fenced-lock NAME [options] -- CMD [ARGS...]")
    p.add_argument("name", help="lock name")
    p.add_argument("--server", default=os.environ.get("FENCE_SERVER") or "127.0.0.1:7700",
                   help="fenced servers HOST:PORT[,HOST:PORT...] (default $FENCE_SERVER, "
                        "else 127.0.0.1:7700)")
    p.add_argument("--timeout", type=int, default=5000, metavar="MS",
                   help="per request, retries included, on top of --wait (default 5000)")
    p.add_argument("--ttl", type=int, default=10000, metavar="MS", help="lease TTL (10000)")
    p.add_argument("--wait", type=int, default=0, metavar="MS",
                   help="queue this long for a busy lock (default 0: try once)")
    p.add_argument("--on-lost", choices=("term", "kill", "ignore"), default="term",
                   help="what to do to CMD when the lease is lost (term)")
    p.add_argument("--grace", type=int, default=None, metavar="MS",
                   help="SIGTERM to SIGKILL delay, and how early before valid_until "
                        "CMD is stopped when renewals fail (default TTL/4)")
    p.add_argument("--tls", action="store_true", help="connect with TLS (--tls-port)")
    p.add_argument("--cacert", metavar="FILE", help="CA file for --tls (default: system CAs)")
    p.add_argument("--cert", metavar="FILE", help="client certificate for mutual TLS")
    p.add_argument("--key", metavar="FILE", help="its key")
    p.add_argument("--user", metavar="NAME",
                   help="log in as NAME; the password comes from $FENCE_PASSWORD")
    a = p.parse_args(opts)
    a.password = os.environ.get("FENCE_PASSWORD") or None
    if (a.cacert or a.cert or a.key) and not a.tls:
        p.error("--cacert, --cert and --key need --tls")
    if (a.cert is None) != (a.key is None):
        p.error("--cert and --key go together")
    if a.user and not a.password:
        p.error("--user needs the password in $FENCE_PASSWORD")
    if not cmd:
        p.error("no command given (put it after --)")
    if a.ttl < 10 or a.wait < 0 or a.timeout <= 0:
        p.error("--ttl must be >= 10, --wait >= 0, --timeout > 0")
    if a.grace is None:
        a.grace = a.ttl // 4
    a.grace = min(max(a.grace, 0), a.ttl // 4)
    a.cmd = cmd
    return a


def _killpg(pgid: int, sig: int) -> None:
    """Signal a process group, ignoring a group that is already gone."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _spawn(cmd: List[str], env: Dict[str, str]) -> "subprocess.Popen[bytes]":
    """Start CMD as the leader of a new process group."""
    if sys.version_info >= (3, 11):
        return subprocess.Popen(cmd, env=env, process_group=0)
    return subprocess.Popen(cmd, env=env, start_new_session=True)


def run(argv: Optional[Sequence[str]] = None) -> int:
    """Run fenced-lock with argv (default sys.argv[1:]); returns the exit
    status."""
    a = _parse(sys.argv[1:] if argv is None else argv)
    client = Client(a.server, timeout_ms=a.timeout, tls=a.tls, tls_ca_file=a.cacert,
                    tls_cert_file=a.cert, tls_key_file=a.key, username=a.user,
                    password=a.password)
    woke = threading.Event()

    def on_wait(info: Optional[LockInfo]) -> None:
        if sys.stderr.isatty():
            holder = ("held by lease %d" % info.lease) if info else "busy"
            sys.stderr.write("fenced-lock: waiting for lock %s %s (up to %d ms)\n"
                             % (a.name, holder, a.wait))
            sys.stderr.flush()

    lock = Lock(client, a.name, a.ttl, a.wait, on_lost=lambda *_: woke.set(),
                on_wait=on_wait, raise_on_lost=False)
    try:
        lock.acquire()
    except FencedError as e:
        sys.stderr.write("fenced-lock: %s\n" % e)
        return exit_code(e)
    env = dict(os.environ)
    env.update(FENCE_TOKEN=str(lock.token), FENCE_LEASE=str(lock.lease), FENCE_LOCK=a.name,
               FENCE_SERVER=a.server)
    try:
        child = _spawn(a.cmd, env)
    except OSError as e:
        lock.release()
        sys.stderr.write("fenced-lock: %s: %s\n" % (a.cmd[0], e.strerror))
        return 127 if isinstance(e, FileNotFoundError) else 126
    old = {}
    for s in FORWARDED:
        old[s] = signal.signal(s, lambda sig, _f: _killpg(child.pid, sig))
    lost = False
    term_at: Optional[float] = None
    try:
        while child.poll() is None:
            woke.wait(0.02)
            now = time.monotonic()
            if not lost and (lock.lost.is_set() or now >= lock.valid_until - a.grace / 1000.0):
                lost = True
                why = lock.lost_error or "no renewal succeeded in time"
                sys.stderr.write("fenced-lock: lease of lock %s lost (%s); %s\n" % (
                    a.name, why, {"term": "stopping the command", "kill": "killing the command",
                                  "ignore": "leaving the command running"}[a.on_lost]))
                if a.on_lost == "term":
                    _killpg(child.pid, signal.SIGTERM)
                    term_at = now
                elif a.on_lost == "kill":
                    _killpg(child.pid, signal.SIGKILL)
            if term_at is not None and now >= term_at + a.grace / 1000.0:
                _killpg(child.pid, signal.SIGKILL)
                term_at = None
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    rc = child.returncode
    status = 128 - rc if rc < 0 else rc
    try:
        lock.release()
    except FencedError as e:
        sys.stderr.write("fenced-lock: release: %s\n" % e)
    if lost or lock.lost.is_set():
        return EXIT_LEASE_LOST
    return status


def main() -> None:
    """Console entry point (``fenced-lock``)."""
    sys.exit(run())


if __name__ == "__main__":
    main()
