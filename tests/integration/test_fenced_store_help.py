#!/usr/bin/python3
"""fenced and fence-store share one option set, by construction (issue 19,
step 2: one RESP daemon skeleton, src/daemon/daemon.h).

Both tables include the same rows (FENCE_DAEMON_OPT_ROWS): listeners, TLS,
--config, client limits, logging, users, connection guards.  This test
reads `fenced --help` and `fence-store --help` and compares, row by row,
each shared option's name, placeholder, description and bounds/default.
What may differ is listed here, with the reason:

  port         each daemon has its own default port (7700, 7710);
  max-clients  fence-store's bound and default are lower (a connection
               may hold --max-value bytes of request);
  max-obuf     fence-store's floor is higher (a reply must hold a value of
               --max-value) and its ceiling lower;
  insecure     the risk it names: fenced "may own every lock", fence-store
               "may admit any token";
  log-level    fence-store still takes the old digits 0..3 (deprecated);
               fenced never did (checked by running both).

Every other option the two have in common (data-dir) is a daemon's own row
with its own default, listed as such.  fence-proxy's --log-level goes
through the same parser (a bad directive names its file and line).  No
server is started: only --help and refused flags.
"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from fencetest import Tap, binary  # noqa: E402

FENCED = binary("fenced", env="FENCED")
FENCE_STORE = binary("fence-store", env="FENCE_STORE")
FENCE_PROXY = os.environ.get("FENCE_PROXY") or os.path.join(
    os.path.dirname(FENCED), "fence-proxy")

SHARED = ["port", "metrics-port", "metrics-bind", "bind", "unix-socket", "tls-port", "tls-cert", "tls-key",
          "tls-ca", "tls-auth-clients", "tls-handshake-timeout-ms", "config", "max-clients",
          "max-pipeline", "max-obuf", "obuf-max", "log-level", "log-file", "log-format",
          "acl-file", "insecure", "max-conn-memory", "idle-timeout-ms", "request-timeout-ms",
          "auth-timeout-ms"]
# Shared rows whose bounds/default line differs on purpose (see above).
DETAIL_DIFFERS = {"port", "max-clients", "max-obuf"}
# Shared rows whose description differs on purpose.
HELP_DIFFERS = {"insecure"}
# Options both have that are each daemon's own row (own default, own text).
OWN_IN_BOTH = {"data-dir"}
# The option engine's own (src/base/options.c), in every binary.
ENGINE = {"help", "version"}


def options(prog):
    """{name: (placeholder, description, bounds/default)} from PROG --help."""
    out = subprocess.run([prog, "--help"], stdout=subprocess.PIPE, check=True,
                         universal_newlines=True).stdout
    rows, name = {}, None
    for line in out.splitlines():
        m = re.match(r"^  --([a-z0-9-]+)(?: (<[^>]*>))?\s+(.*)$", line)
        if m:
            name = m.group(1)
            rows[name] = [m.group(2) or "", m.group(3).strip(), ""]
        elif name is not None and re.match(r"^ {20,}\S", line):
            rows[name][2] += line.strip()
        else:
            name = None
    return {k: tuple(v) for k, v in rows.items()}


t = Tap()
fd = options(FENCED)
st = options(FENCE_STORE)
t.check(len(fd) > 30 and len(st) > 20, "both --help outputs parse into option rows",
        "%d / %d rows" % (len(fd), len(st)))

for name in SHARED:
    a, b = fd.get(name), st.get(name)
    if a is None or b is None:
        t.check(False, "--%s is in both --help outputs" % name,
                "fenced %s, fence-store %s" % (a is not None, b is not None))
        continue
    same = a[0] == b[0] and (name in HELP_DIFFERS or a[1] == b[1]) and \
        (name in DETAIL_DIFFERS or a[2] == b[2])
    t.check(same, "--%s: same placeholder, description and default in both" % name,
            "fenced %r\nfence-store %r" % (a, b))

# The intended differences are what they say, and nothing else is shared
# by accident.
t.eq("range 0..65535, default 7700", fd["port"][2], "fenced's default port")
t.eq("range 0..65535, default 7710", st["port"][2], "fence-store's default port")
t.check("may own every lock" in fd["insecure"][1] and
        "may admit any token" in st["insecure"][1],
        "--insecure names each daemon's risk")
common = (set(fd) & set(st)) - set(SHARED) - ENGINE
t.eq(sorted(OWN_IN_BOTH), sorted(common),
     "the options both have beyond the shared rows are the listed own ones")

# --log-level: the words in both, the old digits only in fence-store.
# The flags are applied in order, so a bad --port after --log-level tells
# whether the level was taken (the --port error) or refused (its own).
def refusal(prog, level):
    r = subprocess.run([prog, "--log-level", level, "--port", "70000"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return r


r = refusal(FENCED, "2")
t.check(r.returncode == 2 and "--log-level: '2'" in r.stderr,
        "fenced refuses the old digit levels", r.stderr)
r = refusal(FENCE_STORE, "2")
t.check(r.returncode == 2 and "--port: 70000" in r.stderr,
        "fence-store still takes them (deprecated)", r.stderr)
for prog in (FENCED, FENCE_STORE):
    r = refusal(prog, "loud")
    t.check(r.returncode == 2 and "--log-level" in r.stderr and "debug, info, warn or error"
            in r.stderr, "%s: an unknown level gets the same refusal" %
            os.path.basename(prog), r.stderr)

# fence-proxy is no RESP daemon, but its --log-level row is the shared
# parser's too (it checked the word by hand, after parsing, so a bad
# directive in a --config file lost its file:line).
if os.access(FENCE_PROXY, os.X_OK):
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
        f.write("# proxy\nlog-level loud\n")
    r = subprocess.run([FENCE_PROXY, "--config", f.name], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True)
    os.unlink(f.name)
    t.eq("fence-proxy: %s:2: log-level: 'loud' is not debug, info, warn or error" % f.name,
         r.stderr.strip(), "fence-proxy: a bad log level in --config names file and line")
    t.eq(2, r.returncode, "and exits 2")
else:
    t.note("fence-proxy not built: its log-level check not run")

t.finish()
