#!/usr/bin/python3
"""fence-proxy's budgets (issue 18, section 2), in front of a real nginx:

- memory: 64 clients each PUT a 15 MB body at once.  Without a budget the
  proxy went from 8 MB to about 1 GB (1.8 GB measured here); with the
  default --max-conn-memory (256m) and with 64m, its peak RSS (VmHWM from
  /proc) stays near the budget, every client gets an answer or a reset
  (none hangs), the memory is given back, and a small write is served
  afterwards;
- idle sockets: 1,100 idle connections against the default
  --max-connections (1024) locked every client out for 10 s; now a new
  client is served at once (the quietest idle connection makes room), and
  a connection with a request in flight is never the one closed.
"""
# serial: measures memory and time under load
import os
import resource
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_proxy_lib import (Nginx, Proxy, SlowUpstream, Tap, fenced_headers,  # noqa: E402
                            free_port, make_tmp, need_nginx, need_proxy, request, wait_port)
from fencetest import run_group  # noqa: E402

need_proxy()
need_nginx()
tap = Tap()
TMP = make_tmp("fence-proxy-budget.")
MB = 1024 * 1024


def status_mb(pid, key):
    """A VmXXX line of /proc/pid/status, in MB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024
    return -1


def big_bodies(ng, name, args, peak_max, clients=64, size=15 * MB):
    px = Proxy(TMP, ng.port, name=name, args=list(args) + ["--restart-hold-ms", "0"]).start()
    try:
        pid = px.proc.pid
        body = b"b" * size
        results = []
        mu = threading.Lock()

        def one(i):
            try:
                st, _, _ = request(px.port, "PUT", "/%s/%d" % (name, i), body,
                                   fenced_headers("%s-%d" % (name, i), 1), timeout=60)
                r = st
            except OSError as e:  # reset, broken pipe: refused past the budget
                r = type(e).__name__
            with mu:
                results.append(r)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        took = time.monotonic() - t0
        peak = status_mb(pid, "VmHWM")
        ok = sum(1 for r in results if r in (201, 204))
        busy = sum(1 for r in results if r == 503)
        tap.note("%s: %d clients x %d MB in %.1f s: %d written, %d 503, %d reset; peak RSS %d MB"
                 % (name, clients, size // MB, took, ok, busy, len(results) - ok - busy, peak))
        tap.eq(clients, len(results), "%s: every client got an answer or a reset" % name)
        tap.check(all(r in (201, 204, 503, "ConnectionResetError", "BrokenPipeError",
                            "RemoteDisconnected") for r in results),
                  "%s: answers are 201/204, 503 or a reset (no timeout)" % name, results)
        tap.check(peak <= peak_max, "%s: peak RSS %d MB <= %d MB" % (name, peak, peak_max))
        st, _, _ = request(px.port, "PUT", "/%s/small" % name, b"s",
                           fenced_headers(name + "-small", 1))
        tap.check(st in (201, 204), "%s: a small write afterwards is served (%d)" % (name, st))
        deadline = time.monotonic() + 10
        rss = status_mb(pid, "VmRSS")
        while rss > 128 and time.monotonic() < deadline:
            time.sleep(0.1)
            rss = status_mb(pid, "VmRSS")
        tap.check(rss <= 128, "%s: memory is given back (RSS %d MB)" % (name, rss))
        tap.check(px.alive(), "%s: the proxy is up" % name, px.log_text())
    finally:
        px.stop()


def test_memory(ng):
    big_bodies(ng, "default", [], 512)
    big_bodies(ng, "m64", ["--max-conn-memory", "64m"], 192)


def test_idle(ng):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2500 and hard >= 2500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (2500, hard))
    mport = free_port()
    px = Proxy(TMP, ng.port, name="idle", args=["--restart-hold-ms", "0",
                                                "--metrics-port", str(mport)]).start()
    socks = []
    try:
        for _ in range(1100):
            socks.append(socket.create_connection(("127.0.0.1", px.port)))
        t0 = time.monotonic()
        try:
            st, _, _ = request(px.port, "PUT", "/idle/after", b"x", fenced_headers("idle", 1),
                               timeout=15)
        except OSError as e:
            st = repr(e)
        took = time.monotonic() - t0
        tap.note("with 1100 idle connections open, a new PUT took %.3f s" % took)
        tap.check(st in (201, 204) and took < 2.0,
                  "1100 idle connections do not lock a new client out (%s in %.2f s)" % (st, took))
        st, _, body = request(px.port, "GET", "/idle/after", timeout=15)
        tap.eq((200, b"x"), (st, body), "and the next one is served too")
        wait_port(mport)
        _, _, text = request(mport, "GET", "/metrics", timeout=10)
        closed = [ln for ln in text.decode().splitlines()
                  if ln.startswith('fence_proxy_connections_closed_total{reason="room"}')]
        tap.check(closed and int(float(closed[0].split()[-1])) >= 70,
                  "fence_proxy_connections_closed_total{reason=\"room\"} counts them", closed)
        tap.check(px.alive(), "the proxy is up", px.log_text())
    finally:
        for s in socks:
            s.close()
        px.stop()


def test_busy_not_evicted():
    up = SlowUpstream()
    px = Proxy(TMP, up.port, name="busy", args=["--max-connections", "3",
                                                "--restart-hold-ms", "0"]).start()
    socks = []
    try:
        result = {}

        def slow():
            result["r"] = request(px.port, "PUT", "/slow", b"slow",
                                  dict(fenced_headers("busy", 1), **{"X-Sleep-Ms": "1500"}),
                                  timeout=20)

        t = threading.Thread(target=slow)
        t.start()
        deadline = time.monotonic() + 5
        while not any(e[0] == "start" for e in up.snapshot()) and time.monotonic() < deadline:
            time.sleep(0.01)
        for _ in range(4):
            socks.append(socket.create_connection(("127.0.0.1", px.port)))
        st, _, _ = request(px.port, "GET", "/fast", timeout=10)
        tap.eq(200, st, "with the table full, a new client is served")
        t.join(20)
        tap.eq(200, result.get("r", (None,))[0],
               "the connection with a request in flight was not closed to make room")
    finally:
        for s in socks:
            s.close()
        px.stop()
        up.close()


def main():
    ng = Nginx(TMP).start()
    run_group(tap, test_idle, ng)
    run_group(tap, test_busy_not_evicted)
    run_group(tap, test_memory, ng)
    ng.stop()
    tap.finish()


if __name__ == "__main__":
    main()
