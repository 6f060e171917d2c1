#!/usr/bin/python3
"""Unit tests of tools/torture_check.py over hand-made histories.

Each case builds a small history in memory (times in ms, converted to the
ns of real histories), runs the checker and states which violation kinds it
must report: clean histories must pass, and every property must be able to
fail.  Output is TAP-like ("ok - ..." / "not ok - ...") for tests/run.sh.
"""

import io
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))
TOOLS = os.path.join(HERE, "..", "..", "tools")
sys.path.insert(0, TOOLS)
import torture_check  # noqa: E402
import torture_common  # noqa: E402

sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from fencetest import Tap, TempDir  # noqa: E402

MS = 1000000
T = Tap()


class H:
    """A history under construction: ops are added as invoke/complete pairs."""

    def __init__(self, ttl=1000, hold_max=500):
        self.events = []
        self.seq = {}
        self.meta(ttl=ttl, hold_max=hold_max, seed=42)

    def add(self, t, proc, op, phase, n, **f):
        e = {"t": int(t * MS), "proc": proc, "op": op, "phase": phase, "n": n}
        e.update(f)
        self.events.append(e)

    def meta(self, **f):
        self.add(0, "nemesis", "meta", "ok", 0, **f)

    def op(self, proc, op, t_inv, t_done, phase="ok", **f):
        """Adds one op; fields go to both events (like the worker does)."""
        n = self.seq.get(proc, 0) + 1
        self.seq[proc] = n
        inv = {k: v for k, v in f.items() if k not in ("highest", "stale", "err", "released")}
        self.add(t_inv, proc, op, "invoke", n, **inv)
        if t_done is not None:
            self.add(t_done, proc, op, phase, n, **f)

    def cycle(self, proc, t, lease, token, read, rec=True, hold=5, ttl=1000):
        """A full correct critical section starting at t (ms); returns its end."""
        self.op(proc, "grant", t, t + 1, lease=lease, ttl=ttl)
        self.op(proc, "lock", t + 1, t + 2, lock="L", lease=lease, token=token)
        self.op(proc, "admit", t + 2, t + 3, fence="F", token=token)
        self.op(proc, "read", t + 3, t + 4, key="counter", value=read)
        self.op(proc, "write", t + 4 + hold, t + 5 + hold, fence="F", token=token, key="counter",
                value=read + 1, read=read)
        end = t + 6 + hold
        if rec:
            self.op(proc, "record", end, end + 1, fence="F", token=token, key="rec:%s:%d" % (proc, token),
                    value="%d:%d" % (token, read + 1))
            end += 2
        self.op(proc, "unlock", end, end + 1, token=token, released=1)
        self.op(proc, "revoke", end + 1, end + 2, lease=lease)
        return end + 3

    def final(self, t, key, value, phase="ok"):
        self.add(t, "final", "read", phase, 0, key=key, value=value)

    def fault(self, t_start, t_end, kind, target=None, n=None, **f):
        n = n if n is not None else len(self.events)
        self.add(t_start, "nemesis", "fault", "start", n, kind=kind, target=target, **f)
        if t_end is not None:
            self.add(t_end, "nemesis", "fault", "end", n, kind=kind, target=target)

    def stop(self, t):
        self.add(t, "nemesis", "stop", "ok", 0)

    def run(self, **kw):
        evs = sorted(self.events, key=lambda e: e["t"])
        for i, e in enumerate(evs):
            e["_seq"] = i
        return torture_check.check(evs, **kw)


def expect(name, res, kinds):
    """Checks that the result reports exactly the violation kinds given."""
    got = sorted(set(v.kind for v in res.violations))
    if got == sorted(set(kinds)):
        T.check(True, name)
        return
    out = io.StringIO()
    torture_check.report(res, out=out)
    T.check(False, name, "expected violations %s, got %s\n%s" % (sorted(set(kinds)), got, out.getvalue()))


def clean_history():
    """Two workers taking turns correctly, final state matching."""
    h = H()
    t = 10
    read = 0
    for i in range(6):
        proc = "w%d" % (i % 2 + 1)
        t = h.cycle(proc, t, lease=100 + i, token=i + 1, read=read)
        read += 1
    h.final(t + 10, "counter", str(read))
    for i in range(6):
        proc = "w%d" % (i % 2 + 1)
        h.final(t + 11, "rec:%s:%d" % (proc, i + 1), "%d:%d" % (i + 1, i + 1))
    return h, t


