"""Shared helpers for the fenced cluster tests (imported, not run as a test).

Built on tests/lib/fencetest.py (Tap, ports, processes, temp dirs):
- Tap: "ok - ..." / "not ok - ..." lines and a summary.
- Cluster: N fenced nodes on 127.0.0.1 (free client and raft ports, one temp
  data dir each), started with the same --peers list; nodes are stopped by
  PID (SIGTERM or SIGKILL) and restarted on the same data dir.  A node can
  also be created fresh with --join 1 for CLUSTER.ADD.
- Client: a redis-py connection that follows NOTLEADER redirects and retries
  TRYAGAIN / connection errors with the same REQID until a deadline.
- ns_prefix: an optional command prefix (["ip", "netns", "exec", NAME]) per
  node, for the partition test that runs nodes in network namespaces.

Every process started is killed by PID at exit and the temp dir is removed
(kept with KEEP_TMP=1).  Run with /usr/bin/python3 (Debian's python3-redis).
"""
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fencetest import (BUILD, Tap, at_exit, exit_on_sigterm, free_port,  # noqa: E402,F401
                       make_tmp, need_module, read_log, spawn, stop_process)

FENCED = os.path.join(BUILD, "fenced")
FENCECTL = os.path.join(BUILD, "fencectl")
redis = need_module("redis", "python3-redis")
TMP = make_tmp("fence-cluster.")
CLUSTERS = []  # every Cluster made, for diagnostics (run_main)
exit_on_sigterm(1)


# How long a test waits for a cluster to elect a ready leader.
ELECT_S = 60.0


def parse_info(text):
    """CLUSTER.INFO / INFO text -> (dict of fields, list of node dicts)."""
    fields, nodes = {}, []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        k, v = line.split(":", 1)
        if k == "node":
            nodes.append(dict(kv.split("=", 1) for kv in v.split(",")))
        else:
            fields[k] = v
    return fields, nodes


class Node:
    """One fenced process of a cluster."""

    def __init__(self, cluster, node_id, host="127.0.0.1", port=None, raft_port=None,
                 prefix=None, bind=None):
        self.cluster = cluster
        self.id = node_id
        self.host = host
        self.port = port or free_port()
        self.raft_port = raft_port or free_port()
        self.prefix = prefix or []
        self.bind = bind or host
        self.dir = os.path.join(TMP, "%sn%d" % (cluster.name, node_id))
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "fenced.log")
        self.proc = None
        self.args = []  # flags of this node alone (e.g. its own certificate)
        os.makedirs(self.dir, exist_ok=True)

    @property
    def peer(self):
        """This node's --peers entry."""
        return "%d=%s:%d/%d" % (self.id, self.host, self.port, self.raft_port)

    @property
    def addr(self):
        """Client address host:port."""
        return "%s:%d" % (self.host, self.port)

    @property
    def raft_addr(self):
        """Raft address host:port."""
        return "%s:%d" % (self.host, self.raft_port)

    def start(self, join=False, peers=None, extra=()):
        """Start (or restart on the same data dir) and wait for the port."""
        peers = peers or self.cluster.peers()
        cmd = self.prefix + [FENCED, "--node-id", str(self.id), "--port", str(self.port),
                             "--bind", self.bind, "--raft-port", str(self.raft_port),
                             "--data-dir", self.data, "--peers", peers,
                             "--log-level", "info"] + list(self.cluster.args) + list(self.args) + \
            list(extra)
        if join:
            cmd += ["--join", "1"]
        self.proc = spawn(cmd, self.log, header="### start %s\n" % " ".join(cmd))
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError("node %d exited; log:\n%s" % (self.id, self.log_text()))
            try:
                self.client(socket_timeout=1).ping()
                return self
            except redis.RedisError:
                time.sleep(0.03)
        raise RuntimeError("node %d did not listen; log:\n%s" % (self.id, self.log_text()))

    def kill(self, sig=signal.SIGKILL):
        """Send sig (SIGKILL by default) by PID and reap the process."""
        if self.proc is not None and self.proc.poll() is None:
            stop_process(self.proc, sig, 20)
        self.proc = None

    def alive(self):
        """Whether the process runs."""
        return self.proc is not None and self.proc.poll() is None

    def client(self, **kw):
        """A plain redis-py client for this node (decoded replies)."""
        kw.setdefault("decode_responses", True)
        kw.setdefault("socket_timeout", 5)
        kw.setdefault("socket_connect_timeout", 2)
        return redis.Redis(host=self.host, port=self.port, **kw)

    def cinfo(self):
        """CLUSTER.INFO as (fields, nodes), or (None, None) if unreachable."""
        try:
            c = self.client(socket_timeout=2)
            text = c.execute_command("CLUSTER.INFO")
            c.close()
            return parse_info(text)
        except redis.RedisError:
            return None, None

    def log_since_start(self):
        """The log written since the last "raft started" line (the whole
        log when there is none), to tell start-up from later events."""
        text = read_log(self.log)
        i = text.rfind("raft started")
        return text[i:] if i >= 0 else text

    def log_text(self):
        """This node's log (for failure details)."""
        return read_log(self.log, tail=4000)


