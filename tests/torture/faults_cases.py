#!/usr/bin/python3
"""Tests of fence-faults, the torture harness's TCP fault proxy, against a
small echo server: plain forwarding, delay, partition and heal, reset, and
bad control input.  Timing checks are only lower bounds (a delay of D ms
never answers sooner than D), never upper bounds."""

import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fencetest import Tap, binary, free_port  # noqa: E402

PROXY = binary("fence-faults")
T = Tap()
report = T.check  # report(ok, name): one "ok - name" / "not ok - name" line


def echo_server():
    """Starts a threaded echo server on a free port; returns the port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)

    def serve(c):
        with c:
            while True:
                try:
                    d = c.recv(65536)
                except OSError:
                    return
                if not d:
                    return
                c.sendall(d)

    def accept():
        while True:
            c, _ = srv.accept()
            threading.Thread(target=serve, args=(c,), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    return srv.getsockname()[1]


def main():
    if not os.access(PROXY, os.X_OK):
        print("not ok - %s is missing" % PROXY)
        return 1
    eport = echo_server()
    pport = free_port()
    p = subprocess.Popen([PROXY, str(pport), "127.0.0.1", str(eport)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        report(p.stdout.readline().startswith("ok listening"), "proxy starts and says so")

        def ctl(line):
            p.stdin.write(line + "\n")
            p.stdin.flush()
            return p.stdout.readline().strip()

        c = socket.create_connection(("127.0.0.1", pport), timeout=5)
        c.sendall(b"hello")
        report(c.recv(100) == b"hello", "bytes are forwarded both ways")
        big = os.urandom(3 * 1024 * 1024)
        got = bytearray()
        t = threading.Thread(target=c.sendall, args=(big,))
        t.start()
        while len(got) < len(big):
            d = c.recv(1 << 20)
            if not d:
                break
            got += d
        t.join()
        report(bytes(got) == big, "3 MiB pass through intact (bounded queues, back-pressure)")

        report(ctl("delay 300") == "ok delay 300", "delay command acknowledged")
        t0 = time.monotonic()
        c.sendall(b"x")
        r = c.recv(10)
        el = time.monotonic() - t0
        report(r == b"x" and el >= 0.55, "delayed data arrives, no sooner than the delay each way (%.0f ms)"
               % (el * 1000))
        report(ctl("heal") == "ok heal", "heal acknowledged")

        report(ctl("partition") == "ok partition", "partition acknowledged")
        c.settimeout(0.5)
        c.sendall(b"during")
        try:
            c.recv(10)
            report(False, "nothing arrives during a partition")
        except socket.timeout:
            report(True, "nothing arrives during a partition")
        c2 = socket.create_connection(("127.0.0.1", pport), timeout=5)
        c2.settimeout(0.3)
        c2.sendall(b"new")
        try:
            c2.recv(10)
            report(False, "a new connection is black-holed too")
        except socket.timeout:
            report(True, "a new connection is black-holed too")
        ctl("heal")
        c.settimeout(5)
        c2.settimeout(5)
        report(c.recv(10) == b"during", "held data is delivered after heal (like a healed partition)")
        report(c2.recv(10) == b"new", "the new connection connects upstream after heal")

        report(ctl("reset") == "ok reset", "reset acknowledged")
        try:
            d = c.recv(10)
            report(d == b"", "reset closes existing connections")
        except ConnectionResetError:
            report(True, "reset closes existing connections")
        c3 = socket.create_connection(("127.0.0.1", pport), timeout=5)
        c3.sendall(b"again")
        report(c3.recv(10) == b"again", "new connections work after a reset")
        report(ctl("bogus command").startswith("err"), "an unknown control command gets an error line")
        report(ctl("quit") == "ok quit" and p.wait(timeout=5) == 0, "quit exits cleanly")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    r = subprocess.run([PROXY, "nope", "127.0.0.1", "1"], capture_output=True, text=True)
    report(r.returncode == 2 and "bad listen port" in r.stderr, "a bad port is refused with a message")
    return 1 if T.failed else 0


if __name__ == "__main__":
    sys.exit(main())
