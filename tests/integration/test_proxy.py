#!/usr/bin/python3
"""fence-proxy in front of a real nginx (WebDAV PUT/DELETE, checks no
tokens), with tokens from a real fenced:

- basics: 409 STALE + Fencing-Highest, 428 without a token, per-route
  rules (reads unfenced; a strict route), GET with a token admitted like a
  write, the fencing headers stripped (or kept) on the way upstream;
- the seed's pause scenario: holder 1 gets a token from fenced, is paused
  (SIGSTOP) past its lease, holder 2 gets a higher token and PUTs, holder 1
  resumes and PUTs: 409 and nginx keeps holder 2's content; the same run
  straight to nginx loses holder 2's write;
- 64 concurrent clients on many fences (own fences and shared ones): every
  answer is 2xx or 409, and each shared file holds the write of the highest
  token admitted (the ordering rule under load);
- options: --help, --version, bad flags (exit 2), a --config file, the
  --log-file reopened on SIGHUP; an unreachable upstream (502, the mark
  raised anyway);
- bad input (huge headers, a token that is not a number, 2^64, a missing or
  empty fence name, repeated headers, a body over the limit, a garbage
  request line, slowloris, too many connections: the quietest idle one is closed to
  make room): clear errors, the proxy stays up.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_proxy_lib import (PROXY, Nginx, Proxy, SlowUpstream, Tap, binary,  # noqa: E402
                            fenced_headers, free_port, make_tmp, need_nginx, need_proxy,
                            raw_exchange, read_log, request, run_threads, spawn,
                            stop_process, wait_port)
from fencetest import wait_for  # noqa: E402

need_proxy()
need_nginx()
tap = Tap()
TMP = make_tmp("fence-proxy-test.")

HOLDER = r"""
import http.client, sys, time
import redis
fport, lock, ttl, port, path, content, delay, fenced = sys.argv[1:9]
r = redis.Redis(host="127.0.0.1", port=int(fport), decode_responses=True)
token, lease = r.execute_command("ACQUIRE", lock, int(ttl), "WAIT", 10000)
print("token", token, flush=True)
time.sleep(float(delay))
h = {"Fencing-Lock": lock, "Fencing-Token": str(token)} if fenced == "1" else {}
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
c.request("PUT", path, body=content.encode(), headers=h)
resp = c.getresponse()
print("status", resp.status, resp.read().decode().strip(), flush=True)
"""


def test_basics(ng, px):
    st, hd, _ = request(px.port, "PUT", "/basic.txt", b"one", fenced_headers("basic", 5))
    tap.check(st in (201, 204), "a PUT with token 5 is forwarded (%d)" % st)
    tap.eq(b"one", ng.file("basic.txt"), "nginx holds its content")
    st, hd, body = request(px.port, "PUT", "/basic.txt", b"two", fenced_headers("basic", 4))
    tap.eq(409, st, "a PUT with the lower token 4: 409")
    tap.eq("5", hd.get("fencing-highest"), "Fencing-Highest: 5")
    tap.check(body.startswith(b"STALE 4 5 "), "body 'STALE 4 5 ...'", body)
    tap.eq(b"one", ng.file("basic.txt"), "nothing was forwarded")
    st, _, _ = request(px.port, "PUT", "/basic.txt", b"three", fenced_headers("basic", 5))
    tap.check(st in (201, 204), "the same token 5 again is admitted (%d)" % st)
    st, _, body = request(px.port, "PUT", "/basic.txt", b"x")
    tap.eq(428, st, "a PUT without a token: 428")
    tap.check(body.startswith(b"NOTOKEN"), "body 'NOTOKEN ...'", body)
    st, _, _ = request(px.port, "DELETE", "/basic.txt")
    tap.eq(428, st, "a DELETE without a token: 428")
    st, _, body = request(px.port, "GET", "/basic.txt")
    tap.eq((200, b"three"), (st, body), "a GET without a token passes unfenced on the default route")
    st, _, body = request(px.port, "GET", "/basic.txt", None, fenced_headers("basic", 9))
    tap.eq((200, b"three"), (st, body), "a GET with token 9 is admitted (and forwarded)")
    st, _, _ = request(px.port, "PUT", "/basic.txt", b"four", fenced_headers("basic", 6))
    tap.eq(409, st, "after GET with token 9, a PUT with 6 is stale (admit, read, write)")
    st, _, _ = request(px.port, "GET", "/strict/x", None)
    tap.eq(428, st, "a GET without a token under the strict route '/strict/ *': 428")
    st, _, _ = request(px.port, "PUT", "/open/x.txt", b"free")
    tap.check(st in (201, 204), "a PUT without a token under the open route '/open/ -' passes (%d)" % st)


def test_headers_stripped(tmp):
    up = SlowUpstream()
    try:
        px = Proxy(tmp, up.port, name="proxy-strip").start()
        st, _, _ = request(px.port, "PUT", "/h", b"strip", fenced_headers("hdr", 1))
        tap.eq(200, st, "a fenced PUT through to a plain upstream")
        px.stop()
        px2 = Proxy(tmp, up.port, name="proxy-keep", args=["--keep-fencing-headers"]).start()
        st, _, _ = request(px2.port, "PUT", "/h", b"keep", fenced_headers("hdr", 1))
        tap.eq(200, st, "a fenced PUT through a proxy with --keep-fencing-headers")
        px2.stop()
        hd = {ev[4]: ev[5] for ev in up.snapshot() if ev[0] == "start"}
        tap.check("fencing-token" not in hd.get(b"strip", {}) and
                  "fencing-lock" not in hd.get(b"strip", {}) and b"strip" in hd,
                  "by default the upstream does not see the fencing headers", hd.get(b"strip"))
        tap.check(hd.get(b"keep", {}).get("fencing-token") == "1" and
                  hd.get(b"keep", {}).get("fencing-lock") == "hdr",
                  "with --keep-fencing-headers it does", hd.get(b"keep"))
    finally:
        up.close()


def holder(fport, lock, ttl, port, path, content, delay, fenced, log):
    """Start a holder process; returns (proc, stdout reader)."""
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(fport), lock, str(ttl), str(port),
                          path, content, str(delay), "1" if fenced else "0"],
                         stdout=subprocess.PIPE, stderr=open(log, "ab"), text=True)
    return p


def pause_run(fd, ng, target_port, fenced, name):
    """The seed's scenario against target_port; returns (holder 1's status
    line, nginx's file afterwards)."""
    import redis
    lock = "pause-" + name
    path = "/%s.txt" % name
    h1 = holder(fd.port, lock, 1000, target_port, path, "holder1", 0.5, fenced,
                os.path.join(TMP, "holder-%s.log" % name))
    line = h1.stdout.readline().split()
    os.kill(h1.pid, signal.SIGSTOP)
    t1 = int(line[1])
    time.sleep(1.6)  # past holder 1's 1 s lease
    r = redis.Redis(host="127.0.0.1", port=fd.port, decode_responses=True)
    t2, _ = r.execute_command("ACQUIRE", lock, 5000, "WAIT", 10000)
    h = fenced_headers(lock, t2) if fenced else {}
    st2, _, _ = request(target_port, "PUT", path, b"holder2", h)
    os.kill(h1.pid, signal.SIGCONT)
    out = h1.stdout.readline().strip()
    h1.wait(10)
    return t1, t2, st2, out, ng.file(path.lstrip("/"))