def test_clean():
    h, t = clean_history()
    h.stop(t + 4000)
    expect("a correct history passes", h.run(), [])


def test_stale_rejected_is_fine():
    h, t = clean_history()
    # w3 holds token 1's era long gone: its write is rejected (fail/stale).
    h.op("w3", "write", t + 1, t + 2, phase="fail", fence="F", token=1, key="counter", value=1, read=0,
         stale=True, highest=6, err="STALE 1 6")
    res = h.run()
    expect("a rejected stale write is not a violation", res, [])
    T.check(res.stats["rejected_stale"] == 1, "rejected stale write is counted")


def test_lease_only_overlap():
    """The seed's scenario against a resource that ignores tokens."""
    h = H()
    h.op("w1", "grant", 0, 1, lease=1, ttl=1000)
    h.op("w1", "lock", 1, 2, lock="L", lease=1, token=1)
    h.op("w1", "admit", 2, 3, fence="F", token=1)
    h.op("w1", "read", 3, 4, key="counter", value=0)
    # w1 is paused 4..2500; its lease expires; w2 gets token 2.
    h.fault(4, 2500, "pause", target="w1")
    h.op("w2", "grant", 1500, 1501, lease=2, ttl=1000)
    h.op("w2", "lock", 1501, 1502, lock="L", lease=2, token=2)
    h.op("w2", "admit", 1502, 1503, fence="F", token=2)
    h.op("w2", "read", 1503, 1504, key="counter", value=0)
    h.op("w2", "write", 1505, 1506, fence="F", token=2, key="counter", value=1, read=0)
    # w1 resumes and its stale write is admitted.
    h.op("w1", "write", 2501, 2502, fence="F", token=1, key="counter", value=1, read=0)
    h.final(2600, "counter", "1")
    expect("lease-only: stale write and lost update are reported", h.run(), ["fence-order", "lost-update"])


def test_token_twice():
    h = H()
    h.op("w1", "grant", 0, 1, lease=1)
    h.op("w1", "lock", 1, 2, lock="L", lease=1, token=5)
    h.op("w2", "grant", 0, 1, lease=2)
    h.op("w2", "lock", 1, 3, lock="L", lease=2, token=5)
    expect("a token granted to two leases is reported", h.run(), ["tokens"])


def shared_readers(h, t, token, first, second):
    """Two readers of one shared phase (token) overlapping from t (ms)."""
    for i, proc in enumerate(("w8", "w9")):
        h.op(proc, "grant", t + i, t + i + 1, lease=300 + i, ttl=1000)
        h.op(proc, "lock", t + i + 1, t + i + 2, lock="L", lease=300 + i, token=token, shared=1)
        h.op(proc, "admit", t + i + 2, t + i + 3, fence="F", token=token)
        h.op(proc, "read", t + i + 3, t + i + 4, key="counter", value=first)
    for i, proc in enumerate(("w8", "w9")):
        h.op(proc, "read", t + 10 + i, t + 11 + i, key="counter", value=second)
        h.op(proc, "admit", t + 12 + i, t + 13 + i, fence="F", token=token)
        h.op(proc, "reread", t + 14 + i, t + 14 + i, token=token, first=first, second=second)
        h.op(proc, "unlock", t + 15 + i, t + 16 + i, token=token, released=1)
        h.op(proc, "revoke", t + 17 + i, t + 18 + i, lease=300 + i)
    return t + 20


def test_shared_phase():
    h, t = clean_history()
    end = shared_readers(h, t, 7, 6, 6)
    h.stop(end + 4000)
    res = h.run()
    expect("two readers of one shared phase share a token, reads agree: passes", res, [])
    T.check(res.stats.get("rereads_checked") == 2, "both rereads are checked", res.stats)


def test_shared_reread_differs():
    h, t = clean_history()
    end = shared_readers(h, t, 7, 6, 7)
    h.stop(end + 4000)
    expect("a reader whose two reads differ while still admitted is reported", h.run(),
           ["read-stable"])


def test_shared_token_to_writer():
    h = H()
    h.op("w1", "grant", 0, 1, lease=1)
    h.op("w1", "lock", 1, 2, lock="L", lease=1, token=5, shared=1)
    h.op("w2", "grant", 0, 1, lease=2)
    h.op("w2", "lock", 1, 3, lock="L", lease=2, token=5)
    expect("a shared phase's token granted to an exclusive lease too is reported", h.run(),
           ["tokens"])


