#!/usr/bin/python3
"""kill -9 of fence-proxy under load: 16 clients PUT through it to nginx,
each on its own fence with a rising token (so every request raises the
mark: an fsync, group-committed), while the proxy is killed with SIGKILL
twice and restarted on the same data dir.  Afterwards, for every fence:

- the mark survived: a token below the highest acknowledged one is refused
  (409) with a Fencing-Highest of at least that token;
- nothing acknowledged is lost: nginx's file holds the write of the
  highest acknowledged token or of a later one;
- after the restart, fenced requests on fences that had a mark wait
  --restart-hold-ms (the killed process's requests may still be at the
  upstream); a new fence is served at once.
"""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_proxy_lib import (Nginx, Proxy, Tap, fenced_headers, make_tmp,  # noqa: E402
                            need_nginx, need_proxy, request)

need_proxy()
need_nginx()
tap = Tap()
TMP = make_tmp("fence-proxy-crash.")
CLIENTS = 16


def main():
    ng = Nginx(TMP).start()
    px = Proxy(TMP, ng.port, args=["--restart-hold-ms", "300"]).start()
    acked = {}          # fence -> highest token acknowledged (2xx)
    tried = {}          # fence -> highest token sent
    stop = threading.Event()
    mu = threading.Lock()
    bad = []

    def client(i):
        fence = "crash%d" % i
        token = 0
        while not stop.is_set():
            token += 1
            with mu:
                tried[fence] = token
            try:
                st, _, _ = request(px.port, "PUT", "/c/%s.txt" % fence,
                                   ("%s-%d" % (fence, token)).encode(),
                                   fenced_headers(fence, token), timeout=5)
            except OSError:
                time.sleep(0.02)  # proxy down: retry with a newer token
                continue
            with mu:
                if st in (201, 204):
                    acked[fence] = max(acked.get(fence, 0), token)
                elif st != 409:
                    bad.append((fence, token, st))

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for th in threads:
        th.start()
    for _ in range(2):
        time.sleep(1.0)
        px.stop(signal.SIGKILL)
        time.sleep(0.2)
        px.start()
    time.sleep(0.8)
    px.stop(signal.SIGKILL)
    stop.set()
    for th in threads:
        th.join(10)
    px.start(extra=["--restart-hold-ms", "1500"])
    t0 = time.monotonic()
    st, _, _ = request(px.port, "PUT", "/c/new.txt", b"new", fenced_headers("brand-new", 1))
    t_new = time.monotonic() - t0
    st2, _, _ = request(px.port, "PUT", "/c/crash0.txt", b"crash0-%d" % (tried["crash0"] + 1),
                        fenced_headers("crash0", tried["crash0"] + 1))
    t_old = time.monotonic() - t0
    tap.check(st in (201, 204) and t_new < 1.0,
              "after the restart a fence without a mark is served at once (%.2f s)" % t_new)
    tap.check(st2 in (201, 204) and t_old >= 1.3,
              "a fence with a mark waits --restart-hold-ms (1.5 s) for what the killed process "
              "may have left at the upstream (%.2f s)" % t_old, st2)
    acked["crash0"] = tried["crash0"] + 1
    tap.eq([], bad, "every answer under load was 2xx or 409 (no 5xx)")
    tap.check(sum(acked.values()) > CLIENTS * 5, "clients got writes acknowledged (%d in all)"
              % sum(acked.values()))
    lost_marks, lost_writes = [], []
    for i in range(CLIENTS):
        fence = "crash%d" % i
        a = acked.get(fence, 0)
        if a < 2:
            continue
        st, hd, _ = request(px.port, "PUT", "/c/%s.txt" % fence, b"late",
                            fenced_headers(fence, a - 1))
        high = int(hd.get("fencing-highest", "0"))
        if st != 409 or high < a:
            lost_marks.append((fence, a, st, high))
        got = ng.file("c/%s.txt" % fence) or b""
        try:
            written = int(got.decode().rsplit("-", 1)[1])
        except (ValueError, IndexError):
            written = -1
        if written < a:
            lost_writes.append((fence, a, got))
    tap.eq([], lost_marks, "after 3 kill -9s every mark is at least the highest acknowledged token")
    tap.eq([], lost_writes, "no acknowledged write was lost (each file is that write or a later one)")
    tap.check(px.alive(), "the restarted proxy is up", px.log_text())
    px.stop()
    ng.stop()
    tap.finish()


if __name__ == "__main__":
    main()
