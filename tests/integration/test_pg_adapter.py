#!/usr/bin/python3
"""Integration test of the PostgreSQL adapter (adapters/postgres/fence.sql).

Starts its own PostgreSQL 15 (initdb into a temp dir, listening only on a
Unix socket in that dir, fsync on; as the postgres system user when run as
root, since PostgreSQL refuses to run as root), loads fence.sql with psql -f
(twice), and checks: stale admit fails with SQLSTATE FN001 and the
transaction's writes are gone; equal tokens admitted; two racing
transactions with tokens 33 and 34 in both orders leave only 34's effects;
different fences do not block each other (lock_timeout); token range and
name validation; privileges; a control showing why reads must come after the
admit; marks surviving an immediate (crash) shutdown; and a 64-client hammer
that never admits a token below the mark and loses no counter update.
Prints "ok - ..." / "not ok - ..." lines; exits 1 on failure, 77 if
PostgreSQL 15 or psycopg2 is missing.  The server is stopped by its PID and
the directory removed.
"""
import itertools
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fencetest import (ROOT, Tap, exit_on_sigterm, free_port, make_tmp,  # noqa: E402
                       need_module, run_group, run_threads, skip, spawn, wait_for, wait_up)

SQL = os.path.join(ROOT, "adapters", "postgres", "fence.sql")
PGBIN = os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin")

psycopg2 = need_module("psycopg2", "python3-psycopg2")
need_module("psycopg2.extensions", "python3-psycopg2")
if not os.access(os.path.join(PGBIN, "postgres"), os.X_OK):
    skip("PostgreSQL 15 is not installed in " + PGBIN)

I64MAX = 2 ** 63 - 1


T = Tap()


