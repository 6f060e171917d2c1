#!/usr/bin/python3
"""make bench-proxy: small PUTs (64-byte bodies) with wrk, through
fence-proxy and straight to the same nginx, in the same run, with 1 and 64
clients.  Prints requests/s, p50 and p99 per row, and the proxy's share of
nginx's rate.

Rows through the proxy:
- "steady": each client is one lock holder writing many times with the
  same token (its mark is already durable: no disk write per request);
- "new token": every request carries a higher token than the client's last,
  so every admit raises the mark durably (one fsync, shared by the
  concurrent admits of other clients: group commit).
Each client (wrk thread, one connection) has its own fence, new in each row.

Environment: BENCH_SECONDS (default 3) per row.
"""
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from test_proxy_lib import Nginx, Proxy, make_tmp  # noqa: E402

SECONDS = int(os.environ.get("BENCH_SECONDS", "3"))

LUA = r"""
local counter = 0
function setup(thread)
    counter = counter + 1
    thread:set("id", counter)
end
function init(args)
    mode = args[1]
    run = args[2]
    n = 0
    body = string.rep("x", 64)
end
function request()
    n = n + 1
    local tok = "1"
    if mode == "rising" then tok = tostring(n) end
    -- one file per fence: a path belongs to the first fence that wrote it
    return wrk.format("PUT", "/bench/" .. run .. "-" .. mode .. "-" .. id .. ".txt",
                      {["Fencing-Lock"] = "bench-" .. run .. "-" .. mode .. "-" .. id,
                       ["Fencing-Token"] = tok}, body)
end
"""


def unit_ms(v, u):
    """A wrk latency ("812.00", "us") in milliseconds."""
    f = float(v)
    return {"us": f / 1000.0, "ms": f, "s": f * 1000.0}[u]


def wrk(port, clients, mode, script):
    """Run wrk; returns (requests/s, p50 ms, p99 ms, non-2xx count)."""
    out = subprocess.run(["wrk", "-t%d" % clients, "-c%d" % clients, "-d%ds" % SECONDS,
                          "--latency", "-s", script, "http://127.0.0.1:%d/" % port, "--", mode, str(clients)],
                         capture_output=True, text=True, timeout=SECONDS + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = dict((p, unit_ms(v, u)) for p, v, u in
               re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M))
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    return rps, lat.get("50", float("nan")), lat.get("99", float("nan")), int(m.group(1)) if m else 0


def main():
    if shutil.which("wrk") is None:
        print("bench-proxy: wrk is not installed (scripts/deps.sh test installs it)")
        return 1
    tmp = make_tmp("fence-proxy-bench.")
    script = os.path.join(tmp, "put.lua")
    with open(script, "w") as f:
        f.write(LUA)
    ng = Nginx(tmp).start()
    px = Proxy(tmp, ng.port, args=["--log-level", "warn"]).start()
    print("fence-proxy vs nginx (WebDAV PUT, 64-byte bodies), %d s per row, data dir on %s"
          % (SECONDS, tmp))
    print()
    print("| target                       | clients | requests/s | p50 ms | p99 ms | non-2xx | vs nginx |")
    print("|------------------------------|---------|------------|--------|--------|---------|----------|")
    try:
        for clients in (1, 64):
            base, p50, p99, bad = wrk(ng.port, clients, "steady", script)
            print("| %-28s | %7d | %10.0f | %6.2f | %6.2f | %7d | %8s |"
                  % ("nginx (direct)", clients, base, p50, p99, bad, "1.00"))
            for mode, label in (("steady", "proxy, steady token"),
                                ("rising", "proxy, new token each PUT")):
                rps, p50, p99, bad = wrk(px.port, clients, mode, script)
                print("| %-28s | %7d | %10.0f | %6.2f | %6.2f | %7d | %8.2f |"
                      % (label, clients, rps, p50, p99, bad, rps / base if base else 0))
            sys.stdout.flush()
    finally:
        px.stop()
        ng.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
