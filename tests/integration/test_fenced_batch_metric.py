#!/usr/bin/python3
"""fenced_batch_commands (the group-commit batch-size histogram) against a
real fenced: after pipelined writes, its count and sum agree with INFO's
batches and batch_commands (every entry this leader proposed was applied,
and each observation is the number of commands apply decoded from it, not a
second decoding of the entry bytes), and the pipeline really was batched
(fewer entries than commands)."""
import os
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap, free_port  # noqa: E402

N = 300


def scrape(port):
    """fenced_batch_commands' _count and _sum from /metrics (None if absent)."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    got = {}
    for line in text.splitlines():
        for k in ("fenced_batch_commands_count", "fenced_batch_commands_sum"):
            if line.startswith(k + " "):
                got[k] = float(line.split()[1])
    return got.get("fenced_batch_commands_count"), got.get("fenced_batch_commands_sum")


t = Tap()
mport = free_port()
f = Fenced("fenced", args=["--metrics-port", str(mport)]).start()
c = f.client()
p = c.pipeline(transaction=False)
for _ in range(N):
    p.execute_command("LEASE.GRANT", 60000)
leases = p.execute()
t.check(all(isinstance(x, int) and x > 0 for x in leases), "%d pipelined grants answered" % N)
p = c.pipeline(transaction=False)
for i, lease in enumerate(leases[:50]):
    p.execute_command("LOCK", "m:%d" % i, lease)
toks = p.execute()
t.check(all(isinstance(x, int) and x > 0 for x in toks), "50 pipelined LOCKs granted")

# Every reply came after its entry applied; wait (on the condition, with a
# deadline) until an internal TICK that may still be in flight is counted.
deadline = time.monotonic() + 10
while True:
    info = f.info()
    count, total = scrape(mport)
    same = (count is not None and total is not None and
            int(count) == int(info["batches"]) and int(total) == int(info["batch_commands"]))
    if same or time.monotonic() > deadline:
        break
    time.sleep(0.05)
t.check(count is not None and total is not None, "/metrics has fenced_batch_commands")
t.eq(int(info["batches"]), int(count or 0),
     "fenced_batch_commands_count = INFO batches (one observation per entry)")
t.eq(int(info["batch_commands"]), int(total or 0),
     "fenced_batch_commands_sum = INFO batch_commands (commands apply decoded)")
t.check((total or 0) >= N + 50, "the sum covers every command (%s)" % total)
t.check((count or 0) < N + 50, "the pipeline was batched: %s entries for %s commands"
        % (count, total))
t.eq(0, f.stop(), "fenced stops cleanly")
t.finish()
