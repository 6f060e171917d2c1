#!/usr/bin/python3
"""fence-store with a small --max-pipeline under a long pipeline: when the
pipeline drains, the connection layer resumes parsing in the next loop
turn's idle phase, not inside the check callback that just committed the
batch.  Before, the resumed requests opened a batch after the commit, the
once-a-second flush timer found it open and fence-store aborted
("assertion failed: !s->open"; seen in test_tls.py's store_tls too).
"""
# serial: it runs past several flush-timer periods
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from fencetest import Tap, binary, free_port, make_tmp, read_log, spawn, stop_process, wait_up  # noqa: E402

FENCE_STORE = binary("fence-store", env="FENCE_STORE")
TMP = make_tmp("fence-pipe.")
N = 8000

t = Tap()
port = free_port()
log = os.path.join(TMP, "store.log")
proc = spawn([FENCE_STORE, "--port", str(port), "--data-dir", os.path.join(TMP, "data"),
              "--max-pipeline", "4"], log, stdin=subprocess.DEVNULL)
if wait_up(proc, lambda: socket.create_connection(("127.0.0.1", port), 0.2).close(),
           20, 0.05) != "up":
    raise RuntimeError("fence-store did not start: %s" % read_log(log))
s = socket.create_connection(("127.0.0.1", port), 5)
req = b"".join(b"*5\r\n$4\r\nFSET\r\n$1\r\nf\r\n$%d\r\n%d\r\n$1\r\nk\r\n$1\r\nv\r\n"
               % (len(str(i + 1)), i + 1) for i in range(N))
t0 = time.monotonic()
s.sendall(req)
s.settimeout(60)
buf = b""
try:
    while buf.count(b"\r\n") < N:
        d = s.recv(65536)
        if not d:
            break
        buf += d
except OSError:
    pass
secs = time.monotonic() - t0
t.eq(N, buf.count(b"+OK\r\n"), "%d pipelined FSETs with --max-pipeline 4 are all answered "
     "(%.1f s)" % (N, secs))
t.check(proc.poll() is None, "fence-store is still running",
        read_log(log, tail=300) if proc.poll() is not None else None)
t.check("assertion failed" not in read_log(log), "no assertion failed")
s.close()
t.eq(0, stop_process(proc), "clean exit")
t.finish()
