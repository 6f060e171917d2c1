#!/usr/bin/python3
"""torture_check: the history checker of the fenced torture harness.

Reads one or more JSON-lines history files (workers, nemesis, final reads;
see docs/testing.md, "Torture") and checks, on the shared monotonic
timeline:

  tokens        Lock grants: no token is handed to two different leases, and
                a grant that completed before another was invoked has the
                smaller token (grant order never contradicts token order).
  fence-order   Per fence, every admitted operation (FENCE.ADMIT, FSET with a
                token) has a token >= that of every admitted operation that
                completed before it was invoked: no stale writer got in.
  lost-update   The counter: no two acknowledged increments wrote the same
                value, the final counter is >= the acknowledged increments
                and <= acknowledged + outcome-unknown ones, and it never
                ends below an acknowledged value.
  durability    Every acknowledged append record is present, with its value,
                in the final state (after all the crashes).
  expired-grant No lock is granted to a lease that was certainly expired:
                the lease's last possible renewal (successful renewals: their
                completion; outcome-unknown ones: when the client gave up, or
                when a network fault on that client healed, plus a bound) plus
                the TTL plus slack lies before a lower bound of the grant time
                (the LOCK invocation, and the moment the previous holder
                could first have released: its UNLOCK or REVOKE invocation, or
                its lease's earliest possible expiry).  A fenced restart or a
                leader change (logged by the harness) gives every lease a fresh
                full TTL, counted from the first answer given afterwards.
  liveness      After the last fault healed, some lock grant completes within
                the liveness bound (default TTL + longest hold + 2 s).
  read-stable   A reader under a shared lock (--shared-pct) reads the counter,
                holds, reads it again and is admitted again with its token:
                both reads agree (no write came while its phase's token was
                still admitted).  Shared grants of one phase share a token:
                the tokens check allows that among shared grants only.

Usage: torture_check.py [options] HISTORY...
Exit status: 0 no violation, 1 violations, 2 unreadable input.  With
--expect-violation (the controls) 0 means "a violation was found".
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import torture_common  # noqa: E402

# Ops that go to the lock service; a successful one after a restart shows
# the restarted server is answering.
FENCED_OPS = ("grant", "keepalive", "lock", "unlock", "revoke")
# Ops that are admitted (or rejected) at the resource by token.
FENCE_OPS = ("admit", "write", "record")
NET_FAULTS = ("partition", "delay", "reset")


class Op:
    """One operation of a worker: its invocation and its completion."""

    __slots__ = ("proc", "n", "op", "inv", "done")

    def __init__(self, proc, n, op):
        self.proc = proc  # process name, "w<id>"
        self.n = n  # sequence number within the process
        self.op = op  # grant, keepalive, lock, admit, read, write, ...
        self.inv = None  # invoke event (dict) or None
        self.done = None  # completion event (ok/fail/info) or None

    @property
    def status(self):
        """Returns "ok", "fail", "info" (unknown) or None (never completed)."""
        return self.done["phase"] if self.done is not None else None

    @property
    def inv_t(self):
        return self.inv["t"] if self.inv is not None else self.done["t"]

    @property
    def done_t(self):
        return self.done["t"] if self.done is not None else None

    def get(self, field, default=None):
        """Returns a field from the completion event, else the invocation."""
        if self.done is not None and field in self.done:
            return self.done[field]
        if self.inv is not None and field in self.inv:
            return self.inv[field]
        return default


class Violation:
    """One broken property, with the events that show it."""

    def __init__(self, kind, t, message, events):
        self.kind = kind  # property name (see the module doc)
        self.t = t  # time of the detecting event (ns)
        self.message = message  # one readable sentence
        self.events = [e for e in events if e is not None]  # the evidence

    def as_dict(self):
        return {"kind": self.kind, "t": self.t, "message": self.message}


class Result:
    """What the checker found: violations, statistics and notes."""

    def __init__(self):
        self.violations = []
        self.stats = {}
        self.notes = []
        self.t0 = 0

    @property
    def ok(self):
        return not self.violations


def _ms(result, t):
    """Formats an absolute time as ms since the start of the history."""
    return "%.1fms" % ((t - result.t0) / 1e6)


def pair_ops(events):
    """Groups worker events into Ops keyed by (proc, n)."""
    ops = {}
    for e in events:
        proc = e["proc"]
        if not proc.startswith("w") or e["op"] in ("start", "exit"):
            continue
        key = (proc, e.get("n"))
        op = ops.get(key)
        if op is None:
            op = ops[key] = Op(proc, e.get("n"), e["op"])
        if e["phase"] == "invoke":
            op.inv = e
        else:
            op.done = e
    return list(ops.values())


def _meta(events):
    """Returns the merged fields of all "meta" events (run parameters)."""
    meta = {}
    for e in events:
        if e["op"] == "meta":
            meta.update({k: v for k, v in e.items() if not k.startswith("_")})
    return meta


def check_grants(res, grants):
    """Tokens are unique per grant, and grant order never contradicts token
    order: if grant a completed before grant b was invoked, a.token < b.token."""
    by_token = {}
    for g in grants:
        tok = g.get("token")
        prev = by_token.get(tok)
        if prev is not None and prev.get("lease") != g.get("lease") and \
                not (prev.get("shared") and g.get("shared")):
            res.violations.append(Violation(
                "tokens", g.done_t,
                "token %s was granted twice: to lease %s (%s) and to lease %s (%s)"
                % (tok, prev.get("lease"), prev.proc, g.get("lease"), g.proc),
                [prev.inv, prev.done, g.inv, g.done]))
        by_token.setdefault(tok, g)
    by_done = sorted(grants, key=lambda o: o.done_t)
    i = 0
    best = None
    for b in sorted(grants, key=lambda o: o.inv_t):
        while i < len(by_done) and by_done[i].done_t < b.inv_t:
            if best is None or by_done[i].get("token") > best.get("token"):
                best = by_done[i]
            i += 1
        if best is None:
            continue
        bt, at = b.get("token"), best.get("token")
        if bt < at or (bt == at and b.get("lease") != best.get("lease") and
                       not (b.get("shared") and best.get("shared"))):
            res.violations.append(Violation(
                "tokens", b.done_t,
                "token order contradicts grant order: token %s (lease %s, %s) was granted after "
                "token %s (lease %s, %s) had already been granted"
                % (bt, b.get("lease"), b.proc, at, best.get("lease"), best.proc),
                [best.inv, best.done, b.inv, b.done]))


def check_fences(res, admitted):
    """Per fence: an admitted op's token is >= the token of every admitted op
    that completed before it was invoked."""
    by_fence = {}
    for o in admitted:
        by_fence.setdefault(o.get("fence"), []).append(o)
    for fence, ops in sorted(by_fence.items(), key=lambda kv: str(kv[0])):
        by_done = sorted(ops, key=lambda o: o.done_t)
        i = 0
        best = None
        for b in sorted(ops, key=lambda o: o.inv_t):
            while i < len(by_done) and by_done[i].done_t < b.inv_t:
                if best is None or by_done[i].get("token") > best.get("token"):
                    best = by_done[i]
                i += 1
            if best is not None and b.get("token") < best.get("token"):
                res.violations.append(Violation(
                    "fence-order", b.done_t,
                    "stale token admitted on fence %r: %s %s with token %s was admitted after %s %s "
                    "with token %s had been admitted (two writers overlapped)"
                    % (fence, b.proc, b.op, b.get("token"), best.proc, best.op, best.get("token")),
                    [best.inv, best.done, b.inv, b.done]))


def check_counter(res, ops, finals, counter_key):
    """No lost updates on the counter, judged from the acknowledged writes
    and the final value read after the run."""
    writes = [o for o in ops if o.op == "write" and o.get("key") == counter_key
              and isinstance(o.get("value"), int)]
    acked = [o for o in writes if o.status == "ok"]
    unknown = [o for o in writes if o.status in ("info", None)]
    seen = {}
    for o in sorted(acked, key=lambda o: o.done_t):
        v = o.get("value")
        if v in seen:
            a = seen[v]
            res.violations.append(Violation(
                "lost-update", o.done_t,
                "lost update: %s (token %s) and %s (token %s) both wrote %s=%s after reading %s; "
                "one increment was lost" % (a.proc, a.get("token"), o.proc, o.get("token"),
                                           counter_key, v, o.get("read")),
                [a.inv, a.done, o.inv, o.done]))
        else:
            seen[v] = o
    res.stats["increments_acked"] = len(acked)
    res.stats["increments_unknown"] = len(unknown)
    final = finals.get(counter_key)
    if final is None:
        if finals:
            res.notes.append("final counter not read: counter check skipped")
        return
    if final["phase"] != "ok":
        res.violations.append(Violation("durability", final["t"], "the final state could not be read: %s"
                                        % final.get("err", "?"), [final]))
        return
    try:
        fv = int(final.get("value") or 0)
    except (TypeError, ValueError):
        res.violations.append(Violation("durability", final["t"], "the final counter %r is not a number"
                                        % (final.get("value"),), [final]))
        return
    res.stats["final_counter"] = fv
    if fv < len(acked):
        res.violations.append(Violation(
            "lost-update", final["t"],
            "lost updates: the final counter is %d but %d increments were acknowledged" % (fv, len(acked)),
            [final]))
    elif fv > len(acked) + len(unknown):
        res.violations.append(Violation(
            "lost-update", final["t"],
            "the final counter is %d, more than %d acknowledged + %d outcome-unknown increments"
            % (fv, len(acked), len(unknown)), [final]))
    top = max(acked, key=lambda o: o.get("value"), default=None)
    if top is not None and fv < top.get("value"):
        res.violations.append(Violation(
            "lost-update", final["t"],
            "the final counter %d is below the acknowledged write of %d by %s (token %s)"
            % (fv, top.get("value"), top.proc, top.get("token")), [top.inv, top.done, final]))


def check_records(res, ops, finals):
    """Every acknowledged append record is present with its value at the end."""
    recs = [o for o in ops if o.op == "record" and o.status == "ok"]
    res.stats["records_acked"] = len(recs)
    if not finals:
        if recs:
            res.notes.append("no final reads in the history: durability of records not checked")
        return
    for o in sorted(recs, key=lambda o: o.done_t):
        key = o.get("key")
        f = finals.get(key)
        if f is None or f["phase"] != "ok":
            res.violations.append(Violation(
                "durability", o.done_t, "acknowledged record %s was not read back at the end" % key,
                [o.inv, o.done, f]))
        elif f.get("value") != o.get("value"):
            res.violations.append(Violation(
                "durability", o.done_t,
                "acknowledged record %s=%r is %r in the final state" % (key, o.get("value"), f.get("value")),
                [o.inv, o.done, f]))


def check_expired_grants(res, ops, events, grants, slack_ms, inflight_ms, default_ttl_ms):
    """The planted-bug detector: no grant to a lease that was certainly
    expired at the earliest moment the grant can have happened."""
    t_end = events[-1]["t"] if events else 0
    ms = 1000000
    lease_ttl = {}
    renew_ok = {}  # lease -> [Op] successful grant/keepalive
    renew_unknown = {}  # lease -> [Op] keepalives with unknown outcome
    for o in ops:
        lease = o.get("lease")
        if lease is None:
            continue
        if o.op == "grant" and o.status == "ok":
            lease_ttl[lease] = o.get("ttl", default_ttl_ms)
            renew_ok.setdefault(lease, []).append(o)
        elif o.op == "keepalive" and o.status == "ok":
            renew_ok.setdefault(lease, []).append(o)
        elif o.op == "keepalive" and o.status in ("info", None):
            renew_unknown.setdefault(lease, []).append(o)
    # Network faults per target: (start, end, extra delay) to bound when a
    # held-back request could still arrive.
    net = {}
    open_faults = {}
    for e in events:
        if e["proc"] == "nemesis" and e["op"] == "fault" and e.get("kind") in NET_FAULTS:
            key = (e.get("target"), e.get("n"))
            if e["phase"] == "start":
                open_faults[key] = e
            elif key in open_faults:
                s = open_faults.pop(key)
                net.setdefault(e.get("target"), []).append((s["t"], e["t"], int(s.get("ms", 0)) * ms))
    for key, s in open_faults.items():
        net.setdefault(key[0], []).append((s["t"], t_end, int(s.get("ms", 0)) * ms))
    # fenced restarts: kill time -> first successful answer afterwards.
    oks = sorted(o.done_t for o in ops if o.op in FENCED_OPS and o.status == "ok")
    restarts = []
    for e in events:
        if e["proc"] != "nemesis":
            continue
        if (e["op"] == "fault" and e.get("kind") == "kill-fenced" and e["phase"] == "start") \
                or e["op"] == "leader-change":
            # A leader change may have happened before it was observed:
            # count from one TTL-free second earlier (only loosens).
            since = e["t"] - (1000 * ms if e["op"] == "leader-change" else 0)
            up = next((t for t in oks if t > e["t"]), None)
            restarts.append((since, up if up is not None else t_end))
    release_lb = {}  # token -> earliest time its holder can have let go
    unlock_inv = {}
    for o in ops:
        if o.op == "unlock" and o.inv is not None:
            tok = o.get("token")
            unlock_inv[tok] = min(unlock_inv.get(tok, o.inv_t), o.inv_t)
    revoke_inv = {}
    for o in ops:
        if o.op == "revoke" and o.inv is not None:
            lease = o.get("lease")
            revoke_inv[lease] = min(revoke_inv.get(lease, o.inv_t), o.inv_t)
    for g in grants:
        lease = g.get("lease")
        cands = []
        tok = g.get("token")
        if tok in unlock_inv:
            cands.append(unlock_inv[tok])
        if lease in revoke_inv and revoke_inv[lease] > g.inv_t:
            cands.append(revoke_inv[lease])
        rs = renew_ok.get(lease, [])
        if rs:
            ttl = lease_ttl.get(lease, default_ttl_ms)
            cands.append(max(r.inv_t for r in rs) + ttl * ms)
        # The holders of a shared phase share the token: the next grant
        # waits for the last of them (the latest of their earliest releases).
        mine = min(cands) if cands else None
        if tok in release_lb and (release_lb[tok] is None or mine is None):
            release_lb[tok] = None
        elif tok in release_lb:
            release_lb[tok] = max(release_lb[tok], mine)
        else:
            release_lb[tok] = mine
    by_lock = {}
    for g in grants:
        by_lock.setdefault(g.get("lock"), []).append(g)
    token_lock = {g.get("token"): g.get("lock") for g in grants}
    res.stats["expired_grant_checked"] = 0
    for lock, gs in by_lock.items():
        gs = sorted(gs, key=lambda o: o.get("token"))
        for idx, g in enumerate(gs):
            lease = g.get("lease")
            if lease not in renew_ok:
                continue
            ttl = lease_ttl.get(lease, default_ttl_ms) * ms
            gdone = g.done_t
            before = [r.done_t + ttl for r in renew_ok[lease] if r.inv_t < gdone]
            if not before:
                continue  # the lease was granted after this grant? a malformed history
            ub = max(before)
            why_ub = "its last renewal completed at %s" % _ms(res, ub - ttl)
            for r in renew_unknown.get(lease, []):
                if r.inv_t >= gdone:
                    continue
                gave_up = r.done_t if r.done_t is not None else t_end
                for (s, e, extra) in net.get(r.proc, []):
                    if s <= gave_up:
                        gave_up = max(gave_up, e + extra)
                cand = gave_up + inflight_ms * ms + ttl
                if cand > ub:
                    ub = cand
                    why_ub = "a renewal with unknown outcome may have landed until %s" % _ms(res, cand - ttl)
            grant_t = min(renew_ok[lease], key=lambda r: r.inv_t).inv_t
            for (kill_t, up_t) in restarts:
                if grant_t < kill_t < gdone and up_t + ttl > ub:
                    ub = up_t + ttl
                    why_ub = "fenced restarted (killed at %s) and renewed every lease by %s" % (
                        _ms(res, kill_t), _ms(res, up_t))
            lb = g.inv_t
            why_lb = "LOCK was invoked at %s" % _ms(res, lb)
            # The previous grant of another token (joining a shared phase
            # waits for no earlier holder of it).
            j = idx - 1
            while j >= 0 and gs[j].get("token") == tok_of(g):
                j -= 1
            prev = gs[j] if j >= 0 else None
            if prev is not None:
                pt = prev.get("token")
                if tok_of(g) - pt > 1000:
                    gap = [None]
                else:
                    gap = [t for t in range(pt + 1, tok_of(g)) if token_lock.get(t) in (None, lock)]
                rl = release_lb.get(pt)
                if not gap and rl is not None and rl > lb:
                    lb = rl
                    why_lb = "the previous holder (token %s, %s) cannot have released before %s" % (
                        pt, prev.proc, _ms(res, rl))
            res.stats["expired_grant_checked"] += 1
            if lb > ub + slack_ms * ms:
                res.violations.append(Violation(
                    "expired-grant", gdone,
                    "lock %r was granted (token %s) to lease %s of %s after that lease had certainly expired: "
                    "%s, so it expired by %s; the grant happened no earlier than %s because %s"
                    % (lock, g.get("token"), lease, g.proc, why_ub, _ms(res, ub), _ms(res, lb), why_lb),
                    [g.inv, g.done]))


def check_rereads(res, ops):
    """A reader's two reads agree when its token was admitted after both."""
    n = 0
    for o in ops:
        if o.op != "reread" or o.status != "ok":
            continue
        n += 1
        if o.get("first") != o.get("second"):
            res.violations.append(Violation(
                "read-stable", o.done_t,
                "%s read the counter as %s, then %s, under a shared lock (token %s) whose token "
                "the fence still admitted after both reads: a write came inside a shared phase"
                % (o.proc, o.get("first"), o.get("second"), o.get("token")),
                [o.inv, o.done]))
    res.stats["rereads_checked"] = n


