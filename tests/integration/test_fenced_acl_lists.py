#!/usr/bin/python3
"""The ACL covers every command, by construction (issue 18, item 4).

LOCK.LIST, LEASE.LIST and CLIENT LIST were in no ACL category, so the gate
let them through: any logged-in user (a user with no commands at all, or one
limited to ~orders:*) read every user's lock names, tokens, leases,
connection names and addresses.  Now each daemon has one command table from
which dispatch, the ACL check, COMMAND and the metrics are derived, and:
  - a user without @lock / @lease gets -NOPERM for LOCK.LIST / LEASE.LIST;
  - LOCK.LIST lists only the names the user's ~patterns cover;
  - LEASE.LIST lists only the user's own leases, unless @admin;
  - CLIENT LIST / CLIENT INFO show only the user's own connections, unless
    @admin (fenced and fence-store);
  - HEALTH and INFO need their categories too;
  - COMMAND INFO shows each command's own categories (@lock, @lease, ...).
Real fenced and fence-store processes, redis-py, free ports, temp dirs.
"""
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from fencetest import (Tap, binary, free_port, make_tmp, need_module, read_log,  # noqa: E402
                       spawn, wait_up)

redis = need_module("redis", "python3-redis")
FENCED = binary("fenced", env="FENCED")
FENCE_STORE = binary("fence-store", env="FENCE_STORE")
TMP = make_tmp("fence-acl-lists.")

ACL = """user admin on >adm1n-pw ~* +@all
user alice on >al1ce-pw ~orders:* +@all -@admin
user bob on >b0b-pw ~batch:* +@all -@admin
user nocmd on >n0cmd-pw ~* -@all
"""

t = Tap()


def start(binpath, name, args):
    port = free_port()
    log = os.path.join(TMP, name + ".log")
    proc = spawn([binpath, "--port", str(port), "--data-dir", os.path.join(TMP, name)] + args,
                 log, stdin=subprocess.DEVNULL)
    state = wait_up(proc, lambda: socket.create_connection(("127.0.0.1", port), 0.2).close(),
                    15, 0.05)
    if state != "up":
        raise RuntimeError("%s did not start: %s" % (name, read_log(log)))
    return proc, port


def conn(port, user, pw, name=None):
    c = redis.Redis(port=port, username=user, password=pw, decode_responses=True,
                    socket_timeout=10, client_name=name)
    c.ping()
    return c


def err_of(fn):
    try:
        fn()
    except redis.exceptions.NoPermissionError as e:
        return "NOPERM " + str(e)
    except redis.exceptions.ResponseError as e:
        return str(e)
    return None


def wait_ready(c):
    for _ in range(400):
        if c.info().get("leader_ready") == 1:
            return True
        time.sleep(0.025)
    return False


acl_path = os.path.join(TMP, "users.acl")
with open(acl_path, "w") as f:
    f.write(ACL)
os.chmod(acl_path, 0o600)

# ---- fenced ------------------------------------------------------------------
proc, port = start(FENCED, "fenced", ["--acl-file", acl_path])
admin = conn(port, "admin", "adm1n-pw", "admin-conn")
t.check(wait_ready(admin), "fenced is ready")
alice = conn(port, "alice", "al1ce-pw", "alice-conn")
bob = conn(port, "bob", "b0b-pw", "bob-conn")
nocmd = conn(port, "nocmd", "n0cmd-pw", "nocmd-conn")

la = int(alice.execute_command("LEASE.GRANT", 60000))
lb = int(bob.execute_command("LEASE.GRANT", 60000))
alice.execute_command("LOCK", "orders:1", la)
alice.execute_command("LOCK", "orders:2", la)
bob.execute_command("LOCK", "batch:secret-job", lb)


def lock_names(c, *args):
    cur, rows = c.execute_command("LOCK.LIST", *args)
    return sorted(r[0] for r in rows)


def lease_ids(c):
    cur, rows = c.execute_command("LEASE.LIST")
    return sorted(int(r[0]) for r in rows)


