#!/usr/bin/python3
"""WRONGTYPE names the actual kind (issue 21): every kind of name (a lock,
a shared lock, a multi-lock's name, an election, a semaphore, a
semaphore's slot name#i) x every other kind's command (LOCK, LOCK ...
SHARED, ACQUIRE, UNLOCK, UNLOCK ... LEASE, LOCK.MULTI, ACQUIRE.MULTI,
SEM.ACQUIRE, SEM.RELEASE, ELECTION.CAMPAIGN / PROCLAIM / RESIGN /
LEADER / OBSERVE): the reply is -WRONGTYPE "<name> is <the kind the name
is>", table-driven against a real fenced; and nothing was taken."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap, redis  # noqa: E402

t = Tap()
f = Fenced("fenced").start()
c = f.client()
x = c.execute_command
hold = x("LEASE.GRANT", 600000)   # holds every name of the table
other = x("LEASE.GRANT", 600000)  # the lease of every probe

# The kinds: a name of each, made once, and the words the message must say.
x("LOCK", "k.lock", hold)
x("LOCK", "k.shared", hold, "SHARED")
x("LOCK.MULTI", hold, "k.multi", "k.multi2")
x("ELECTION.CAMPAIGN", "k.elect", hold, "v")
x("SEM.ACQUIRE", "k.sem", 2, hold)
KINDS = [
    ("lock", "k.lock", "k.lock is a lock"),
    ("shared lock", "k.shared", "k.shared is a lock"),
    ("multi-lock name", "k.multi", "k.multi is a lock"),
    ("election", "k.elect", "k.elect is an election"),
    ("semaphore", "k.sem", "k.sem is a semaphore"),
    ("semaphore slot", "k.sem#1", "k.sem#1 is a slot of semaphore k.sem"),
]
LOCKISH = {"lock", "shared lock", "multi-lock name"}

# The commands: (command family, argv builder).  A family does not probe
# its own kind (a lock command on a lock is no WRONGTYPE).
CMDS = [
    ("lock", "LOCK", lambda n: ["LOCK", n, other]),
    ("lock", "LOCK SHARED", lambda n: ["LOCK", n, other, "SHARED"]),
    ("lock", "ACQUIRE", lambda n: ["ACQUIRE", n, 5000]),
    ("lock", "UNLOCK", lambda n: ["UNLOCK", n, 999999]),
    ("lock", "UNLOCK LEASE", lambda n: ["UNLOCK", n, 999999, "LEASE", other]),
    ("lock", "LOCK.MULTI", lambda n: ["LOCK.MULTI", other, "k.free", n]),
    ("lock", "ACQUIRE.MULTI", lambda n: ["ACQUIRE.MULTI", 5000, n, "k.free2"]),
    ("sem", "SEM.ACQUIRE", lambda n: ["SEM.ACQUIRE", n, 2, other]),
    ("sem", "SEM.ACQUIRE TTL", lambda n: ["SEM.ACQUIRE", n, 2, "TTL", 5000]),
    ("sem", "SEM.RELEASE", lambda n: ["SEM.RELEASE", n, 0, 999999]),
    ("elect", "ELECTION.CAMPAIGN", lambda n: ["ELECTION.CAMPAIGN", n, other, "v"]),
    ("elect", "ELECTION.PROCLAIM", lambda n: ["ELECTION.PROCLAIM", n, 999999, "v"]),
    ("elect", "ELECTION.RESIGN", lambda n: ["ELECTION.RESIGN", n, 999999]),
    ("elect", "ELECTION.LEADER", lambda n: ["ELECTION.LEADER", n]),
    ("elect", "ELECTION.OBSERVE", lambda n: ["ELECTION.OBSERVE", n]),
]


def family(kind):
    if kind in LOCKISH:
        return "lock"
    return {"election": "elect", "semaphore": "sem", "semaphore slot": "sem"}[kind]


def reply(argv):
    try:
        return x(*argv)
    except redis.ResponseError as e:
        return "-" + str(e)


def holder(n):
    i = x("LOCK.INFO", n)
    return i and i[:2]  # token and lease


before = {n: holder(n) for _, n, _ in KINDS if not n.startswith("k.sem")}
for kind, name, words in KINDS:
    for fam, label, build in CMDS:
        if fam == family(kind):
            continue
        got = reply(build(name))
        want = "-WRONGTYPE " + words
        t.check(isinstance(got, str) and got.startswith(want),
                "%s on a %s (%s): %s" % (label, kind, name, want), got)
# A multi-lock waiting over an election's name is refused at once (it was
# queued, and granted the election's name as a lock when the leader
# resigned: the election lost its value and fenced stopped on an assert).
t.check(str(reply(["LOCK.MULTI", other, "k.free", "k.elect", "WAIT", 200])).startswith(
    "-WRONGTYPE k.elect is an election"), "LOCK.MULTI ... WAIT over an election: WRONGTYPE")
# A semaphore's first SEM.ACQUIRE over a slot name another kind holds.
x("LOCK", "k.s2#1", hold)
t.check(str(reply(["SEM.ACQUIRE", "k.s2", 2, other])).startswith(
    "-WRONGTYPE k.s2#1 is a lock"), "SEM.ACQUIRE whose slot name is a lock names it",
    reply(["SEM.ACQUIRE", "k.s2", 2, other]))
x("ELECTION.CAMPAIGN", "k.s3#0", hold, "v")
t.check(str(reply(["SEM.ACQUIRE", "k.s3", 1, other])).startswith(
    "-WRONGTYPE k.s3#0 is an election"), "SEM.ACQUIRE whose slot name is an election names it",
    reply(["SEM.ACQUIRE", "k.s3", 1, other]))
# Nothing moved: the holders are the same, the probe lease holds nothing.
after = {n: holder(n) for n in before}
t.eq(before, after, "every name still has its holder")
t.eq(0, x("LEASE.INFO", other)[2], "the probing lease holds nothing")
t.eq(None, x("LOCK.INFO", "k.free"), "a refused multi-lock took none of its names")
x("ELECTION.RESIGN", "k.elect", x("ELECTION.LEADER", "k.elect")[1])
t.eq(None, x("ELECTION.LEADER", "k.elect"), "the election resigns cleanly (fenced is up)")
t.finish()
