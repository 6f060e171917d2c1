#!/usr/bin/python3
"""Integration test of signed tokens in PostgreSQL (adapters/postgres/fence_signed.sql).

Starts its own PostgreSQL 15 the way test_pg_adapter.py does (its PgServer),
loads fence.sql and fence_signed.sql (twice), adds an HMAC key made by
`fencectl keygen --scheme hmac-sha256` (or, without fencectl, by Python),
and checks: a real signed token is admitted; forged tokens (2^63 with a real
signature, a plain 9223372036854775807, the number changed, another lock's
token, another key under the same id, an unlisted key id, malformed forms)
raise FN004 and leave the mark and the transaction's writes alone; real
holders write afterwards; the C implementation's fixed vector verifies here
too; rotation (old key verifies while listed, not after removal); and
privileges (an application granted only fence.admit_signed cannot call
fence.admit nor read the keys).  Exits 77 without PostgreSQL 15/psycopg2.
"""
import base64
import hashlib
import hmac
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)
from fencetest import ROOT, Tap, exit_on_sigterm, make_tmp, run_group  # noqa: E402
import signedtok  # noqa: E402
from test_pg_adapter import PgServer, attempt, one, sql  # noqa: E402

SQL = os.path.join(ROOT, "adapters", "postgres", "fence.sql")
SIGNED_SQL = os.path.join(ROOT, "adapters", "postgres", "fence_signed.sql")
FENCECTL = os.path.join(ROOT, os.environ.get("BUILD", "build"), "fencectl")

T = Tap()


def b64(b):
    """Unpadded base64url."""
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def sign(key, key_id, name, token):
    """A signed token string, as fenced makes it (docs/security.md)."""
    msg = signedtok.message(key_id, name, token)
    return "%d.%s.%s" % (token, key_id, b64(hmac.new(key, msg, hashlib.sha256).digest()))


def make_key(tmp, key_id):
    """(key bytes, verify.keys line) from fencectl keygen, or Python if it is not built."""
    d = os.path.join(tmp, "keys-" + key_id)
    if os.access(FENCECTL, os.X_OK):
        out = subprocess.run([FENCECTL, "keygen", d, "--scheme", "hmac-sha256", "--key-id", key_id],
                             capture_output=True, timeout=30)
        T.check(out.returncode == 0, "fencectl keygen --scheme hmac-sha256 --key-id " + key_id,
                out.stderr.decode(errors="replace"))
        with open(os.path.join(d, "verify.keys")) as f:
            line = [x for x in f.read().splitlines() if x and not x.startswith("#")][0]
        with open(os.path.join(d, "signing.key")) as f:
            sline = [x for x in f.read().splitlines() if x and not x.startswith("#")][0]
        T.eq(line, sline, "an HMAC key's verify line is its signing line")
    else:
        key = os.urandom(32)
        line = "%s hmac-sha256 %s" % (key_id, b64(key))
    enc = line.split()[2]
    return base64.urlsafe_b64decode(enc + "="), line


def code(res):
    """The SQLSTATE of an attempt() result ("ok" on success)."""
    return res[0]


def test_load(pg):
    """Both files load cleanly, twice."""
    for i in range(2):
        for path in (SQL, SIGNED_SQL):
            out = pg.psql_file(path)
            T.check(out.returncode == 0 and out.stderr == b"",
                    "psql -f %s loads (%s)" % (os.path.basename(path), "again" if i else "first"),
                    out.stderr.decode(errors="replace"))
    c = pg.connect(autocommit=True)
    sql(c, "CREATE TABLE public.orders (id int PRIMARY KEY, writer bigint)")
    sql(c, "INSERT INTO public.orders VALUES (1, 0)")
    c.close()