def check_early_expiry(res, ops, grants, slack_ms):
    """The renewal guarantee (docs/leases.md): a lease whose holder neither
    unlocked nor revoked loses its lock only once it expired, and it may not
    expire before the last renewal answered OK ran out: invoke time + the
    reply's TTL (a grant: + its TTL).  So the next grant of the lock may not
    complete before that, minus the slack."""
    ms = 1000000
    promise = {}  # lease -> [(answered, promised until)]
    for o in ops:
        lease = o.get("lease")
        if lease is None or o.status != "ok" or o.op not in ("grant", "keepalive"):
            continue
        ttl = o.get("ttl")
        if ttl is None:
            continue
        promise.setdefault(lease, []).append((o.done_t, o.inv_t + int(ttl) * ms))
    unlocked = {}
    for o in ops:
        if o.op == "unlock" and o.inv is not None:
            tok = o.get("token")
            unlocked[tok] = min(unlocked.get(tok, o.inv_t), o.inv_t)
    revoked = {}
    for o in ops:
        if o.op == "revoke" and o.inv is not None:
            lease = o.get("lease")
            revoked[lease] = min(revoked.get(lease, o.inv_t), o.inv_t)
    by_lock = {}
    for g in grants:
        by_lock.setdefault(g.get("lock"), []).append(g)
    res.stats["early_expiry_checked"] = 0
    for lock, gs in by_lock.items():
        gs = sorted(gs, key=tok_of)
        for prev, g in zip(gs, gs[1:]):
            if tok_of(g) != tok_of(prev) + 1:
                continue  # another grant may lie between (unknown outcome)
            lease, gdone = prev.get("lease"), g.done_t
            if lease == g.get("lease") or unlocked.get(tok_of(prev), gdone) < gdone or \
                    revoked.get(lease, gdone) < gdone:
                continue  # let go of, not expired
            ps = [p for (done, p) in promise.get(lease, []) if done is not None and done < gdone]
            if not ps:
                continue
            res.stats["early_expiry_checked"] += 1
            if gdone + slack_ms * ms < max(ps):
                res.violations.append(Violation(
                    "early-expiry", gdone,
                    "lock %r went to token %s (completed at %s) while lease %s of %s, holder of token "
                    "%s, was promised to live until %s by a renewal answered OK, and its holder had "
                    "neither unlocked nor revoked" % (lock, tok_of(g), _ms(res, gdone), lease,
                                                     prev.proc, tok_of(prev), _ms(res, max(ps))),
                    [prev.inv, g.done]))