def test_token_order():
    h = H()
    h.op("w1", "grant", 0, 1, lease=1)
    h.op("w1", "lock", 1, 2, lock="L", lease=1, token=7)
    h.op("w1", "unlock", 3, 4, token=7, released=1)
    h.op("w2", "grant", 5, 6, lease=2)
    h.op("w2", "lock", 6, 7, lock="L", lease=2, token=6)
    expect("a later grant with a smaller token is reported", h.run(), ["tokens"])


def test_concurrent_grants_any_order():
    h = H()
    h.op("w1", "grant", 0, 1, lease=1)
    h.op("w2", "grant", 0, 1, lease=2)
    h.op("w1", "lock", 2, 10, lock="A", lease=1, token=9)
    h.op("w2", "lock", 3, 9, lock="B", lease=2, token=8)
    expect("overlapping grants may complete in any token order", h.run(), [])


def test_fence_order_equal_tokens():
    h = H()
    h.op("w1", "admit", 0, 1, fence="F", token=3)
    h.op("w1", "write", 2, 3, fence="F", token=3, key="k", value=1)
    h.op("w1", "write", 4, 5, fence="F", token=3, key="k", value=2)
    expect("the same token may write many times", h.run(), [])


def test_lost_update_final():
    h, t = clean_history()
    h.events = [e for e in h.events if not (e["proc"] == "final" and e.get("key") == "counter")]
    h.final(t + 20, "counter", "4")
    expect("a final counter below the acknowledged increments is reported", h.run(), ["lost-update"])


def test_counter_unknown_ok():
    h, t = clean_history()
    h.op("w1", "write", t, t + 2000, phase="info", fence="F", token=7, key="counter", value=7, read=6,
         err="no connection")
    h.events = [e for e in h.events if not (e["proc"] == "final" and e.get("key") == "counter")]
    h.final(t + 3000, "counter", "7")
    expect("an outcome-unknown increment may have landed", h.run(), [])


def test_counter_too_high():
    h, t = clean_history()
    h.events = [e for e in h.events if not (e["proc"] == "final" and e.get("key") == "counter")]
    h.final(t + 20, "counter", "9")
    expect("a counter above acknowledged + unknown increments is reported", h.run(), ["lost-update"])


def test_record_lost():
    h, t = clean_history()
    h.events = [e for e in h.events if not (e["proc"] == "final" and e.get("key") == "rec:w2:4")]
    h.final(t + 20, "rec:w2:4", None)
    expect("an acknowledged record missing after crashes is reported", h.run(), ["durability"])


def test_final_unreadable():
    h, t = clean_history()
    h.events = [e for e in h.events if e["proc"] != "final"]
    h.final(t + 20, "counter", None, phase="fail")
    h.add(t + 20, "final", "read", "fail", 0, key="counter", err="connection refused")
    res = h.run()
    kinds = set(v.kind for v in res.violations)
    name = "an unreadable final state fails the run"
    T.check("durability" in kinds, name)


def bug_history(restart=None, unknown_keepalive=None, leader_change=None):
    """w2 queues with lease 2 (TTL 1000) and is paused; its last renewal
    completes at 300; w1 holds token 1 until it unlocks at 2000, and the lock
    goes to w2's long-dead lease (the etcd#11456 pattern)."""
    h = H()
    h.op("w1", "grant", 0, 1, lease=1)
    h.op("w1", "lock", 1, 2, lock="L", lease=1, token=1)
    h.op("w2", "grant", 5, 6, lease=2)
    h.op("w2", "lock", 7, None, lock="L", lease=2)
    h.op("w2", "keepalive", 299, 300, lease=2, ttl=1000)
    h.op("w1", "keepalive", 600, 601, lease=1, ttl=1000)
    h.op("w1", "keepalive", 1200, 1201, lease=1, ttl=1000)
    h.op("w1", "keepalive", 1800, 1801, lease=1, ttl=1000)
    h.fault(310, 4000, "pause", target="w2")
    if unknown_keepalive is not None:
        h.op("w2", "keepalive", 305, unknown_keepalive, phase="info", lease=2, err="timeout")
    if restart is not None:
        h.fault(restart, restart + 100, "kill-fenced", target="fenced")
        h.op("w1", "keepalive", restart + 150, restart + 160, lease=1, ttl=1000)
    if leader_change is not None:
        h.add(leader_change, "nemesis", "leader-change", "ok", 0, term=3)
        h.op("w1", "keepalive", leader_change + 10, leader_change + 20, lease=1, ttl=1000)
    h.op("w1", "unlock", 2000, 2001, token=1, released=1)
    # w2's LOCK completes (token 2) when it is resumed.
    lock_n = [e for e in h.events if e["proc"] == "w2" and e["op"] == "lock"][0]["n"]
    h.add(4001, "w2", "lock", "ok", lock_n, lock="L", lease=2, token=2)
    return h


