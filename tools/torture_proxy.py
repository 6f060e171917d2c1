#!/usr/bin/python3
"""fence-torture --proxy: the torture harness's proxy mode (issue 10).

It starts fenced, a real nginx (WebDAV PUT, its own config in the run
directory, 127.0.0.1, free ports) and fence-proxy in front of it, then N
workers (this file with --worker, one process each).  A worker loops:

    LEASE.GRANT ttl; LOCK counter lease WAIT     (fenced: a token)
    GET  /counter.txt with the token             (admit, then read)
    hold a little (the nemesis may pause it here)
    PUT  /counter.txt value+1 with the token     (the write)
    UNLOCK, LEASE.REVOKE

and writes every step into its history file (the same JSON-lines events as
fence-torture-worker: grant, lock, admit, write, unlock).  The nemesis
SIGSTOPs a worker inside its critical section for 1.5-3 TTLs (the seed's
pause: its lease expires, another worker takes the lock and writes), or
(--kill-pct of the faults) kills the proxy with SIGKILL and restarts it on
the same data dir, at random intervals drawn from the seed.  At the end the counter is read
straight from nginx, and the history checker (tools/torture_check.py) runs
over everything: fence-order and lost-update find nothing when the workers
go through the proxy.

--direct is the control: the workers talk straight to nginx (no token is
checked) and the checker must find lost updates (use --expect-violation).
"""

import argparse
import http.client
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import torture_check  # noqa: E402
import torture_common as tc  # noqa: E402

NGINX_CONF = """daemon off;
master_process off;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/nginx-error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(d)s/nginx-tmp/body;
    proxy_temp_path %(d)s/nginx-tmp/proxy;
    fastcgi_temp_path %(d)s/nginx-tmp/fastcgi;
    uwsgi_temp_path %(d)s/nginx-tmp/uwsgi;
    scgi_temp_path %(d)s/nginx-tmp/scgi;
    server {
        listen 127.0.0.1:%(port)d;
        root %(d)s/www;
        location / { dav_methods PUT DELETE; }
    }
}
"""


