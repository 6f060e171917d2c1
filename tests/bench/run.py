#!/usr/bin/python3
"""make bench: one table from one run (docs/performance.md says how to read it).

Starts every process itself (free ports on 127.0.0.1, one temp dir, every
process stopped by PID at the end), runs short cells one after another and
prints one table whose rows all have the same columns:

  what | clients | rate/s | p50 us | p99 us | max us | value | peer (same run) | ratio | notes

Latencies are microseconds, from the load generator's histogram (fencectl
bench --format tsv and tests/bench/keepalive_load: src/fencectl/hist.c, within
3%; redis-benchmark: its own, to the microsecond).  "value" holds the rows
whose figure is not a rate (fsync time, floor, bytes per lock, restart
time, loop lag).  "ratio" is rate / peer rate unless the notes say
otherwise.  The load generators are C (fencectl bench, keepalive_load,
fsync_probe) or redis-benchmark / redis-cli --pipe; this script only starts
them and reads their numbers.

Environment:
  BUILD          build directory (default build/release)
  BENCH_SECONDS  seconds per cell (default 3)
  BENCH_SMOKE=1  tiny cells for the smoke test: 10k instead of 1M held
                 locks and leases, 1,000 keepalive leases on 50 connections
  BENCH_BIG      held locks / leases of the 1M rows (default 1000000)
  BENCH_ROUNDS   cells per side of a comparison, interleaved (default 2;
                 smoke 1)
  BENCH_ONLY     comma-separated sections to run (fenced, store, big,
                 keepalive (100k leases, 1M leases, 100k at 3 nodes), cluster,
                 features, proxy, go, multi, elect); default all
  FSYNC_PROBE    the fsync probe (default BUILD/tests/fsync_probe)
  BENCH_TMPDIR   where the temp dir goes (default $TMPDIR or /tmp): its
                 filesystem is the one every data dir and the fsync probe use
Exit status: 0 if every section ran, 1 if one failed (its rows say n/a).
"""
import datetime
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from fenceproto import Resp, RespError, encode_command, free_port, wait_port  # noqa: E402

BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build", "release"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)
SECS = max(1, int(os.environ.get("BENCH_SECONDS", "3")))
SMOKE = os.environ.get("BENCH_SMOKE", "") == "1"
BIG = int(os.environ.get("BENCH_BIG", "10000" if SMOKE else "1000000"))
KA_LEASES = 1000 if SMOKE else 100000
KA_CONNS = 50 if SMOKE else 1000
KA_TTL_MS = 10000
# The 1M-lease renewal row (issue 23): BIG leases renewed every ttl/3.
KA_BIG_TTL_MS = 30000
SECTIONS = ["fenced", "store", "big", "keepalive", "cluster", "features", "proxy", "go",
            "multi", "elect"]
ONLY = [s for s in os.environ.get("BENCH_ONLY", "").split(",") if s] or SECTIONS

FENCED = os.path.join(BUILD, "fenced")
FENCECTL = os.path.join(BUILD, "fencectl")
FENCE_STORE = os.path.join(BUILD, "fence-store")
KEEPALIVE_LOAD = os.path.join(BUILD, "tests", "keepalive_load")
HANDOFF_LOAD = os.path.join(BUILD, "tests", "handoff_load")
CYCLE_LOAD = os.path.join(BUILD, "tests", "cycle_load")
# tests/bench/fsync_probe.c (CLI: fsync_probe DIR [N], prints
# "fsync_p50_us=... fsync_p99_us=..."); wherever its mk fragment puts it.
FSYNC_PROBES = [p for p in (os.environ.get("FSYNC_PROBE"),) if p] + [
    os.path.join(BUILD, "tests", "fsync_probe"), os.path.join(BUILD, "fsync_probe")]
FSYNC_PROBES = [p if os.path.isabs(p) else os.path.join(ROOT, p) for p in FSYNC_PROBES]

TMP = tempfile.mkdtemp(prefix="fence-bench.", dir=os.environ.get("BENCH_TMPDIR") or None)
PROCS = []  # every process started, stopped by PID at exit
ROWS = []   # the table
FAILED = []  # sections that failed


def log(msg):
    """Progress on stderr (the table goes to stdout at the end)."""
    sys.stderr.write("bench: %s\n" % msg)
    sys.stderr.flush()


# ---------------------------------------------------------------- rows

class Row:
    """One line of the table."""

    def __init__(self, what, clients="-", rate=None, p50=None, p99=None, mx=None, value="-",
                 peer="-", ratio="-", notes=""):
        self.what = what
        self.clients = clients
        self.rate = rate
        self.p50 = p50
        self.p99 = p99
        self.max = mx
        self.value = value
        self.peer = peer
        self.ratio = ratio
        self.notes = notes

    def cells(self):
        """The row's columns as text."""
        def num(v, fmt="%.0f"):
            if v is None:
                return "-"
            if isinstance(v, str):
                return v
            return fmt % v
        return [self.what, str(self.clients), num(self.rate), num(self.p50), num(self.p99),
                num(self.max), self.value, self.peer, self.ratio, self.notes]


HEADER = ["what", "clients", "rate/s", "p50 us", "p99 us", "max us", "value",
          "peer (same run)", "ratio", "notes"]


def add(row):
    """Append a row and show it on stderr at once."""
    ROWS.append(row)
    log("row: " + " | ".join(row.cells()))
    return row


def pct(a, b):
    """a / b as a percentage text, or n/a."""
    if a is None or b is None or isinstance(a, str) or isinstance(b, str) or b <= 0:
        return "n/a"
    return "%.0f%%" % (100.0 * a / b)


def times(a, b):
    """a / b as "0.00x", or n/a."""
    if a is None or b is None or isinstance(a, str) or isinstance(b, str) or b <= 0:
        return "n/a"
    return "%.2fx" % (a / b)


def print_table():
    """The table, as Markdown (pasted as is into docs/performance.md)."""
    rows = [HEADER] + [r.cells() for r in ROWS]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    right = {1, 2, 3, 4, 5, 6, 8}

    def line(r):
        return "| " + " | ".join(
            (c.rjust(widths[i]) if i in right else c.ljust(widths[i])) for i, c in enumerate(r)
        ) + " |"
    print(line(HEADER))
    print("|" + "|".join(("-" * (w + 1) + ":" if i in right else "-" * (w + 2))
                         for i, w in enumerate(widths)) + "|")
    for r in rows[1:]:
        print(line(r))
    sys.stdout.flush()


# ---------------------------------------------------------------- processes

def spawn(argv, logname, **kw):
    """Start argv with stdout/stderr to TMP/logname; remembered for cleanup."""
    f = open(os.path.join(TMP, logname), "ab")
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kw)
    f.close()
    PROCS.append(p)
    return p


def stop(p, sig=signal.SIGTERM, timeout=30):
    """Stop p by PID: sig, then SIGKILL after timeout s; returns seconds to exit."""
    t0 = time.monotonic()
    if p.poll() is None:
        try:
            p.send_signal(sig)
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if p in PROCS:
        PROCS.remove(p)
    return time.monotonic() - t0


def cleanup():
    """Stop everything still running, remove the temp dir."""
    for p in list(PROCS):
        stop(p, timeout=10)
    shutil.rmtree(TMP, ignore_errors=True)


def on_signal(signum, _frame):
    """SIGTERM / SIGINT: clean up, then exit."""
    cleanup()
    sys.exit(128 + signum)


class Fenced:
    """One fenced process on a free port with its own data dir."""

    def __init__(self, name, args=()):
        self.name = name
        self.port = free_port()
        self.dir = os.path.join(TMP, name)
        self.data = os.path.join(self.dir, "data")
        os.makedirs(self.dir, exist_ok=True)
        self.args = list(args)
        self.proc = None

    def start(self):
        """Start on the same port and data dir; wait until it serves."""
        self.proc = spawn([FENCED, "--port", str(self.port), "--bind", "127.0.0.1",
                           "--data-dir", self.data, "--log-level", "warn"] + self.args,
                          self.name + ".log")
        wait_serving(self.port, self.proc, 60)
        return self

    def stop(self):
        """SIGTERM by PID; returns seconds until it exited."""
        s = stop(self.proc)
        self.proc = None
        return s

    def info(self):
        """INFO as a dict."""
        return info(self.port)

    def rss(self):
        """Resident set size in bytes (/proc/PID/status VmRSS)."""
        with open("/proc/%d/status" % self.proc.pid) as f:
            for ln in f:
                if ln.startswith("VmRSS:"):
                    return int(ln.split()[1]) * 1024
        raise RuntimeError("no VmRSS")

    def addr(self):
        return "127.0.0.1:%d" % self.port