def test_expired_grant():
    expect("a grant to a certainly expired lease is reported (planted bug)", bug_history().run(),
           ["expired-grant"])


def test_expired_grant_restart():
    expect("a fenced restart renews leases: no expired-grant report", bug_history(restart=900).run(), [])


def test_expired_grant_leader_change():
    expect("a logged leader change renews leases: no expired-grant report",
           bug_history(leader_change=1200).run(), [])


def test_expired_grant_unknown_keepalive():
    expect("an outcome-unknown renewal may have extended the lease",
           bug_history(unknown_keepalive=1500).run(), [])


def test_expired_grant_slack():
    h = bug_history()
    expect("slack large enough to cover the gap suppresses the report", h.run(slack_ms=1000), [])


def early_history(grant_at):
    """w1 holds token 1; its renewal answered at 1001 promises the lease
    until 1000 + 1000; w2's LOCK completes (token 2) at grant_at, with no
    UNLOCK or REVOKE by w1."""
    h = H()
    h.op("w1", "grant", 0, 1, lease=1, ttl=1000)
    h.op("w1", "lock", 1, 2, lock="L", lease=1, token=1)
    h.op("w1", "keepalive", 1000, 1001, lease=1, ttl=1000)
    h.op("w2", "grant", 5, 6, lease=2, ttl=5000)
    h.op("w2", "keepalive", 1000, 1001, lease=2, ttl=5000)
    h.op("w2", "lock", 7, None, lock="L", lease=2)
    n = [e for e in h.events if e["proc"] == "w2" and e["op"] == "lock"][0]["n"]
    h.add(grant_at, "w2", "lock", "ok", n, lock="L", lease=2, token=2)
    return h


def test_early_expiry():
    expect("a lease that expires before its last answered renewal ran out is reported",
           early_history(1500).run(), ["early-expiry"])
    expect("the lock moving on once that renewal ran out is fine", early_history(2050).run(), [])


def test_valid_handoff():
    """A waiter whose lease is kept alive gets the lock: no report."""
    h = H()
    h.op("w1", "grant", 0, 1, lease=1)
    h.op("w1", "lock", 1, 2, lock="L", lease=1, token=1)
    h.op("w2", "grant", 5, 6, lease=2)
    h.op("w2", "lock", 7, None, lock="L", lease=2)
    for k in range(1, 7):
        h.op("w2", "keepalive", 300 * k, 300 * k + 1, lease=2, ttl=1000)
        h.op("w1", "keepalive", 300 * k + 5, 300 * k + 6, lease=1, ttl=1000)
    h.op("w1", "unlock", 2000, 2001, token=1, released=1)
    n = [e for e in h.events if e["proc"] == "w2" and e["op"] == "lock"][0]["n"]
    h.add(2002, "w2", "lock", "ok", n, lock="L", lease=2, token=2)
    expect("a hand-off to a live waiter is fine", h.run(), [])


def test_liveness():
    h = H()
    h.cycle("w1", 10, lease=1, token=1, read=0)
    h.fault(100, 200, "pause", target="w1")
    h.stop(10000)
    expect("no grant after the last fault healed is a liveness violation", h.run(), ["liveness"])
    h.cycle("w1", 1000, lease=2, token=2, read=1)
    res = h.run()
    expect("a grant soon after the heal satisfies liveness", res, [])