def log(msg):
    """Prints a progress line with a wall-clock stamp."""
    print("[torture-proxy %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


# ---- the worker -----------------------------------------------------------

def http_call(port, method, path, body, headers, timeout):
    """One request on a new connection; (status, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()


def worker(a):
    """The worker loop (runs until SIGTERM)."""
    rnd = random.Random(a.seed * 1000 + a.id)
    hist = tc.HistoryWriter(a.history, "w%d" % a.id)
    state = a.state
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    fenced = None
    path = "/counter.txt"
    while True:
        if fenced is None:
            try:
                fenced = tc.Resp("127.0.0.1", a.fenced_port, timeout=10)
            except OSError:
                time.sleep(0.1)
                continue
        n = hist.event("grant", "invoke", ttl=a.ttl_ms)
        try:
            lease = fenced.call("LEASE.GRANT", a.ttl_ms)
            hist.event("grant", "ok", n=n, lease=lease, ttl=a.ttl_ms)
        except (tc.RespError, OSError, ConnectionError) as e:
            hist.event("grant", "info", n=n, err=str(e))
            fenced = None
            time.sleep(0.1)
            continue
        n = hist.event("lock", "invoke", lock="counter", lease=lease, wait=a.wait_ms)
        try:
            token = fenced.call("LOCK", "counter", lease, "WAIT", a.wait_ms)
        except (tc.RespError, OSError, ConnectionError) as e:
            hist.event("lock", "info", n=n, err=str(e))
            fenced = None
            continue
        if token is None:
            hist.event("lock", "fail", n=n, err="wait timed out")
            continue
        hist.event("lock", "ok", n=n, lock="counter", lease=lease, token=token)
        h = {"Fencing-Lock": "counter", "Fencing-Token": str(token)}
        with open(state, "w") as f:
            f.write("hold")
        n = hist.event("admit", "invoke", fence="counter", token=token)
        try:
            st, body = http_call(a.port, "GET", path, None, h, 10)
        except OSError as e:
            hist.event("admit", "info", n=n, err=str(e))
            st = None
        value = None
        if st == 200:
            value = int(body.decode() or "0")
        elif st == 404:
            value = 0
        elif st == 409:
            hist.event("admit", "fail", n=n, stale=True, err=body.decode(errors="replace")[:120])
        elif st is not None:
            hist.event("admit", "fail", n=n, err="HTTP %d" % st)
        if value is not None:
            hist.event("admit", "ok", n=n, fence="counter", token=token, read=value)
            time.sleep(rnd.uniform(0, a.hold_max_ms) / 1000.0)
            n = hist.event("write", "invoke", fence="counter", token=token, key="counter",
                           value=value + 1, read=value)
            try:
                st, body = http_call(a.port, "PUT", path, str(value + 1).encode(), h, 10)
                if st in (200, 201, 204):
                    hist.event("write", "ok", n=n, fence="counter", token=token, key="counter",
                               value=value + 1, read=value)
                elif st == 409:
                    hist.event("write", "fail", n=n, stale=True, err=body.decode(errors="replace")[:120])
                else:
                    # 5xx from the proxy: outcome unknown at the upstream.
                    hist.event("write", "info", n=n, err="HTTP %d" % st)
            except OSError as e:
                hist.event("write", "info", n=n, err=str(e))
        with open(state, "w") as f:
            f.write("idle")
        n = hist.event("unlock", "invoke", token=token)
        try:
            r = fenced.call("UNLOCK", "counter", token)
            hist.event("unlock", "ok", n=n, token=token, released=r)
            fenced.call("LEASE.REVOKE", lease)
        except (tc.RespError, OSError, ConnectionError) as e:
            hist.event("unlock", "info", n=n, err=str(e))
            fenced = None


# ---- the orchestrator -----------------------------------------------------

class Proc:
    """A process we start and stop by PID."""

    def __init__(self, name, argv, logpath):
        self.name = name
        logf = open(logpath, "a")
        self.p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        logf.close()

    def stop(self, sig=signal.SIGTERM):
        if self.p.poll() is None:
            try:
                self.p.send_signal(signal.SIGCONT)
                self.p.send_signal(sig)
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def run(a):
    """One run; returns the process exit status."""
    rnd = random.Random(a.seed)
    out = a.out or tempfile.mkdtemp(prefix="fence-torture-proxy.")
    os.makedirs(out, exist_ok=True)
    os.makedirs(os.path.join(out, "www"), exist_ok=True)
    os.makedirs(os.path.join(out, "nginx-tmp"), exist_ok=True)
    procs = []
    try:
        fport, nport, pport = tc.free_port(), tc.free_port(), tc.free_port()
        fd = Proc("fenced", [a.fenced, "--port", str(fport), "--data-dir", os.path.join(out, "fenced")],
                  os.path.join(out, "fenced.log"))
        procs.append(fd)
        with open(os.path.join(out, "nginx.conf"), "w") as f:
            f.write(NGINX_CONF % {"d": out, "port": nport})
        ng = Proc("nginx", [a.nginx, "-p", out, "-c", os.path.join(out, "nginx.conf")],
                  os.path.join(out, "nginx.log"))
        procs.append(ng)
        px_argv = [a.proxy_bin, "--listen", "127.0.0.1:%d" % pport,
                   "--upstream", "http://127.0.0.1:%d" % nport,
                   "--data-dir", os.path.join(out, "proxy"), "--restart-hold-ms", "300"]
        px = Proc("fence-proxy", px_argv, os.path.join(out, "proxy.log"))
        procs.append(px)
        if not (tc.wait_port(fport) and tc.wait_port(nport) and tc.wait_port(pport)
                and tc.wait_fenced_ready(fport)):
            log("a server did not start; see %s" % out)
            return 2
        target = nport if a.direct else pport
        hist = tc.HistoryWriter(os.path.join(out, "nemesis.jsonl"), "nemesis")
        hist.event("meta", "ok", n=0, seed=a.seed, ttl=a.ttl_ms, hold_max=a.hold_max_ms,
                   slack_ms=100, counter="counter", mode="direct" if a.direct else "proxy")
        workers = []
        for i in range(a.workers):
            st = os.path.join(out, "w%d.state" % i)
            with open(st, "w") as f:
                f.write("idle")
            w = Proc("w%d" % i, [sys.executable, os.path.realpath(__file__), "--worker",
                                 "--id", str(i), "--seed", str(a.seed),
                                 "--history", os.path.join(out, "w%d.jsonl" % i),
                                 "--state", st, "--fenced-port", str(fport), "--port", str(target),
                                 "--ttl-ms", str(a.ttl_ms), "--wait-ms", str(a.wait_ms),
                                 "--hold-max-ms", str(a.hold_max_ms)],
                     os.path.join(out, "w%d.log" % i))
            w.state = st
            workers.append(w)
            procs.append(w)
        log("%s mode, %d workers, %d s, seed %d, run dir %s"
            % ("direct (control)" if a.direct else "proxy", a.workers, a.duration, a.seed, out))
        end = time.monotonic() + a.duration
        pauses = 0
        kills = 0
        # A quiet period at the end for the checker's liveness bound.
        quiet = (a.ttl_ms + a.hold_max_ms + 2500) / 1000.0
        while time.monotonic() + 3.0 * a.ttl_ms / 1000.0 < end - quiet:
            time.sleep(rnd.uniform(0.3, 1.2) * a.interval_ms / 1000.0)
            if not a.direct and rnd.random() < a.kill_pct / 100.0:
                # kill -9 the proxy and restart it on the same data dir.
                n = hist.event("fault", "start", kind="kill-proxy", target="fence-proxy")
                px.stop(signal.SIGKILL)
                procs.remove(px)
                time.sleep(rnd.uniform(0.05, 0.3))
                px = Proc("fence-proxy", px_argv, os.path.join(out, "proxy.log"))
                procs.append(px)
                up = tc.wait_port(pport)
                hist.event("fault", "end", n=n, kind="kill-proxy", target="fence-proxy", up=up)
                kills += 1
                continue
            holders = [w for w in workers if open(w.state).read() == "hold"]
            if not holders:
                continue
            w = rnd.choice(holders)
            dur = rnd.uniform(1.5, 3.0) * a.ttl_ms / 1000.0
            n = hist.event("fault", "start", kind="pause-holder", target=w.name, ms=int(dur * 1000))
            os.kill(w.p.pid, signal.SIGSTOP)
            time.sleep(dur)
            os.kill(w.p.pid, signal.SIGCONT)
            hist.event("fault", "end", n=n, kind="pause-holder", target=w.name)
            pauses += 1
        time.sleep(max(0.0, end - time.monotonic()))
        hist.event("stop", "ok")
        for w in workers:
            w.stop()
        final = tc.HistoryWriter(os.path.join(out, "final.jsonl"), "final")
        try:
            st, body = http_call(nport, "GET", "/counter.txt", None, {}, 10)
            final.event("read", "ok", key="counter", value=int(body.decode() or "0") if st == 200 else 0)
        except (OSError, ValueError) as e:
            final.event("read", "fail", key="counter", err=str(e))
        final.close()
        hist.close()
        files = [os.path.join(out, f) for f in sorted(os.listdir(out)) if f.endswith(".jsonl")]
        events = tc.read_history(files)
        res = torture_check.check(events)
        torture_check.report(res)
        torture_check.summary_table(res, title="torture proxy summary (%s)"
                                    % ("direct" if a.direct else "proxy"))
        kinds = sorted(set(v.kind for v in res.violations))
        log("%d pauses, %d proxy kills; violations: %s" % (pauses, kills, ", ".join(kinds) or "none"))
        if a.expect_violation:
            ok = bool(res.violations)
        else:
            ok = not res.violations
        if ok and not a.out and not a.keep:
            shutil.rmtree(out, ignore_errors=True)
        else:
            log("histories and logs kept in %s" % out)
        return 0 if ok else 1
    finally:
        for p in reversed(procs):
            p.stop()


def main(argv=None):
    here = tc.tool_dir()
    ap = argparse.ArgumentParser(description="fence-torture's proxy mode: read-modify-write through "
                                 "fence-proxy to nginx under pauses, then the history checker.")
    ap.add_argument("--proxy", action="store_true", help="(the mode switch fence-torture passes on)")
    ap.add_argument("--direct", action="store_true", help="control: workers talk straight to nginx")
    ap.add_argument("--expect-violation", action="store_true", help="succeed only if the checker "
                    "finds a violation (the control)")
    ap.add_argument("--duration", type=int, default=10, help="seconds (default 10)")
    ap.add_argument("--workers", type=int, default=4, help="workers (default 4)")
    ap.add_argument("--seed", type=int, default=None, help="fault schedule seed (default: random)")
    ap.add_argument("--ttl-ms", type=int, default=1000, help="lease TTL (default 1000)")
    ap.add_argument("--wait-ms", type=int, default=5000, help="LOCK WAIT (default 5000)")
    ap.add_argument("--hold-max-ms", type=int, default=100, help="longest hold in a worker (default 100)")
    ap.add_argument("--interval-ms", type=int, default=1000, help="mean time between pauses (default 1000)")
    ap.add_argument("--kill-pct", type=int, default=20, help="percent of faults that kill -9 and "
                    "restart the proxy instead of pausing a holder (default 20; never with --direct)")
    ap.add_argument("--out", help="keep histories and logs in this directory")
    ap.add_argument("--keep", action="store_true", help="keep the temp run dir")
    ap.add_argument("--bin-dir", default=here, help="where fenced and fence-proxy are")
    ap.add_argument("--nginx", default=shutil.which("nginx") or "/usr/sbin/nginx")
    # Worker side (internal).
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--id", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--history", help=argparse.SUPPRESS)
    ap.add_argument("--state", help=argparse.SUPPRESS)
    ap.add_argument("--fenced-port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.seed is None:
        a.seed = random.randrange(1, 1 << 30)
    if a.worker:
        worker(a)
        return 0
    a.fenced = os.path.join(a.bin_dir, "fenced")
    a.proxy_bin = os.path.join(a.bin_dir, "fence-proxy")
    for exe in (a.fenced, a.proxy_bin, a.nginx):
        if not os.access(exe, os.X_OK):
            print("torture-proxy: %s not found (build it, or scripts/deps.sh test for nginx)" % exe,
                  file=sys.stderr)
            return 2
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
