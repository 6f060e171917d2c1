#!/usr/bin/python3
"""Leader election against a real fenced (issue 21 §1; docs/protocol.md):
ELECTION.CAMPAIGN / PROCLAIM / RESIGN / LEADER / OBSERVE.  A second
candidate waits and is elected with a higher token when the leader resigns
or its lease ends; PROCLAIM moves the revision; OBSERVE answers at once,
parks until a change (woken by the apply, not by polling), answers nil
after WAIT, returns [nil, 0, 0, revision] when nobody leads; the one name
space answers WRONGTYPE both ways; a too-long value is a clear error; the
per-connection observer limit answers LIMIT; a key pattern (~orders:*)
limits which elections a user may campaign for; the revision survives a
restart with snapshots (--snapshot-threshold 8)."""
# serial (a WAIT of 200 ms is timed)
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap, redis  # noqa: E402
from fencetest import info_field, wait_for  # noqa: E402

t = Tap()


def processed():
    """INFO commands_processed (this INFO counted): requests parsed and
    dispatched, so a parked request is counted once it is parked."""
    return int(info_field(f.port, "commands_processed"))


def wait_parked(before, n):
    """Wait until n requests besides the INFOs since processed() returned
    before are dispatched (parked: nothing else is sent meanwhile)."""
    wait_for(lambda: processed() >= before + n + 1)


def err_of(fn):
    try:
        fn()
    except redis.exceptions.ResponseError as e:
        return str(e)
    return None


f = Fenced("fenced", args=["--snapshot-threshold", "8", "--snapshot-trailing", "2"]).start()
a = f.client()
b = f.client()
la = a.execute_command("LEASE.GRANT", 60000)
lb = b.execute_command("LEASE.GRANT", 60000)

t.eq(None, a.execute_command("ELECTION.LEADER", "db"), "LEADER of an unknown election: nil")
st = a.execute_command("ELECTION.OBSERVE", "db")
t.eq([None, 0, 0, 0], st, "OBSERVE without AFTER: the state now ([nil, 0, 0, 0])")
tok_a, lease = a.execute_command("ELECTION.CAMPAIGN", "db", la, "host-a")
t.check(tok_a > 0 and lease == la, "CAMPAIGN elects at once: [token, lease]", (tok_a, lease))
val, tok, lease, rev1 = a.execute_command("ELECTION.LEADER", "db")
t.check(val == "host-a" and tok == tok_a and lease == la and rev1 > 0,
        "LEADER: [value, token, lease, revision]", (val, tok, lease, rev1))
t.eq(None, b.execute_command("ELECTION.CAMPAIGN", "db", lb, "host-b"),
     "CAMPAIGN without WAIT while another leads: nil")

# b waits in line; a resigns; b is elected with a higher token.
got = {}


def campaign_b():
    got["b"] = b.execute_command("ELECTION.CAMPAIGN", "db", lb, "host-b", "WAIT", 20000)


c0 = processed()
th = threading.Thread(target=campaign_b)
th.start()
# An observer parks on the current revision.
obs = f.client()
seen = {}


def observe(after, key, wait=20000):
    seen[key] = obs.execute_command("ELECTION.OBSERVE", "db", "AFTER", after, "WAIT", wait)


to = threading.Thread(target=observe, args=(rev1, "p"))
to.start()
wait_parked(c0, 2)  # both park (the assertions below hold either way)
rev2 = a.execute_command("ELECTION.PROCLAIM", "db", tok_a, "host-a:v2")
t.check(rev2 > rev1, "PROCLAIM replies a higher revision", (rev1, rev2))
to.join(10)
t.eq(["host-a:v2", tok_a, la, rev2], seen.get("p"), "a parked OBSERVE wakes with the new value")
t.eq(0, a.execute_command("ELECTION.PROCLAIM", "db", tok_a + 100, "x"),
     "PROCLAIM with a token that does not lead: 0")
t.eq(0, a.execute_command("ELECTION.RESIGN", "db", tok_a + 100), "RESIGN with a wrong token: 0")
t.eq(1, a.execute_command("ELECTION.RESIGN", "db", tok_a), "RESIGN of the leader: 1")
th.join(10)
tok_b, lease_b = got.get("b", (0, 0))
t.check(tok_b > tok_a and lease_b == lb, "the waiting candidate is elected with a higher token",
        got.get("b"))
