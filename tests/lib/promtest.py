"""Helpers for tests against a real Prometheus (imported, never run).

Standard library only.  What is here:
- need_prometheus(): skips the test (exit 77) when Debian's prometheus
  package (prometheus, promtool) is not installed.
- http_get(port, path): (status, body text) of a GET on 127.0.0.1.
- parse_metrics(text): {name: [(labels dict, value float)]} of an
  exposition text (the subset our renderer writes), for assertions.
- promtool_check_metrics(text) / promtool_check_rules(path): (ok, output).
- Prometheus: a prometheus server on 127.0.0.1 and a free port, with a
  temp config (scrape and evaluation interval 1s) and storage dir, started
  with spawn() (killed by PID at exit); query() and wait_query() use the
  HTTP query API (/api/v1/query) through urllib; targets() reads
  /api/v1/targets.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fencetest import free_port, make_tmp, skip, spawn, stop_process  # noqa: E402

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def need_prometheus():
    """Skips the whole test when prometheus or promtool is missing."""
    if not (os.access(PROMETHEUS, os.X_OK) and os.access(PROMTOOL, os.X_OK)):
        skip("prometheus is not installed (scripts/deps.sh test installs it)")


def http_get(port, path, timeout=5.0):
    """GET http://127.0.0.1:port/path; returns (status, body text).  An
    HTTP error status is returned, not raised."""
    url = "http://127.0.0.1:%d%s" % (port, path)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Parses exposition text into {name: [(labels, value)]} (histogram
    lines under their _bucket/_sum/_count names); "# " lines are skipped."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError("not a sample line: %r" % line)
        labels = {}
        if m.group(3):
            for k, v in _LABEL.findall(m.group(3)):
                labels[k] = v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        out.setdefault(m.group(1), []).append((labels, float(m.group(4))))
    return out


def metric_names(text):
    """The family names (# TYPE lines) of an exposition text, and for
    histograms their _bucket, _sum and _count names too."""
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            names.add(name)
            if typ == "histogram":
                names.update({name + "_bucket", name + "_sum", name + "_count"})
    return names


def value(text, name, labels=None):
    """The value of one sample (labels must match exactly when given; the
    sum over all series of name otherwise), or None when absent."""
    samples = parse_metrics(text).get(name)
    if samples is None:
        return None
    if labels is None:
        return sum(v for _, v in samples)
    for lab, v in samples:
        if lab == labels:
            return v
    return None


def _promtool(args, stdin=None):
    """Runs promtool with args; (ok, combined output)."""
    p = subprocess.run([PROMTOOL] + args, input=stdin, capture_output=True, timeout=60)
    return p.returncode == 0, (p.stdout + p.stderr).decode("utf-8", "replace")


def promtool_check_metrics(text):
    """promtool check metrics on text (lint: naming, help, units)."""
    return _promtool(["check", "metrics"], stdin=text.encode())


def promtool_check_rules(path):
    """promtool check rules on a rules file."""
    return _promtool(["check", "rules", path])


class Prometheus:
    """A prometheus server scraping jobs {name: ["127.0.0.1:port", ...]}
    every second, on a free 127.0.0.1 port with a temp storage dir."""

    def __init__(self, jobs, rule_files=()):
        self.jobs = dict(jobs)             # job name -> list of targets
        self.rule_files = list(rule_files)  # alerting/recording rule files
        self.port = free_port()             # web/API port
        self.dir = make_tmp("fence-prom.")  # config, storage, log
        self.proc = None                    # the Popen once started
        self.log = os.path.join(self.dir, "prometheus.log")

    def _config(self):
        """The prometheus.yml text (YAML written by hand: JSON is YAML)."""
        cfg = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": self.rule_files,
            "scrape_configs": [
                {"job_name": job, "static_configs": [{"targets": targets}]}
                for job, targets in sorted(self.jobs.items())
            ],
        }
        return json.dumps(cfg, indent=1)

    def start(self, secs=30):
        """Writes the config, starts prometheus and waits for /-/ready."""
        path = os.path.join(self.dir, "prometheus.yml")
        with open(path, "w") as f:
            f.write(self._config())
        argv = [PROMETHEUS, "--config.file=" + path,
                "--storage.tsdb.path=" + os.path.join(self.dir, "data"),
                "--web.listen-address=127.0.0.1:%d" % self.port,
                "--log.level=warn"]
        self.proc = spawn(argv, self.log)
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("prometheus exited:\n" + self.log_text())
            try:
                if http_get(self.port, "/-/ready", timeout=1)[0] == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus not ready after %ds:\n%s" % (secs, self.log_text()))

    def stop(self):
        """Stops the server by PID."""
        if self.proc is not None:
            stop_process(self.proc)

    def log_text(self):
        """The server's log (last 4000 characters)."""
        try:
            with open(self.log, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def api(self, path, **params):
        """GET /api/v1/<path>?params; the decoded JSON "data" field."""
        q = urllib.parse.urlencode(params)
        status, body = http_get(self.port, "/api/v1/%s?%s" % (path, q), timeout=10)
        doc = json.loads(body)
        if status != 200 or doc.get("status") != "success":
            raise RuntimeError("query %s failed: %s" % (params, body[:500]))
        return doc["data"]

    def query(self, expr):
        """An instant query; [(labels dict, float value)]."""
        data = self.api("query", query=expr)
        if data["resultType"] == "scalar":
            return [({}, float(data["result"][1]))]
        return [(r["metric"], float(r["value"][1])) for r in data["result"]]

    def wait_query(self, expr, pred, secs=30):
        """Polls query(expr) until pred(result) holds; returns (ok, last
        result)."""
        end = time.monotonic() + secs
        last = None
        while True:
            try:
                last = self.query(expr)
                if pred(last):
                    return True, last
            except (OSError, RuntimeError, ValueError) as e:
                last = repr(e)
            if time.monotonic() >= end:
                return False, last
            time.sleep(0.5)

    def targets(self):
        """{scrape url: health} of the active targets."""
        data = self.api("targets")
        return {t["scrapeUrl"]: t["health"] for t in data["activeTargets"]}


def temp_file(text, suffix):
    """Writes text to a new temp file (removed at exit); returns its path."""
    d = make_tmp("fence-prom-file.")
    fd, path = tempfile.mkstemp(suffix=suffix, dir=d)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path