class Cluster:
    """A set of fenced nodes sharing one --peers list."""

    def __init__(self, n, args=(), hosts=None, prefixes=None, bind=None, ports=None,
                 name=""):
        self.args = list(args)
        self.name = name  # prefix of the node dirs (several clusters in one test)
        self.nodes = {}
        for i in range(1, n + 1):
            kw = {}
            if hosts:
                kw["host"] = hosts[i - 1]
            if prefixes:
                kw["prefix"] = prefixes[i - 1]
            if bind:
                kw["bind"] = bind
            if ports:
                kw["port"], kw["raft_port"] = ports
            self.nodes[i] = Node(self, i, **kw)
        self.initial = sorted(self.nodes)
        CLUSTERS.append(self)

    def peers(self):
        """The --peers text of the initial members (same on every node)."""
        return ",".join(self.nodes[i].peer for i in self.initial)

    def start(self):
        """Start every node."""
        for i in self.initial:
            self.nodes[i].start()
        return self

    def live(self):
        """Nodes whose process runs."""
        return [n for n in self.nodes.values() if n.alive()]

    def leader(self, among=None):
        """The node that says it leads and is ready, or None."""
        for n in among or self.live():
            f, _ = n.cinfo()
            if f and f.get("role") == "leader" and f.get("leader_ready") == "1":
                return n
        return None

    def wait_leader(self, secs=ELECT_S, among=None, step=0.02):
        """Poll until a ready leader exists; returns it (or None).  An
        election is a liveness wait: secs only bounds a hang, and is long
        enough for a loaded machine."""
        end = time.monotonic() + secs
        while time.monotonic() < end:
            n = self.leader(among)
            if n is not None:
                return n
            time.sleep(step)
        return None

    def addrs(self, among=None):
        """Client addresses of the given (default: live) nodes."""
        return [n.addr for n in (among or self.live())]

    def wait_caught_up(self, node, secs=30.0):
        """Wait until node's applied index reaches the leader's commit index
        as it was when the wait began (under load the target would move on
        forever otherwise).  Returns (ok, node_fields)."""
        end = time.monotonic() + secs
        f = None
        target = None
        while time.monotonic() < end:
            if target is None:
                ldr = self.leader([n for n in self.live() if n is not node] or None)
                lf, _ = ldr.cinfo() if ldr else (None, None)
                if lf:
                    target = int(lf["commit_index"])
            f, _ = node.cinfo()
            if target is not None and f and int(f["applied_index"]) >= target:
                return True, f
            time.sleep(0.05)
        return False, f


class Unavailable(Exception):
    """The cluster did not answer within the client's deadline."""


class Client:
    """A cluster client: tries the known addresses, follows NOTLEADER and
    retries TRYAGAIN and connection errors with the same arguments (so a
    REQID makes the retry idempotent) until deadline_s has passed."""

    def __init__(self, addrs, deadline_s=15.0, timeout_s=3.0):
        self.addrs = list(addrs)
        self.deadline_s = deadline_s
        self.timeout_s = timeout_s
        self.cur = self.addrs[0]
        self.conn = None
        self.redirects = 0
        self.retries = 0
        self.last = None

    def _connect(self, addr):
        host, port = addr.rsplit(":", 1)
        self.close()
        self.conn = redis.Redis(host=host, port=int(port), decode_responses=True,
                                socket_timeout=self.timeout_s,
                                socket_connect_timeout=1.0)
        self.cur = addr

    def close(self):
        """Drop the connection."""
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def call(self, *args, deadline_s=None):
        """Run one command; returns its reply or raises redis.ResponseError for
        a definite error reply, Unavailable when out of time."""
        end = time.monotonic() + (deadline_s or self.deadline_s)
        rot = 0
        while True:
            if self.conn is None:
                self._connect(self.cur)
            try:
                return self.conn.execute_command(*args)
            except redis.ResponseError as e:
                msg = str(e)
                if msg.startswith("NOTLEADER "):
                    self.redirects += 1
                    self._connect(msg.split()[1])
                    continue
                if not msg.startswith("TRYAGAIN"):
                    raise
                self.retries += 1
                self.last = "%s: %s" % (self.cur, msg)
            except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
                self.last = "%s: %r" % (self.cur, e)
                self.retries += 1
                self.close()
                rot += 1
                self.cur = self.addrs[rot % len(self.addrs)]
            if time.monotonic() >= end:
                raise Unavailable("no answer to %r within the deadline (last: %s)"
                                  % (args, self.last))
            time.sleep(0.02)


