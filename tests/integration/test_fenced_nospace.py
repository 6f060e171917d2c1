#!/usr/bin/python3
"""A full disk: fenced names it, at start-up and when a write fails.

Each fenced runs on a small tmpfs of its own, mounted in a private mount
namespace (unshare -m), so the mount disappears with the process.  Needs
root (or CAP_SYS_ADMIN) and util-linux's unshare; skipped otherwise.

1. A data dir whose file system cannot hold one raft log segment (4 MiB
   free, a segment is 8 MiB): fenced refuses to start, exit status 1, and
   says so ("no space left for the raft log", with the sizes).
2. 12 MiB free: fenced starts with a warning (less than 3 segments), and
   once the first segment is full the next one cannot be preallocated;
   the failed append is logged as "no space left on device" (libraft 0.15
   calls RAFT_NOSPACE "unknown error (22)") and fenced aborts (crash-stop).
"""
import os
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fencetest import (BUILD, Tap, encode_command, exit_on_sigterm, free_port,  # noqa: E402
                       make_tmp, read_log, skip, spawn, stop_process, wait_port)

FENCED = os.path.join(BUILD, "fenced")
TMP = make_tmp("fence-nospace.")
exit_on_sigterm(1)
# mount the tmpfs at $1, then exec the rest of the arguments
MOUNT_AND_EXEC = 'mnt=$1; size=$2; shift 2; mount -t tmpfs -o "size=$size" tmpfs "$mnt" && exec "$@"'


def in_tmpfs(mnt, size, argv):
    """argv run in a private mount namespace with a tmpfs of size at mnt."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", MOUNT_AND_EXEC,
            "sh", mnt, size] + argv


def can_mount():
    """Whether this process may mount a tmpfs in a private namespace."""
    if shutil.which("unshare") is None:
        return False
    probe = os.path.join(TMP, "probe")
    os.makedirs(probe, exist_ok=True)
    try:
        r = subprocess.run(in_tmpfs(probe, "1m", ["true"]), capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def fenced_argv(port, data):
    """A single-node fenced on port with its data dir data."""
    return [FENCED, "--port", str(port), "--bind", "127.0.0.1", "--data-dir", data,
            "--log-level", "info"]


def too_small(t):
    """Case 1: refuse to start."""
    mnt = os.path.join(TMP, "small")
    os.makedirs(mnt)
    log = os.path.join(TMP, "small.log")
    p = spawn(in_tmpfs(mnt, "4m", fenced_argv(free_port(), os.path.join(mnt, "data"))), log)
    try:
        rc = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        rc = stop_process(p)
    text = read_log(log)
    t.eq(1, rc, "fenced refuses to start on a data dir that cannot hold a log segment", text)
    t.check("no space left for the raft log" in text and "8388608" in text,
            "...and says why, with the segment size", text)


def fills_up(t):
    """Case 2: start with a warning, then abort with the right words."""
    mnt = os.path.join(TMP, "tight")
    os.makedirs(mnt)
    log = os.path.join(TMP, "tight.log")
    port = free_port()
    p = spawn(in_tmpfs(mnt, "12m", fenced_argv(port, os.path.join(mnt, "data"))), log)
    if not t.check(wait_port(port, 15), "fenced starts with 12 MiB free", read_log(log)):
        return
    t.check("only" in read_log(log) and "bytes free" in read_log(log),
            "...with a warning about the free space", read_log(log))
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    name = "n" * 250
    end = time.monotonic() + 60
    lease = None
    while lease is None and time.monotonic() < end:
        s.sendall(encode_command("LEASE.GRANT", 600000))
        r = s.recv(100)
        if r.startswith(b":"):
            lease = int(r[1:].split(b"\r\n")[0])
        else:
            time.sleep(0.05)
    t.check(lease is not None, "a lease is granted")
    s.sendall(encode_command("LOCK", name, lease))
    s.recv(100)
    # Every further LOCK of the held name by another lease is refused (nil)
    # but still written to the log: about 300 bytes each.
    batch = encode_command("LOCK", name, lease + 1) * 500
    sent = 0
    s.settimeout(2)
    try:
        while p.poll() is None and time.monotonic() < end and sent < 200000:
            s.sendall(batch)
            sent += 500
            try:
                s.recv(1 << 20)  # drain some replies; the rest stay queued
            except socket.timeout:
                pass
    except OSError:
        pass
    s.close()
    try:
        rc = p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        rc = stop_process(p)
    text = read_log(log)
    t.note("%d commands sent" % sent)
    t.check(rc != 0, "fenced stops (crash-stop) once the disk is full (status %d)" % rc)
    t.check("no space left on device" in text,
            "the failed write is logged as 'no space left on device'", text[-2000:])
    t.check("unknown error" not in text, "...not as 'unknown error'", text[-2000:])


def main():
    t = Tap()
    if not os.path.exists(FENCED):
        skip("%s is not built" % FENCED)
    if not can_mount():
        skip("cannot mount a tmpfs in a private mount namespace (needs root and unshare)")
    too_small(t)
    fills_up(t)
    t.finish()


if __name__ == "__main__":
    main()