def tok_of(g):
    """Returns the token of a grant op."""
    return g.get("token")


def check_liveness(res, events, grants, liveness_ms):
    """After the last fault healed, a grant completes within liveness_ms."""
    heal = None
    stop = None
    for e in events:
        if e["proc"] != "nemesis":
            continue
        if e["op"] == "fault" and e["phase"] == "end":
            heal = e
        if e["op"] == "stop":
            stop = e
    if heal is None:
        start = next((e for e in events if e["proc"] == "nemesis" and e["op"] == "meta"), None)
        heal = start
    if heal is None or stop is None:
        res.notes.append("liveness not checked (no nemesis start/stop events)")
        return
    bound = heal["t"] + liveness_ms * 1000000
    if stop["t"] < bound:
        res.notes.append("liveness not checked: the quiet period after the last fault (%.0f ms) is shorter "
                         "than the bound (%d ms)" % ((stop["t"] - heal["t"]) / 1e6, liveness_ms))
        return
    after = [g for g in grants if heal["t"] < g.done_t <= bound]
    if not after:
        res.violations.append(Violation(
            "liveness", bound,
            "no lock was granted within %d ms after the last fault healed at %s" % (liveness_ms, _ms(res, heal["t"])),
            [heal]))


def check(events, ttl_ms=None, slack_ms=None, liveness_ms=None, inflight_ms=None, counter_key=None):
    """Runs every check over a merged, time-sorted event list; returns a
    Result.  Parameters not given come from the history's meta events."""
    res = Result()
    meta = _meta(events)
    ttl_ms = int(ttl_ms if ttl_ms is not None else meta.get("ttl", 1000))
    slack_ms = int(slack_ms if slack_ms is not None else meta.get("slack_ms", 100))
    inflight_ms = int(inflight_ms if inflight_ms is not None else meta.get("inflight_ms", 500))
    hold_max = int(meta.get("hold_max", ttl_ms))
    liveness_ms = int(liveness_ms if liveness_ms is not None else meta.get("liveness_ms", ttl_ms + hold_max + 2000))
    counter_key = counter_key or meta.get("counter", "counter")
    res.t0 = events[0]["t"] if events else 0
    ops = pair_ops(events)
    finals = {}
    for e in events:
        if e["proc"] == "final" and e["op"] == "read":
            finals[e.get("key")] = e
    grants = [o for o in ops if o.op == "lock" and o.status == "ok"]
    admitted = [o for o in ops if o.op in FENCE_OPS and o.status == "ok"]
    check_grants(res, grants)
    check_fences(res, admitted)
    check_counter(res, ops, finals, counter_key)
    check_records(res, ops, finals)
    check_expired_grants(res, ops, events, grants, slack_ms, inflight_ms, ttl_ms)
    check_early_expiry(res, ops, grants, slack_ms)
    check_liveness(res, events, grants, liveness_ms)
    check_rereads(res, ops)
    res.violations.sort(key=lambda v: v.t)
    faults = {}
    for e in events:
        if e["proc"] == "nemesis" and e["op"] == "fault" and e["phase"] == "start":
            faults[e.get("kind")] = faults.get(e.get("kind"), 0) + 1
    by_op = {}
    for o in ops:
        if o.done is not None:
            by_op[o.op] = by_op.get(o.op, 0) + 1
    res.stats.update({
        "ops": sum(by_op.values()),
        "ops_by_kind": by_op,
        "unknown_outcome": sum(1 for o in ops if o.status in ("info", None)),
        "grants": len(grants),
        "admitted": len(admitted),
        "rejected_stale": sum(1 for o in ops if o.status == "fail" and o.done.get("stale")),
        "faults": faults,
        "violations": len(res.violations),
        "seed": meta.get("seed"),
        "ttl_ms": ttl_ms,
        "liveness_ms": liveness_ms,
    })
    res.events = events
    return res