def test_forgeries(pg, tmp):
    """Real tokens admitted; every forgery FN004 with the mark and writes untouched."""
    key, line = make_key(tmp, "h1")
    other_key, _ = make_key(tmp, "h1other")
    c = pg.connect(autocommit=True)
    T.eq("h1", one(c, "SELECT fence.add_verify_key(%s)", (line,)), "add_verify_key returns the id")
    T.eq("FN005", code(attempt(c, "SELECT fence.add_verify_key(%s)", (line,))),
         "adding the same key id twice is FN005")
    for bad in ("h2 ed25519 " + b64(key), "k2 hmac-sha256 " + b64(key), "h2 hmac-sha256 short",
                "h2 hmac-sha256 " + b64(key) + "="):
        T.eq("FN005", code(attempt(c, "SELECT fence.add_verify_key(%s)", (bad,))),
             "a bad key line is FN005: " + bad[:24])
    c.close()

    c = pg.connect()
    t34 = sign(key, "h1", "orders", 34)
    T.eq(34, one(c, "SELECT fence.admit_signed('orders', %s)", (t34,)), "a real signed token is admitted")
    sql(c, "UPDATE orders SET writer = 34 WHERE id = 1")
    c.commit()

    sig34 = t34.split(".", 1)[1]
    forged = [
        ("2^63 with a real signature", "9223372036854775808." + sig34),
        ("2^63-1 unsigned", "9223372036854775807"),
        ("the number changed", "35." + sig34),
        ("another lock's token", sign(key, "h1", "invoices", 99)),
        ("another key under the same id", sign(other_key, "h1", "orders", 99)),
        ("an unlisted key id", sign(key, "h9", "orders", 99)),
        ("padding", t34 + "="),
        ("a leading zero", "0" + t34),
        ("2^64", "18446744073709551616." + sig34),
        ("an ed25519-shaped token", "99.k1." + "A" * 86),
        ("empty", ""),
    ]
    for what, tok in forged:
        sql(c, "UPDATE orders SET writer = -1 WHERE id = 1")
        res = attempt(c, "SELECT fence.admit_signed('orders', %s)", (tok,))
        T.eq("FN004", code(res), "refused with FN004: " + what)
        T.check(str(res[1]).startswith("BADTOKEN "), "the message starts with BADTOKEN: " + what, res[1])
        c.rollback()
        T.eq(34, one(c, "SELECT fence.high('orders')"), "the mark stays 34 after: " + what)
        T.eq(34, one(c, "SELECT writer FROM orders WHERE id = 1"), "the write rolled back: " + what)
        c.rollback()

    # Real holders still write: the same token, then a newer one; the old is stale.
    T.eq(34, one(c, "SELECT fence.admit_signed('orders', %s)", (t34,)), "the holder of 34 writes again")
    c.commit()
    T.eq(40, one(c, "SELECT fence.admit_signed('orders', %s)", (sign(key, "h1", "orders", 40),)),
         "a newer holder (40) is admitted")
    c.commit()
    T.eq("FN001", code(attempt(c, "SELECT fence.admit_signed('orders', %s)", (t34,))),
         "then 34 is stale (FN001), not bad")
    c.rollback()
    T.eq(99, one(c, "SELECT fence.admit_signed('invoices', %s)", (sign(key, "h1", "invoices", 99),)),
         "the other lock's token is fine at its own fence")
    c.commit()
    big = sign(key, "h1", "orders", 2 ** 63)
    T.eq("FN003", code(attempt(c, "SELECT fence.admit_signed('orders', %s)", (big,))),
         "a correctly signed token above 2^63-1 is FN003 (a bigint mark cannot hold it)")
    c.rollback()
    c.close()


def test_c_vector(pg):
    """The fixed vector of tests/unit/test_signtok.c verifies in PostgreSQL."""
    c = pg.connect(autocommit=True)
    sql(c, "SELECT fence.add_verify_key('hvec hmac-sha256 AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8')")
    key = bytes(range(32))
    T.eq("34.h1.A1Zr2CtyXCvUl2d_nN9VRTigQ38JQsGvdXmYmVIo0ls", sign(key, "h1", "orders", 34),
         "Python's signing matches the C vector")
    T.eq(7, one(c, "SELECT fence.admit_signed('vec', %s)", (sign(key, "hvec", "vec", 7),)),
         "a token under the vector key verifies")
    T.eq(True, one(c, "SELECT fence.remove_verify_key('hvec')"), "remove_verify_key returns true")
    c.close()


