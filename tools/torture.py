#!/usr/bin/python3
"""fence-torture: randomized fault injection against real fenced and
fence-store processes, then the history checker.

It starts fence-store and fenced (temp dirs, free ports on 127.0.0.1), one
pair of fault proxies (fence-faults) per worker, and N workers
(fence-torture-worker).  A nemesis follows a schedule drawn from the seed
and injects, every few seconds:

  pause-holder  SIGSTOP a worker inside its critical section (after its
                FENCE.ADMIT, before its write landed) for 1.5-3 TTLs: the
                seed's scenario
  pause-waiter  SIGSTOP a worker queued in LOCK WAIT for 1.5-3 TTLs: its
                lease expires while queued (the etcd#11456 case)
  pause         SIGSTOP a random worker
  kill-fenced   kill -9 fenced, restart it on the same data dir
  kill-store    kill -9 fence-store, restart it
  partition     black-hole a worker's connections to both servers
  delay         delay a worker's traffic by 50-400 ms each way
  reset         reset a worker's connections (RST)
  clock         jump a worker's wall clock by +-1..3 h (libfaketime; the
                monotonic clock is left alone, as it must not matter)

Every fault is logged into the history with its time.  After the run:
everything healed, a quiet period (liveness), workers stopped, final reads
of the counter and of every acknowledged record straight from the store,
then the checker (tools/torture_check.py) and a summary table.

Replay: the same --seed (and the same options) gives the same fault
schedule.  The exit status is 0 when the checker finds nothing (or, with
--expect-violation, the controls, when it does find a violation).
"""

import argparse
import heapq
import json
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import torture_check  # noqa: E402
import torture_common as tc  # noqa: E402

ALL_FAULTS = ("pause-holder", "pause-waiter", "pause", "kill-fenced", "kill-store", "partition", "delay",
              "reset", "clock")
# Relative weights of the default mix.
WEIGHTS = {"pause-holder": 4, "pause-waiter": 2, "pause": 1, "kill-fenced": 1, "kill-store": 1,
           "partition": 1, "delay": 1, "reset": 1, "clock": 1}
FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1",
                 "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def log(msg):
    """Prints a progress line with a wall-clock stamp."""
    print("[torture %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


class Server:
    """A fenced or fence-store process we can kill -9 and restart."""

    def __init__(self, name, argv, port, logpath):
        self.name = name  # "fenced" or "fence-store"
        self.argv = argv  # full command line
        self.port = port  # client port on 127.0.0.1
        self.logpath = logpath  # stdout/stderr go here (appended)
        self.proc = None  # subprocess.Popen or None while down

    def start(self, wait_s=15.0, ready=True):
        """Starts the process and waits for its port (and, for a single
        fenced, for its leader to be ready); False if it never came up."""
        logf = open(self.logpath, "a")
        self.proc = subprocess.Popen(self.argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        logf.close()
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if tc.wait_port(self.port, 0.2):
                if self.name.startswith("fenced") and ready:
                    return tc.wait_fenced_ready(self.port, max(0.5, deadline - time.monotonic()))
                return True
        return False

    def kill(self, sig=signal.SIGKILL):
        """Signals the process and reaps it."""
        if self.proc is None:
            return
        try:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc = None


class Proxy:
    """A fence-faults process driven over its stdin."""

    def __init__(self, exe, target, logpath):
        self.port = tc.free_port()
        logf = open(logpath, "a")
        self.proc = subprocess.Popen([exe, str(self.port), target[0], str(target[1])],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=logf, text=True)
        logf.close()
        line = self.proc.stdout.readline()
        if not line.startswith("ok listening"):
            raise RuntimeError("fence-faults did not start: %r" % line)

    def cmd(self, line):
        """Sends one control command and waits for its acknowledgement."""
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        ack = self.proc.stdout.readline()
        if not ack.startswith("ok"):
            raise RuntimeError("fence-faults refused %r: %r" % (line, ack))

    def stop(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Tail:
    """Follows a worker's history file to know what it is doing now."""

    def __init__(self, path):
        self.path = path
        self.off = 0
        self.partial = ""
        self.last = None  # last event seen
        self.holding = False  # between a granted LOCK and its UNLOCK
        self.critical = False  # between FENCE.ADMIT ok and the write's end
        self.waiting = False  # LOCK invoked, not completed

    def poll(self):
        """Reads new complete lines and updates the state."""
        try:
            with open(self.path) as f:
                f.seek(self.off)
                data = f.read()
                self.off = f.tell()
        except OSError:
            return
        data = self.partial + data
        lines = data.split("\n")
        self.partial = lines.pop()
        for line in lines:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            self.last = e
            op, ph = e.get("op"), e.get("phase")
            if op == "lock":
                self.waiting = ph == "invoke"
                self.holding = ph == "ok"
            elif op == "admit" and ph == "ok":
                self.critical = True
            elif op == "write" and ph != "invoke":
                self.critical = False
            elif op in ("unlock", "revoke", "grant"):
                self.holding = False
                self.critical = False


class Worker:
    """One workload process with its two proxies and its faked wall clock."""

    def __init__(self, idx, args, fenced_addrs, store_addr, outdir, seed, use_faketime, extra_args):
        self.idx = idx
        self.name = "w%d" % idx
        self.history = os.path.join(outdir, "history-%s.jsonl" % self.name)
        self.pfs = [Proxy(args.proxy, fp, os.path.join(outdir, "proxy-%s.log" % self.name)) for fp in fenced_addrs]
        self.ps = Proxy(args.proxy, store_addr, os.path.join(outdir, "proxy-%s.log" % self.name))
        self.clockfile = os.path.join(outdir, "clock-%s" % self.name)
        with open(self.clockfile, "w") as f:
            f.write("+0\n")
        env = dict(os.environ)
        if use_faketime:
            lib = next((p for p in FAKETIME_LIBS if os.path.exists(p)), None)
            if lib is not None:
                env.update({"LD_PRELOAD": lib, "FAKETIME_TIMESTAMP_FILE": self.clockfile,
                            "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1",
                            "DONT_FAKE_MONOTONIC": "1"})
        argv = [args.worker, "--id", str(idx), "--history", self.history,
                "--fenced", ",".join("127.0.0.1:%d" % pf.port for pf in self.pfs), "--store", "127.0.0.1:%d" % self.ps.port,
                "--ttl-ms", str(args.ttl_ms), "--wait-ms", str(args.wait_ms),
                "--hold-max-ms", str(args.hold_max_ms), "--seed", str(seed), "--long-pct", str(args.long_pct),
                "--shared-pct", str(args.shared_pct),
                "--lock", args.lock, "--fence", args.fence, "--counter", args.counter] + extra_args
        logf = open(os.path.join(outdir, "%s.log" % self.name), "a")
        self.proc = subprocess.Popen(argv, env=env, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        logf.close()
        self.tail = Tail(self.history)
        self.paused = False

    def signal(self, sig):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self):
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for p in self.pfs + [self.ps]:
            p.stop()

    def net(self, line):
        """Sends one control command to all of this worker's proxies."""
        for p in self.pfs + [self.ps]:
            p.cmd(line)


def make_schedule(rng, args, kinds):
    """Draws the fault schedule from the seed: (start_s, kind, target index,
    duration_s, parameter).  Targets of pause-holder/pause-waiter are chosen
    at run time by rule (the worker in that state)."""
    sched = []
    t = rng.uniform(0.3, 0.7) * args.interval_ms / 1000.0 + 0.5
    weights = [WEIGHTS.get(k, 1) for k in kinds]
    ttl_s = args.ttl_ms / 1000.0
    while t < args.duration:
        kind = rng.choices(kinds, weights)[0]
        target = rng.randrange(args.workers)
        param = 0
        if kind.startswith("pause"):
            dur = ttl_s * rng.uniform(1.5, 3.0)
        elif kind in ("kill-fenced", "kill-store"):
            dur = rng.uniform(0.1, 1.0)
            param = rng.choice((0, rng.randint(1, 16)))
        elif kind == "partition":
            dur = rng.uniform(0.5, 3.0)
        elif kind == "delay":
            dur = rng.uniform(1.0, 4.0)
            param = rng.randint(50, 400)
        elif kind == "clock":
            dur = rng.uniform(2.0, 5.0)
            param = rng.choice((-1, 1)) * rng.randint(3600, 3 * 3600)
        else:
            dur = 0.0
        sched.append((round(t, 3), kind, target, round(dur, 3), param))
        t += rng.uniform(0.5, 1.5) * args.interval_ms / 1000.0
    return sched


class Nemesis:
    """Runs the schedule against the processes and logs every fault."""

    def __init__(self, args, hist, workers, fenced, store):
        self.args = args
        self.hist = hist  # HistoryWriter for proc "nemesis"
        self.workers = workers
        self.fenced = fenced  # list of fenced Servers (nodes); empty when external
        self.store = store
        self.pending = []  # heap of (time, seq, callable) fault ends
        self.seq = 0
        self.busy = set()  # (kind-group, target) with a fault in progress
        self.counts = {}

    def _later(self, at, fn):
        self.seq += 1
        heapq.heappush(self.pending, (at, self.seq, fn))

    def _poll_tails(self):
        for w in self.workers:
            w.tail.poll()

    def _hunt(self, pred, max_s=2.0):
        """Waits up to max_s for a running worker in the wanted state."""
        deadline = time.monotonic() + max_s
        while time.monotonic() < deadline:
            self._poll_tails()
            cands = [w for w in self.workers if not w.paused and pred(w)]
            if cands:
                return cands[0]
            time.sleep(0.003)
        return None

    def start_fault(self, kind, target, dur, param):
        """Injects one fault now and schedules its end."""
        now = time.monotonic()
        if kind.startswith("pause"):
            if kind == "pause-holder":
                w = self._hunt(lambda w: w.tail.critical) or self._hunt(lambda w: w.tail.holding, 0.5)
            elif kind == "pause-waiter":
                w = self._hunt(lambda w: w.tail.waiting and any(o.tail.holding for o in self.workers if o is not w))
            else:
                w = self.workers[target]
            if w is None or w.paused:
                self.hist.event("fault-skipped", "ok", kind=kind, reason="no worker in the wanted state")
                return
            n = self.hist.event("fault", "start", kind=kind, target=w.name, ms=int(dur * 1000))
            w.signal(signal.SIGSTOP)
            w.paused = True

            def end(w=w, n=n):
                self.hist.event("fault", "end", n=n, kind=kind, target=w.name)
                w.signal(signal.SIGCONT)
                w.paused = False
            self._later(time.monotonic() + dur, end)
        elif kind in ("kill-fenced", "kill-store"):
            if kind == "kill-fenced":
                srv = self._pick_node(param) if self.fenced else None
            else:
                srv = self.store
            if srv is None or (kind, 0) in self.busy:
                self.hist.event("fault-skipped", "ok", kind=kind, reason="server busy or external")
                return
            self.busy.add((kind, 0))
            n = self.hist.event("fault", "start", kind=kind, target=srv.name)
            srv.kill(signal.SIGKILL)

            def end(srv=srv, n=n, kind=kind):
                up = srv.start(ready=len(self.fenced) == 1 or kind != "kill-fenced")
                self.hist.event("fault", "end", n=n, kind=kind, target=srv.name, up=up)
                if not up:
                    log("%s did not come back after kill -9; see its log" % srv.name)
                self.busy.discard((kind, 0))
            self._later(now + dur, end)
        elif kind in ("partition", "delay"):
            w = self.workers[target]
            if ("net", w.idx) in self.busy:
                self.hist.event("fault-skipped", "ok", kind=kind, reason="target busy")
                return
            self.busy.add(("net", w.idx))
            line = "partition" if kind == "partition" else "delay %d" % param
            n = self.hist.event("fault", "start", kind=kind, target=w.name, ms=param)
            w.net(line)

            def end(w=w, n=n, kind=kind):
                w.net("heal")
                self.hist.event("fault", "end", n=n, kind=kind, target=w.name)
                self.busy.discard(("net", w.idx))
            self._later(now + dur, end)
        elif kind == "reset":
            w = self.workers[target]
            n = self.hist.event("fault", "start", kind=kind, target=w.name)
            w.net("reset")
            self.hist.event("fault", "end", n=n, kind=kind, target=w.name)
        elif kind == "clock":
            w = self.workers[target]
            if ("clock", w.idx) in self.busy:
                return
            self.busy.add(("clock", w.idx))
            n = self.hist.event("fault", "start", kind=kind, target=w.name, offset_s=param)
            with open(w.clockfile, "w") as f:
                f.write("%+d\n" % param)

            def end(w=w, n=n):
                with open(w.clockfile, "w") as f:
                    f.write("+0\n")
                self.hist.event("fault", "end", n=n, kind="clock", target=w.name)
                self.busy.discard(("clock", w.idx))
            self._later(now + dur, end)
        self.counts[kind] = self.counts.get(kind, 0) + 1

    def _pick_node(self, param):
        """Picks the fenced node to kill: the leader when param is 0 (half
        of the schedule's kills), else node param % nodes."""
        if len(self.fenced) == 1:
            return self.fenced[0]
        if param == 0:
            for srv in self.fenced:
                try:
                    r = tc.Resp("127.0.0.1", srv.port, timeout=1)
                    info = r.call("INFO")
                    r.close()
                    if b"role:leader" in info:
                        return srv
                except (OSError, tc.RespError, ConnectionError):
                    continue
        return self.fenced[param % len(self.fenced)]

    def run_due(self, until):
        """Runs fault ends due before `until` (monotonic seconds)."""
        while self.pending and self.pending[0][0] <= until:
            _, _, fn = heapq.heappop(self.pending)
            fn()

    def heal_all(self):
        """Ends every fault still in progress, now."""
        while self.pending:
            _, _, fn = heapq.heappop(self.pending)
            fn()

    def run(self, schedule, t_start):
        """Executes the schedule (times relative to t_start)."""
        for (at, kind, target, dur, param) in schedule:
            when = t_start + at
            while True:
                now = time.monotonic()
                nxt = min(when, self.pending[0][0]) if self.pending else when
                if nxt > now:
                    time.sleep(min(nxt - now, 0.05))
                    continue
                self.run_due(now)
                if now >= when:
                    break
            self.start_fault(kind, target, dur, param)
        end = t_start + self.args.duration
        while time.monotonic() < end:
            self.run_due(time.monotonic())
            time.sleep(0.02)
        self.heal_all()


def final_reads(store_addr, hist_paths, counter, final_path):
    """Reads the counter and every acknowledged record straight from the
    store and appends them to the history as proc "final" events."""
    keys = [counter]
    for e in tc.read_history(hist_paths):
        if e["op"] == "record" and e["phase"] == "ok":
            keys.append(e["key"])
    w = tc.HistoryWriter(final_path, "final")
    conn = None
    for _ in range(50):
        try:
            conn = tc.Resp(store_addr[0], store_addr[1])
            break
        except OSError:
            time.sleep(0.2)
    for k in keys:
        if conn is None:
            w.event("read", "fail", n=0, key=k, err="cannot connect to fence-store")
            continue
        try:
            v = conn.call("FGET", k)
            w.event("read", "ok", n=0, key=k, value=v.decode() if v is not None else None)
        except (tc.RespError, OSError) as e:
            w.event("read", "fail", n=0, key=k, err=str(e))
    if conn is not None:
        conn.close()
    w.close()
    return len(keys)


def split_addr(text):
    """Splits "host:port" into (host, port)."""
    host, port = text.rsplit(":", 1)
    return host, int(port)


def start_fenced_nodes(a, outdir):
    """Starts fenced: one node, or a cluster of a.nodes sharing one --peers
    list; waits until a leader is ready.  Returns the Servers."""
    if a.nodes == 1:
        port = tc.free_port()
        fdir = os.path.join(outdir, "fenced-data")
        srv = Server("fenced", [a.fenced, "--port", str(port), "--bind", "127.0.0.1", "--data-dir", fdir]
                     + a.fenced_arg, port, os.path.join(outdir, "fenced.log"))
        if not srv.start():
            raise RuntimeError("fenced did not start; see %s" % srv.logpath)
        return [srv]
    ports = [(tc.free_port(), tc.free_port()) for _ in range(a.nodes)]
    peers = ",".join("%d=127.0.0.1:%d/%d" % (i + 1, p, r) for i, (p, r) in enumerate(ports))
    nodes = []
    for i, (p, r) in enumerate(ports):
        argv = [a.fenced, "--node-id", str(i + 1), "--port", str(p), "--bind", "127.0.0.1", "--raft-port", str(r),
                "--data-dir", os.path.join(outdir, "fenced-%d" % (i + 1)), "--peers", peers] + a.fenced_arg
        nodes.append(Server("fenced-%d" % (i + 1), argv, p, os.path.join(outdir, "fenced-%d.log" % (i + 1))))
    for n in nodes:
        if not n.start(ready=False):
            raise RuntimeError("%s did not start; see %s" % (n.name, n.logpath))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if any(tc.wait_fenced_ready(n.port, 0.2) and node_is_leader(n.port) for n in nodes):
            return nodes
        time.sleep(0.1)
    raise RuntimeError("the %d-node cluster elected no leader; see %s/fenced-*.log" % (a.nodes, outdir))


def node_info(host, port):
    """Returns a node's INFO as a dict, or None if it does not answer."""
    try:
        r = tc.Resp(host, port, timeout=1)
        try:
            text = r.call("INFO")
        finally:
            r.close()
    except (OSError, tc.RespError, ConnectionError):
        return None
    out = {}
    for line in text.decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k.strip()] = v.strip()
    return out


def node_is_leader(port):
    """True if the node on 127.0.0.1:port is a ready leader."""
    info = node_info("127.0.0.1", port)
    return info is not None and info.get("role") == "leader" and info.get("leader_ready") == "1"


class LeaderMonitor:
    """Polls the nodes' INFO and logs a "leader-change" event whenever the
    highest term seen grows: a new leader restarts every lease's TTL, which
    the checker must know about even when no kill caused it."""

    def __init__(self, addrs, hist):
        self.addrs = addrs
        self.hist = hist
        self.term = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=5)

    def _run(self):
        while not self.stopping.is_set():
            for host, port in self.addrs:
                info = node_info(host, port)
                try:
                    term = int(info.get("term", "0")) if info else 0
                except ValueError:
                    term = 0
                if term > self.term:
                    if self.term != 0:
                        self.hist.event("leader-change", "ok", term=term, node="%s:%d" % (host, port))
                    self.term = term
            self.stopping.wait(0.2)


def parse_args(argv):
    here = tc.tool_dir()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--version", action="version", version="fence-torture 0.1.0")
    ap.add_argument("--proxy", action="store_true", help="proxy mode: read-modify-write over HTTP through "
                    "fence-proxy to nginx (fence-torture --proxy --help lists its options)")
    ap.add_argument("--duration", type=float, default=60, help="seconds of faults (default 60)")
    ap.add_argument("--seed", type=int, help="seed of the fault schedule (default: random, printed)")
    ap.add_argument("--workers", type=int, default=4, help="worker processes (default 4)")
    ap.add_argument("--ttl-ms", type=int, default=1000, help="lease TTL of the workers (default 1000)")
    ap.add_argument("--hold-max-ms", type=int, help="longest hold (default: the TTL)")
    ap.add_argument("--long-pct", type=int, default=5, help="percent of long holds (default 5)")
    ap.add_argument("--shared-pct", type=int, default=0,
                    help="percent of worker iterations that are readers under a shared lock "
                         "(LOCK ... SHARED; checked by read-stable; default 0)")
    ap.add_argument("--wait-ms", type=int, default=5000, help="LOCK WAIT of the workers (default 5000)")
    ap.add_argument("--interval-ms", type=int, default=2500, help="mean time between faults (default 2500)")
    ap.add_argument("--faults", default=",".join(ALL_FAULTS),
                    help="comma-separated fault kinds (default: all: %s)" % ",".join(ALL_FAULTS))
    ap.add_argument("--slack-ms", type=int, default=100, help="slack of the expired-grant check (default 100)")
    ap.add_argument("--out", help="keep histories and logs in this directory (default: temp, removed if ok)")
    ap.add_argument("--bin-dir", default=here, help="where fenced, fence-store, fence-faults, "
                    "fence-torture-worker are (default: this script's directory)")
    ap.add_argument("--fenced", help="fenced binary (default BIN_DIR/fenced); e.g. build/mutant/grant_expired/fenced")
    ap.add_argument("--fence-store", help="fence-store binary (default BIN_DIR/fence-store)")
    ap.add_argument("--store-ignore-tokens", action="store_true",
                    help="control: run fence-store --ignore-tokens (lease only)")
    ap.add_argument("--nodes", type=int, default=1, help="fenced nodes: 1, or 3/5 for a cluster (default 1)")
    ap.add_argument("--fenced-arg", action="append", default=[], help="extra fenced argument (repeatable)")
    ap.add_argument("--external-fenced", help="test your own deployment: fenced address(es) h:p[,h:p]")
    ap.add_argument("--external-store", help="test your own deployment: fence-store address h:p")
    ap.add_argument("--lock", default=None, help="lock name (default torture-<seed>)")
    ap.add_argument("--elect", action="store_true",
                    help="election workload: the workers lead the election --lock (ELECTION.CAMPAIGN "
                         "... WAIT, RESIGN) instead of locking it; the leader's token fences the writes")
    ap.add_argument("--fence", default=None, help="fence name (default torture-<seed>)")
    ap.add_argument("--expect-violation", action="store_true",
                    help="control mode: succeed only if the checker reports a violation")
    ap.add_argument("--json", help="write the checker's result as JSON here")
    a = ap.parse_args(argv)
    a.proxy = os.path.join(a.bin_dir, "fence-faults")
    a.worker = os.path.join(a.bin_dir, "fence-torture-worker")
    a.fenced = a.fenced or os.path.join(a.bin_dir, "fenced")
    a.fenced_shown = os.path.relpath(a.fenced)
    a.fence_store = a.fence_store or os.path.join(a.bin_dir, "fence-store")
    if a.hold_max_ms is None:
        a.hold_max_ms = a.ttl_ms
    kinds = [k.strip() for k in a.faults.split(",") if k.strip()]
    bad = [k for k in kinds if k not in ALL_FAULTS]
    if bad:
        ap.error("unknown fault kind(s): %s (known: %s)" % (",".join(bad), ",".join(ALL_FAULTS)))
    a.kinds = kinds
    if a.nodes not in (1, 3, 5):
        ap.error("--nodes must be 1, 3 or 5")
    if a.workers < 1 or a.workers > 64:
        ap.error("--workers must be 1..64")
    if bool(a.external_fenced) != bool(a.external_store):
        ap.error("--external-fenced and --external-store go together")
    if a.external_fenced:
        a.kinds = [k for k in kinds if k not in ("kill-fenced", "kill-store")]
    if a.seed is None:
        a.seed = random.SystemRandom().randrange(1, 2 ** 31)
    a.lock = a.lock or "torture-%d" % a.seed
    a.fence = a.fence or "torture-%d" % a.seed
    a.counter = "counter-%d-%d" % (a.seed, os.getpid())
    for exe in [a.proxy, a.worker] + ([] if a.external_fenced else [a.fenced, a.fence_store]):
        if not os.access(exe, os.X_OK):
            ap.error("%s is missing: build it first (make %s)" % (exe, os.path.relpath(exe)))
    return a


def replay_command(argv, seed):
    """Returns the command line that replays this run's fault schedule."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--seed" not in args and not any(x.startswith("--seed=") for x in args):
        args += ["--seed", str(seed)]
    return shlex.join(["fence-torture"] + args)


def _terminate(signum, frame):
    """Turns SIGTERM into an exception so that every child is stopped."""
    raise SystemExit(128 + signum)


def main(argv=None):
    signal.signal(signal.SIGTERM, _terminate)
    args = sys.argv[1:] if argv is None else argv
    if "--proxy" in args:
        # Proxy mode: HTTP workers through fence-proxy to nginx (its own
        # options; see tools/torture_proxy.py).
        import torture_proxy
        return torture_proxy.main(args)
    a = parse_args(argv)
    outdir = a.out or tempfile.mkdtemp(prefix="fence-torture-")
    if a.out and os.path.isdir(outdir) and os.listdir(outdir):
        if not os.path.exists(os.path.join(outdir, "schedule.txt")):
            print("fence-torture: %s is not empty and not a previous run's directory; pick another --out"
                  % outdir, file=sys.stderr)
            return 2
        shutil.rmtree(outdir)  # a previous run: start afresh (histories append)
    os.makedirs(outdir, exist_ok=True)
    keep = a.out is not None
    # Run private copies of the binaries: in a shared tree someone may
    # rebuild build/fenced in the middle of a run, and a restart after
    # kill -9 must run the same program as before.
    bindir = os.path.join(outdir, "bin")
    os.makedirs(bindir, exist_ok=True)
    for attr in ("proxy", "worker") + (() if a.external_fenced else ("fenced", "fence_store")):
        src = getattr(a, attr)
        dst = os.path.join(bindir, "%s-%s" % (attr, os.path.basename(src)))
        shutil.copy2(src, dst)
        setattr(a, attr, dst)
    rng = random.Random(a.seed)
    schedule = make_schedule(rng, a, a.kinds)
    log("seed %d: %d faults scheduled over %.0f s (%s); output in %s"
        % (a.seed, len(schedule), a.duration, ",".join(a.kinds), outdir))
    nem_path = os.path.join(outdir, "history-nemesis.jsonl")
    final_path = os.path.join(outdir, "history-final.jsonl")
    for p in (nem_path, final_path):
        if os.path.exists(p):
            os.unlink(p)
    hist = tc.HistoryWriter(nem_path, "nemesis")
    hold_max = a.hold_max_ms
    liveness_ms = a.ttl_ms + hold_max + 2000
    hist.event("meta", "ok", n=0, seed=a.seed, ttl=a.ttl_ms, hold_max=hold_max, slack_ms=a.slack_ms,
               liveness_ms=liveness_ms, counter=a.counter, workers=a.workers, duration=a.duration,
               faults=a.kinds, lease_only=a.store_ignore_tokens, fenced=a.external_fenced or a.fenced_shown,
               nodes=a.nodes)
    with open(os.path.join(outdir, "schedule.txt"), "w") as f:
        for s in schedule:
            target = "w%d" % (s[2] + 1) if s[1] in ("pause", "partition", "delay", "reset", "clock") else "(rule)"
            f.write("%8.3fs %-13s target=%-6s dur=%.3fs param=%d\n" % (s[0], s[1], target, s[3], s[4]))
    fenced = []
    store = None
    workers = []
    monitor = None
    ok = False
    try:
        if a.external_fenced:
            fenced_addrs = [split_addr(x) for x in a.external_fenced.split(",")]
            store_addr = split_addr(a.external_store)
        else:
            store_addr = ("127.0.0.1", tc.free_port())
            sdir = os.path.join(outdir, "store-data")
            os.makedirs(sdir, exist_ok=True)
            sargv = [a.fence_store, "--port", str(store_addr[1]), "--bind", "127.0.0.1", "--data-dir", sdir]
            if a.store_ignore_tokens:
                sargv.append("--ignore-tokens")
            store = Server("fence-store", sargv, store_addr[1], os.path.join(outdir, "fence-store.log"))
            if not store.start():
                raise RuntimeError("fence-store did not start; see %s" % store.logpath)
            fenced = start_fenced_nodes(a, outdir)
            fenced_addrs = [("127.0.0.1", n.port) for n in fenced]
        use_ft = "clock" in a.kinds
        for i in range(1, a.workers + 1):
            workers.append(Worker(i, a, fenced_addrs, store_addr, outdir, a.seed, use_ft,
                                  ["--elect"] if a.elect else []))
        if len(fenced_addrs) > 1:
            monitor = LeaderMonitor(fenced_addrs, hist)
            monitor.start()
        nem = Nemesis(a, hist, workers, fenced, store)
        t_start = time.monotonic()
        nem.run(schedule, t_start)
        log("faults over; quiet period of %.1f s for the liveness check" % (liveness_ms / 1000.0 + 0.5))
        time.sleep(liveness_ms / 1000.0 + 0.5)
        hist.event("stop", "ok", n=0)
        if monitor is not None:
            monitor.stop()
        for w in workers:
            w.stop()
        workers = []
        paths = [os.path.join(outdir, p) for p in sorted(os.listdir(outdir)) if p.startswith("history-w")]
        nkeys = final_reads(store_addr, paths, a.counter, final_path)
        log("final state: %d keys read back" % nkeys)
        hist.close()
        events = tc.read_history(paths + [nem_path, final_path])
        res = torture_check.check(events)
        torture_check.report(res)
        res.stats["faults"] = dict(res.stats.get("faults", {}))
        torture_check.summary_table(res, title="torture summary (%s%s)" % (
            "lease-only control" if a.store_ignore_tokens else "fencing on",
            ", %d-node fenced=%s" % (a.nodes, a.fenced_shown) if not a.external_fenced
            else ", external"))
        print("replay (same fault schedule): %s" % replay_command(argv, a.seed))
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"stats": res.stats, "violations": [v.as_dict() for v in res.violations]}, f, indent=1)
        ok = (not res.ok) if a.expect_violation else res.ok
        if a.expect_violation:
            log("control: the checker %s" % ("caught it (expected)" if ok else "found NOTHING (control failed)"))
    finally:
        for w in workers:
            w.stop()
        if monitor is not None:
            monitor.stop()
        for srv in fenced + [store]:
            if srv is not None:
                srv.kill(signal.SIGTERM)
        if not keep and ok:
            shutil.rmtree(outdir, ignore_errors=True)
        elif not keep:
            log("kept the run's files for inspection: %s" % outdir)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
