#!/usr/bin/python3
"""fenced, fence-store and fence-proxy metrics under a real Prometheus.

- Each daemon started with --metrics-port serves /metrics that passes
  `promtool check metrics`, and /health.
- The seed's pause scenario: a holder process (lease TTL 600 ms, renewed
  every 100 ms, writing to fence-store with its token) is SIGSTOPped past
  its lease; another client takes the lock and writes with the newer
  token; the holder resumes and its next write is refused as STALE.  A
  prometheus server (127.0.0.1, temp config, 1 s scrape interval) then
  reports, through its query API, fenced_lease_expirations_with_locks_total
  >= 1 and fence_store_stale_rejections_total >= 1 (with the fence label).
- Every metric name the Grafana dashboard (docs/grafana-dashboard.json)
  uses exists on a live /metrics.
- The endpoint survives bad HTTP input and 48 concurrent scrapers, and
  fenced keeps serving RESP meanwhile; HEALTH agrees with /health.
"""
# test-timeout: 240
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
import promtest  # noqa: E402
from fencetest import ROOT, Tap, binary, free_port, make_tmp, spawn, track, wait_port  # noqa: E402

promtest.need_prometheus()
from test_fenced_lib import Fenced  # noqa: E402
from test_store_helpers import Store  # noqa: E402

tap = Tap()
TMP = make_tmp("fence-metrics-daemons.")

HOLDER = r'''
import sys, time, redis
fport, sport = int(sys.argv[1]), int(sys.argv[2])
f = redis.Redis(port=fport, decode_responses=True)
s = redis.Redis(port=sport, decode_responses=True)
lease = f.execute_command("LEASE.GRANT", 600)
token = f.execute_command("LOCK", "res", lease)
print("token", token, flush=True)
while True:
    try:
        f.execute_command("LEASE.KEEPALIVE", lease)
    except redis.ResponseError as e:
        print("keepalive", e, flush=True)
    try:
        s.execute_command("FSET", "res", token, "k", "holder")
        print("wrote", flush=True)
    except redis.ResponseError as e:
        print("refused", str(e).split()[0], flush=True)
        break
    time.sleep(0.1)  # the holder's pace of work
'''


def scrape(port):
    """GET /metrics: (status, text)."""
    return promtest.http_get(port, "/metrics")


def check_promtool(name, port):
    st, text = scrape(port)
    tap.eq(200, st, "%s: GET /metrics answers 200" % name)
    ok, out = promtest.promtool_check_metrics(text)
    tap.check(ok, "%s: promtool check metrics accepts /metrics" % name, out)
    return text