def test_files_and_cli():
    """The CLI merges files, tolerates a torn last line, refuses garbage."""
    h, t = clean_history()
    with TempDir("fence-check-") as d:
        a = os.path.join(d, "a.jsonl")
        b = os.path.join(d, "b.jsonl")
        evs = sorted(h.events, key=lambda e: e["t"])
        with open(a, "w") as f:
            for e in evs:
                if e["proc"] != "w2":
                    f.write(json.dumps(e) + "\n")
            f.write('{"t": 99999999999, "proc": "w1", "op": "gra')  # torn by kill -9
        with open(b, "w") as f:
            for e in evs:
                if e["proc"] == "w2":
                    f.write(json.dumps(e) + "\n")
        chk = os.path.join(TOOLS, "torture_check.py")
        r = subprocess.run([sys.executable, chk, a, b], capture_output=True, text=True)
        name = "CLI: merged files with a torn last line pass"
        T.check(r.returncode == 0, name, r.stdout + r.stderr)
        r = subprocess.run([sys.executable, chk, "--expect-violation", a, b], capture_output=True, text=True)
        name = "CLI: --expect-violation fails on a clean history"
        T.check(r.returncode == 1, name)
        with open(b, "a") as f:
            f.write("this is not json\n")
            f.write(json.dumps(evs[-1]) + "\n")
        r = subprocess.run([sys.executable, chk, a, b], capture_output=True, text=True)
        name = "CLI: a malformed line in the middle is refused with file:line"
        good = r.returncode == 2 and "b.jsonl:" in r.stderr
        T.check(good, name)


def test_mutations():
    """Robustness of the history reader and checker: thousands of seeded
    mutations of a valid history either are refused with HistoryError or
    are checked without the checker itself failing."""
    import random
    h, t = clean_history()
    h.stop(t + 4000)
    lines = [json.dumps({k: v for k, v in e.items() if k != "_seq"}) for e in sorted(h.events, key=lambda e: e["t"])]
    rng = random.Random(int(os.environ.get("MUTSEED", "1234")))
    crashes = 0
    refused = 0
    tokens = ['"x"', "-1", "null", "true", "1e99", "[]", "{}", '""', "0", "18446744073709551616", '"ok"']
    with TempDir("fence-check-mut-") as d:
        path = os.path.join(d, "h.jsonl")
        for i in range(int(os.environ.get("MUTN", "1000"))):
            mutated = list(lines)
            for _ in range(rng.randint(1, 3)):
                k = rng.randrange(len(mutated))
                line = mutated[k]
                choice = rng.randrange(4)
                if choice == 0 and line:
                    pos = rng.randrange(len(line))
                    line = line[:pos] + chr(rng.randrange(32, 127)) + line[pos + 1:]
                elif choice == 1:
                    try:
                        e = json.loads(line)
                        f = rng.choice(list(e.keys()))
                    except (ValueError, AttributeError, IndexError):
                        continue
                    e[f] = json.loads(rng.choice(tokens))
                    line = json.dumps(e)
                elif choice == 2:
                    line = line[:rng.randrange(len(line) + 1)]
                else:
                    mutated.insert(k, mutated[rng.randrange(len(mutated))])
                mutated[k] = line
            with open(path, "w") as f:
                f.write("\n".join(mutated) + "\n")
            try:
                evs = torture_common.read_history([path])
                if evs:
                    torture_check.check(evs)
            except torture_common.HistoryError:
                refused += 1
            except Exception as e:  # noqa: BLE001 - any other exception is a checker bug
                crashes += 1
                if crashes <= 3:
                    print("#   mutation %d crashed the checker: %r" % (i, e))
    T.check(crashes == 0, "%d mutated histories: refused (%d) or checked, never a crash" % (i + 1, refused))


def main():
    for fn in (test_clean, test_stale_rejected_is_fine, test_lease_only_overlap, test_token_twice,
               test_token_order, test_concurrent_grants_any_order, test_fence_order_equal_tokens,
               test_lost_update_final, test_counter_unknown_ok, test_counter_too_high, test_record_lost,
               test_final_unreadable, test_expired_grant, test_expired_grant_restart,
               test_expired_grant_leader_change, test_expired_grant_unknown_keepalive, test_expired_grant_slack, test_early_expiry,
               test_valid_handoff,
               test_liveness, test_files_and_cli, test_mutations, test_shared_phase,
               test_shared_reread_differs, test_shared_token_to_writer):
        try:
            fn()
        except Exception as e:  # a crash in the checker fails that case only
            T.check(False, fn.__name__, "%s raised %r" % (fn.__name__, e))
    return 1 if T.failed else 0


if __name__ == "__main__":
    sys.exit(main())