def test_pause(ng, px):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_fenced_lib import Fenced
    fd = Fenced(name="fenced-pause").start()
    try:
        t1, t2, st2, out, content = pause_run(fd, ng, px.port, True, "through")
        tap.check(t2 > t1, "holder 2's token %d is higher than holder 1's %d" % (t2, t1))
        tap.check(st2 in (201, 204), "holder 2's PUT through the proxy is stored (%d)" % st2)
        tap.check(out.startswith("status 409 STALE %d %d" % (t1, t2)),
                  "holder 1 resumes and its PUT gets 409 STALE %d %d" % (t1, t2), out)
        tap.eq(b"holder2", content, "through the proxy nginx's file holds holder 2's content")
        t1, t2, st2, out, content = pause_run(fd, ng, ng.port, False, "direct")
        tap.check(out.startswith("status 20"), "straight to nginx, holder 1's late PUT succeeds", out)
        tap.eq(b"holder1", content, "straight to nginx holder 2's write is lost (the control)")
        # docs/proxy.md's example: fencectl lock NAME -- curl with $FENCE_TOKEN.
        fencectl = binary("fencectl")
        if os.access(fencectl, os.X_OK) and shutil.which("curl"):
            env = dict(os.environ, FENCE_SERVER="127.0.0.1:%d" % fd.port)
            cmd = ('curl -sf -X PUT -H "Fencing-Lock: report" -H "Fencing-Token: $FENCE_TOKEN" '
                   '--data-binary "from fencectl $FENCE_TOKEN" http://127.0.0.1:%d/report.txt' % px.port)
            r = subprocess.run([fencectl, "lock", "report", "--", "sh", "-c", cmd], env=env,
                               capture_output=True, text=True, timeout=30)
            tap.check(r.returncode == 0 and (ng.file("report.txt") or b"").startswith(b"from fencectl"),
                      "docs/proxy.md's fencectl lock ... -- curl example writes through the proxy",
                      (r.returncode, r.stdout, r.stderr))
        else:
            tap.note("fencectl or curl missing: the docs example is not run")
    finally:
        fd.stop()


