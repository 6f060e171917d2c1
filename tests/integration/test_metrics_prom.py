#!/usr/bin/python3
"""The metrics endpoint under a real Prometheus (Debian's prometheus).

A stand-alone exporter over src/ops/metrics (build/tests/metrics_demo)
is scraped by a prometheus server started here on 127.0.0.1 (temp config
and storage, free port, 1s interval):
- promtool check metrics accepts /metrics;
- the query API sees the exporter up, its counter rising, its histogram's
  buckets usable by histogram_quantile, and the capped label at <= cap + 1
  series;
- /health follows the exporter's callback (200, then 503);
- docs/metrics.md's alert rules pass promtool check rules and load into the
  server (rule groups visible through /api/v1/rules).
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import promtest  # noqa: E402
from fencetest import BUILD, ROOT, Tap, make_tmp, spawn, track  # noqa: E402,F401

promtest.need_prometheus()
tap = Tap()
TMP = make_tmp("fence-metrics-prom.")


def doc_rules():
    """The alert rules block of docs/metrics.md (between the markers)."""
    with open(os.path.join(ROOT, "docs", "metrics.md")) as f:
        text = f.read()
    m = re.search(r"<!-- rules:begin -->\s*```yaml\n(.*?)```\s*<!-- rules:end -->", text, re.S)
    return m.group(1) if m else None


def main():
    marker = os.path.join(TMP, "unhealthy")
    log = os.path.join(TMP, "demo.log")
    proc = track(subprocess.Popen([os.path.join(BUILD, "tests", "metrics_demo"), "0", marker],
                                  stdout=subprocess.PIPE, stderr=open(log, "ab")))
    line = proc.stdout.readline().decode()
    port = int(line.split()[1])
    status, text = promtest.http_get(port, "/metrics")
    tap.eq(200, status, "GET /metrics answers 200")
    ok, out = promtest.promtool_check_metrics(text)
    tap.check(ok, "promtool check metrics accepts the output", out)
    tap.eq(200, promtest.http_get(port, "/health")[0], "/health is 200 while healthy")
    open(marker, "w").close()
    st, body = promtest.http_get(port, "/health")
    tap.check(st == 503 and "marker" in body, "/health is 503 when the callback says so", body)
    os.unlink(marker)

    rules = doc_rules()
    tap.check(rules is not None, "docs/metrics.md has an alert rules block")
    rules_path = promtest.temp_file(rules or "", ".yml")
    ok, out = promtest.promtool_check_rules(rules_path)
    tap.check(ok, "promtool check rules accepts docs/metrics.md's rules", out)

    prom = promtest.Prometheus({"demo": ["127.0.0.1:%d" % port]}, rule_files=[rules_path])
    prom.start()
    ok, res = prom.wait_query('up{job="demo"}', lambda r: r and r[0][1] == 1)
    tap.check(ok, "prometheus scrapes the exporter (up == 1)", res)
    ok, res = prom.wait_query("demo_ticks_total", lambda r: r and r[0][1] > 0)
    tap.check(ok, "the counter is visible through the query API", res)
    ok, res = prom.wait_query("rate(demo_ticks_total[5s])", lambda r: r and r[0][1] > 1)
    tap.check(ok, "its rate is positive", res)
    ok, res = prom.wait_query(
        "histogram_quantile(0.9, rate(demo_latency_seconds_bucket[5s]))",
        lambda r: r and 0 < r[0][1] <= 0.01)
    tap.check(ok, "histogram_quantile works on the buckets", res)
    ok, res = prom.wait_query("count(demo_stale_total)", lambda r: r and r[0][1] == 5)
    tap.check(ok, "the capped label shows cap + 1 series (4 values and _other)", res)
    res = prom.query('demo_stale_total{fence="_other"}')
    tap.check(res and res[0][1] > 0, "the overflow series counts the rest", res)
    groups = prom.api("rules")["groups"]
    tap.check(len(groups) >= 1 and sum(len(g["rules"]) for g in groups) >= 3,
              "the documented rules load into prometheus", groups)
    prom.stop()
    proc.terminate()
    tap.eq(0, proc.wait(timeout=10), "the exporter stops cleanly on SIGTERM")


main()
tap.finish()
