#!/usr/bin/env bash
# make bench-cluster (part 2): `fencectl bench` (the same table as `make
# bench` for one node) against a fresh 3-node cluster on 127.0.0.1 (free
# ports, temp dirs, nodes stopped by PID).  Arguments go to fencectl bench.
set -euo pipefail
# test_cluster_lib.py (the cluster helpers) is in tests/integration.
here=$(cd "$(dirname "$0")/../integration" && pwd)
export BUILD=${BUILD:-build/release}
HERE="$here" exec /usr/bin/python3 - "$@" <<'PY'
import os, subprocess, sys
sys.path.insert(0, os.environ["HERE"])
from test_cluster_lib import FENCECTL, Cluster

cl = Cluster(3).start()
ldr = cl.wait_leader(20)
if ldr is None:
    sys.exit("no leader")
# The leader first: fencectl starts there (a follower would redirect).
addrs = [ldr.addr] + [a for a in cl.addrs() if a != ldr.addr]
print("bench: 3-node cluster, leader node %d at %s, data in %s"
      % (ldr.id, ldr.addr, os.path.dirname(ldr.dir)), flush=True)
rc = subprocess.call([FENCECTL, "--server", ",".join(addrs), "bench"] + sys.argv[1:])
sys.exit(rc)
PY