def test_clients64(ng, px):
    own = 48      # clients with a fence each
    shared = 16   # clients sharing 4 fences
    rounds = 15
    errors = []
    results = {}  # fence -> list of (token, status, body)
    mu = threading.Lock()
    counters = {"sh%d" % k: 100 for k in range(4)}

    def client(i):
        try:
            for n in range(rounds):
                if i < own:
                    fence, token = "own%d" % i, n + 1
                else:
                    fence = "sh%d" % (i % 4)
                    with mu:
                        counters[fence] += 1
                        token = counters[fence]
                body = ("c%d-t%d" % (i, token)).encode()
                st, _, _ = request(px.port, "PUT", "/m/%s.txt" % fence, body,
                                   fenced_headers(fence, token))
                with mu:
                    results.setdefault(fence, []).append((token, st, body))
        except Exception as e:  # noqa: BLE001
            with mu:
                errors.append(repr(e))

    t0 = time.monotonic()
    run_threads(client, own + shared)
    secs = time.monotonic() - t0
    tap.eq([], errors, "64 concurrent clients: no connection errors")
    statuses = [st for v in results.values() for (_, st, _) in v]
    tap.eq(len(statuses), 64 * rounds, "every request was answered")
    tap.check(all(st in (201, 204, 409) for st in statuses),
              "every answer is 201/204 or 409", sorted(set(statuses)))
    own_ok = all(st in (201, 204) for f, v in results.items() if f.startswith("own") for _, st, _ in v)
    tap.check(own_ok, "clients on their own fences (rising tokens) were never refused")
    bad = []
    for f, v in results.items():
        admitted = [(t, b) for (t, st, b) in v if st in (201, 204)]
        top = max(admitted)
        got = ng.file("m/%s.txt" % f)
        if got != top[1]:
            bad.append((f, top, got))
    tap.eq([], bad, "each file holds the write of its fence's highest admitted token")
    tap.note("64 clients x %d PUTs in %.2f s" % (rounds, secs))
    tap.check(px.alive(), "the proxy is still up")