e = err_of(lambda: nocmd.execute_command("LOCK.LIST"))
t.check(e is not None and "NOPERM" in e, "a user without @lock: LOCK.LIST is -NOPERM", e)
e = err_of(lambda: nocmd.execute_command("LEASE.LIST"))
t.check(e is not None and "NOPERM" in e, "a user without @lease: LEASE.LIST is -NOPERM", e)
e = err_of(lambda: nocmd.execute_command("HEALTH"))
t.check(e is not None and "NOPERM" in e, "a user without commands: HEALTH is -NOPERM too", e)
t.eq(["orders:1", "orders:2"], lock_names(alice), "LOCK.LIST shows alice only her ~orders:* names")
t.eq(["orders:1", "orders:2"], lock_names(alice, "*"),
     "... also with a pattern that would match every name")
t.eq(["batch:secret-job"], lock_names(bob), "LOCK.LIST shows bob only his ~batch:* names")
t.eq(["batch:secret-job", "orders:1", "orders:2"], lock_names(admin),
     "an admin with ~* sees every name")
t.eq([la], lease_ids(alice), "LEASE.LIST shows alice her own lease only")
t.eq([lb], lease_ids(bob), "LEASE.LIST shows bob his own lease only")
t.eq(sorted([la, lb]), lease_ids(admin), "LEASE.LIST shows an @admin every lease")


def client_names(c):
    return sorted(line.split(" name=")[1].split(" ")[0]
                  for line in c.execute_command("CLIENT", "LIST").strip().split("\n"))


t.eq(["alice-conn"], client_names(alice), "CLIENT LIST shows alice her own connection only")
t.eq(["nocmd-conn"], client_names(nocmd),
     "CLIENT LIST shows even a user without commands only its own")
t.eq(["admin-conn", "alice-conn", "bob-conn", "nocmd-conn"], client_names(admin),
     "CLIENT LIST shows an @admin every connection")
alice2 = conn(port, "alice", "al1ce-pw", "alice-two")
t.eq(["alice-conn", "alice-two"], client_names(alice),
     "... and every connection of the user's own")
bob_id = bob.execute_command("CLIENT", "ID")
info = alice.execute_command("CLIENT", "LIST", "ID", bob_id)
t.check("bob" not in info, "CLIENT LIST ID <bob's id> shows alice nothing of bob's", info)



def command_info(name):
    """COMMAND INFO name through redis-cli (redis-py reshapes the reply)."""
    out = subprocess.run(["redis-cli", "-p", str(port), "--user", "admin", "--pass", "adm1n-pw",
                          "--no-auth-warning", "COMMAND", "INFO", name],
                         capture_output=True, text=True, timeout=10).stdout
    return set(w for w in out.split() if w.startswith("@"))


cats = command_info("LOCK")
t.check({"@lock", "@write"} <= cats, "COMMAND INFO LOCK shows @lock @write", cats)
cats = command_info("LEASE.LIST")
t.check({"@lease", "@read"} <= cats, "COMMAND INFO LEASE.LIST shows @lease @read", cats)
e = err_of(lambda: alice.execute_command("NOSUCH.COMMAND", "x"))
t.check(e is not None and "unknown command" in e, "a command in no table is unknown", e)

# ---- fence-store ---------------------------------------------------------------
sproc, sport = start(FENCE_STORE, "store", ["--acl-file", acl_path])
sadmin = conn(sport, "admin", "adm1n-pw", "s-admin")
salice = conn(sport, "alice", "al1ce-pw", "s-alice")
snocmd = conn(sport, "nocmd", "n0cmd-pw", "s-nocmd")
t.eq(["s-alice"], client_names(salice), "fence-store: CLIENT LIST shows alice her own only")
t.eq(["s-admin", "s-alice", "s-nocmd"], client_names(sadmin),
     "fence-store: CLIENT LIST shows an @admin every connection")
e = err_of(lambda: snocmd.execute_command("FGET", "k"))
t.check(e is not None and "NOPERM" in e, "fence-store: a user without commands: FGET -NOPERM", e)
e = err_of(lambda: snocmd.execute_command("INFO"))
t.check(e is not None and "NOPERM" in e, "fence-store: INFO needs its categories", e)
e = err_of(lambda: salice.execute_command("FSET", "other", 5, "k", "v"))
t.check(e is not None and "NOPERM" in e, "fence-store: a fence outside alice's patterns", e)
t.eq("OK", salice.execute_command("FSET", "orders:1", 5, "k", "v"),
     "fence-store: alice writes through her own fence")
e = err_of(lambda: salice.execute_command("FSET", "orders:1", 5, "k"))
t.check(e is not None and "usage: FSET <fence> <token> <key> <value>" in e,
        "fence-store: the usage text comes from the table's argument names", e)

t.finish()