st = a.execute_command("ELECTION.OBSERVE", "db", "AFTER", rev2)
t.check(st[0] == "host-b" and st[1] == tok_b and st[3] > rev2,
        "a change between two OBSERVEs is returned by the second at once", st)
rev3 = st[3]
t.eq(None, a.execute_command("ELECTION.OBSERVE", "db", "AFTER", rev3),
     "OBSERVE AFTER the current revision without WAIT: nil")
t0 = time.monotonic()
t.eq(None, a.execute_command("ELECTION.OBSERVE", "db", "AFTER", rev3, "WAIT", 200),
     "OBSERVE AFTER the current revision, WAIT 200: nil once WAIT passes")
t.check(time.monotonic() - t0 >= 0.15, "... after about WAIT ms")

# Nobody leads: [nil, 0, 0, revision]; LEADER says nil.
c0 = processed()
to = threading.Thread(target=observe, args=(rev3, "gone"))
to.start()
wait_parked(c0, 1)
t.eq(1, b.execute_command("ELECTION.RESIGN", "db", tok_b), "the last leader resigns")
to.join(10)
gone = seen.get("gone")
t.check(gone is not None and gone[:3] == [None, 0, 0] and gone[3] > rev3,
        "an observer sees 'no leader' as [nil, 0, 0, revision]", gone)
t.eq(None, a.execute_command("ELECTION.LEADER", "db"), "LEADER with nobody leading: nil")
t.eq(None, a.execute_command("ELECTION.OBSERVE", "db", "AFTER", gone[3]),
     "the gone election keeps its revision (no change, nil)")

# Lease expiry ends leadership: a short lease, the next candidate is elected.
ls = a.execute_command("LEASE.GRANT", 500)
tok_s, _ = a.execute_command("ELECTION.CAMPAIGN", "db", ls, "short")
tok_n, lease_n = b.execute_command("ELECTION.CAMPAIGN", "db", lb, "next", "WAIT", 10000)
t.check(tok_n > tok_s and lease_n == lb, "a leader whose lease expires is replaced", (tok_s, tok_n))
rev_before = b.execute_command("ELECTION.LEADER", "db")[3]

# The one name space.
a.execute_command("LOCK", "plain", la)
e = err_of(lambda: a.execute_command("ELECTION.CAMPAIGN", "plain", la, "v"))
t.check(e is not None and e.startswith("WRONGTYPE plain is a lock"), "CAMPAIGN on a lock", e)
e = err_of(lambda: a.execute_command("LOCK", "db", la))
t.check(e is not None and e.startswith("WRONGTYPE db is an election"), "LOCK on an election", e)
e = err_of(lambda: a.execute_command("ELECTION.OBSERVE", "plain"))
t.check(e is not None and e.startswith("WRONGTYPE"), "OBSERVE on a lock", e)
e = err_of(lambda: a.execute_command("ELECTION.LEADER", "plain"))
t.check(e is not None and e.startswith("WRONGTYPE"), "LEADER on a lock", e)
e = err_of(lambda: a.execute_command("ELECTION.CAMPAIGN", "big", la, "x" * 4097))
t.check(e is not None and "at most 4096 bytes" in e, "a value over 4096 bytes: clear error", e)
t.check(a.execute_command("ELECTION.CAMPAIGN", "big", la, "x" * 4096)[0] > 0,
        "a value of 4096 bytes is fine")
e = err_of(lambda: a.execute_command("ELECTION.CAMPAIGN", "big", 999999, "x"))
t.check(e is not None and e.startswith("NOLEASE"), "CAMPAIGN with an unknown lease", e)
e = err_of(lambda: a.execute_command("ELECTION.OBSERVE", "db", "AFTER", "x"))
t.check(e is not None and "AFTER" in e, "OBSERVE AFTER x: clear error", e)

# Observer limit: 16 parked per connection, the 17th answers LIMIT.
p = f.client().pipeline(transaction=False)
cur = rev_before
for _ in range(17):
    p.execute_command("ELECTION.OBSERVE", "db", "AFTER", cur + 1000000, "WAIT", 300)
res = p.execute(raise_on_error=False)
t.check(all(r is None for r in res[:16]) and isinstance(res[16], redis.exceptions.ResponseError)
        and str(res[16]).startswith("LIMIT"), "the 17th parked OBSERVE of a connection: LIMIT",
        res[-2:])