def test_bad_input(px):
    big = "a" * 20000
    st, _, body = request(px.port, "PUT", "/bad", b"x", {"X-Big": big, **fenced_headers("bad", 1)})
    tap.eq(431, st, "a 20 KB header: 431 (over --max-header-bytes)")
    out = raw_exchange(px.port, b"PUT /bad HTTP/1.1\r\nHost: x\r\nX-Huge: " + b"b" * 600000 +
                       b"\r\nContent-Length: 0\r\n\r\n")
    tap.check(out == b"" or out.split(b" ")[1][:1] == b"4",
              "a 600 KB header: closed or a 4xx from H2O", out[:100])
    for value, what in (("12abc", "a token with letters"), ("-1", "a negative token"),
                        ("0x10", "a hex token"), ("18446744073709551616", "the token 2^64"),
                        ("1 2", "two numbers"), ("", "an empty token")):
        st, _, body = request(px.port, "PUT", "/bad", b"x", {"Fencing-Lock": "bad",
                                                              "Fencing-Token": value})
        tap.check(st == 400 and body.startswith(b"BADTOKEN"), "%s: 400 BADTOKEN" % what, (st, body))
    st, _, _ = request(px.port, "PUT", "/max.txt", b"x",
                       fenced_headers("max", 18446744073709551615))
    tap.check(st in (201, 204), "the token 2^64-1 is accepted (%d)" % st)
    st, _, body = request(px.port, "PUT", "/bad", b"x", {"Fencing-Token": "5"})
    tap.check(st == 400 and body.startswith(b"BADFENCE"), "a token without Fencing-Lock: 400 BADFENCE",
              (st, body))
    st, _, body = request(px.port, "PUT", "/bad", b"x", {"Fencing-Lock": "", "Fencing-Token": "5"})
    tap.check(st == 400 and body.startswith(b"BADFENCE"), "an empty fence name: 400", (st, body))
    st, _, body = request(px.port, "PUT", "/bad", b"x", {"Fencing-Lock": "n" * 300,
                                                          "Fencing-Token": "5"})
    tap.check(st == 400, "a 300-byte fence name: 400", (st, body))
    out = raw_exchange(px.port, b"PUT /bad HTTP/1.1\r\nHost: x\r\nFencing-Lock: a\r\n"
                       b"Fencing-Token: 5\r\nFencing-Token: 6\r\nContent-Length: 0\r\n\r\n",
                       read_all=False)
    tap.check(out.startswith(b"HTTP/1.1 400"), "two Fencing-Token headers: 400", out[:80])
    st, _, _ = request(px.port, "PUT", "/bad", b"z" * 4096, fenced_headers("bad", 1))
    tap.eq(413, st, "a body over --max-body-bytes: 413")
    out = raw_exchange(px.port, b"GARBAGE\r\n\r\n")
    tap.check(out == b"" or out.startswith(b"HTTP/1.1 400"), "a garbage request line: 400 or closed",
              out[:80])

    # Slowloris: 20 connections trickling a request head; the proxy drops
    # them after --request-timeout-ms and serves others meanwhile.
    socks = []
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", px.port))
        s.sendall(b"PUT /slow HTTP/1.1\r\nHost: x\r\n")
        socks.append(s)
    t0 = time.monotonic()
    closed = 0
    served = 0
    while time.monotonic() - t0 < 3.0 and closed < len(socks):
        st, _, _ = request(px.port, "GET", "/basic.txt", timeout=5)
        served += st == 200
        for s in socks:
            if s.fileno() < 0:
                continue
            try:
                s.sendall(b"X")
            except OSError:
                s.close()
                closed += 1
        time.sleep(0.2)
    tap.check(served > 0, "other clients are served during slowloris (%d GETs)" % served)
    tap.check(closed == len(socks), "every slowloris connection was dropped within 3 s (%d of %d)"
              % (closed, len(socks)))
    for s in socks:
        s.close()
    tap.check(px.alive(), "the proxy is still up after bad input", px.log_text())


def test_max_connections(tmp, ng):
    px = Proxy(tmp, ng.port, name="proxy-conns", args=["--max-connections", "4"]).start()
    time.sleep(0.3)  # let the start-up probe's connection close first
    socks = [socket.create_connection(("127.0.0.1", px.port)) for _ in range(4)]
    time.sleep(0.2)
    out = raw_exchange(px.port, b"GET /basic.txt HTTP/1.1\r\nHost: x\r\n\r\n", timeout=2,
                       read_all=False)
    tap.check(out.startswith(b"HTTP/1.1 200"),
              "a fifth connection with --max-connections 4 is served (an idle one makes room)",
              out[:200])
    closed = 0
    for s in socks:
        s.settimeout(2)
        try:
            if s.recv(1) == b"":
                closed += 1
        except OSError:
            closed += 1
    tap.check(closed >= 1, "the quietest idle connection was closed for it (%d closed)" % closed)
    for s in socks:
        s.close()

    def served():
        try:
            return request(px.port, "GET", "/basic.txt")[0]
        except OSError:
            return None
    tap.eq(200, wait_for(lambda: served() == 200) and 200,
           "once they closed, a new connection is served")
    px.stop()


