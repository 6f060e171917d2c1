#!/usr/bin/python3
"""Tokens from a real ZooKeeper, enforced by fence-proxy (the resource side
takes any monotonic token, not only fenced's).

ZooKeeper (Debian's zookeeper package, java) runs standalone on a free
127.0.0.1 port with its own zoo.cfg in a temp dir.  The lock is ZooKeeper's
usual recipe: each contender creates an EPHEMERAL_SEQUENTIAL node under
/locks/report; the lowest sequence number holds the lock; the token is
that node's czxid (the zxid of the transaction that created it, which only
grows).  python3-kazoo is the client.

Scenario (the seed's, with ZooKeeper in place of fenced): holder 1 takes
the lock (token czxid1) and is paused (SIGSTOP) past its session timeout,
so ZooKeeper expires the session and deletes its node; holder 2 takes the
lock (czxid2 > czxid1) and PUTs through the proxy; holder 1 resumes and
PUTs with czxid1: 409, and nginx keeps holder 2's content.
"""
import os
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_proxy_lib import (Nginx, Proxy, Tap, fenced_headers, free_port,  # noqa: E402
                            make_tmp, need_nginx, need_proxy, read_log, request,
                            skip, spawn, wait_port)

need_proxy()
need_nginx()
try:
    import kazoo.client  # noqa: F401 - only probes that kazoo is there
except ImportError:
    skip("python3-kazoo is not installed (scripts/deps.sh test installs it)")
ZK_JAR = "/usr/share/java/zookeeper.jar"
JAVA = shutil.which("java")
if not os.path.exists(ZK_JAR) or JAVA is None:
    skip("zookeeper (Debian package) or java is not installed")

tap = Tap()
TMP = make_tmp("fence-proxy-zk.")

HOLDER = r"""
import sys, time, http.client
from kazoo.client import KazooClient
zk_port, port, path, content, delay = sys.argv[1:6]
zk = KazooClient(hosts="127.0.0.1:" + zk_port, timeout=2.0)
zk.start(timeout=20)
zk.ensure_path("/locks/report")
me = zk.create("/locks/report/lock-", b"", ephemeral=True, sequence=True)
name = me.rsplit("/", 1)[1]
while True:
    kids = sorted(zk.get_children("/locks/report"))
    if kids[0] == name:
        break
    time.sleep(0.05)
token = zk.exists(me).czxid
print("token", token, flush=True)
time.sleep(float(delay))
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
c.request("PUT", path, body=content.encode(),
          headers={"Fencing-Lock": "report", "Fencing-Token": str(token)})
r = c.getresponse()
print("status", r.status, r.read().decode().strip(), flush=True)
try:
    zk.stop()
except Exception:
    pass
"""


def start_zk():
    """Standalone ZooKeeper in TMP/zk on a free port; returns (proc, port)."""
    d = os.path.join(TMP, "zk")
    os.makedirs(os.path.join(d, "data"), exist_ok=True)
    port = free_port()
    with open(os.path.join(d, "zoo.cfg"), "w") as f:
        f.write("tickTime=500\ndataDir=%s/data\nclientPort=%d\nclientPortAddress=127.0.0.1\n"
                "minSessionTimeout=1000\nmaxSessionTimeout=10000\nadmin.enableServer=false\n"
                "4lw.commands.whitelist=ruok\n" % (d, port))
    with open(os.path.join(d, "log4j.properties"), "w") as f:
        f.write("log4j.rootLogger=WARN, CONSOLE\n"
                "log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender\n"
                "log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout\n"
                "log4j.appender.CONSOLE.layout.ConversionPattern=%d %p %m%n\n")
    log = os.path.join(d, "zk.log")
    proc = spawn([JAVA, "-Xmx256m", "-Dzookeeper.log.dir=" + d, "-cp", d + ":" + ZK_JAR,
                  "org.apache.zookeeper.server.ZooKeeperServerMain",
                  os.path.join(d, "zoo.cfg")], log)
    if not wait_port(port, seconds=60, step=0.2):
        raise RuntimeError("zookeeper did not listen; log:\n" + read_log(log, 4000))
    return proc, port, log


def holder(zk_port, port, path, content, delay, name):
    return subprocess.Popen([sys.executable, "-c", HOLDER, str(zk_port), str(port), path,
                             content, str(delay)], stdout=subprocess.PIPE, text=True,
                            stderr=open(os.path.join(TMP, "holder-%s.log" % name), "ab"))


def main():
    zk, zk_port, zk_log = start_zk()
    ng = Nginx(TMP).start()
    px = Proxy(TMP, ng.port).start()
    try:
        h1 = holder(zk_port, px.port, "/report.txt", "holder1", 0.5, "1")
        line = h1.stdout.readline().split()
        tap.check(len(line) == 2 and line[0] == "token", "holder 1 took the ZooKeeper lock",
                  line)
        os.kill(h1.pid, signal.SIGSTOP)
        t1 = int(line[1])
        # Session timeout 2 s: ZooKeeper expires holder 1's session and
        # deletes its node while it is stopped; holder 2 then holds the lock.
        h2 = holder(zk_port, px.port, "/report.txt", "holder2", 0, "2")
        line2 = h2.stdout.readline().split()
        tap.check(len(line2) == 2, "holder 2 took the lock after holder 1's session expired",
                  line2)
        t2 = int(line2[1])
        tap.check(t2 > t1, "holder 2's czxid %d is higher than holder 1's %d" % (t2, t1))
        out2 = h2.stdout.readline().strip()
        h2.wait(20)
        tap.check(out2.startswith("status 201") or out2.startswith("status 204"),
                  "holder 2's PUT through the proxy is stored", out2)
        os.kill(h1.pid, signal.SIGCONT)
        out1 = h1.stdout.readline().strip()
        h1.wait(20)
        tap.check(out1.startswith("status 409 STALE %d %d" % (t1, t2)),
                  "holder 1 resumes and its PUT with czxid %d gets 409" % t1, out1)
        tap.eq(b"holder2", ng.file("report.txt"), "nginx's file holds holder 2's content")
        st, hd, _ = request(px.port, "GET", "/report.txt", None, fenced_headers("report", t1))
        tap.eq(409, st, "a read-modify-write by holder 1 is refused at its first step (GET)")
    finally:
        zk.send_signal(signal.SIGTERM)
        try:
            zk.wait(10)
        except subprocess.TimeoutExpired:
            zk.kill()
        px.stop()
        ng.stop()
    tap.finish()


if __name__ == "__main__":
    main()