def run_main(main, cluster_ref):
    """Run main(); on an unexpected exception print it, every node's
    CLUSTER.INFO and log tail as comments, and a "not ok" line, then exit 1.
    cluster_ref is the list of clusters to describe (normally CLUSTERS)."""
    import traceback
    try:
        main()
    except SystemExit:
        raise
    except BaseException:  # noqa: BLE001
        for line in traceback.format_exc().splitlines():
            print("# " + line)
        for cl in cluster_ref:
            for n in cl.nodes.values():
                print("# node %d alive=%s info=%s" % (n.id, n.alive(), n.cinfo()[0]))
                for line in n.log_text().splitlines()[-25:]:
                    print("#   n%d| %s" % (n.id, line))
        print("not ok - the scenario raised an exception", flush=True)
        sys.exit(1)


def fencectl(*args, timeout=30):
    """Run fencectl; returns (exit code, stdout, stderr)."""
    p = subprocess.run([FENCECTL] + list(args), capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class Load:
    """n client threads doing LOCK/UNLOCK with REQIDs against the cluster,
    keeping their leases alive through whichever node leads.  Each thread
    remembers what was acknowledged: (name -> token) it holds now, every
    (token, first-send time) it got, and errors."""

    def __init__(self, addrs, n=16, ttl_ms=5000, locks_per_thread=4, shared=2):
        self.addrs = addrs
        self.n = n
        self.ttl_ms = ttl_ms
        self.locks_per_thread = locks_per_thread
        self.shared = shared
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()
        self.grants = []          # (token, first_send_monotonic, ack_monotonic, name)
        self.held = {}            # thread -> {name: token}
        self.leases = {}          # thread -> lease id
        self.errors = []          # unexpected errors (text)
        self.lost_leases = []     # threads whose lease was reported gone
        self.ops = 0
        self.threads = []
        self.reqid = (os.getpid() << 32) + 1

    def _next_reqid(self):
        with self.lock:
            self.reqid += 1
            return self.reqid

    def _worker(self, t):
        import random
        rnd = random.Random(1000 + t)
        c = Client(self.addrs, deadline_s=20.0)
        held = {}
        self.held[t] = held
        try:
            lease = c.call("LEASE.GRANT", self.ttl_ms, "REQID", self._next_reqid())
        except Exception as e:  # noqa: BLE001
            self.errors.append("thread %d: grant: %r" % (t, e))
            return
        self.leases[t] = lease
        last_ka = time.monotonic()
        while not self.stop_ev.is_set():
            try:
                if time.monotonic() - last_ka > self.ttl_ms / 3000.0:
                    c.call("LEASE.KEEPALIVE", lease)
                    last_ka = time.monotonic()
                own = ["t%d.l%d" % (t, rnd.randrange(self.locks_per_thread))]
                name = own[0] if rnd.random() < 0.8 else "shared.%d" % rnd.randrange(self.shared)
                if name in held and rnd.random() < 0.5:
                    tok = held.pop(name)
                    c.call("UNLOCK", name, tok)
                elif name not in held:
                    sent = time.monotonic()
                    r = c.call("LOCK", name, lease, "REQID", self._next_reqid())
                    if r is not None:
                        tok = int(r)
                        held[name] = tok
                        with self.lock:
                            self.grants.append((tok, sent, time.monotonic(), name))
                with self.lock:
                    self.ops += 1
            except redis.ResponseError as e:
                if str(e).startswith("NOLEASE"):
                    self.lost_leases.append(t)
                    return
                self.errors.append("thread %d: %s" % (t, e))
                return
            except Exception as e:  # noqa: BLE001
                self.errors.append("thread %d: %r" % (t, e))
                return
        c.close()

    def start(self):
        """Start the threads."""
        for t in range(self.n):
            th = threading.Thread(target=self._worker, args=(t,), daemon=True)
            th.start()
            self.threads.append(th)
        return self

    def stop(self):
        """Stop the threads and wait for them."""
        self.stop_ev.set()
        for th in self.threads:
            th.join(timeout=60)