def test_options(ng):
    def run(*args):
        p = subprocess.run([PROXY] + list(args), capture_output=True, text=True, timeout=10)
        return p.returncode, p.stdout + p.stderr
    rc, out = run("--help")
    tap.check(rc == 0 and "--drain-timeout-ms" in out and "--route" in out, "--help lists the options")
    rc, out = run("--version")
    tap.check(rc == 0 and out.startswith("fence-proxy "), "--version", out)
    for args, want, what in ((["--data-dir", "/tmp/x"], "--upstream is required", "no --upstream"),
                             (["--upstream", "http://127.0.0.1:1"], "--data-dir is required",
                              "no --data-dir"),
                             (["--upstream", "https://h:1", "--data-dir", "d"], "plain HTTP",
                              "an https upstream"),
                             (["--upstream", "http://h:1", "--data-dir", "d", "--route", "x PUT"],
                              "must start with '/'", "a bad route"),
                             (["--upstream", "http://h:1", "--data-dir", "d", "--drain-action",
                               "maybe"], "not fail or proceed", "a bad --drain-action"),
                             (["--upstream", "http://h:1", "--data-dir", "d", "--max-connections",
                               "0"], "max-connections", "--max-connections 0"),
                             (["--upstream", "http://h:1", "--data-dir", "d", "--log-format",
                               "xml"], "not text or json", "a bad --log-format"),
                             (["--bogus"], "unknown option", "an unknown option")):
        rc, out = run(*args)
        tap.check(rc == 2 and want in out, "%s: exit 2 and '%s'" % (what, want), (rc, out))
    # A config file, the log file, and SIGHUP reopening it (logrotate).
    d = os.path.join(TMP, "conf")
    os.makedirs(d, exist_ok=True)
    port = free_port()
    logf = os.path.join(d, "proxy.log")
    conf = os.path.join(d, "proxy.conf")
    with open(conf, "w") as f:
        f.write("# fence-proxy test config\nlisten 127.0.0.1:%d\nupstream http://127.0.0.1:%d\n"
                "data-dir %s/data\nlog-file %s\nlog-level debug\nroute /ro/ -\n"
                % (port, ng.port, d, logf))
    p = spawn([PROXY, "--config", conf], os.path.join(d, "stderr.log"))
    try:
        tap.check(wait_port(port), "the proxy starts from a --config file")
        st, _, _ = request(port, "PUT", "/ro/conf.txt", b"c")
        tap.check(st in (201, 204), "its route directive applies (%d)" % st)
        tap.check("listening on" in read_log(logf), "it logs to --log-file")
        os.rename(logf, logf + ".1")
        p.send_signal(signal.SIGHUP)
        request(port, "GET", "/ro/conf.txt")
        tap.check(wait_for(lambda: "log reopened" in read_log(logf)),
                  "SIGHUP reopens the log file at its path")
    finally:
        stop_process(p)


def test_json_log(tmp, ng):
    """--log-format json: every line of the log is one JSON object."""
    import json
    px = Proxy(tmp, ng.port, name="proxy-json", args=["--log-format", "json",
                                                       "--log-level", "debug"]).start()
    request(px.port, "PUT", "/j.txt", b"j", fenced_headers("json", 3))
    px.stop()
    lines = [ln for ln in read_log(px.log).splitlines() if ln.strip()]
    good = 0
    for ln in lines:
        try:
            o = json.loads(ln)
            good += isinstance(o, dict) and "msg" in o and "level" in o
        except ValueError:
            pass
    tap.check(lines and good == len(lines), "--log-format json: %d lines, each a JSON object"
              % len(lines), lines[:3])


def test_upstream_down(tmp):
    px = Proxy(tmp, free_port(), name="proxy-down").start()
    st, _, body = request(px.port, "PUT", "/x", b"x", fenced_headers("down", 5))
    tap.check(st == 502 and body.startswith(b"UPSTREAM"), "an unreachable upstream: 502 UPSTREAM",
              (st, body))
    st, hd, _ = request(px.port, "PUT", "/x", b"x", fenced_headers("down", 4))
    tap.check(st == 409 and hd.get("fencing-highest") == "5",
              "the mark was raised before forwarding: token 4 is now stale", (st, hd))
    tap.check(px.alive(), "the proxy stays up")
    px.stop()


def main():
    ng = Nginx(TMP).start()
    px = Proxy(TMP, ng.port, args=["--route", "/strict/ *; /open/ -", "--max-body-bytes", "1024",
                                   "--request-timeout-ms", "1000"]).start()
    for fn, args in ((test_basics, (ng, px)), (test_headers_stripped, (TMP,)),
                     (test_pause, (ng, px)), (test_clients64, (ng, px)),
                     (test_bad_input, (px,)), (test_max_connections, (TMP, ng)),
                     (test_options, (ng,)), (test_json_log, (TMP, ng)),
                     (test_upstream_down, (TMP,))):
        try:
            fn(*args)
        except Exception as e:  # noqa: BLE001
            import traceback
            traceback.print_exc(file=sys.stdout)
            tap.check(False, "%s crashed: %r" % (fn.__name__, e))
    tap.check(px.alive(), "the proxy survived the whole run", px.log_text())
    px.stop()
    ng.stop()
    tap.finish()


if __name__ == "__main__":
    main()