def test_rotation(pg, tmp):
    """Old and new keys listed: both verify; old removed: refused."""
    old, old_line = make_key(tmp, "hold")
    new, new_line = make_key(tmp, "hnew")
    c = pg.connect(autocommit=True)
    sql(c, "SELECT fence.add_verify_key(%s)", (old_line,))
    T.eq(10, one(c, "SELECT fence.admit_signed('rot', %s)", (sign(old, "hold", "rot", 10),)),
         "old key verifies")
    T.eq("FN004", code(attempt(c, "SELECT fence.admit_signed('rot', %s)", (sign(new, "hnew", "rot", 11),))),
         "new key refused before it is added")
    sql(c, "SELECT fence.add_verify_key(%s)", (new_line,))
    T.eq(11, one(c, "SELECT fence.admit_signed('rot', %s)", (sign(new, "hnew", "rot", 11),)),
         "new key verifies once added")
    T.eq(12, one(c, "SELECT fence.admit_signed('rot', %s)", (sign(old, "hold", "rot", 12),)),
         "old key still verifies while listed")
    T.eq(True, one(c, "SELECT fence.remove_verify_key('hold')"), "old key removed")
    T.eq(False, one(c, "SELECT fence.remove_verify_key('hold')"), "removing it again is false")
    T.eq("FN004", code(attempt(c, "SELECT fence.admit_signed('rot', %s)", (sign(old, "hold", "rot", 13),))),
         "old key refused after removal")
    T.eq(12, one(c, "SELECT fence.high('rot')"), "the mark is unchanged")
    T.eq(14, one(c, "SELECT fence.admit_signed('rot', %s)", (sign(new, "hnew", "rot", 14),)),
         "new key keeps working")
    c.close()


def test_privileges(pg, tmp):
    """An application granted only admit_signed cannot use admit or read keys."""
    key, _ = make_key(tmp, "hpriv")  # never listed: only for a token's shape
    c = pg.connect(autocommit=True)
    sql(c, "DROP ROLE IF EXISTS sapp")
    sql(c, "CREATE ROLE sapp LOGIN")
    sql(c, "GRANT USAGE ON SCHEMA fence TO sapp")
    sql(c, "GRANT EXECUTE ON FUNCTION fence.admit_signed(text, text), fence.high(text) TO sapp")
    c.close()
    a = pg.connect(user="sapp", autocommit=True)
    T.eq("FN004", code(attempt(a, "SELECT fence.admit_signed('p', %s)", (sign(key, "hpriv", "p", 5),))),
         "the application reaches admit_signed (an unlisted key: FN004)")
    T.eq("42501", code(attempt(a, "SELECT fence.admit('p', 9223372036854775807)")),
         "the application may not call fence.admit")
    T.eq("42501", code(attempt(a, "SELECT * FROM fence.hmac_keys")), "nor read the keys")
    T.eq("42501", code(attempt(a, "SELECT fence.add_verify_key('h5 hmac-sha256 " + "A" * 43 + "')")),
         "nor add a key")
    T.eq(0, one(a, "SELECT fence.high('p')"), "the mark of p is still 0")
    a.close()


def main():
    exit_on_sigterm(143)
    tmp = make_tmp("fence-pg-signed.")
    pg = PgServer(tmp)
    try:
        pg.initdb()
        pg.start()
        run_group(T, test_load, pg)
        run_group(T, test_forgeries, pg, tmp)
        run_group(T, test_c_vector, pg)
        run_group(T, test_rotation, pg, tmp)
        run_group(T, test_privileges, pg, tmp)
    except Exception as e:  # noqa: BLE001 - a server that will not start
        T.check(False, "could not run: %r" % (e,))
        print("# " + pg.log_tail().replace("\n", "\n# "))
    finally:
        pg.stop()
    T.finish()


if __name__ == "__main__":
    main()