def describe(res, e):
    """Formats one event as a readable timeline line."""
    fields = " ".join("%s=%s" % (k, json.dumps(v) if isinstance(v, str) else v)
                      for k, v in e.items() if k not in ("t", "proc", "op", "phase", "n", "_seq"))
    return "%10s  %-8s %-10s %-7s %s" % (_ms(res, e["t"]), e["proc"], e["op"], e["phase"], fields)


def report(res, out=sys.stdout, context=8):
    """Prints the violations (the first one with the events around it) and
    the notes."""
    if res.ok:
        print("checker: no violations", file=out)
    else:
        print("checker: %d violation(s)" % len(res.violations), file=out)
        for v in res.violations[:20]:
            print("  [%s] at %s: %s" % (v.kind, _ms(res, v.t), v.message), file=out)
        if len(res.violations) > 20:
            print("  ... %d more" % (len(res.violations) - 20), file=out)
        first = res.violations[0]
        print("\nfirst violation: [%s] %s" % (first.kind, first.message), file=out)
        print("evidence:", file=out)
        for e in sorted(first.events, key=lambda e: e["t"]):
            print("  " + describe(res, e), file=out)
        anchor = max(first.events, key=lambda e: e["t"]) if first.events else None
        if anchor is not None and "_seq" in anchor:
            idx = next((i for i, e in enumerate(res.events) if e is anchor), None)
            if idx is not None:
                lo = max(0, idx - 3 * context)
                print("events around it (all processes):", file=out)
                for e in res.events[lo:idx + context + 1]:
                    mark = ">>" if any(e is x for x in first.events) else "  "
                    print(mark + describe(res, e), file=out)
    for n in res.notes:
        print("note: " + n, file=out)