def dashboard_names():
    """Metric names the dashboard's expressions use."""
    with open(os.path.join(ROOT, "docs", "grafana-dashboard.json")) as f:
        dash = json.load(f)
    exprs = []

    def walk(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k == "expr" and isinstance(v, str):
                    exprs.append(v)
                else:
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(dash)
    names = set()
    for e in exprs:
        e = re.sub(r'\{[^}]*\}', '', e)      # label matchers
        e = re.sub(r'\[[^\]]*\]', '', e)     # ranges
        e = re.sub(r'"[^"]*"', '', e)        # strings
        for tok in re.findall(r'[a-zA-Z_:][a-zA-Z0-9_:]*', e):
            if tok.startswith(("fenced_", "fence_store_", "fence_proxy_")):
                names.add(tok)
    return exprs, names


def bad_input_and_scrapers(fenced, mport):
    """Garbage at the metrics port, then 48 scrapers at once, while a client
    keeps using fenced."""
    junk = [b"\x00\xff\xfe\r\n\r\n", b"GET /metrics HTTP/7.0\r\n\r\n",
            b"GET " + b"A" * 100000 + b" HTTP/1.1\r\n\r\n",
            b"POST /metrics HTTP/1.1\r\nContent-Length: 100000000\r\n\r\nxx"]
    for j in junk:
        s = socket.create_connection(("127.0.0.1", mport), 5)
        try:
            s.sendall(j)
            s.settimeout(5)
            s.recv(4096)
        except OSError:
            pass
        s.close()
    results = []
    stop = threading.Event()

    def client_loop():
        c = fenced.client()
        n = 0
        while not stop.is_set():
            c.execute_command("PING")
            n += 1
        results.append(("pings", n))

    def scraper(i):
        ok = 0
        for _ in range(10):
            try:
                st, text = scrape(mport)
                ok += st == 200 and "fenced_grants_total" in text
            except OSError:
                pass
        results.append(("scrapes", ok))
    t = threading.Thread(target=client_loop)
    t.start()
    threads = [threading.Thread(target=scraper, args=(i,)) for i in range(48)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stop.set()
    t.join()
    scrapes = sum(n for k, n in results if k == "scrapes")
    pings = sum(n for k, n in results if k == "pings")
    tap.check(scrapes >= 48 * 10 // 2, "most of 480 concurrent scrapes succeed (%d)" % scrapes)
    tap.check(pings > 0, "fenced serves RESP while scraped (%d PINGs)" % pings)
    tap.eq(200, scrape(mport)[0], "the endpoint still answers after bad input and scrapers")


def json_logs():
    """fenced --log-format json: every line is one JSON object."""
    j = Fenced("fenced-json", args=["--log-format", "json"]).start()
    j.client().execute_command("LEASE.GRANT", 1000)
    j.stop()
    lines = [ln for ln in j.log_text().splitlines() if ln.strip()]
    good = 0
    for ln in lines:
        try:
            o = json.loads(ln)
            good += all(k in o for k in ("ts", "pid", "level", "msg"))
        except ValueError:
            tap.note("not JSON: %r" % ln)
    tap.check(lines and good == len(lines), "--log-format json: %d lines, each a JSON object"
              % len(lines))
    bad = subprocess.run([binary("fenced"), "--log-format", "xml", "--data-dir",
                          os.path.join(TMP, "x")], capture_output=True, timeout=30)
    tap.check(bad.returncode != 0 and b"log-format" in bad.stderr,
              "--log-format xml is refused", bad.stderr)


def main():
    json_logs()
    fm, sm, pm = free_port(), free_port(), free_port()
    fenced = Fenced("fenced", args=["--metrics-port", str(fm)]).start()
    store = Store(TMP, flags=["--metrics-port", str(sm)])
    store.start()
    wait_port(fm)
    wait_port(sm)
    up = free_port()
    proxy = spawn([binary("fence-proxy"), "--listen", "127.0.0.1:%d" % free_port(),
                   "--upstream", "http://127.0.0.1:%d" % up, "--data-dir",
                   os.path.join(TMP, "proxy"), "--metrics-port", str(pm)],
                  os.path.join(TMP, "proxy.log"))
    tap.check(wait_port(pm), "fence-proxy serves its metrics port")

    check_promtool("fenced", fm)
    check_promtool("fence-store", sm)
    ptext = check_promtool("fence-proxy", pm)
    tap.check("fence_proxy_stale_rejections_total" in ptext,
              "fence-proxy exports fence_proxy_stale_rejections_total")
    st, body = promtest.http_get(fm, "/health")
    tap.check(st == 200 and "leader, ready" in body, "fenced /health is 200 on a ready leader",
              body)
    tap.eq("leader, ready", fenced.client().execute_command("HEALTH"), "HEALTH agrees")

    prom = promtest.Prometheus({"fenced": ["127.0.0.1:%d" % fm],
                                "fence-store": ["127.0.0.1:%d" % sm],
                                "fence-proxy": ["127.0.0.1:%d" % pm]})
    prom.start()
    ok, res = prom.wait_query("sum(up)", lambda r: r and r[0][1] == 3)
    tap.check(ok, "prometheus scrapes all three daemons", res)

    # The pause scenario.
    holder = track(subprocess.Popen(["/usr/bin/python3", "-c", HOLDER, str(fenced.port),
                                     str(store.port)], stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT))
    first = holder.stdout.readline().decode()
    tap.check(first.startswith("token"), "the holder took the lock", first)
    old_token = int(first.split()[1]) if first.startswith("token") else 0
    # Pause it once it has written under its token (or it has ended).
    line = first
    while line and not line.startswith("wrote"):
        line = holder.stdout.readline().decode()
    holder.send_signal(signal.SIGSTOP)
    c = fenced.client()
    lease = c.execute_command("LEASE.GRANT", 30000)
    new_token = c.execute_command("LOCK", "res", lease, "WAIT", 10000)
    tap.check(new_token and int(new_token) > old_token,
              "another client gets the lock once the paused holder's lease ran out")
    s = store.proc and __import__("redis").Redis(port=store.port, decode_responses=True)
    tap.eq("OK", s.execute_command("FSET", "res", new_token, "k", "new"),
           "the new holder writes with its token")
    holder.send_signal(signal.SIGCONT)
    out = b""
    try:
        out, _ = holder.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        holder.kill()
    tap.check(b"refused STALE" in out, "the resumed holder's write is refused as STALE",
              out.decode(errors="replace"))

    ok, res = prom.wait_query("fenced_lease_expirations_with_locks_total",
                              lambda r: r and r[0][1] >= 1)
    tap.check(ok, "prometheus: fenced_lease_expirations_with_locks_total >= 1", res)
    ok, res = prom.wait_query('fence_store_stale_rejections_total{fence="res"}',
                              lambda r: r and r[0][1] >= 1)
    tap.check(ok, "prometheus: fence_store_stale_rejections_total{fence=\"res\"} >= 1", res)
    ok, res = prom.wait_query("fence_store_fence_mark", lambda r: r and r[0][1] >= int(new_token))
    tap.check(ok, "prometheus: fence_store_fence_mark reached the new token", res)
    ok, res = prom.wait_query("fenced_handoffs_total", lambda r: r and r[0][1] >= 1)
    tap.check(ok, "prometheus: the waiter's grant counts as a hand-off", res)
    ok, res = prom.wait_query("fenced_acquire_wait_seconds_count", lambda r: r and r[0][1] >= 1)
    tap.check(ok, "prometheus: the acquire wait was observed", res)
    ok, res = prom.wait_query(
        # Over the cumulative buckets, not rate(): a rate is NaN when every
        # KEEPALIVE landed before the first scrape (no increase in the window).
        'histogram_quantile(0.5, sum by (le) (fenced_command_duration_seconds_bucket'
        '{command="LEASE.KEEPALIVE"}))', lambda r: r and 0 < r[0][1] < 1)
    tap.check(ok, "prometheus: a command latency quantile", res)

    # The audit lines of the scenario.
    flog, slog = fenced.log_text(), open(store.log, errors="replace").read()
    tap.check("audit: expiry-with-locks" in flog, "fenced logs an expiry-with-locks audit line")
    tap.check("audit: handoff: token %s" % new_token in flog,
              "fenced logs the hand-off to the waiter")
    tap.check("audit: stale-rejection: fence 'res' token %d" % old_token in slog,
              "fence-store logs the stale rejection", slog[-2000:])

    # The dashboard's metric names exist.
    names = set()
    for port in (fm, sm, pm):
        names |= promtest.metric_names(scrape(port)[1])
    exprs, used = dashboard_names()
    tap.check(len(exprs) >= 8, "the dashboard has panels with expressions (%d)" % len(exprs))
    missing = sorted(used - names)
    tap.check(not missing and used, "every metric the dashboard uses exists on /metrics",
              "missing: %s" % missing)
    for e in exprs:
        try:
            prom.query(e.replace("$__rate_interval", "30s").replace("$__interval", "5s"))
            good = True
        except RuntimeError as err:
            good = False
            tap.note(str(err))
        if not good:
            tap.check(False, "dashboard expression is valid PromQL: %s" % e)
            break
    else:
        tap.check(True, "every dashboard expression is valid PromQL")

    bad_input_and_scrapers(fenced, fm)
    prom.stop()
    tap.eq(0, fenced.stop(), "fenced stops cleanly with the metrics thread running")
    store.stop()
    proxy.terminate()
    proxy.wait(timeout=10)


main()
tap.finish()