def info(port):
    """INFO of the server on port, as a dict of strings."""
    r = Resp("127.0.0.1", port, timeout=30)
    try:
        text = r.call("INFO")
    finally:
        r.close()
    text = text.decode() if isinstance(text, bytes) else str(text)
    out = {}
    for ln in text.splitlines():
        k, sep, v = ln.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def wait_serving(port, proc, secs):
    """Poll until LEASE.GRANT answers on port (a ready leader); returns the
    seconds it took.  Raises if proc exits or secs pass."""
    t0 = time.monotonic()
    end = t0 + secs
    while time.monotonic() < end:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("process on port %d exited (%d)" % (port, proc.returncode))
        try:
            r = Resp("127.0.0.1", port, timeout=5)
            try:
                r.call("LEASE.GRANT", 10000)
                return time.monotonic() - t0
            finally:
                r.close()
        except (OSError, ConnectionError, RespError):
            time.sleep(0.005)
    raise RuntimeError("nothing served on port %d within %d s" % (port, secs))


# ---------------------------------------------------------------- load generators

def fencectl_bench(servers, mode, conns, extra=(), seconds=None):
    """fencectl bench --format tsv; returns {conns: row dict} of one mode."""
    argv = [FENCECTL, "--server", servers] + [
        "bench", "--duration", str(seconds or SECS), "--mode", mode,
        "--conns", ",".join(str(c) for c in conns), "--format", "tsv"] + list(extra)
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    lines = out.stdout.decode().splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError("fencectl bench failed (%d): %s" % (out.returncode,
                                                               out.stderr.decode()[-300:]))
    head = lines[0].split("\t")
    res = {}
    for ln in lines[1:]:
        d = dict(zip(head, ln.split("\t")))
        res[int(d["conns"])] = {k: (float(v) if k != "mode" else v) for k, v in d.items()}
    return res


def bench_row(what, d, **kw):
    """A row from one fencectl bench cell."""
    notes = kw.pop("notes", "")
    if d["errors"]:
        notes = (notes + "; " if notes else "") + "%d errors" % d["errors"]
    return Row(what, int(d["conns"]), d["cycles_per_s"], d["p50_us"], d["p99_us"], d["max_us"],
               notes=notes, **kw)


def redis_benchmark(port, clients, n, *cmd):
    """redis-benchmark --csv of one command: (rps, p50_us, p99_us, max_us)."""
    argv = ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-n", str(n), "-c",
            str(clients), "-r", "100000", "--csv"] + [str(c) for c in cmd]
    out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
    last = [ln for ln in out.stdout.decode().splitlines() if ln.strip()]
    if out.returncode != 0 or not last or last[-1].startswith('"test"'):
        raise RuntimeError("redis-benchmark %s failed: %s" % (cmd[0], out.stderr.decode()[-300:]))
    f = [x.strip('"') for x in last[-1].split(",")]
    # "name",rps,avg,min,p50,p95,p99,max (ms)
    return float(f[1]), float(f[4]) * 1000, float(f[6]) * 1000, float(f[7]) * 1000


def timed_redis_benchmark(port, clients, *cmd):
    """redis-benchmark sized to last about SECS: a short calibration run
    first (also the warm-up), then n = rate * SECS."""
    n0 = 200 if clients == 1 else 2000
    rps, _, _, _ = redis_benchmark(port, clients, n0, *cmd)
    n = max(n0, int(rps * SECS))
    return redis_benchmark(port, clients, n, *cmd)


ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "1" if SMOKE else "2")))


def interleaved(cells):
    """Run the cells of a comparison ROUNDS times, forward then backward
    (A B B A with two rounds), so that load from elsewhere on the machine
    that rises or falls during the run hits every cell alike.  cells is a
    list of (name, fn); returns {name: [result of each round]}."""
    out = {name: [] for name, _ in cells}
    for r in range(ROUNDS):
        for name, fn in (cells if r % 2 == 0 else list(reversed(cells))):
            out[name].append(fn())
    return out


# The comparisons of one fenced with itself (metrics, TLS, signed; and
# fenced against Redis) are measured in short cells that take turns: the
# cell time of BENCH_SECONDS is cut into 1-second cells and there are as
# many more rounds, so each side still runs ROUNDS * SECS seconds in all.
# On the shared development machine the disk's fsync time moves by 10x
# within seconds; with 3-second cells one side could get a fast disk and
# the other a slow one.
FINE_SECS = 1
FINE_ROUNDS = ROUNDS * max(1, SECS // FINE_SECS)


def interleaved_fine(cells):
    """interleaved() with FINE_ROUNDS rounds of FINE_SECS-second cells
    (each fn takes the cell's seconds)."""
    out = {name: [] for name, _ in cells}
    for r in range(FINE_ROUNDS):
        for name, fn in (cells if r % 2 == 0 else list(reversed(cells))):
            out[name].append(fn(FINE_SECS))
    return out


def fine_note():
    """What the notes say about a row of interleaved_fine cells."""
    return "%d cells of %d s interleaved" % (FINE_ROUNDS, FINE_SECS)


def merge_bench(results):
    """One row's numbers from several rounds of a fencectl bench cell: rate
    the mean, p50/p99/max the highest of the rounds (each from that round's
    histogram: an upper bound, never an average of percentiles)."""
    m = dict(results[0])
    m["cycles_per_s"] = sum(d["cycles_per_s"] for d in results) / len(results)
    for k in ("p50_us", "p99_us", "p999_us", "max_us", "max_cycles"):
        m[k] = max(d[k] for d in results)
    m["min_cycles"] = min(d["min_cycles"] for d in results)
    m["errors"] = sum(d["errors"] for d in results)
    return m


def merge_rb(results):
    """As merge_bench for redis-benchmark tuples (rps, p50, p99, max)."""
    return (sum(r[0] for r in results) / len(results), max(r[1] for r in results),
            max(r[2] for r in results), max(r[3] for r in results))


def cpu_s(pids):
    """CPU seconds the processes pids have run so far, all their threads
    (/proc/PID/task/*/schedstat: nanoseconds on a CPU, user and system)."""
    total = 0
    for pid in pids:
        tasks = "/proc/%d/task" % pid
        for t in os.listdir(tasks):
            try:
                with open(os.path.join(tasks, t, "schedstat")) as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass  # the thread ended meanwhile
    return total / 1e9


def children_cpu_s():
    """CPU seconds of the children this script has waited for: the load
    generators (subprocess.run), not the servers, which run on."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def cpu_at(samples, t):
    """The CPU seconds of (monotonic time, CPU seconds) samples at time t,
    interpolated between the two samples around it."""
    prev = samples[0]
    for cur in samples[1:]:
        if cur[0] >= t:
            if cur[0] <= prev[0]:
                return cur[1]
            f = min(1.0, max(0.0, (t - prev[0]) / (cur[0] - prev[0])))
            return prev[1] + f * (cur[1] - prev[1])
        prev = cur
    return prev[1]


def metered(pids, fn, window=False):
    """fn (a cell: its result a dict with "cycles") with the CPU it took:
    "server_cpu_s" what the processes pids took, "load_cpu_s" what the
    load generator took (issue 23: whether a row is bound by the shared
    cores; see cpu_note).  With window (fencectl bench cells, whose tsv
    says when the measured window began and ended, CLOCK_MONOTONIC like
    time.monotonic(), and fencectl's own CPU in it): both over that window
    only, the servers' from samples every 10 ms, so that neither side
    counts the connects and TLS handshakes before it.  Without: over the
    whole cell, the load generator's as the children's CPU."""
    def run(*args):
        samples = [(time.monotonic(), cpu_s(pids))]
        c0 = children_cpu_s()
        done = threading.Event()

        def sample():
            while not done.wait(0.01):
                samples.append((time.monotonic(), cpu_s(pids)))
        th = threading.Thread(target=sample, daemon=True) if window else None
        if th is not None:
            th.start()
        try:
            d = dict(fn(*args))
        finally:
            done.set()
            if th is not None:
                th.join()
        samples.append((time.monotonic(), cpu_s(pids)))
        if window and "start_us" in d:
            t0, t1 = d["start_us"] / 1e6, d["stop_us"] / 1e6
            d["server_cpu_s"] = cpu_at(samples, t1) - cpu_at(samples, t0)
            d["load_cpu_s"] = d["cpu_s"]
        else:
            d["server_cpu_s"] = samples[-1][1] - samples[0][1]
            d["load_cpu_s"] = children_cpu_s() - c0
        return d
    return run


def cpu_per_cycle(cells):
    """(server, load) CPU microseconds per cycle over metered cells."""
    n = max(1.0, sum(c["cycles"] for c in cells))
    return (1e6 * sum(c["server_cpu_s"] for c in cells) / n,
            1e6 * sum(c["load_cpu_s"] for c in cells) / n)


def cells_seconds(cells):
    """The seconds metered cells ran: each one's cycles over its rate."""
    return sum(c["cycles"] / c["cycles_per_s"] for c in cells if c["cycles_per_s"] > 0)


def cpu_note(cells, target=None):
    """What a metered row's CPU says: server and load generator CPU per
    cycle; the most the machine's cores could do at that cost, all of them
    busy with nothing else (os.cpu_count() over the sum); how busy the
    cells kept them (their CPU over their seconds); and with target (a rate)
    how busy they would be at it.  A closed loop of clients sets the rate
    by its latency; this says how far the cores would let it go."""
    srv, load = cpu_per_cycle(cells)
    ncpu = os.cpu_count() or 1
    per = (srv + load) / 1e6
    cpu = sum(c["server_cpu_s"] + c["load_cpu_s"] for c in cells)
    secs = cells_seconds(cells)
    note = ("CPU per cycle: server %.1f us + load generator %.1f us; with all %d cores busy at "
            "most %.0f/s; this row kept them %.0f%% busy"
            % (srv, load, ncpu, ncpu / max(1e-12, per), 100.0 * cpu / max(1e-12, secs) / ncpu))
    if target:
        note += ", its target (%.0f/s) would need %.0f%%" % (target, 100.0 * target * per / ncpu)
    return note


def pinned_note(cells):
    """cpu_note for cells whose server and load generator each had one CPU
    of their own: each side's CPU per cycle, the most its CPU would allow,
    and how busy the cells kept the server's."""
    srv, load = cpu_per_cycle(cells)
    busy = sum(c["server_cpu_s"] for c in cells) / max(1e-12, cells_seconds(cells))
    return ("CPU per cycle: server %.1f us (its CPU allows at most %.0f/s; the cells kept it "
            "%.0f%% busy) + load generator %.1f us (at most %.0f/s)"
            % (srv, 1e6 / max(1e-9, srv), 100.0 * busy, load, 1e6 / max(1e-9, load)))


def rounds_note():
    """What the notes say about a merged row."""
    return "1 cell" if ROUNDS == 1 else "%d cells interleaved" % ROUNDS


def fsync_probe(d, mode="direct"):
    """fsync_probe DIR N MODE: {key: float}, or None if the probe is not built."""
    for p in FSYNC_PROBES:
        if os.access(p, os.X_OK):
            os.makedirs(d, exist_ok=True)
            n = "200" if SMOKE else "2000"
            out = subprocess.run([p, d, n, mode], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, timeout=300)
            if out.returncode != 0:
                raise RuntimeError("fsync_probe failed: %s" % out.stderr.decode()[-200:])
            return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", out.stdout.decode())}
    return None


def pipe_load(port, path):
    """redis-cli --pipe < path; returns (seconds, replies, errors)."""
    t0 = time.monotonic()
    with open(path, "rb") as f:
        out = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), "--pipe"],
                             stdin=f, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=1800)
    secs = time.monotonic() - t0
    text = out.stdout.decode(errors="replace")
    m = re.search(r"errors:\s*(\d+),\s*replies:\s*(\d+)", text)
    if out.returncode != 0 or m is None:
        raise RuntimeError("redis-cli --pipe failed: %s" % text[-300:])
    return secs, int(m.group(2)), int(m.group(1))