def summary_table(res, out=sys.stdout, title="torture summary"):
    """Prints the run summary table: ops, faults by kind, admitted, rejected
    stale, violations, and the seed to replay the fault schedule."""
    s = res.stats
    rows = [("ops completed", s.get("ops", 0)),
            ("  lock grants", s.get("grants", 0)),
            ("  outcome unknown", s.get("unknown_outcome", 0))]
    for k, v in sorted(s.get("faults", {}).items()):
        rows.append(("fault %s" % k, v))
    if not s.get("faults"):
        rows.append(("faults", 0))
    rows += [("admitted (token ok)", s.get("admitted", 0)),
             ("rejected stale", s.get("rejected_stale", 0)),
             ("increments acked", s.get("increments_acked", 0)),
             ("final counter", s.get("final_counter", "-"))]
    if s.get("rereads_checked"):
        rows.append(("shared rereads", s["rereads_checked"]))
    rows += [("violations", s.get("violations", 0)),
             ("seed", s.get("seed", "-"))]
    w = max(len(r[0]) for r in rows)
    print("---- %s ----" % title, file=out)
    for k, v in rows:
        print("  %-*s  %s" % (w, k, v), file=out)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Check a fenced torture history (JSON lines).")
    ap.add_argument("--version", action="version", version="torture_check 0.1.0")
    ap.add_argument("history", nargs="+", help="history files (merged by time)")
    ap.add_argument("--ttl-ms", type=int, help="lease TTL (default: from the history's meta event, else 1000)")
    ap.add_argument("--slack-ms", type=int, help="slack for the expired-grant check (default 100)")
    ap.add_argument("--inflight-ms", type=int, help="how long an unanswered request may still land (default 500)")
    ap.add_argument("--liveness-ms", type=int, help="liveness bound after the last fault (default ttl+hold+2000)")
    ap.add_argument("--counter", help="counter key (default counter)")
    ap.add_argument("--json", help="also write the result as JSON to this file")
    ap.add_argument("--summary", action="store_true", help="print the summary table too")
    ap.add_argument("--expect-violation", action="store_true",
                    help="control mode: exit 0 only if a violation is found")
    a = ap.parse_args(argv)
    try:
        events = torture_common.read_history(a.history)
    except torture_common.HistoryError as e:
        print("torture_check: %s" % e, file=sys.stderr)
        return 2
    if not events:
        print("torture_check: the history is empty", file=sys.stderr)
        return 2
    res = check(events, ttl_ms=a.ttl_ms, slack_ms=a.slack_ms, liveness_ms=a.liveness_ms,
                inflight_ms=a.inflight_ms, counter_key=a.counter)
    report(res)
    if a.summary:
        summary_table(res)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"stats": res.stats, "violations": [v.as_dict() for v in res.violations],
                       "notes": res.notes}, f, indent=1)
    if a.expect_violation:
        return 0 if not res.ok else 1
    return 0 if res.ok else 1


if __name__ == "__main__":
    sys.exit(main())
