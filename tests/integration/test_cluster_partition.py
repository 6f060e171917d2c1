#!/usr/bin/python3
"""fenced cluster: a minority partition cannot grant anything and the
majority goes on.

Network: the test makes its own network namespaces (names carry its PID):
a hub namespace with two bridges, "raft" (10.77.1.0/24) and "client"
(10.77.2.0/24), and one namespace per node with a veth on each bridge
(10.77.1.k and 10.77.2.k).  The private addresses exist only inside these
namespaces.  Nodes run their raft traffic (and normal client traffic) on the
raft network; the test itself runs inside the hub namespace.  Isolating the
leader = setting the hub end of its raft veth down: it can no longer reach
(or be reached by) the other nodes, but the test can still talk to it over
the client network, so it can check that the isolated node grants nothing.

Checks: while isolated, the old leader answers every LEASE.GRANT / LOCK with
an error or not at all (never a token); the majority elects a leader and
grants; a lock held before the partition by a client that keeps its lease
alive through the new leader stays held (not handed to a contender); after
the partition heals the old leader catches up and nothing it was asked to do
while isolated exists; tokens were never issued twice.

Needs root and `ip netns` (iproute2); otherwise the test is skipped (77).
"""
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "fcl%d" % os.getpid()
NODES = 3
CLIENT_PORT = 7700  # fixed ports are safe: each node has its own namespace
RAFT_PORT = 7800


def sh(*args, check=True):
    """Run a command quietly; raise on failure when check."""
    return subprocess.run(list(args), check=check, capture_output=True, text=True)


def ns_names(prefix):
    """Hub and node namespace names for prefix."""
    return prefix + "h", [prefix + "n%d" % k for k in range(1, NODES + 1)]


def setup(prefix):
    """Create the namespaces, bridges and veths; raise on failure."""
    hub, nodes = ns_names(prefix)
    sh("ip", "netns", "add", hub)
    for ns in nodes:
        sh("ip", "netns", "add", ns)
    sh("ip", "-n", hub, "link", "set", "lo", "up")
    for net, br in ((1, "brr"), (2, "brc")):
        sh("ip", "-n", hub, "link", "add", br, "type", "bridge")
        sh("ip", "-n", hub, "addr", "add", "10.77.%d.254/24" % net, "dev", br)
        sh("ip", "-n", hub, "link", "set", br, "up")
    for k, ns in enumerate(nodes, start=1):
        sh("ip", "-n", ns, "link", "set", "lo", "up")
        for net, br, tag in ((1, "brr", "r"), (2, "brc", "c")):
            hub_end = "h%s%d" % (tag, k)
            sh("ip", "-n", hub, "link", "add", hub_end, "type", "veth", "peer", "name",
               "eth" + tag, "netns", ns)
            sh("ip", "-n", hub, "link", "set", hub_end, "master", br, "up")
            sh("ip", "-n", ns, "addr", "add", "10.77.%d.%d/24" % (net, k), "dev", "eth" + tag)
            sh("ip", "-n", ns, "link", "set", "eth" + tag, "up")


def teardown(prefix):
    """Delete the namespaces (their processes are gone by then)."""
    hub, nodes = ns_names(prefix)
    for ns in nodes + [hub]:
        sh("ip", "netns", "del", ns, check=False)


def outer():
    """Set up the namespaces, run the inner test in the hub, tear down."""
    if os.geteuid() != 0:
        print("# skipped: needs root for network namespaces")
        sys.exit(77)
    try:
        setup(PREFIX)
    except (subprocess.CalledProcessError, OSError) as e:
        teardown(PREFIX)
        print("# skipped: cannot create network namespaces: %s"
              % str(getattr(e, "stderr", None) or e).strip())
        sys.exit(77)
    hub, _ = ns_names(PREFIX)
    child = None
    # A runner timeout (SIGTERM) still stops the inner test and its nodes
    # and deletes the namespaces.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        child = subprocess.Popen(["ip", "netns", "exec", hub, "/usr/bin/python3",
                                  os.path.abspath(__file__), "--inner", PREFIX])
        rc = child.wait()
    except BaseException:
        if child is not None and child.poll() is None:
            child.terminate()
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
        raise
    finally:
        teardown(PREFIX)
    sys.exit(rc)


