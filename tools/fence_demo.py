#!/usr/bin/python3
"""fence-demo: the pause scenario, live, with real processes.

Starts fenced and fence-store (temp dirs, free ports on 127.0.0.1), then:

  1. client 1 takes a short lease, locks, gets token N and registers it at
     the store (FENCE.ADMIT);
  2. client 1 is paused with SIGSTOP (a GC pause, a VM suspension) for
     longer than its lease; fenced sees the lease expire;
  3. client 2 acquires the lock (token N+1), registers it and writes;
  4. client 1 is resumed with SIGCONT and, still believing it holds the
     lock, writes with its old token N.

With fencing the store rejects that write (STALE) and keeps client 2's
data.  Then the same again against fence-store --ignore-tokens ("lease
only"): the stale write is accepted and overwrites client 2's data.

It prints a timeline of both runs and, with --svg FILE, draws it: lease
intervals as bars per client, the lock held on top, the pause hatched,
writes as marks (admitted green, rejected red, stale-but-accepted orange).

The clients are real processes: fence-torture-worker in its one-shot mode.
"""

import argparse
import html
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import torture_common as tc  # noqa: E402


def die(msg):
    print("fence-demo: " + msg, file=sys.stderr)
    sys.exit(1)


class Proc:
    """A started server process with its port and log file."""

    def __init__(self, argv, port, logpath):
        self.port = port
        self.logpath = logpath
        with open(logpath, "a") as logf:
            self.p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if not tc.wait_port(port, 15):
            self.stop()
            die("%s did not start; its log:\n%s" % (argv[0], open(logpath).read()[-2000:]))

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def wait_event(path, pred, timeout_s):
    """Polls a history file until an event matches pred; returns it or None."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for e in tc.read_history([path]) if os.path.exists(path) else []:
            if pred(e):
                return e
        time.sleep(0.005)
    return None


def scenario(a, tmp, lease_only):
    """Runs the pause scenario once; returns (events, final value, store high)."""
    name = "lease-only" if lease_only else "fenced"
    d = os.path.join(tmp, name)
    os.makedirs(d)
    sport, fport = tc.free_port(), tc.free_port()
    sargv = [a.fence_store, "--port", str(sport), "--bind", "127.0.0.1", "--data-dir", os.path.join(d, "store")]
    if lease_only:
        sargv.append("--ignore-tokens")
    store = Proc(sargv, sport, os.path.join(d, "fence-store.log"))
    fenced = Proc([a.fenced, "--port", str(fport), "--bind", "127.0.0.1", "--data-dir", os.path.join(d, "fenced")],
                  fport, os.path.join(d, "fenced.log"))
    if not tc.wait_fenced_ready(fport):
        die("fenced never became ready; see %s" % fenced.logpath)
    clients = []
    demo = tc.HistoryWriter(os.path.join(d, "history-demo.jsonl"), "demo")
    try:
        def client(i, hold_ms, value):
            hist = os.path.join(d, "history-w%d.jsonl" % i)
            argv = [a.worker, "--once", "--id", str(i), "--history", hist,
                    "--fenced", "127.0.0.1:%d" % fport, "--store", "127.0.0.1:%d" % sport,
                    "--ttl-ms", str(a.ttl_ms), "--wait-ms", str(4 * a.ttl_ms), "--lock", "demo-lock",
                    "--fence", "demo", "--key", "data", "--value", value, "--hold-ms", str(hold_ms)]
            with open(os.path.join(d, "w%d.log" % i), "a") as logf:
                p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            clients.append(p)
            return p, hist

        demo.event("start", "ok", lease_only=lease_only, ttl=a.ttl_ms)
        c1, h1 = client(1, a.ttl_ms, "written by client 1")
        if wait_event(h1, lambda e: e["op"] == "admit" and e["phase"] != "invoke", 10) is None:
            die("client 1 never got the lock; see %s" % d)
        c1.send_signal(signal.SIGSTOP)
        demo.event("pause", "start", target="w1")
        time.sleep((a.ttl_ms + a.margin_ms) / 1000.0)
        c2, h2 = client(2, 150, "written by client 2")
        try:
            c2.wait(timeout=15)
        except subprocess.TimeoutExpired:
            die("client 2 did not finish; see %s" % d)
        time.sleep(0.2)
        demo.event("pause", "end", target="w1")
        c1.send_signal(signal.SIGCONT)
        try:
            c1.wait(timeout=15)
        except subprocess.TimeoutExpired:
            die("client 1 did not finish after SIGCONT; see %s" % d)
        r = tc.Resp("127.0.0.1", sport)
        value = r.call("FGET", "data")
        high = r.call("FENCE.HIGH", "demo")
        r.close()
        demo.event("final", "ok", value=value.decode() if value else None, high=high)
        demo.close()
        events = tc.read_history([h1, h2, os.path.join(d, "history-demo.jsonl")])
        return events, (value.decode() if value else None), high
    finally:
        for p in clients:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
                p.wait()
        fenced.stop()
        store.stop()


class Story:
    """The facts of one scenario, extracted from its history."""

    def __init__(self, events, ttl_ms, lease_only, final, high):
        self.lease_only = lease_only
        self.final = final
        self.high = high
        self.ttl_ms = ttl_ms
        self.t0 = events[0]["t"]
        self.events = events
        self.clients = {}
        for cl in ("w1", "w2"):
            evs = [e for e in events if e["proc"] == cl]
            c = {"lease": None, "granted": None, "renewals": [], "token": None, "locked": None, "unlock": None,
                 "revoke": None, "end": None, "writes": [], "admit": None}
            for e in evs:
                op, ph = e["op"], e["phase"]
                if op == "grant" and ph == "ok":
                    c["lease"], c["granted"] = e["lease"], self.ms(e["t"])
                    c["renewals"].append(self.ms(e["t"]))
                elif op == "keepalive" and ph == "ok":
                    c["renewals"].append(self.ms(e["t"]))
                elif op == "lock" and ph == "ok":
                    c["token"], c["locked"] = e["token"], self.ms(e["t"])
                elif op == "admit" and ph != "invoke":
                    c["admit"] = (self.ms(e["t"]), ph == "ok", e.get("err"))
                elif op == "write" and ph != "invoke":
                    c["writes"].append((self.ms(e["t"]), ph == "ok", e.get("token"), e.get("err"), e.get("value")))
                elif op == "unlock" and ph != "invoke":
                    c["unlock"] = (self.ms(e["t"]), e.get("released"))
                elif op == "revoke" and ph == "ok":
                    c["revoke"] = self.ms(e["t"])
                elif op == "exit":
                    c["end"] = self.ms(e["t"])
            self.clients[cl] = c
        self.pause = [self.ms(e["t"]) for e in events if e["proc"] == "demo" and e["op"] == "pause"]
        self.t_end = self.ms(events[-1]["t"])

    def ms(self, t):
        return (t - self.t0) / 1e6

    def lease_end(self, cl):
        """When the client's lease ended: revoked, or expired at the last
        renewal + TTL if that came first (the pause case)."""
        c = self.clients[cl]
        if not c["renewals"]:
            return None
        exp = None
        if self.pause and cl == "w1":
            before = [r for r in c["renewals"] if r <= self.pause[0]]
            if before:
                exp = before[-1] + self.ttl_ms
                if len(self.pause) > 1 and exp >= self.pause[1]:
                    exp = None
        ends = [x for x in (exp, c["revoke"]) if x is not None]
        return min(ends) if ends else self.t_end

    def lock_end(self, cl):
        """When the client stopped holding the lock (expiry or unlock)."""
        c = self.clients[cl]
        le = self.lease_end(cl)
        if c["unlock"] is not None and c["unlock"][1] == 1:
            return min(c["unlock"][0], le) if le is not None else c["unlock"][0]
        return le


def timeline_text(st, title):
    """Returns the readable timeline of one scenario."""
    who = {"w1": "client 1", "w2": "client 2", "demo": "demo"}
    out = ["== %s ==" % title]

    def line(t, w, text):
        out.append("  %7.0f ms  %-9s %s" % (t, w, text))
    rows = []
    for e in st.events:
        t = st.ms(e["t"])
        w = who.get(e["proc"], e["proc"])
        op, ph = e["op"], e["phase"]
        if ph == "invoke" or op in ("start", "exit", "keepalive"):
            if op == "start" and e["proc"] == "demo":
                pass
            continue
        if op == "grant":
            rows.append((t, w, "LEASE.GRANT %d ms -> lease %s" % (st.ttl_ms, e.get("lease", e.get("err")))))
        elif op == "lock":
            rows.append((t, w, "LOCK -> token %s: %s holds the lock" % (e.get("token"), w) if ph == "ok"
                         else "LOCK -> %s" % e.get("err")))
        elif op == "admit":
            rows.append((t, w, "FENCE.ADMIT token %s -> %s" % (e.get("token"), "admitted" if ph == "ok"
                                                               else "REJECTED (%s)" % e.get("err"))))
        elif op == "write":
            if ph == "ok":
                stale = e["proc"] == "w1"
                rows.append((t, w, "FSET data token %s -> ACCEPTED%s" % (
                    e.get("token"), "  <-- stale write accepted: client 2's data is overwritten" if stale else "")))
            else:
                rows.append((t, w, "FSET data token %s -> REJECTED: %s" % (e.get("token"), e.get("err"))))
        elif op == "unlock":
            rows.append((t, w, "UNLOCK token %s -> %s" % (e.get("token"), "released" if e.get("released") == 1
                                                         else "0 (it no longer held the lock)")))
        elif op == "revoke":
            rows.append((t, w, "LEASE.REVOKE"))
        elif op == "pause" and ph == "start":
            rows.append((t, w, "SIGSTOP client 1 (a pause longer than its %d ms lease)" % st.ttl_ms))
        elif op == "pause" and ph == "end":
            rows.append((t, w, "SIGCONT client 1: it resumes, still believing it holds the lock"))
    le = st.lease_end("w1")
    if le is not None and st.pause and le < st.pause[-1]:
        rows.append((le, "fenced", "client 1's lease expires (no keepalive during the pause; approx.)"))
    for t, w, text in sorted(rows, key=lambda r: r[0]):
        line(t, w, text)
    out.append("  result: the store holds %r (highest token admitted: %s)" % (st.final, st.high))
    return "\n".join(out)


def svg(stories, path):
    """Draws both scenarios as an SVG timeline."""
    W, left, right = 1000, 130, 50
    panel_h, top = 200, 70
    H = top + panel_h * len(stories) + 60
    t_max = max(s.t_end for s, _ in stories) * 1.04
    sx = lambda t: left + (W - left - right) * t / t_max  # noqa: E731
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="DejaVu Sans, Arial, sans-serif" '
         'font-size="13">' % (W, H),
         '<defs><pattern id="hatch" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
         '<rect width="8" height="8" fill="#eeeeee"/><line x1="0" y1="0" x2="0" y2="8" stroke="#999" '
         'stroke-width="3"/></pattern></defs>',
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="28" font-size="18" font-weight="bold">A paused lock holder: fencing tokens vs. '
         'leases alone</text>' % left,
         '<text x="%d" y="50" fill="#444">lease bars per client (dark: holds the lock), hatched: paused by '
         'SIGSTOP; writes: <tspan fill="#1a8f2e">&#9679; admitted</tspan>, <tspan fill="#d11">&#10006; rejected'
         '</tspan>, <tspan fill="#e07b00">&#9650; stale but accepted</tspan></text>' % left]
    for k, (st, title) in enumerate(stories):
        y0 = top + k * panel_h
        o.append('<text x="10" y="%d" font-size="15" font-weight="bold">%s</text>' % (y0 + 18, html.escape(title)))
        for row, cl in enumerate(("w1", "w2")):
            c = st.clients[cl]
            y = y0 + 40 + row * 62
            o.append('<text x="10" y="%d">client %d</text>' % (y + 17, row + 1))
            o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>' % (left, y + 12, W - right, y + 12))
            if cl == "w1" and len(st.pause) == 2:
                o.append('<rect x="%.1f" y="%d" width="%.1f" height="10" fill="url(#hatch)" stroke="#777"/>'
                         % (sx(st.pause[0]), y + 27, sx(st.pause[1]) - sx(st.pause[0])))
                o.append('<text x="%.1f" y="%d" font-size="11" fill="#333">paused by SIGSTOP (%d ms, longer '
                         'than its %d ms lease)</text>' % (sx(st.pause[0]) + 4, y + 49, st.pause[1] - st.pause[0],
                                                          st.ttl_ms))
            if c["granted"] is not None:
                le = st.lease_end(cl)
                o.append('<rect x="%.1f" y="%d" width="%.1f" height="24" fill="#bcd6f5" stroke="#6a9bd8"/>'
                         % (sx(c["granted"]), y, max(2, sx(le) - sx(c["granted"]))))
                o.append('<text x="%.1f" y="%d" font-size="11" fill="#335">lease %s</text>'
                         % (sx(c["granted"]) + 3, y - 3, c["lease"]))
                if cl == "w1" and st.pause and le < st.pause[-1]:
                    o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#6a9bd8" stroke-dasharray="3,2"/>'
                             % (sx(le), y - 12, sx(le), y + 130))
                    o.append('<text x="%.1f" y="%d" font-size="11" fill="#335">lease %s expired: lock free'
                             '</text>' % (sx(le) + 4, y - 3, c["lease"]))
            if c["locked"] is not None:
                ke = st.lock_end(cl)
                o.append('<rect x="%.1f" y="%d" width="%.1f" height="12" fill="#2f6db5"/>'
                         % (sx(c["locked"]), y + 6, max(2, sx(ke) - sx(c["locked"]))))
                if sx(ke) - sx(c["locked"]) > 130:
                    o.append('<text x="%.1f" y="%d" font-size="11" fill="white" font-weight="bold">holds lock, '
                             'token %s</text>' % (sx(c["locked"]) + 4, y + 16, c["token"]))
                else:
                    o.append('<text x="%.1f" y="%d" font-size="11" fill="#2f6db5" font-weight="bold" '
                             'text-anchor="end">token %s</text>' % (sx(c["locked"]) - 6, y + 16, c["token"]))
            for (t, ok, tok, err, val) in c["writes"]:
                x = sx(t)
                if not ok:
                    o.append('<text x="%.1f" y="%d" font-size="20" fill="#d11" text-anchor="middle">&#10006;</text>'
                             % (x, y + 19))
                    o.append('<text x="%.1f" y="%d" font-size="11" fill="#d11" text-anchor="end" font-weight="bold">'
                         'write with token %s: REJECTED (stale)</text>' % (x + 8, y + 49, tok))
                elif cl == "w1":
                    o.append('<path d="M %.1f %d l 8 14 l -16 0 z" fill="#e07b00"/>' % (x, y + 4))
                    o.append('<text x="%.1f" y="%d" font-size="11" fill="#e07b00" text-anchor="end" '
                             'font-weight="bold">write with token %s: ACCEPTED, overwrites client 2</text>'
                             % (x + 8, y + 49, tok))
                else:
                    o.append('<circle cx="%.1f" cy="%d" r="7" fill="#1a8f2e"/>' % (x, y + 12))
                    o.append('<text x="%.1f" y="%d" font-size="11" fill="#1a8f2e">write with token %s: admitted</text>'
                             % (x - 20, y + 40, tok))
        o.append('<text x="%d" y="%d" fill="#222">store afterwards: data = "%s"</text>'
                 % (left, y0 + 178, html.escape(str(st.final))))
    ya = top + panel_h * len(stories) + 10
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>' % (left, ya, W - right, ya))
    step = 500 if t_max > 2000 else 250
    t = 0
    while t <= t_max:
        o.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>' % (sx(t), ya, sx(t), ya + 5))
        o.append('<text x="%.1f" y="%d" font-size="11" text-anchor="middle">%d ms</text>' % (sx(t), ya + 18, t))
        t += step
    o.append('</svg>')
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main(argv=None):
    here = tc.tool_dir()
    ap = argparse.ArgumentParser(description="The pause scenario with real processes: fencing on, then lease only.")
    ap.add_argument("--version", action="version", version="fence-demo 0.1.0")
    ap.add_argument("--svg", help="write the timeline picture to this SVG file")
    ap.add_argument("--ttl-ms", type=int, default=1000, help="the clients' lease TTL (default 1000)")
    ap.add_argument("--margin-ms", type=int, default=500, help="how much longer than the TTL the pause lasts")
    ap.add_argument("--bin-dir", default=here, help="where fenced, fence-store, fence-torture-worker are")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (histories, logs)")
    a = ap.parse_args(argv)
    a.fenced = os.path.join(a.bin_dir, "fenced")
    a.fence_store = os.path.join(a.bin_dir, "fence-store")
    a.worker = os.path.join(a.bin_dir, "fence-torture-worker")
    for exe in (a.fenced, a.fence_store, a.worker):
        if not os.access(exe, os.X_OK):
            die("%s is missing; build it first (make)" % exe)
    tmp = tempfile.mkdtemp(prefix="fence-demo-")
    try:
        ev1, v1, h1 = scenario(a, tmp, lease_only=False)
        ev2, v2, h2 = scenario(a, tmp, lease_only=True)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("files kept in %s" % tmp)
    s1 = Story(ev1, a.ttl_ms, False, v1, h1)
    s2 = Story(ev2, a.ttl_ms, True, v2, h2)
    t1 = "Fencing on: fence-store checks tokens"
    t2 = "Lease only: fence-store --ignore-tokens"
    print(timeline_text(s1, t1))
    print()
    print(timeline_text(s2, t2))
    print()
    fenced_ok = v1 == "written by client 2"
    lease_broken = v2 == "written by client 1"
    print("verdict: with fencing the stale write was %s; with the lease alone it %s."
          % ("REJECTED and client 2's data survived" if fenced_ok else "NOT rejected (unexpected!)",
             "overwrote client 2's data" if lease_broken else "did not overwrite (unexpected)"))
    if a.svg:
        svg([(s1, t1), (s2, t2)], a.svg)
        print("timeline picture: %s" % a.svg)
    return 0 if fenced_ok and lease_broken else 1


if __name__ == "__main__":
    sys.exit(main())