def kv(text):
    """"key=value ..." words of a line as a dict of floats."""
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", text)}


# ---------------------------------------------------------------- sections

def section_fenced():
    """Rows 1-2: one fenced, uncontended and one contended lock, with the
    handoff floor (fsync p50 of the data dir's disk + 1-client PING RTT)."""
    f = Fenced("fenced").start()
    log("fenced uncontended 1, 64 clients")
    u = fencectl_bench(f.addr(), "uncontended", [1, 64])
    for c in (1, 64):
        add(bench_row("fenced uncontended (a lock per client): acquire+release cycles, "
                      "acquire latency", u[c]))
    lock_vs_redis(f)
    log("fsync probe, PING round trip")
    probe = fsync_probe(os.path.join(TMP, "fsync-probe"))
    rps, p50, p99, mx = timed_redis_benchmark(f.port, 1, "PING")
    add(Row("PING round trip, 1 client (redis-benchmark)", 1, rps, p50, p99, mx))
    rtt = p50
    if probe is None:
        add(Row("fsync, data dir's disk (tests/bench/fsync_probe)", 1, value="n/a",
                notes="fsync_probe not built (tests/bench/fsync_probe.c)"))
        floor = None
    else:
        fp50 = probe.get("fsync_p50_us")
        add(Row("fsync, data dir's disk (tests/bench/fsync_probe)", 1,
                1e6 / fp50 if fp50 else None, fp50, probe.get("fsync_p99_us"),
                probe.get("fsync_max_us"), value="%.0f us" % fp50,
                notes="rate = 1 / fsync p50"))
        floor = 1e6 / (fp50 + rtt)
        add(Row("handoff floor = 1 / (fsync p50 + PING RTT p50)", 1,
                value="%.0f/s" % floor,
                notes="%.0f us + %.0f us" % (fp50, rtt)))
        # The same block writes the way libraft submits them (kernel AIO,
        # an eventfd, poll, io_getevents): the wake-up that path adds.
        aio = fsync_probe(os.path.join(TMP, "fsync-probe"), "aio")
        ap50 = aio.get("fsync_p50_us")
        add(Row("same writes through kernel AIO, as libraft submits them (fsync_probe aio)", 1,
                1e6 / ap50 if ap50 else None, ap50, aio.get("fsync_p99_us"),
                aio.get("fsync_max_us"), value="%.0f us" % ap50,
                notes="floor with it: %.0f/s" % (1e6 / (ap50 + rtt))))
    log("fenced one contended lock, 1 and 64 clients")
    c = fencectl_bench(f.addr(), "contended", [1, 64])
    for n in (1, 64):
        d = c[n]
        add(bench_row("fenced one contended lock: grants (with 64 clients each a handoff), "
                      "acquire latency", d,
                      peer="floor %.0f/s" % floor if floor else "floor n/a",
                      ratio=pct(d["cycles_per_s"], floor),
                      notes="target 70%% of floor; fewest/most per client %d/%d"
                            % (d["min_cycles"], d["max_cycles"])))
    # Shared (read) holds of one lock (issue 21): each joins the phase at
    # once, so the cycles run like uncontended ones, not like hand-offs.
    log("fenced one shared lock, 64 clients")
    sh = fencectl_bench(f.addr(), "shared", [64])[64]
    add(bench_row("fenced one shared lock (LOCK ... SHARED): acquire+release cycles, "
                  "acquire latency", sh,
                  notes="fewest/most per client %d/%d" % (sh["min_cycles"], sh["max_cycles"])))
    # The same cycles from one epoll thread (tests/bench/handoff_load.c):
    # what the 64 threads of fencectl bench, each woken for its grants, add.
    out = subprocess.run([HANDOFF_LOAD, str(f.port), "64", str(SECS)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=120)
    if out.returncode != 0:
        raise RuntimeError("handoff_load failed: %s" % out.stderr.decode()[-300:])
    h = kv(out.stdout.decode())
    add(Row("same, one epoll thread driving the 64 connections (tests/bench/handoff_load)", 64,
            h["cycles_per_s"], h["p50_us"], h["p99_us"], h["max_us"],
            peer="floor %.0f/s" % floor if floor else "floor n/a",
            ratio=pct(h["cycles_per_s"], floor),
            notes="fewest/most per client %d/%d; %d error replies"
                  % (h["min_cycles"], h["max_cycles"], h["errors"])))
    # A semaphore of 8 slots under 64 clients (SEM.ACQUIRE ... TTL, WAIT and
    # SEM.RELEASE from the same epoll client): 8 holders at a time, each
    # grant after the first 8 a handoff of a released slot.
    out = subprocess.run([HANDOFF_LOAD, str(f.port), "64", str(SECS), "10000", "8"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if out.returncode != 0:
        raise RuntimeError("handoff_load (semaphore) failed: %s" % out.stderr.decode()[-300:])
    h = kv(out.stdout.decode())
    add(Row("SEM.ACQUIRE with N=8 and 64 clients: acquire+release cycles, acquire latency "
            "(tests/bench/handoff_load, one epoll thread)", 64,
            h["cycles_per_s"], h["p50_us"], h["p99_us"], h["max_us"],
            peer="floor %.0f/s" % floor if floor else "floor n/a",
            ratio=pct(h["cycles_per_s"], floor),
            notes="fewest/most per client %d/%d; %d error replies"
                  % (h["min_cycles"], h["max_cycles"], h["errors"])))
    f.stop()


def cycle_load(port, mode, conns=64, seconds=None, cpu=None):
    """tests/bench/cycle_load PORT CONNS SECS MODE: {key: float}.  With cpu
    (a CPU number) the load generator runs on that CPU alone."""
    pre = ["taskset", "-c", str(cpu)] if cpu is not None else []
    out = subprocess.run(pre + [CYCLE_LOAD, str(port), str(conns), str(seconds or SECS), mode],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    if out.returncode != 0:
        raise RuntimeError("cycle_load %s failed: %s" % (mode, out.stderr.decode()[-300:]))
    return kv(out.stdout.decode())


def pin(pids, cpus):
    """Put every thread of the processes pids on the CPUs cpus (a set);
    returns what each thread had, for unpin.  Threads started later inherit
    their creator's set."""
    had = []
    for pid in pids:
        for t in os.listdir("/proc/%d/task" % pid):
            try:
                tid = int(t)
                had.append((tid, os.sched_getaffinity(tid)))
                os.sched_setaffinity(tid, cpus)
            except (OSError, ValueError):
                pass  # the thread ended meanwhile
    return had


def unpin(had):
    """Give the threads pin() moved their CPUs back."""
    for tid, cpus in had:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:
            pass


def lock_vs_redis(f):
    """Row 1b: the 64-client uncontended cycle against the same cycle on
    Redis 7 with appendfsync always (a Lua acquire that SETs NX PX and
    INCRs a token counter, a Lua compare-and-DEL release), both driven by
    one epoll client (tests/bench/cycle_load.c), interleaved."""
    if shutil.which("redis-server") is None:
        add(Row("Redis 7 lock cycle (Lua SET NX PX + INCR token, compare-and-DEL), "
                "appendfsync always", 64, value="n/a", notes="redis-server not installed"))
        return
    rport = free_port()
    rdir = os.path.join(TMP, "redis-locks")
    os.makedirs(rdir, exist_ok=True)
    rp = spawn(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--dir", rdir,
                "--appendonly", "yes", "--appendfsync", "always", "--save", ""],
               "redis-locks.log")
    if not wait_port(rport, 30):
        raise RuntimeError("redis-server did not listen")
    log("fenced vs Redis lock cycles, 64 clients (cycle_load)")
    e0 = int(f.info().get("raft_entries", 0))
    res = interleaved_fine([
        ("fenced", metered([f.proc.pid], lambda t: cycle_load(f.port, "fenced", seconds=t))),
        ("redis", metered([rp.pid], lambda t: cycle_load(rport, "redis", seconds=t)))])
    entries = int(f.info().get("raft_entries", 0)) - e0
    # The same cells with each server on one CPU and the load generator on
    # another (issue 23 section 2): what the servers do with a core of
    # their own, where the shared cells above also measure how the two
    # sides share the cores.  The ratio should follow the servers' CPU per
    # cycle.
    pinned = None
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2 and shutil.which("taskset") is not None:
        srv_cpu, load_cpu = cpus[0], cpus[1]
        log("fenced vs Redis lock cycles, servers on CPU %d, cycle_load on CPU %d"
            % (srv_cpu, load_cpu))
        had = pin([f.proc.pid, rp.pid], {srv_cpu})
        try:
            pinned = interleaved_fine([
                ("fenced", metered([f.proc.pid], lambda t: cycle_load(
                    f.port, "fenced", seconds=t, cpu=load_cpu))),
                ("redis", metered([rp.pid], lambda t: cycle_load(
                    rport, "redis", seconds=t, cpu=load_cpu)))])
        finally:
            unpin(had)
    stop(rp)

    def merged(cells):
        m = dict(cells[0])
        for k in ("cycles_per_s", "cycles"):
            m[k] = sum(c[k] for c in cells) / len(cells)
        for k in ("p50_us", "p99_us", "max_us"):
            m[k] = max(c[k] for c in cells)
        m["errors"] = sum(c["errors"] for c in cells)
        return m

    r, fc = merged(res["redis"]), merged(res["fenced"])
    add(Row("Redis 7 lock cycle (Lua SET NX PX + INCR token, compare-and-DEL), appendfsync "
            "always (cycle_load)", 64, r["cycles_per_s"], r["p50_us"], r["p99_us"], r["max_us"],
            notes="%s; %d error replies; %s" % (cpu_note(res["redis"]), r["errors"],
                                                fine_note())))
    add(Row("fenced uncontended, the same client (cycle_load: ACQUIRE name ttl + UNLOCK)", 64,
            fc["cycles_per_s"], fc["p50_us"], fc["p99_us"], fc["max_us"],
            peer="Redis %.0f/s" % r["cycles_per_s"], ratio=times(fc["cycles_per_s"],
                                                                r["cycles_per_s"]),
            notes="target >= 2x Redis; %s; %.1f raft entries (disk writes) per 100 cycles "
                  "(3.1 at best: one per half-cycle of all 64 clients); %d error replies; %s"
                  % (cpu_note(res["fenced"], target=2 * r["cycles_per_s"]),
                     100.0 * entries / max(1.0, sum(c["cycles"] for c in res["fenced"])),
                     fc["errors"], fine_note())))
    if pinned is None:
        log("no pinned cells: they need two CPUs and taskset")
        return
    pr, pf = merged(pinned["redis"]), merged(pinned["fenced"])
    rs, fs = cpu_per_cycle(pinned["redis"])[0], cpu_per_cycle(pinned["fenced"])[0]
    add(Row("Redis 7, the same cycle, redis-server on one CPU and cycle_load on another", 64,
            pr["cycles_per_s"], pr["p50_us"], pr["p99_us"], pr["max_us"],
            notes="%s; %d error replies; %s" % (pinned_note(pinned["redis"]), pr["errors"],
                                                fine_note())))
    add(Row("fenced, the same cycle, fenced on one CPU and cycle_load on another", 64,
            pf["cycles_per_s"], pf["p50_us"], pf["p99_us"], pf["max_us"],
            peer="Redis %.0f/s" % pr["cycles_per_s"],
            ratio=times(pf["cycles_per_s"], pr["cycles_per_s"]),
            notes="a core of its own for each server; server CPU per cycle Redis/fenced "
                  "%.2fx (the ratio if both servers kept their cores equally busy); %s; "
                  "%d error replies; %s"
                  % (rs / max(1e-9, fs), pinned_note(pinned["fenced"]), pf["errors"],
                     fine_note())))


def section_store():
    """Row 3: fence-store FSET next to Redis appendfsync always SET."""
    if shutil.which("redis-benchmark") is None or shutil.which("redis-server") is None:
        raise RuntimeError("redis-benchmark / redis-server not installed (redis-tools, redis-server)")
    sdir = os.path.join(TMP, "store")
    sport = free_port()
    sp = spawn([FENCE_STORE, "--port", str(sport), "--data-dir", os.path.join(sdir, "data"),
                "--log-level", "warn"], "store.log")
    rdir = os.path.join(TMP, "redis")
    os.makedirs(rdir)
    rport = free_port()
    rp = spawn(["redis-server", "--port", str(rport), "--bind", "127.0.0.1", "--dir", rdir,
                "--appendonly", "yes", "--appendfsync", "always", "--save", ""], "redis.log")
    if not wait_port(sport, 30) or not wait_port(rport, 30):
        raise RuntimeError("fence-store or redis-server did not listen")
    v = "0123456789abcdef"  # as tests/bench/store_bench.sh
    for c in (1, 64):
        log("Redis SET appendfsync always, fence-store FSET, %d clients" % c)
        res = interleaved([
            ("redis", lambda c=c: timed_redis_benchmark(rport, c, "SET", "key:__rand_int__", v)),
            ("store", lambda c=c: timed_redis_benchmark(sport, c, "FSET", "f", "1",
                                                        "key:__rand_int__", v))])
        r = merge_rb(res["redis"])
        st = merge_rb(res["store"])
        add(Row("Redis 7 SET, appendonly yes, appendfsync always (redis-benchmark)", c, *r,
                notes=rounds_note()))
        add(Row("fence-store FSET (equal token, 16-byte value; redis-benchmark)", c, *st,
                peer="Redis %.0f/s" % r[0], ratio=times(st[0], r[0]),
                notes="target >= %s Redis; %s" % ("0.8x" if c == 1 else "1x", rounds_note())))
    stop(sp)
    stop(rp)


def restart_row(f, what):
    """kill -TERM, start again, time until LEASE.GRANT answers."""
    down = f.stop()
    t0 = time.monotonic()
    f.proc = spawn([FENCED, "--port", str(f.port), "--bind", "127.0.0.1", "--data-dir", f.data,
                    "--log-level", "warn"] + f.args, f.name + ".log")
    wait_serving(f.port, f.proc, 600)
    up = time.monotonic() - t0
    add(Row(what, value="%.2f s" % up, notes="start to the first LEASE.GRANT answered (target "
            "< 2 s); SIGTERM to exit took %.2f s" % down))


def write_pipe_file(path, cmds):
    """Write the RESP of every command in cmds to path."""
    with open(path, "wb") as out:
        batch = []
        for c in cmds:
            batch.append(encode_command(*c))
            if len(batch) == 10000:
                out.write(b"".join(batch))
                batch = []
        out.write(b"".join(batch))


def section_big():
    """Row 4: 1M held locks (and 1M leases): rate against the empty state,
    loop lag, memory per lock and per lease, restart to serving."""
    n = BIG
    label = "1M" if n == 1000000 else "%dk" % (n // 1000) if n % 1000 == 0 else str(n)
    f = Fenced("big", ["--max-locks", str(n + n // 10 + 1000),
                       "--max-leases", str(n + n // 10 + 1000)]).start()
    time.sleep(0.5)
    rss0 = f.rss()
    log("big: empty-state cell")
    empty = fencectl_bench(f.addr(), "uncontended", [64])[64]
    add(bench_row("fenced uncontended, empty state (peer of the %s rows)" % label, empty))
    r = Resp("127.0.0.1", f.port)
    lease = r.call("LEASE.GRANT", 604800000)
    r.close()
    path = os.path.join(TMP, "locks.resp")
    write_pipe_file(path, (("LOCK", "big.%d" % i, lease) for i in range(n)))
    log("big: preloading %d LOCKs (redis-cli --pipe)" % n)
    secs, replies, errs = pipe_load(f.port, path)
    os.unlink(path)
    if errs:
        raise RuntimeError("%d of %d LOCKs in the preload failed" % (errs, replies))
    held = int(f.info()["locks"])
    if held < n:
        raise RuntimeError("after the preload %d locks are held, not %d" % (held, n))
    time.sleep(1)
    rss1 = f.rss()
    i0 = f.info()
    lag_pre = int(i0.get("loop_lag_max_us", "0"))
    over_pre = int(i0.get("loop_lag_over_20ms", "0"))
    add(Row("preload: %s LOCK on one lease (redis-cli --pipe)" % label, 1, n / secs,
            value="%.1f s" % secs, notes="loop lag max so far %.0f ms" % (lag_pre / 1000)))
    add(Row("memory per held lock, %s held (RSS delta / locks)" % label,
            value="%.0f B" % ((rss1 - rss0) / n),
            notes="target < 256 B; RSS %.0f -> %.0f MB (raft log entries in memory included)"
                  % (rss0 / 1e6, rss1 / 1e6)))
    log("big: 64-client cell with %d held" % n)
    full = fencectl_bench(f.addr(), "uncontended", [64])[64]
    add(bench_row("fenced uncontended, %s locks held" % label, full,
                  peer="empty %.0f/s" % empty["cycles_per_s"],
                  ratio=pct(full["cycles_per_s"], empty["cycles_per_s"]),
                  notes="target >= 85%"))
    i1 = f.info()
    lag = int(i1.get("loop_lag_max_us", "0"))
    over = int(i1.get("loop_lag_over_20ms", "0")) - over_pre
    # INFO's maximum cannot be reset: a new maximum is the cell's own; else
    # the count of ticks over 20 ms late (a delta) bounds the cell's.
    if lag > lag_pre:
        value = "%.1f ms" % (lag / 1000)
    elif over == 0:
        value = "< 20 ms"
    else:
        value = "<= %.1f ms" % (lag_pre / 1000)
    add(Row("loop lag max during that cell (INFO loop_lag_max_us)", value=value,
            notes="target < 20 ms; ticks over 20 ms late in the cell: %d%s"
                  % (over, "" if lag > lag_pre else
                     "; the max since start, %.1f ms, was set before the cell (not resettable)"
                     % (lag_pre / 1000))))
    restart_row(f, "restart to serving, %s locks held" % label)
    rss2 = f.rss()
    path = os.path.join(TMP, "leases.resp")
    write_pipe_file(path, (("LEASE.GRANT", 604800000) for _ in range(n)))
    log("big: preloading %d leases" % n)
    secs, replies, errs = pipe_load(f.port, path)
    os.unlink(path)
    if errs:
        raise RuntimeError("%d of %d LEASE.GRANTs in the preload failed" % (errs, replies))
    time.sleep(1)
    rss3 = f.rss()
    add(Row("memory per lease, %s leases (RSS delta / leases)" % label, 1, n / secs,
            value="%.0f B" % ((rss3 - rss2) / n),
            notes="target < 256 B; rate = preload LEASE.GRANTs/s; RSS %.0f -> %.0f MB"
                  % (rss2 / 1e6, rss3 / 1e6)))
    restart_row(f, "restart to serving, %s locks + %s leases" % (label, label))
    f.stop()


def keepalive_run(port, leases, ttl_ms, probe_port=None):
    """tests/bench/keepalive_load against port (its probe against
    probe_port if given): {phase: {key: float}}."""
    env = dict(os.environ)
    if probe_port is not None:
        env["KEEPALIVE_LOAD_PROBE_PORT"] = str(probe_port)
    out = subprocess.run([KEEPALIVE_LOAD, str(port), str(leases), str(KA_CONNS),
                          str(ttl_ms), str(SECS)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, timeout=900, env=env)
    if out.returncode != 0:
        raise RuntimeError("keepalive_load failed: %s" % out.stderr.decode()[-300:])
    return {ln.split()[0]: kv(ln) for ln in out.stdout.decode().splitlines() if ln.strip()}


def met(ok):
    return "met" if ok else "missed"


def keepalive_rows(label, leases, ttl_ms, ph):
    """The rows of one keepalive_load run (issue 23 §1): renewals answered
    against due, then the probe's LOCK rate under the load against idle
    (target >= 70%), its p99 under the load against idle (target <= 2x),
    and raft entries/s under the renewals (target: close to zero)."""
    idle, grant, load = ph["idle"], ph["grant"], ph["load"]
    n = ("1M" if leases == 1000000 else "%dk" % (leases // 1000) if leases % 1000 == 0
         else str(leases))
    add(Row("keepalive load%s: %s leases, LEASE.KEEPALIVE each every ttl/3 (ttl %d s)"
            % (label, n, ttl_ms // 1000), KA_CONNS, load["keepalives_per_s"],
            load["ka_p50_us"], load["ka_p99_us"], load["ka_max_us"],
            peer="due %.0f/s" % load["target_per_s"],
            ratio=pct(load["keepalives_per_s"], load["target_per_s"]),
            notes="answered/s vs due/s (open loop); latency: renewal send to reply; %d error "
                  "replies, %d skipped (4096 owed on a connection); granted at %.0f/s"
                  % (load["errors"], load["skipped"], grant["grants_per_s"])))
    before = ph.get("before", idle)
    probe_rows("LOCK+UNLOCK on its own lock during that load%s" % label, idle, load,
               lambda rate_idle, rate_load:
               "target >= 70%%: %s; idle: the same probe (a thread of its own) in the "
               "idle 500 ms slices between the load's: p50 %.0f p99 %.0f max %.0f us; "
               "before the leases: %.0f/s, p99 %.0f us"
               % (met(rate_idle > 0 and rate_load >= 0.7 * rate_idle),
                  idle["lock_p50_us"], idle["lock_p99_us"], idle["lock_max_us"],
                  before["lock_cycles"] / SECS, before["lock_p99_us"]),
               "ratio: p99 under the load / idle; target <= 2x: %s"
               % met(idle["lock_p99_us"] > 0 and load["lock_p99_us"] <= 2 * idle["lock_p99_us"]))
    add(Row("raft entries/s during that load%s (INFO raft_entries)" % label, KA_CONNS,
            value="%.1f/s" % load.get("raft_entries_per_s", 0),
            ratio=pct(load.get("renewals_local", 0), load["sent"]),
            notes="without the probe's (2 a LOCK/UNLOCK cycle): %.1f/s (target: close to "
                  "zero; a probe cycle that straddles a slice's edge is in the entries, not in "
                  "the cycles); checkpoints in entries of their own: %.1f/s, riding other "
                  "entries: %.0f/s (INFO checkpoints, checkpoints_rode); ratio: renewals "
                  "answered by the leader without an entry (docs/leases.md), %d of %d; "
                  "commands logged: %.0f/s"
                  % (renewal_entries(load), load.get("ckpt_alone", 0) / SECS,
                     load.get("ckpt_rode", 0) / SECS, load.get("renewals_local", 0),
                     load["sent"], load.get("logged_cmds", 0) / SECS)))


def section_keepalive():
    """Row 5: KA_LEASES leases renewed every ttl/3 by KA_CONNS connections,
    LOCK rate and latency meanwhile (tests/bench/keepalive_load); then BIG
    (1M) leases; then KA_LEASES on a 3-node cluster."""
    f = Fenced("keepalive", ["--max-leases", str(2 * KA_LEASES + 1000),
                             "--max-clients", str(KA_CONNS + 1000)]).start()
    log("keepalive: %d leases, %d connections" % (KA_LEASES, KA_CONNS))
    keepalive_rows("", KA_LEASES, KA_TTL_MS, keepalive_run(f.port, KA_LEASES, KA_TTL_MS))
    f.stop()
    keepalive_control()
    section_keepalive_big()
    section_keepalive_cluster()


def keepalive_control():
    """The control of the keepalive rows: the same load against one fenced,
    the probe against a second one, so the probe shares the two cores with
    the load but not the server.  What the machine alone does to the
    probe's rate and p99: the part of those rows no server change moves."""
    f = Fenced("keepalive-load", ["--max-leases", str(2 * KA_LEASES + 1000),
                                  "--max-clients", str(KA_CONNS + 1000)]).start()
    g = Fenced("keepalive-probe").start()
    log("keepalive control: the load on one fenced, the probe on another")
    ph = keepalive_run(f.port, KA_LEASES, KA_TTL_MS, probe_port=g.port)
    f.stop()
    g.stop()
    idle, load = ph["idle"], ph["load"]
    probe_rows("control: the same probe on a second fenced while that load runs on the first",
               idle, load,
               "the machine's share: the load's client and server on the same 2 cores, "
               "no server shared; idle p50 %.0f p99 %.0f us"
               % (idle["lock_p50_us"], idle["lock_p99_us"]),
               "the floor of the p99 row above on this machine (its target: 2x)")


def probe_rows(title, idle, load, rate_notes, p99_notes):
    """The probe's two rows of a keepalive run: its LOCK rate under the load
    against idle, and its p99 under the load against idle.  rate_notes is
    the rate row's notes, or a function of (idle rate, load rate) giving
    them."""
    rate_idle = idle["lock_cycles"] / SECS
    rate_load = load["lock_cycles"] / SECS
    if callable(rate_notes):
        rate_notes = rate_notes(rate_idle, rate_load)
    add(Row(title + ": LOCK rate, load vs idle", 1, rate_load, load["lock_p50_us"],
            load["lock_p99_us"], load["lock_max_us"], peer="idle %.0f/s" % rate_idle,
            ratio=pct(rate_load, rate_idle), notes=rate_notes))
    add(Row(title + ": LOCK p99, load vs idle", 1, value="%.0f us" % load["lock_p99_us"],
            peer="idle %.0f us" % idle["lock_p99_us"],
            ratio=times(load["lock_p99_us"], idle["lock_p99_us"]), notes=p99_notes))


def renewal_entries(load):
    """Raft entries/s of a keepalive_load phase, less the probe's two a cycle."""
    return max(0.0, load.get("raft_entries", 0) - 2 * load["lock_cycles"]) / SECS


def section_keepalive_big():
    """1M leases under renewal: BIG leases renewed every ttl/3 (ttl 30 s)
    on 1,000 connections."""
    f = Fenced("keepalive-big", ["--max-leases", str(BIG + 1000),
                                 "--max-clients", str(KA_CONNS + 1000)]).start()
    log("keepalive: %d leases, %d connections, ttl %d ms" % (BIG, KA_CONNS, KA_BIG_TTL_MS))
    keepalive_rows("", BIG, KA_BIG_TTL_MS, keepalive_run(f.port, BIG, KA_BIG_TTL_MS))
    f.stop()


def section_keepalive_cluster():
    """Keepalive load at 3 nodes: KA_LEASES leases renewed every ttl/3
    against a 3-node cluster's leader."""
    nodes, leader = start_cluster("keepalive3", ["--max-leases", str(2 * KA_LEASES + 1000),
                                                 "--max-clients", str(KA_CONNS + 1000)])
    log("keepalive: %d leases, %d connections, 3 nodes" % (KA_LEASES, KA_CONNS))
    try:
        keepalive_rows(" at 3 nodes", KA_LEASES, KA_TTL_MS,
                       keepalive_run(leader["port"], KA_LEASES, KA_TTL_MS))
    finally:
        for n in nodes:
            stop(n["proc"])


def start_cluster(name, args=()):
    """A 3-node cluster on 127.0.0.1 (free ports, data in TMP/name):
    (nodes, the ready leader), each node a dict with its "port" and "proc"."""
    nodes = []
    for i in (1, 2, 3):
        nodes.append({"id": i, "port": free_port(), "raft": free_port(),
                      "data": os.path.join(TMP, name, "n%d" % i)})
    peers = ",".join("%d=127.0.0.1:%d/%d" % (n["id"], n["port"], n["raft"]) for n in nodes)
    for n in nodes:
        n["proc"] = spawn([FENCED, "--node-id", str(n["id"]), "--port", str(n["port"]),
                           "--bind", "127.0.0.1", "--raft-port", str(n["raft"]),
                           "--data-dir", n["data"], "--peers", peers, "--log-level", "warn"]
                          + list(args), "%s-n%d.log" % (name, n["id"]))
    leader = None
    end = time.monotonic() + 60
    while leader is None and time.monotonic() < end:
        for n in nodes:
            try:
                i = info(n["port"])
            except (OSError, ConnectionError, RespError):
                continue
            if i.get("role") == "leader" and i.get("leader_ready") == "1":
                leader = n
                break
        time.sleep(0.05)
    if leader is None:
        for n in nodes:
            stop(n["proc"])
        raise RuntimeError("the 3-node cluster elected no ready leader")
    wait_serving(leader["port"], leader["proc"], 30)
    return nodes, leader


def section_cluster():
    """Row 6: a 3-node cluster on 127.0.0.1 against one node (row 1)."""
    nodes, leader = start_cluster("cluster")
    addrs = ["127.0.0.1:%d" % leader["port"]] + ["127.0.0.1:%d" % n["port"] for n in nodes
                                                   if n is not leader]
    # The single node right before the cluster, so that the machine's load
    # from elsewhere is about the same for both.
    log("cluster: 1 node and 3 nodes, 64 clients")
    single = Fenced("single").start()
    i1, i3 = single.info(), info(leader["port"])
    res = interleaved([
        ("one", metered([single.proc.pid],
                        lambda: fencectl_bench(single.addr(), "uncontended", [64])[64], True)),
        ("three", metered([n["proc"].pid for n in nodes],
                          lambda: fencectl_bench(",".join(addrs), "uncontended", [64])[64],
                          True))])
    j1, j3 = single.info(), info(leader["port"])
    single.stop()

    def delta(a, b, k):
        try:
            return int(b.get(k, 0)) - int(a.get(k, 0))
        except ValueError:
            return 0
    c1 = sum(r["cycles"] for r in res["one"])
    c3 = sum(r["cycles"] for r in res["three"])
    one = merge_bench(res["one"])
    d = merge_bench(res["three"])
    add(bench_row("1 node, uncontended (peer of the next row)", one,
                  notes="%s; %.1f raft entries per 100 cycles, %d gathered; %s" % (
                      rounds_note(), 100.0 * delta(i1, j1, "raft_entries") / max(c1, 1),
                      delta(i1, j1, "batches_gathered"), cpu_note(res["one"]))))
    add(bench_row("3-node cluster (127.0.0.1), uncontended", d,
                  peer="1 node %.0f/s" % one["cycles_per_s"],
                  ratio=pct(d["cycles_per_s"], one["cycles_per_s"]),
                  notes="target 80%%; %s; %.1f raft entries per 100 cycles, %d gathered, "
                        "%d proposed behind others in flight (INFO batches_pipelined); %s "
                        "(server: the three nodes)" % (
                            rounds_note(), 100.0 * delta(i3, j3, "raft_entries") / max(c3, 1),
                            delta(i3, j3, "batches_gathered"),
                            delta(i3, j3, "batches_pipelined"),
                            cpu_note(res["three"], target=0.8 * one["cycles_per_s"]))))
    for n in nodes:
        stop(n["proc"])


def section_features():
    """Row 7: TLS vs plain, signed vs unsigned grants, metrics on vs off:
    64-client uncontended cycles on one fenced with a TLS listener, a
    signing key and a metrics port."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    import tls_certs
    certs = tls_certs.make(os.path.join(TMP, "certs"))
    keys = os.path.join(TMP, "keys")
    subprocess.run([FENCECTL, "keygen", keys], stdout=subprocess.DEVNULL, check=True)
    tport = free_port()
    mport = free_port()
    f = Fenced("features", ["--tls-port", str(tport), "--tls-cert", certs["server.crt"],
                            "--tls-key", certs["server.key"], "--metrics-port", str(mport),
                            "--token-signing-key", os.path.join(keys, "signing.key")]).start()
    nomet = Fenced("nometrics").start()
    stop_flag = threading.Event()
    scrapes = [0]

    def scraper():
        while not stop_flag.is_set():
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=2).read()
                scrapes[0] += 1
            except OSError:
                pass
            stop_flag.wait(0.1)

    def scraped():
        stop_flag.clear()
        th = threading.Thread(target=scraper, daemon=True)
        th.start()
        try:
            return fencectl_bench(f.addr(), "uncontended", [64])[64]
        finally:
            stop_flag.set()
            th.join()
    log("features: metrics off / on (scraped)")
    res = interleaved([("off", lambda: fencectl_bench(nomet.addr(), "uncontended", [64])[64]),
                       ("on", scraped)])
    nomet.stop()
    off = merge_bench(res["off"])
    met = merge_bench(res["on"])
    add(bench_row("fenced without --metrics-port, uncontended (peer of the next row)", off,
                  notes=rounds_note()))
    add(bench_row("fenced with --metrics-port, /metrics scraped 10 times a second", met,
                  peer="no metrics port %.0f/s" % off["cycles_per_s"],
                  ratio=pct(met["cycles_per_s"], off["cycles_per_s"]),
                  notes="%d scrapes; this fenced also has a TLS port and a signing key; %s"
                        % (scrapes[0], rounds_note())))
    log("features: plain, TLS, signed")
    pids = [f.proc.pid]
    res = interleaved_fine([
        ("plain", metered(pids, lambda t: fencectl_bench(f.addr(), "uncontended", [64],
                                                         seconds=t)[64], True)),
        ("tls", metered(pids, lambda t: fencectl_bench(
            "127.0.0.1:%d" % tport, "uncontended", [64],
            extra=["--tls", "--cacert", certs["ca.crt"]], seconds=t)[64], True)),
        ("signed", metered(pids, lambda t: fencectl_bench(f.addr(), "uncontended", [64],
                                                          extra=["--signed"],
                                                          seconds=t)[64], True))])
    plain, tls, sig = (merge_bench(res[k]) for k in ("plain", "tls", "signed"))
    add(bench_row("same fenced, plain TCP, not scraped (peer of the next rows)", plain,
                  notes="%s; %s" % (fine_note(), cpu_note(res["plain"]))))
    add(bench_row("same fenced, TLS 1.3 (fencectl --tls)", tls, peer="plain %.0f/s"
                  % plain["cycles_per_s"], ratio=pct(tls["cycles_per_s"], plain["cycles_per_s"]),
                  notes="target >= 80%%; the clients' TLS work runs on the same 2 cores; %s; %s"
                        % (fine_note(), cpu_note(res["tls"],
                                               target=0.8 * plain["cycles_per_s"]))))
    add(bench_row("same fenced, signed grants (ACQUIRE ... SIGNED, Ed25519)", sig,
                  peer="unsigned %.0f/s" % plain["cycles_per_s"],
                  ratio=pct(sig["cycles_per_s"], plain["cycles_per_s"]),
                  notes="target >= 85%%; %s; %s" % (fine_note(),
                                                    cpu_note(res["signed"],
                                                             target=0.85 * plain["cycles_per_s"]))))
    f.stop()


def section_multi():
    """Atomic multi-locks (issue 21): ACQUIRE.MULTI of 3 random names with
    a 50 ms dedicated lease (never released: expiry frees them, as a
    crashed holder's would), 64 clients, against ACQUIRE of 1 random name
    the same way (the peer), interleaved."""
    f = Fenced("multi").start()
    one = ["ACQUIRE", "one:__rand_int__", "50"]
    three = ["ACQUIRE.MULTI", "50", "a:__rand_int__", "b:__rand_int__", "c:__rand_int__"]
    log("multi: ACQUIRE of 1 name / ACQUIRE.MULTI of 3, 64 clients")
    res = interleaved([("one", lambda: timed_redis_benchmark(f.port, 64, *one)),
                       ("three", lambda: timed_redis_benchmark(f.port, 64, *three))])
    r1 = merge_rb(res["one"])
    r3 = merge_rb(res["three"])
    add(Row("ACQUIRE of 1 random name, 50 ms lease left to expire, 64 clients "
            "(redis-benchmark; peer of the next row)", 64, *r1, notes=rounds_note()))
    add(Row("ACQUIRE.MULTI of 3 random names (all or none, one token), same", 64, *r3,
            peer="1 name %.0f/s" % r1[0], ratio=pct(r3[0], r1[0]), notes=rounds_note()))


def _quantile(v, q):
    """The q-quantile of the sorted list v (microseconds), or None."""
    if not v:
        return None
    return v[min(len(v) - 1, int(q * len(v)))]


def section_elect():
    """Two rows of leader election (issue 21 §1), with a Python driver over
    raw RESP (so the latencies include its overhead on both sides):
    CAMPAIGN handoff: the leader resigns, the waiting candidate's CAMPAIGN
    reply arrives (RESIGN sent -> reply read); OBSERVE latency: an observer
    parked with AFTER its revision gets the new state after the leader
    resigns and the next candidate is elected (RESIGN sent -> OBSERVE reply)."""
    f = Fenced("elect").start()
    a = Resp("127.0.0.1", f.port, timeout=30)
    b = Resp("127.0.0.1", f.port, timeout=30)
    o = Resp("127.0.0.1", f.port, timeout=30)
    la = a.call("LEASE.GRANT", 600000)
    lb = b.call("LEASE.GRANT", 600000)
    tok = a.call("ELECTION.CAMPAIGN", "bench-e", la, "a")[0]
    leader, waiter = (a, la), (b, lb)
    handoff, observe = [], []
    t_end = time.monotonic() + SECS
    n = 0
    while time.monotonic() < t_end:
        (lc, ll), (wc, wl) = leader, waiter
        rev = o.call("ELECTION.OBSERVE", "bench-e")[3]
        wc.sock.sendall(encode_command("ELECTION.CAMPAIGN", "bench-e", wl, "v", "WAIT", 30000))
        o.sock.sendall(encode_command("ELECTION.OBSERVE", "bench-e", "AFTER", rev, "WAIT", 30000))
        # The candidate is queued once LOCK.INFO (an election is a lock
        # object) counts a waiter; the observer was sent before that poll.
        for _ in range(10000):
            if lc.call("LOCK.INFO", "bench-e")[3] >= 1:
                break
        t0 = time.monotonic()
        lc.sock.sendall(encode_command("ELECTION.RESIGN", "bench-e", tok))
        st = o._reply()
        t_obs = time.monotonic()
        r = wc._reply()
        t_won = time.monotonic()
        if lc._reply() != 1 or isinstance(r, RespError) or isinstance(st, RespError):
            raise RuntimeError("elect: unexpected replies %r %r" % (r, st))
        observe.append((t_obs - t0) * 1e6)
        handoff.append((t_won - t0) * 1e6)
        tok = r[0]
        leader, waiter = waiter, leader
        n += 1
    handoff.sort()
    observe.sort()
    secs = max(1e-9, SECS)
    add(Row("ELECTION.CAMPAIGN handoff: RESIGN -> the waiting candidate elected", 2,
            n / secs, _quantile(handoff, 0.5), _quantile(handoff, 0.99), handoff[-1] if handoff
            else None, notes="%d handoffs; one RESIGN entry each (fsync); Python driver" % n))
    add(Row("ELECTION.OBSERVE latency of a change: RESIGN -> parked observer's reply", 1,
            None, _quantile(observe, 0.5), _quantile(observe, 0.99),
            observe[-1] if observe else None,
            notes="woken at the loop turn after the apply; %d changes" % n))
    for c in (a, b, o):
        c.close()
    f.stop()


def section_go():
    """The Go client (clients/go/internal/bench: Client.Acquire + Release
    per cycle, each goroutine its own Client of one connection, TTL 10 s,
    wait TTL/2, as fencectl bench does with libfence) next to fencectl
    bench on the same fenced, 1 and 64 clients, cells interleaved.  Built
    here with the go command (caches under BUILD/go); without go the
    section prints no row and says so on stderr."""
    if shutil.which("go") is None:
        log("go: skipped, the go command is not installed (apt-get install golang-go)")
        return
    exe = os.path.join(TMP, "fence-go-bench")
    env = dict(os.environ, GOCACHE=os.path.join(BUILD, "go", "cache"),
               GOPATH=os.path.join(BUILD, "go", "path"), GOTOOLCHAIN="local", GOPROXY="off",
               GOFLAGS="")
    out = subprocess.run(["go", "build", "-o", exe, "./internal/bench"],
                         cwd=os.path.join(ROOT, "clients", "go"), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    if out.returncode != 0:
        raise RuntimeError("go build: %s" % out.stdout.decode()[-300:])
    f = Fenced("go").start()

    def go_bench(conns):
        r = subprocess.run([exe, "-server", f.addr(), "-conns", str(conns),
                            "-duration", "%ds" % SECS], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        lines = r.stdout.decode().splitlines()
        if r.returncode != 0 or len(lines) < 2:
            raise RuntimeError("Go bench failed (%d): %s" % (r.returncode, r.stderr.decode()[-300:]))
        d = dict(zip(lines[0].split("\t"), lines[1].split("\t")))
        return {k: (float(v) if k != "mode" else v) for k, v in d.items()}
    log("go: Go client and fencectl bench, 1 and 64 clients")
    for n in (1, 64):
        res = interleaved([("c", lambda: fencectl_bench(f.addr(), "uncontended", [n])[n]),
                           ("go", lambda: go_bench(n))])
        c, g = merge_bench(res["c"]), merge_bench(res["go"])
        add(bench_row("fencectl bench (libfence), uncontended (peer of the next row)", c,
                      notes=rounds_note()))
        add(bench_row("Go client (clients/go), uncontended: Acquire+Release cycles", g,
                      peer="libfence %.0f/s" % c["cycles_per_s"],
                      ratio=pct(g["cycles_per_s"], c["cycles_per_s"]),
                      notes="target >= 80%%; %s" % rounds_note()))
    f.stop()


WRK_RUNS = [0]  # cells so far: each wrk cell's clients get fences of their own


def wrk_cell(port, clients, mode, script):
    """wrk --latency with tests/bench/proxy_bench.py's PUT script: (rps, p50, p99,
    max in us, non-2xx)."""
    WRK_RUNS[0] += 1
    run = "%d.%d" % (clients, WRK_RUNS[0])
    out = subprocess.run(["wrk", "-t%d" % clients, "-c%d" % clients, "-d%ds" % SECS, "--latency",
                          "-s", script, "http://127.0.0.1:%d/" % port, "--", mode, run],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=SECS + 60)
    text = out.stdout.decode()
    unit = {"us": 1.0, "ms": 1000.0, "s": 1e6}

    def us(v, u):
        return float(v) * unit[u]
    m = re.search(r"Requests/sec:\s+([\d.]+)", text)
    lat = re.search(r"^\s+Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\s", text, re.M)
    pcts = {p: us(v, u) for p, v, u in
            re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", text, re.M)}
    if out.returncode != 0 or m is None or lat is None:
        raise RuntimeError("wrk failed: %s" % (out.stderr.decode() or text)[-300:])
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    return (float(m.group(1)), pcts.get("50"), pcts.get("99"), us(*lat.groups()),
            int(bad.group(1)) if bad else 0)


def section_proxy():
    """Row 7 (continued): fence-proxy in front of nginx against nginx alone,
    small WebDAV PUTs with wrk (the script of tests/bench/proxy_bench.py)."""
    if shutil.which("wrk") is None or shutil.which("nginx") is None:
        raise RuntimeError("wrk or nginx not installed (scripts/deps.sh test)")
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
    import importlib
    pb = importlib.import_module("proxy_bench")  # tests/bench/proxy_bench.py: its LUA script
    from test_proxy_lib import Nginx, Proxy
    script = os.path.join(TMP, "put.lua")
    with open(script, "w") as f:
        f.write(pb.LUA)
    ng = Nginx(TMP).start()
    px = Proxy(TMP, ng.port, args=["--log-level", "warn"]).start()
    try:
        for c in (1, 64):
            log("proxy: nginx, proxy steady, proxy new token, %d clients" % c)
            res = interleaved([
                ("nginx", lambda c=c: wrk_cell(ng.port, c, "steady", script)),
                ("steady", lambda c=c: wrk_cell(px.port, c, "steady", script)),
                ("rising", lambda c=c: wrk_cell(px.port, c, "rising", script))])
            merged = {}
            for k, rs in res.items():
                merged[k] = merge_rb([r[:4] for r in rs]) + (sum(r[4] for r in rs),)
            base = merged["nginx"]
            add(Row("nginx alone, WebDAV PUT of 64 bytes (wrk)", c, *base[:4],
                    notes="%s; %d non-2xx" % (rounds_note(), base[4])))
            for k, label in (("steady", "fence-proxy -> nginx, PUT, same token each time"),
                             ("rising", "fence-proxy -> nginx, PUT, a new token each time "
                                        "(durable mark)")):
                r = merged[k]
                add(Row(label, c, *r[:4], peer="nginx %.0f/s" % base[0], ratio=pct(r[0], base[0]),
                        notes="%s; %d non-2xx" % (rounds_note(), r[4])))
    finally:
        px.stop()
        ng.stop()


# ---------------------------------------------------------------- main

def facts():
    """Machine facts for the top of the output."""
    def sh(*argv):
        try:
            return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  cwd=ROOT, timeout=10).stdout.decode().strip()
        except OSError:
            return "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    fs, _, dev = sh("findmnt", "-n", "-o", "FSTYPE,SOURCE", "-T", TMP).partition(" ")
    return [
        "date: %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "git: %s" % sh("git", "describe", "--always", "--dirty", "--tags"),
        "machine: %s cores (nproc), %s, kernel %s %s" % (os.cpu_count() and sh("nproc"), cpu,
                                                         platform.release(), platform.machine()),
        "data dirs: %s (filesystem %s on %s)" % (TMP, fs or "?", dev.strip() or "?"),
        "load average at start: %s" % " ".join(open("/proc/loadavg").read().split()[:3]),
        "cells: %d s each%s" % (SECS, ", smoke run (tiny cells)" if SMOKE else ""),
    ]


def main():
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    for p in (FENCED, FENCECTL, FENCE_STORE, KEEPALIVE_LOAD, HANDOFF_LOAD, CYCLE_LOAD,
              os.path.join(BUILD, "fence-proxy")):
        if not os.access(p, os.X_OK):
            sys.exit("bench: %s is not built (make bench builds it)" % p)
    head = facts()
    t0 = time.monotonic()
    funcs = {"fenced": section_fenced, "store": section_store, "big": section_big,
             "keepalive": section_keepalive, "cluster": section_cluster,
             "features": section_features, "proxy": section_proxy, "go": section_go,
             "multi": section_multi,
             "elect": section_elect}
    try:
        for name in SECTIONS:
            if name not in ONLY:
                continue
            log("section %s" % name)
            try:
                funcs[name]()
            except Exception as e:  # a failed section leaves an n/a row, the rest runs
                FAILED.append(name)
                add(Row("section %s" % name, value="n/a", notes="FAILED: %s" % str(e)[:200]))
            for p in list(PROCS):
                stop(p)
        print("make bench: one table from one run (docs/performance.md)")
        for ln in head:
            print(ln)
        print("load average at end: %s; run took %.0f s" %
              (" ".join(open("/proc/loadavg").read().split()[:3]), time.monotonic() - t0))
        print("latencies in microseconds (us); ratio = rate / peer rate unless noted; "
              "\"N cells interleaved\": the row's cells ran\nin turn with its peer's (A B B A), "
              "rate = their mean, p50/p99/max = the highest cell's")
        print()
        print_table()
    finally:
        cleanup()
    sys.exit(1 if FAILED else 0)


if __name__ == "__main__":
    main()