def inner(prefix):
    """The scenario, run inside the hub namespace."""
    sys.path.insert(0, HERE)
    import redis
    from test_cluster_lib import Client, Cluster, Tap
    hub, nss = ns_names(prefix)
    t = Tap()
    cl = Cluster(NODES, args=["--election-timeout-ms", "400", "--insecure"],
                 hosts=["10.77.1.%d" % k for k in range(1, NODES + 1)],
                 prefixes=[["ip", "netns", "exec", ns] for ns in nss],
                 bind="0.0.0.0", ports=(CLIENT_PORT, RAFT_PORT)).start()
    ldr = cl.wait_leader()
    if not t.check(ldr is not None, "3-node cluster in namespaces elects a leader"):
        t.finish()
    others = [n for n in cl.nodes.values() if n is not ldr]
    tokens = []

    holder = Client(cl.addrs())
    hl = holder.call("LEASE.GRANT", 6000)
    t0 = int(holder.call("LOCK", "held", hl))
    tokens.append(t0)

    # Isolate the leader from the other nodes (its raft link goes down).
    sh("ip", "-n", hub, "link", "set", "hr%d" % ldr.id, "down")
    t.note("isolated node %d (the leader)" % ldr.id)
    part_at = time.monotonic()

    iso = redis.Redis(host="10.77.2.%d" % ldr.id, port=CLIENT_PORT, decode_responses=True,
                      socket_timeout=1.5, socket_connect_timeout=1.0)
    granted, answers = [], {}
    majority = Client(cl.addrs(others), deadline_s=20)
    new = None
    kept_alive = True
    contender_got = None
    k = 0
    while time.monotonic() - part_at < 4.0 or new is None:
        if time.monotonic() - part_at > 25:
            break
        # The isolated node: every write must fail or hang, never grant.
        try:
            lease = iso.execute_command("LEASE.GRANT", 2000, "REQID", 900000 + k)
            granted.append(("grant", lease))
            r = iso.execute_command("LOCK", "minority.%d" % k, lease)
            if r is not None:
                granted.append(("lock", r))
        except redis.ResponseError as e:
            code = str(e).split()[0]
            answers[code] = answers.get(code, 0) + 1
        except (redis.ConnectionError, redis.TimeoutError) as e:
            answers["timeout"] = answers.get("timeout", 0) + 1
            iso.close()
            del e
        k += 1
        # The majority: keep the holder's lease alive, find the new leader.
        try:
            majority.call("LEASE.KEEPALIVE", hl, deadline_s=3)
        except Exception:  # noqa: BLE001
            kept_alive = False
        if new is None:
            new = cl.leader(others)
            if new is not None:
                t.note("majority leader: node %d, %.0f ms after the partition"
                       % (new.id, (time.monotonic() - part_at) * 1000))
        time.sleep(0.1)
    t.check(not granted, "the isolated old leader granted nothing (answers: %s)" % answers,
            granted)
    t.check(new is not None, "the majority side elects a leader")
    t.check(kept_alive, "the holder keeps its lease alive through the majority")
    ml = majority.call("LEASE.GRANT", 4000)
    tm = int(majority.call("LOCK", "majority", ml))
    tokens.append(tm)
    t.check(tm > t0, "the majority side grants (token %d > %d)" % (tm, t0))
    contender_got = majority.call("LOCK", "held", ml)
    t.check(contender_got is None, "the lock held before the partition is not handed on",
            contender_got)
    info = majority.call("LOCK.INFO", "held")
    t.check(info is not None and int(info[0]) == t0 and int(info[1]) == hl,
            "it is still held with its token and lease", info)

    # Heal; the old leader catches up and none of its isolated work exists.
    sh("ip", "-n", hub, "link", "set", "hr%d" % ldr.id, "up")
    ok, f = cl.wait_caught_up(ldr, 30)
    t.check(ok, "after healing, the old leader catches up", f)
    cl.wait_leader()
    roles = {n.id: (n.cinfo()[0] or {}).get("role") for n in cl.nodes.values()}
    t.check(list(roles.values()).count("leader") == 1, "after healing there is one leader",
            roles)
    c = Client(cl.addrs())
    left = [i for i in range(min(k, 50)) if c.call("LOCK.INFO", "minority.%d" % i) is not None]
    t.check(not left, "no lock asked of the isolated node exists after healing", left)
    tf = int(c.call("LOCK", "after.heal", c.call("LEASE.GRANT", 4000)))
    tokens.append(tf)
    t.check(tf > tm, "tokens keep increasing after healing")
    t.eq(len(tokens), len(set(tokens)), "no token issued twice")
    for n in cl.nodes.values():
        n.kill()
    t.finish()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--inner":
        sys.path.insert(0, HERE)
        from test_cluster_lib import CLUSTERS, run_main
        run_main(lambda: inner(sys.argv[2]), CLUSTERS)
    else:
        outer()