# A client that goes away while parked costs nothing and breaks nothing.
q = f.client()
qc = q.connection_pool.get_connection("x")
qc.connect()
c0 = processed()
qc.send_command("ELECTION.OBSERVE", "db", "AFTER", cur + 1000000, "WAIT", 20000)
wait_parked(c0, 1)
q.connection_pool.disconnect()
t.eq(True, a.ping(), "the server lives on after a parked observer hung up")

# Revisions survive a restart (log replay and snapshots) and go on growing.
for i in range(20):
    a.execute_command("LEASE.KEEPALIVE", la)
val, tok, lease, rev_b = a.execute_command("ELECTION.LEADER", "db")
f.stop()
f.start()
a = f.client()
t.eq([val, tok, lease, rev_b], a.execute_command("ELECTION.LEADER", "db"),
     "after a restart: the same leader, value, token and revision")
rev_c = a.execute_command("ELECTION.PROCLAIM", "db", tok, "after-restart")
t.check(rev_c > rev_b, "and the revision goes on growing", (rev_b, rev_c))

# A user limited to ~orders:* campaigns for orders:* elections only.
acl = os.path.join(f.dir, "users.acl")
with open(acl, "w") as fh:
    fh.write("user default on nopass ~* +@all\n"
             "user alice on >al1ce-pw-x ~orders:* +@all -@admin\n")
g = Fenced("acl", args=["--acl-file", acl]).start()
al = g.client(username="alice", password="al1ce-pw-x")
lal = al.execute_command("LEASE.GRANT", 60000)
t.check(al.execute_command("ELECTION.CAMPAIGN", "orders:leader", lal, "me")[0] > 0,
        "alice (~orders:*) may campaign for orders:leader")
e = err_of(lambda: al.execute_command("ELECTION.CAMPAIGN", "billing:leader", lal, "me"))
t.check(e is not None and "ermission" in e, "... but not for billing:leader", e)
e = err_of(lambda: al.execute_command("ELECTION.OBSERVE", "billing:leader"))
t.check(e is not None and "ermission" in e, "... nor observe it", e)

# The Python client, sync and asyncio.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "clients", "python", "src"))
import asyncio  # noqa: E402
import fenced  # noqa: E402
import fenced.aio  # noqa: E402

pc = fenced.Client("127.0.0.1:%d" % f.port)
pl = pc.lease_grant(30000)
pl2 = pc.lease_grant(30000)
got_p = pc.campaign("py", pl, b"one")
t.check(got_p is not None and got_p[1] == pl, "Client.campaign: (token, lease)", got_p)
st = pc.leader("py")
t.check(st is not None and st.value == b"one" and st.token == got_p[0] and st.has_leader,
        "Client.leader: ElectionState", st)
t.eq(None, pc.campaign("py", pl2, "two"), "Client.campaign of a busy election without wait: None")
rev = pc.proclaim("py", got_p[0], "uno")
t.check(rev > st.revision, "Client.proclaim: the new revision", rev)
t.eq(None, pc.observe("py", after=rev, wait_ms=100), "Client.observe: None when nothing changed")
t.eq(True, pc.resign("py", got_p[0]), "Client.resign: True")
now = pc.observe("py")
t.check(now is not None and not now.has_leader and now.value is None and now.revision > rev,
        "Client.observe: nobody leads (value None)", now)
try:
    pc.campaign("py", pl, b"x" * 4097)
    t.check(False, "a too-long value raises ValueError")
except ValueError:
    t.check(True, "a too-long value raises ValueError")


async def aio_part():
    ac = fenced.aio.Client("127.0.0.1:%d" % f.port)
    oc = ac._clone()
    try:
        al = await ac.lease_grant(30000)
        got = await ac.campaign("apy", al, "a")
        seen_a = await ac.observe("apy")
        nxt = asyncio.ensure_future(oc.observe("apy", after=seen_a.revision, wait_ms=10000))
        await asyncio.sleep(0.05)
        await ac.proclaim("apy", got[0], "b")
        return got, seen_a, await nxt, await ac.leader("apy")
    finally:
        await oc.close()
        await ac.close()


got_a, seen_a, nxt, lead_a = asyncio.run(aio_part())
t.check(got_a is not None and seen_a.value == b"a", "aio: campaign and observe", (got_a, seen_a))
t.check(nxt is not None and nxt.value == b"b" and nxt.revision > seen_a.revision,
        "aio: a waiting observe gets the proclaimed value", nxt)
t.check(lead_a is not None and lead_a.token == got_a[0], "aio: leader", lead_a)
t.finish()
