#!/usr/bin/env bash
# One port plan for every example (issue 20): docs/ports.md's table gives
# each port one role, and every port an example in the tree names (README,
# docs/*.md but the measured tables of performance.md, the man pages,
# fenced.conf, dist/) is in the table, with the role its flag or directive
# says: a --metrics-port is a metrics port, a --tls-port a TLS one, a raft
# port (--raft-port, or the /N of a --peers entry) a raft one.  fenced.conf's
# metrics port was 7701, the one-machine cluster's node 1 (cluster.md), and
# security.md's TLS example used it too.
. "$(dirname "$0")/../lib/lib.sh"

"$PY" - "$ROOT" <<'PYEOF'
import glob, os, re, sys

root = sys.argv[1]
fails = 0
def check(cond, what):
    global fails
    print(("ok - " if cond else "not ok - ") + what)
    fails += 0 if cond else 1

plan = {}
for line in open(os.path.join(root, "docs/ports.md")):
    m = re.match(r"\|\s*(\d{4,5})(?:[–-](\d{4,5}))?\s*\|\s*([^|]+)\|", line)
    if m:
        lo = int(m.group(1)); hi = int(m.group(2) or lo)
        for p in range(lo, hi + 1):
            check(p not in plan, "ports.md: %d has one row" % p)
            plan[p] = m.group(3).strip()
check(len(plan) >= 10, "ports.md has its table (%d ports)" % len(plan))

files = [os.path.join(root, f) for f in ("README.md", "fenced.conf")]
files += sorted(glob.glob(os.path.join(root, "docs/*.md")))
files += sorted(glob.glob(os.path.join(root, "docs/*.[18]")))
files += sorted(glob.glob(os.path.join(root, "dist/*"))) + sorted(glob.glob(os.path.join(root, "dist/*/*")))
files = [f for f in files if os.path.isfile(f) and not f.endswith(("performance.md", "ports.md"))]

def role_ok(port, kind):
    r = plan.get(port)
    if r is None:
        return False
    if kind == "metrics":
        return "metrics" in r
    if kind == "tls":
        return "TLS" in r
    if kind == "raft":
        return "raft" in r
    if kind == "client":
        return "raft" not in r and "metrics" not in r
    return True

# (regex, kind): the port is group 1.
pats = [
    (r"(?:--|\b)metrics-port[ =\\]+(\d{4,5})\b", "metrics"),
    (r"(?:--|\b)tls-port[ =\\]+(\d{4,5})\b", "tls"),
    (r"(?:--|\b)raft-port[ =\\]+(\d{4,5})\b", "raft"),
    (r"[0-9a-z.]+:\d{4,5}/(\d{4,5})\b", "raft"),              # peers: host:client/raft
    (r"\b(?:\d{1,3}\.){3}\d{1,3}:(\d{4,5})\b", "any"),         # 127.0.0.1:7700
    (r"(?:^|[\s`])(?:\\-\\-|--)?port[ =]+(\d{4,5})\b", "client"),  # port 7700, --port 7700
    (r"(?:^|\s)-p (\d{4,5})\b", "any"),                          # redis-cli -p 7700
    (r"\bport=(\d{4,5})\b", "any"),                              # redis.Redis(port=...)
]
seen = 0
for f in files:
    text = open(f, errors="replace").read()
    name = os.path.relpath(f, root)
    for n, line in enumerate(text.splitlines(), 1):
        line = line.replace("\\-", "-")
        for rx, kind in pats:
            for m in re.finditer(rx, line):
                port = int(m.group(1))
                if port < 1024 or port >= 32768:   # ephemeral: a client's end in a log line
                    continue
                seen += 1
                if kind == "client" and "tls-port" in line[max(0, m.start() - 5):m.end()]:
                    continue
                ok = role_ok(port, kind)
                if not ok:
                    check(False, "%s:%d: %s port %d: %s" % (name, n, kind, port,
                          plan.get(port, "not in docs/ports.md")))
check(seen >= 50, "the examples name ports (%d)" % seen)
check(fails == 0, "every example follows docs/ports.md")
sys.exit(1 if fails else 0)
PYEOF
check "the port plan holds" test $? -eq 0
finish