class PgServer:
    """A private PostgreSQL cluster in a temp dir, on a Unix socket only."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.data = os.path.join(tmp, "data")
        self.port = free_port()
        self.proc = None
        self.as_postgres = os.geteuid() == 0

    def run_as(self, argv, **kw):
        """Run a PostgreSQL server program as the postgres user if we are root."""
        if self.as_postgres:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        return subprocess.run(argv, capture_output=True, timeout=120, **kw)

    def initdb(self):
        """Create the cluster (trust auth is safe: the socket dir is private)."""
        if self.as_postgres:
            shutil.chown(self.tmp, "postgres", "postgres")
        os.chmod(self.tmp, 0o700)
        out = self.run_as([os.path.join(PGBIN, "initdb"), "-D", self.data, "-A", "trust",
                           "-U", "postgres", "-E", "UTF8", "--locale=C", "--no-sync"])
        if out.returncode != 0:
            raise RuntimeError("initdb failed: " + out.stderr.decode(errors="replace"))

    def start(self):
        """Start the postmaster and wait until it accepts connections."""
        argv = [os.path.join(PGBIN, "postgres"), "-D", self.data,
                "-c", "listen_addresses=", "-c", "unix_socket_directories=" + self.tmp,
                "-c", "port=%d" % self.port, "-c", "fsync=on", "-c", "synchronous_commit=on",
                "-c", "max_connections=100", "-c", "shared_buffers=32MB",
                "-c", "deadlock_timeout=1s", "-c", "logging_collector=off"]
        if self.as_postgres:
            argv = ["runuser", "-u", "postgres", "--"] + argv
        self.proc = spawn(argv, os.path.join(self.tmp, "postgres.log"), stdin=subprocess.DEVNULL)
        state = wait_up(self.proc, lambda: self.connect().close(), 60, 0.1,
                        (psycopg2.OperationalError,))
        if state == "exited":
            raise RuntimeError("postgres exited: " + self.log_tail())
        if state != "up":
            raise RuntimeError("postgres did not start: " + self.log_tail())

    def log_tail(self):
        """The end of the server log, for failure messages."""
        try:
            with open(os.path.join(self.tmp, "postgres.log"), "rb") as f:
                return f.read()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def postmaster_pid(self):
        """The postmaster's PID from postmaster.pid (runuser forks, so it is not ours)."""
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                return int(f.readline().strip())
        except (OSError, ValueError):
            return None

    def stop(self, sig=signal.SIGINT):
        """Stop by PID: SIGINT is a fast shutdown, SIGQUIT an immediate (crash-like) one."""
        if self.proc is None:
            return
        pid = self.postmaster_pid()
        if pid is not None and self.proc.poll() is None:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def connect(self, user="postgres", autocommit=False):
        """A new psycopg2 connection over the private socket."""
        c = psycopg2.connect(host=self.tmp, port=self.port, user=user, dbname="postgres",
                             connect_timeout=10)
        c.autocommit = autocommit
        return c

    def psql_file(self, path):
        """Load a SQL file with psql -f (as root is fine: only the server refuses root)."""
        return subprocess.run([os.path.join(PGBIN, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                               "-h", self.tmp, "-p", str(self.port), "-U", "postgres", "-d", "postgres",
                               "-f", path], capture_output=True, timeout=120)


def sql(conn, query, args=None):
    """Execute query and return all rows (or None for statements without rows)."""
    with conn.cursor() as cur:
        cur.execute(query, args)
        return cur.fetchall() if cur.description else None


def one(conn, query, args=None):
    """Execute query and return the first column of the first row."""
    return sql(conn, query, args)[0][0]


def attempt(conn, query, args=None):
    """Execute query; returns ("ok", rows) or (sqlstate, message) on error."""
    try:
        return ("ok", sql(conn, query, args))
    except psycopg2.Error as e:
        return (e.pgcode, e.diag.message_primary or str(e))


def test_load(pg):
    """fence.sql loads with psql -f, twice, keeping marks; objects exist."""
    out = pg.psql_file(SQL)
    T.check(out.returncode == 0 and out.stderr == b"", "psql -f fence.sql loads cleanly",
            out.stderr.decode(errors="replace"))
    c = pg.connect(autocommit=True)
    sql(c, "SELECT fence.admit('loadtest', 7)")
    out = pg.psql_file(SQL)
    T.check(out.returncode == 0 and out.stderr == b"", "loading fence.sql a second time is harmless and quiet",
            out.stderr.decode(errors="replace"))
    T.eq(7, one(c, "SELECT fence.high('loadtest')"), "marks survive loading again")
    cols = sql(c, "SELECT column_name, data_type FROM information_schema.columns "
                  "WHERE table_schema = 'fence' AND table_name = 'marks' ORDER BY ordinal_position")
    T.eq([("name", "text"), ("token", "bigint"), ("updated_at", "timestamp with time zone")], cols,
         "fence.marks has name text, token bigint, updated_at")
    T.eq(["name"], [r[0] for r in sql(c, "SELECT a.attname FROM pg_index i JOIN pg_attribute a "
                                         "ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
                                         "WHERE i.indrelid = 'fence.marks'::regclass AND i.indisprimary")],
         "name is the primary key")
    sql(c, "CREATE TABLE public.orders (id int PRIMARY KEY, status text, writer bigint)")
    sql(c, "CREATE TABLE public.audit (id bigserial PRIMARY KEY, token bigint)")
    sql(c, "INSERT INTO public.orders VALUES (1, 'new', 0), (2, 'new', 0)")
    c.close()


def test_basic(pg):
    """Admission, stale rejection with FN001 and rollback, equal tokens."""
    c = pg.connect()
    T.eq(0, one(c, "SELECT fence.high('orders')"), "fence.high of an unknown fence is 0")
    c.rollback()
    T.eq(33, one(c, "SELECT fence.admit('orders', 33)"), "admit 33 on a new fence returns 33")
    sql(c, "UPDATE orders SET status = 'by33', writer = 33 WHERE id = 1")
    c.commit()
    T.eq(33, one(c, "SELECT fence.high('orders')"), "fence.high is 33 after commit")
    c.rollback()
    T.eq(34, one(c, "SELECT fence.admit('orders', 34)"), "admit 34 returns 34")
    sql(c, "UPDATE orders SET status = 'by34', writer = 34 WHERE id = 1")
    c.commit()

    # A stale transaction: its write comes first, then the admit fails.
    sql(c, "UPDATE orders SET status = 'stale-before', writer = 33 WHERE id = 2")
    sql(c, "INSERT INTO audit (token) VALUES (33)")
    state, msg = attempt(c, "SELECT fence.admit('orders', 33)")
    T.eq("FN001", state, "stale admit raises SQLSTATE FN001")
    T.eq("STALE 33 34: fencing token 33 for fence 'orders' is older than the highest admitted token 34", msg,
         "the message names both tokens")
    c.rollback()
    T.eq([(1, "by34", 34), (2, "new", 0)], sql(c, "SELECT id, status, writer FROM orders ORDER BY id"),
         "the stale transaction's earlier writes are gone")
    T.eq(0, one(c, "SELECT count(*) FROM audit"), "...including its insert")
    T.eq(34, one(c, "SELECT fence.high('orders')"), "the mark is still 34")
    c.rollback()

    # Writes after a failed admit are refused too (the transaction is aborted).
    attempt(c, "SELECT fence.admit('orders', 1)")
    state, _ = attempt(c, "UPDATE orders SET status = 'after' WHERE id = 2")
    T.eq("25P02", state, "after a stale admit every later statement fails (in_failed_sql_transaction)")
    c.rollback()

    T.eq(34, one(c, "SELECT fence.admit('orders', 34)"), "equal token 34 is admitted")
    sql(c, "UPDATE orders SET status = 'by34-again' WHERE id = 1")
    c.commit()
    T.eq("by34-again", one(c, "SELECT status FROM orders WHERE id = 1"), "equal token's write is committed")
    c.rollback()

    # psql, the way a user would try it.
    out = subprocess.run([os.path.join(PGBIN, "psql"), "-X", "-v", "ON_ERROR_STOP=1", "-h", pg.tmp,
                          "-p", str(pg.port), "-U", "postgres", "-d", "postgres", "-c",
                          "BEGIN; SELECT fence.admit('orders', 5); COMMIT;"], capture_output=True, timeout=60)
    err = out.stderr.decode(errors="replace")
    T.check(out.returncode != 0 and "STALE 5 34" in err, "psql shows the STALE error", err)
    c.close()


def test_validation(pg):
    """Token range (bigint) and name checks, each aborting the transaction."""
    c = pg.connect()
    T.eq(I64MAX, one(c, "SELECT fence.admit('range', %s)", (I64MAX,)), "token 2^63-1 (bigint max) is admitted")
    c.commit()
    T.eq(I64MAX, one(c, "SELECT fence.high('range')"), "fence.high returns 2^63-1 exactly")
    c.rollback()
    T.eq(I64MAX, one(c, "SELECT fence.admit('range', %s)", (I64MAX,)), "2^63-1 again (equal) is admitted")
    c.rollback()
    T.eq(("FN001", "STALE %d %d: fencing token %d for fence 'range' is older than the highest admitted token %d"
          % (I64MAX - 1, I64MAX, I64MAX - 1, I64MAX)),
         attempt(c, "SELECT fence.admit('range', %s)", (I64MAX - 1,)), "2^63-2 after 2^63-1 is stale")
    c.rollback()
    for tok in (2 ** 63, 2 ** 64 - 1):
        # psycopg2 sends a Python int this large as a numeric literal, and
        # there is no implicit cast from numeric to bigint.
        sql(c, "UPDATE orders SET status = 'huge' WHERE id = 2")
        state, msg = attempt(c, "SELECT fence.admit('range2', %s)", (tok,))
        T.check(state == "42883" and "fence.admit(unknown, numeric) does not exist" in msg,
                "token %d as a numeric literal: refused, 42883 (no fence.admit for numeric)" % tok,
                "%s %s" % (state, msg))
        c.rollback()
        sql(c, "UPDATE orders SET status = 'huge' WHERE id = 2")
        state, msg = attempt(c, "SELECT fence.admit('range2', %s::bigint)", (tok,))
        T.check(state == "22003" and "bigint out of range" in msg,
                "token %d cast with ::bigint: refused, 22003 bigint out of range" % tok, "%s %s" % (state, msg))
        c.rollback()
    sql(c, "PREPARE admit_p AS SELECT fence.admit($1, $2)")
    c.commit()
    T.eq(I64MAX, one(c, "EXECUTE admit_p('range', '9223372036854775807')"),
         "a prepared admit with parameter $2 = 2^63-1 is admitted")
    c.rollback()
    sql(c, "UPDATE orders SET status = 'huge' WHERE id = 2")
    state, msg = attempt(c, "EXECUTE admit_p('range2', '9223372036854775808')")
    T.check(state == "22003" and "out of range for type bigint" in msg,
            "a prepared admit with parameter $2 = 2^63: refused, 22003", "%s %s" % (state, msg))
    c.rollback()
    state, msg = attempt(c, "SELECT fence.admit('range2', $$18446744073709551615$$)")
    T.check(state == "22003" and "out of range" in msg, "token 2^64-1 passed as text: 22003, out of range",
            "%s %s" % (state, msg))
    c.rollback()
    state, msg = attempt(c, "SELECT fence.admit('range2', '9223372036854775808'::text::bigint)")
    T.check(state == "22003", "token 2^63 cast to bigint: 22003", "%s %s" % (state, msg))
    c.rollback()
    T.eq("new", one(c, "SELECT status FROM orders WHERE id = 2"), "no out-of-range attempt wrote anything")
    T.eq(0, one(c, "SELECT fence.high('range2')"), "...or created a mark")
    c.rollback()
    state, msg = attempt(c, "SELECT fence.admit('neg', -1)")
    T.check(state == "FN003" and "invalid fencing token -1" in msg, "negative token: FN003", "%s %s" % (state, msg))
    c.rollback()
    state, msg = attempt(c, "SELECT fence.admit('neg', NULL)")
    T.check(state == "FN003" and "NULL" in msg, "NULL token: FN003 (never a silent NULL)", "%s %s" % (state, msg))
    c.rollback()
    for name, what in ((None, "NULL"), ("", "empty"), ("x" * 257, "257-byte"), ("é" * 129, "258-byte UTF-8")):
        state, msg = attempt(c, "SELECT fence.admit(%s, 1)", (name,))
        T.check(state == "FN002", "%s fence name: FN002" % what, "%s %s" % (state, msg))
        c.rollback()
    T.eq(1, one(c, "SELECT fence.admit(%s, 1)", ("n" * 256,)), "a 256-byte fence name is fine")
    c.rollback()
    T.eq(0, one(c, "SELECT fence.admit('zero', 0)"), "token 0 on a new fence is admitted")
    c.rollback()
    c.close()


def wait_until_blocked(admin, pid, timeout=30):
    """Wait until backend pid waits on a lock; returns whether it did."""
    return bool(wait_for(lambda: blocked(admin, pid), timeout))


def blocked(admin, pid):
    """Whether backend pid waits on a lock now."""
    return bool(one(admin, "SELECT count(*) FROM pg_stat_activity WHERE pid = %s AND "
                    "wait_event_type = 'Lock'", (pid,)))


def run_in_thread(fn, res=None):
    """Start fn in a thread; returns (thread, result dict), using res if given."""
    res = {} if res is None else res

    def body():
        try:
            res["value"] = fn()
        except Exception as e:  # noqa: BLE001 - handed to the checker
            res["error"] = e

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, res


def test_race(pg, isolation, fence):
    """Tokens 33 and 34 race on one fence in both orders; only 34's effects stay."""
    admin = pg.connect(autocommit=True)
    sql(admin, "INSERT INTO orders VALUES (10, 'init', 0) ON CONFLICT (id) DO UPDATE SET status = 'init', writer = 0")
    a, b = pg.connect(), pg.connect()
    for c in (a, b):
        c.set_session(isolation_level=isolation)
    label = "%s, fence %s" % (isolation.lower(), fence)

    # Order 1: T33 holds the row lock, T34 waits, T33 commits, T34 admits.
    sql(a, "SELECT fence.admit(%s, 33)", (fence,))
    sql(a, "UPDATE orders SET status = 'by33', writer = 33 WHERE id = 10")
    b_pid = one(b, "SELECT pg_backend_pid()")
    if isolation != "READ COMMITTED":
        b.rollback()  # start the snapshot at the admit, as an application would

    def t34():
        # Above READ COMMITTED, a transaction that waited for the fence gets
        # a serialization failure (40001) and retries, as any would.
        for _ in range(2):
            try:
                sql(b, "SELECT fence.admit(%s, 34)", (fence,))
                sql(b, "UPDATE orders SET status = 'by34', writer = 34 WHERE id = 10")
                b.commit()
                return "committed"
            except psycopg2.errors.SerializationFailure:
                b.rollback()
                res["retried"] = True
        return "gave up"

    res = {}
    th, res = run_in_thread(t34, res)
    T.check(wait_until_blocked(admin, b_pid), "%s: T34 waits for T33's row lock" % label)
    a.commit()
    th.join(60)
    T.eq("committed", res.get("value", res.get("error")), "%s: after T33 commits, T34 admits and commits" % label)
    if isolation == "READ COMMITTED":
        T.check(not res.get("retried"), "%s: ...at once, without a serialization failure" % label)
    T.eq(("by34", 34), tuple(sql(admin, "SELECT status, writer FROM orders WHERE id = 10")[0]),
         "%s: 34's write is the one that stays" % label)
    T.eq(34, one(admin, "SELECT fence.high(%s)", (fence,)), "%s: mark 34" % label)

    # Order 2: T34 holds the lock (on a fresh fence), T33 waits, T34 commits, T33 fails.
    fence2 = fence + "-2"
    sql(admin, "UPDATE orders SET status = 'init', writer = 0 WHERE id = 10")
    sql(a, "SELECT fence.admit(%s, 34)", (fence2,))
    sql(a, "UPDATE orders SET status = 'by34', writer = 34 WHERE id = 10")
    b_pid = one(b, "SELECT pg_backend_pid()")
    b.rollback()

    def t33():
        sql(b, "SELECT 1")  # the snapshot predates T34's commit
        sql(b, "SELECT fence.admit(%s, 33)", (fence2,))
        sql(b, "UPDATE orders SET status = 'by33', writer = 33 WHERE id = 10")
        b.commit()
        return "committed"

    th, res = run_in_thread(t33)
    T.check(wait_until_blocked(admin, b_pid), "%s: T33 waits for T34's row lock (fence row being created)" % label)
    a.commit()
    th.join(60)
    err = res.get("error")
    want = ("FN001",) if isolation == "READ COMMITTED" else ("FN001", "40001")
    T.check(isinstance(err, psycopg2.Error) and err.pgcode in want,
            "%s: after T34 commits, T33 is refused (%s)" % (label, "/".join(want)), repr(res))
    if isinstance(err, psycopg2.Error) and err.pgcode == "FN001":
        T.check("STALE 33 34" in err.diag.message_primary, "%s: T33's error names 33 and 34" % label,
                err.diag.message_primary)
    b.rollback()
    T.eq(("by34", 34), tuple(sql(admin, "SELECT status, writer FROM orders WHERE id = 10")[0]),
         "%s: only 34's write is there" % label)

    # Order 2 again, sequentially: T34 commits first, then T33 starts and fails.
    state, _ = attempt(b, "SELECT fence.admit(%s, 33)", (fence2,))
    T.eq("FN001", state, "%s: T33 starting after T34 committed is refused" % label)
    b.rollback()
    for c in (a, b, admin):
        c.close()


def test_independent(pg):
    """A held fence does not block another fence (existing or new row)."""
    a = pg.connect()
    b = pg.connect()
    sql(a, "SELECT fence.admit('ind-a', 5)")        # a new row, insert not yet committed
    sql(a, "SELECT fence.admit('orders', 34)")       # an existing row, now locked by a
    sql(b, "SET lock_timeout = '5s'")
    # A blocked admit would fail with 55P03 after lock_timeout.
    state, _ = attempt(b, "SELECT fence.admit('ind-b', 5)")
    T.eq("ok", state, "with fence ind-a held, a new fence ind-b is admitted")
    state, _ = attempt(b, "SELECT fence.admit('loadtest', 8)")
    T.eq("ok", state, "with fence orders held, existing fence loadtest is admitted")
    b.commit()
    sql(b, "SET lock_timeout = '200ms'")
    state, _ = attempt(b, "SELECT fence.admit('orders', 35)")
    T.eq("55P03", state, "control: the held fence itself does block (lock_timeout 55P03)")
    b.rollback()
    sql(b, "SET lock_timeout = '200ms'")
    state, _ = attempt(b, "SELECT fence.admit('ind-a', 6)")
    T.eq("55P03", state, "control: a fence whose row is being created blocks too")
    b.rollback()
    a.rollback()
    T.eq(0, one(b, "SELECT fence.high('ind-a')"), "a rolled-back first admit leaves no mark")
    b.close()
    a.close()


def test_admit_before_read(pg):
    """Read-modify-write: reading before the admit loses an update; after, it does not.

    The invariant is "the counter equals the number of admitted increments".
    """
    admin = pg.connect(autocommit=True)
    sql(admin, "CREATE TABLE IF NOT EXISTS counter (id int PRIMARY KEY, v bigint)")
    sql(admin, "INSERT INTO counter VALUES (1, 0), (2, 0)")
    new, old = pg.connect(), pg.connect()

    # Wrong: the new holder (token 34) reads before it admits.  The old holder
    # (33) is still admitted in between, so its increment is overwritten.
    v = one(new, "SELECT v FROM counter WHERE id = 1")
    sql(old, "SELECT fence.admit('rmw-wrong', 33)")
    v_old = one(old, "SELECT v FROM counter WHERE id = 1")
    sql(old, "UPDATE counter SET v = %s WHERE id = 1", (v_old + 1,))
    old.commit()
    sql(new, "SELECT fence.admit('rmw-wrong', 34)")
    sql(new, "UPDATE counter SET v = %s WHERE id = 1", (v + 1,))
    new.commit()
    T.eq(1, one(admin, "SELECT v FROM counter WHERE id = 1"),
         "control: read-before-admit loses an update (2 increments admitted, counter 1)")

    # Right: the new holder admits first, then reads.  The old holder's admit
    # waits for the row lock and is then refused, so nothing is lost.
    sql(new, "SELECT fence.admit('rmw-right', 34)")
    v = one(new, "SELECT v FROM counter WHERE id = 2")
    old_pid = one(old, "SELECT pg_backend_pid()")

    def old_holder():
        sql(old, "SELECT fence.admit('rmw-right', 33)")
        v_old = one(old, "SELECT v FROM counter WHERE id = 2")
        sql(old, "UPDATE counter SET v = %s WHERE id = 2", (v_old + 1,))
        old.commit()
        return "committed"

    th, res = run_in_thread(old_holder)
    T.check(wait_until_blocked(admin, old_pid), "admit-before-read: the old holder waits for the fence")
    sql(new, "UPDATE counter SET v = %s WHERE id = 2", (v + 1,))
    new.commit()
    th.join(60)
    err = res.get("error")
    T.check(isinstance(err, psycopg2.Error) and err.pgcode == "FN001",
            "admit-before-read: the old holder is refused (FN001)", repr(res))
    old.rollback()
    T.eq(1, one(admin, "SELECT v FROM counter WHERE id = 2"),
         "admit-before-read: counter == admitted increments (1)")
    for c in (new, old, admin):
        c.close()


def test_key_binding(pg):
    """A key belongs to one fence (issue 15): fence.claim and the fence.guard
    row trigger refuse a write through another fence with FN004 WRONGFENCE,
    and the whole transaction rolls back."""
    admin = pg.connect(autocommit=True)
    sql(admin, "CREATE TABLE public.accounts (id int PRIMARY KEY, balance int)")
    sql(admin, "CREATE TRIGGER accounts_fence BEFORE INSERT OR UPDATE OR DELETE ON public.accounts "
               "FOR EACH ROW EXECUTE FUNCTION fence.guard('id')")
    c = pg.connect()
    sql(c, "SELECT fence.admit('acct', 100)")
    sql(c, "INSERT INTO accounts VALUES (7, 10)")
    c.commit()
    T.eq("acct", one(c, "SELECT fence FROM fence.keys WHERE key = 'public.accounts/7'"),
         "binding: the first write binds the row's key to the admitted fence")
    c.rollback()
    state, _ = attempt(c, "SELECT fence.admit('acct', 99)")
    T.eq("FN001", state, "binding: a stale token for the owner is FN001")
    c.rollback()
    sql(c, "SELECT fence.admit('otherfence', 0)")
    state, msg = attempt(c, "UPDATE accounts SET balance = 0 WHERE id = 7")
    T.eq("FN004", state, "binding: an update through another fence is FN004")
    T.check(msg.startswith("WRONGFENCE key 'public.accounts/7' belongs to fence 'acct'"),
            "binding: ...naming the key and its fence", msg)
    c.rollback()
    T.eq(10, one(c, "SELECT balance FROM accounts WHERE id = 7"), "binding: ...and nothing was written")
    T.eq(0, one(c, "SELECT fence.high('otherfence')"), "binding: ...not even the other fence's mark")
    c.rollback()
    sql(c, "SELECT fence.admit('otherfence', 0)")
    state, _ = attempt(c, "DELETE FROM accounts WHERE id = 7")
    T.eq("FN004", state, "binding: a delete through another fence is refused")
    c.rollback()
    sql(c, "SELECT fence.admit('otherfence', 1)")
    sql(c, "INSERT INTO accounts VALUES (8, 1)")
    state, _ = attempt(c, "UPDATE accounts SET id = 7 WHERE id = 8")
    T.eq("FN004", state, "binding: an update cannot move a row onto another fence's key")
    c.rollback()
    sql(c, "SELECT fence.admit('acct', 101)")
    sql(c, "UPDATE accounts SET balance = 11 WHERE id = 7")
    sql(c, "DELETE FROM accounts WHERE id = 7")
    c.commit()
    T.eq(0, one(c, "SELECT count(*) FROM accounts"), "binding: the owner updates and deletes its row")
    c.rollback()
    sql(c, "SELECT fence.admit('otherfence', 2)")
    state, _ = attempt(c, "INSERT INTO accounts VALUES (7, 99)")
    T.eq("FN004", state, "binding: a deleted row is not recreated through another fence")
    c.rollback()
    state, msg = attempt(c, "INSERT INTO accounts VALUES (9, 1)")
    T.eq("FN005", state, "binding: a fenced table written without fence.admit is refused (FN005)")
    c.rollback()
    # Explicit claims, for writes a trigger cannot see.
    sql(c, "SELECT fence.admit('acct', 101)")
    sql(c, "SELECT fence.claim('acct', 'blob:7')")
    c.commit()
    state, msg = attempt(c, "SELECT fence.claim('otherfence', 'blob:7')")
    T.eq("FN004", state, "binding: fence.claim through another fence is FN004")
    c.rollback()
    T.eq(("ok", [("",)]), attempt(c, "SELECT fence.claim('acct', 'blob:7')::text"),
         "binding: the owner claims again freely")
    c.rollback()
    # Two first claims of one key race: exactly one fence wins.
    results = {}
    pids = {}
    guard = threading.Lock()  # admin is shared by the two threads' polls

    def other_blocked_or_done(other):
        if other in results:
            return True
        if other not in pids:
            return False
        with guard:
            return blocked(admin, pids[other])

    def claimer(fence_name):
        conn = pg.connect()
        other = "race-b" if fence_name == "race-a" else "race-a"
        try:
            pids[fence_name] = conn.get_backend_pid()
            sql(conn, "SELECT fence.admit(%s, 1)", (fence_name,))
            sql(conn, "INSERT INTO accounts VALUES (50, 0)")
            # Commit once the other claim is waiting on this one (or over).
            wait_for(lambda: other_blocked_or_done(other))
            conn.commit()
            results[fence_name] = "ok"
        except psycopg2.Error as e:
            results[fence_name] = e.pgcode
            conn.rollback()
        finally:
            conn.close()
    ths = [threading.Thread(target=claimer, args=(n,)) for n in ("race-a", "race-b")]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    T.eq(["ok"], [v for v in results.values() if v == "ok"],
         "binding: two transactions claiming one new key: exactly one commits", str(results))
    T.check(sorted(results.values())[0] in ("23505", "FN004"),
            "binding: ...the other is refused", str(results))
    c.close()
    admin.close()


def test_privileges(pg):
    """An application role with only the documented grants can admit but not edit marks."""
    admin = pg.connect(autocommit=True)
    sql(admin, "CREATE ROLE fence_app LOGIN")
    app = pg.connect(user="fence_app")
    state, _ = attempt(app, "SELECT fence.admit('priv', 1)")
    T.eq("42501", state, "without grants an application role cannot call fence.admit")
    app.rollback()
    sql(admin, "GRANT USAGE ON SCHEMA fence TO fence_app")
    sql(admin, "GRANT EXECUTE ON FUNCTION fence.admit(text, bigint), fence.high(text) TO fence_app")
    T.eq(5, one(app, "SELECT fence.admit('priv', 5)"), "with the documented grants it admits")
    app.commit()
    T.eq(5, one(app, "SELECT fence.high('priv')"), "...and reads the mark")
    app.rollback()
    state, _ = attempt(app, "UPDATE fence.marks SET token = 0 WHERE name = 'priv'")
    T.eq("42501", state, "...but cannot lower a mark by hand (permission denied)")
    app.rollback()
    state, _ = attempt(app, "SELECT fence.admit('priv', 4)")
    T.eq("FN001", state, "...and a stale token is still refused")
    app.rollback()
    out = pg.psql_file(SQL)
    T.eq(0, out.returncode, "loading fence.sql again with grants in place")
    T.eq(6, one(app, "SELECT fence.admit('priv', 6)"), "...keeps the application's grants")
    app.commit()
    app.close()
    admin.close()


def test_hammer(pg, clients, ops):
    """Many clients, random tokens: nothing below the mark is ever admitted.

    Fence "h": every client draws tokens from a lock-service-like counter and
    presents some of them late.  Each admitted transaction inserts its token
    into a log with a sequence number taken while it holds the fence's row
    lock, so log order is admission order: tokens must never decrease along
    it, the log must hold exactly the tokens clients saw committed, and every
    FN001 must name a larger, admitted highest.  Fence "ctr": increments with
    admit-before-read and in-order tokens must lose no update.
    """
    admin = pg.connect(autocommit=True)
    sql(admin, "CREATE TABLE hlog (seq bigserial PRIMARY KEY, token bigint NOT NULL)")
    sql(admin, "CREATE TABLE hctr (id int PRIMARY KEY, v bigint NOT NULL)")
    sql(admin, "INSERT INTO hctr VALUES (1, 0)")
    issued = itertools.count(1)
    issued_lock = threading.Lock()
    outcomes = [[] for _ in range(clients)]
    errors = []
    conns = []
    for _ in range(clients):
        conns.append(pg.connect())
    barrier = threading.Barrier(clients)

    def worker(i):
        rng = random.Random(7000 + i)
        c = conns[i]
        barrier.wait()
        try:
            for n in range(ops):
                with issued_lock:
                    tok = next(issued)
                if n % 2 == 0:
                    tok = max(1, tok - rng.choice((0, 0, 1, 3, 10, 50)))
                    try:
                        sql(c, "SELECT fence.admit('h', %s)", (tok,))
                        sql(c, "INSERT INTO hlog (token) VALUES (%s)", (tok,))
                        c.commit()
                        outcomes[i].append(("h", tok, "ok", None))
                    except psycopg2.Error as e:
                        c.rollback()
                        outcomes[i].append(("h", tok, e.pgcode, e.diag.message_primary))
                else:
                    try:
                        sql(c, "SELECT fence.admit('ctr', %s)", (tok,))
                        v = one(c, "SELECT v FROM hctr WHERE id = 1")
                        sql(c, "UPDATE hctr SET v = %s WHERE id = 1", (v + 1,))
                        c.commit()
                        outcomes[i].append(("ctr", tok, "ok", None))
                    except psycopg2.Error as e:
                        c.rollback()
                        outcomes[i].append(("ctr", tok, e.pgcode, e.diag.message_primary))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    run_threads(worker, clients)
    for c in conns:
        c.close()
    T.eq([], errors[:3], "%d clients x %d transactions ran without client errors" % (clients, ops))
    allr = [x for o in outcomes for x in o]
    codes = sorted({code for _, _, code, _ in allr if code != "ok"})
    T.check(set(codes) <= {"FN001"}, "the only refusals are FN001 (stale)", codes)

    log = [r[0] for r in sql(admin, "SELECT token FROM hlog ORDER BY seq")]
    bad = [(x, y) for x, y in zip(log, log[1:]) if y < x]
    T.eq([], bad[:5], "fence h: admitted tokens never decrease in admission order (%d admitted)" % len(log))
    h_ok = sorted(tok for f, tok, code, _ in allr if f == "h" and code == "ok")
    T.eq(h_ok, sorted(log), "fence h: the log holds exactly the transactions clients saw commit")
    admitted = set(h_ok)
    wrong = []
    for f, tok, code, msg in allr:
        if f == "h" and code == "FN001":
            w = msg.replace(":", "").split()
            if w[0] != "STALE" or int(w[1]) != tok or not int(w[2]) > tok or int(w[2]) not in admitted:
                wrong.append(msg)
    T.eq([], wrong[:5], "fence h: every FN001 names a larger highest that was admitted")
    n_stale = sum(1 for f, _, code, _ in allr if f == "h" and code == "FN001")
    T.check(len(log) > 0 and n_stale > 0, "fence h: the run had admissions (%d) and rejections (%d)"
            % (len(log), n_stale))
    T.eq(max(log), one(admin, "SELECT fence.high('h')"), "fence h: the mark is the largest admitted token")

    ctr_ok = sum(1 for f, _, code, _ in allr if f == "ctr" and code == "ok")
    T.eq(ctr_ok, one(admin, "SELECT v FROM hctr WHERE id = 1"),
         "fence ctr: admit-before-read counter == committed increments (%d), no lost update" % ctr_ok)
    admin.close()


def test_crash_restart(pg):
    """An immediate (crash-like) shutdown keeps every committed mark."""
    c = pg.connect()
    sql(c, "SELECT fence.admit('durable', 1000)")
    sql(c, "UPDATE orders SET status = 'by1000' WHERE id = 2")
    c.commit()
    c.close()
    pg.stop(signal.SIGQUIT)
    pg.start()
    c = pg.connect()
    T.eq(1000, one(c, "SELECT fence.high('durable')"), "after an immediate shutdown and recovery the mark is 1000")
    T.eq("by1000", one(c, "SELECT status FROM orders WHERE id = 2"), "...and the admitted write is there")
    c.rollback()
    state, _ = attempt(c, "SELECT fence.admit('durable', 999)")
    T.eq("FN001", state, "...and 999 is refused")
    c.close()


def main():
    # The runner's timeout sends SIGTERM: leave through the finally below,
    # which stops the server by PID and removes the directory.
    exit_on_sigterm(143)
    tmp = make_tmp("fence-pg-test.")
    pg = PgServer(tmp)
    try:
        pg.initdb()
        pg.start()
        run_group(T, test_load, pg)
        run_group(T, test_basic, pg)
        run_group(T, test_validation, pg)
        for iso in ("READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"):
            run_group(T, test_race, pg, iso, "race-" + iso.split()[0].lower())
        run_group(T, test_independent, pg)
        run_group(T, test_admit_before_read, pg)
        run_group(T, test_key_binding, pg)
        run_group(T, test_privileges, pg)
        run_group(T, test_hammer, pg, int(os.environ.get("FENCE_PG_CLIENTS", "64")),
                  int(os.environ.get("FENCE_PG_OPS", "30")))
        run_group(T, test_crash_restart, pg)
    except Exception as e:  # noqa: BLE001 - a server that will not start
        T.check(False, "could not run: %r" % (e,))
        print("# " + pg.log_tail().replace("\n", "\n# "))
    finally:
        pg.stop()
    T.finish()


if __name__ == "__main__":
    main()
