#!/usr/bin/python3
"""Client TLS on fenced and fence-store (src/net/tls.c), with real
processes and certificates made here with openssl (tests/integration/
tls_certs.py): redis-cli --tls and redis-py ssl=True against both daemons,
the plain port switched off, mutual TLS refusing a client without a
certificate, with one of another CA and with an expired one (clear log
lines, daemon unaffected), pipelines and large values, many concurrent TLS
clients, garbage and plaintext on the TLS port, the handshake timeout,
bad option combinations, and no key material in any log.

Run with /usr/bin/python3 (python3-redis)."""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fencetest  # noqa: E402
from fenceproto import encode_command  # noqa: E402
from fencetest import (Tap, binary, free_port, make_tmp, need_module,  # noqa: E402
                       read_log, run_group, run_threads, skip, spawn, stop_process,
                       wait_port)
import tls_certs  # noqa: E402

redis = need_module("redis", "python3-redis")
FENCED = binary("fenced", env="FENCED")
STORE = binary("fence-store", env="FENCE_STORE")
if shutil.which("openssl") is None:
    skip("openssl is not installed")
if shutil.which("redis-cli") is None:
    skip("redis-cli is not installed (redis-tools)")

TMP = make_tmp("fence-tls.")
CERTS = tls_certs.make(os.path.join(TMP, "certs"))
tap = Tap()
fencetest.exit_on_sigterm(1)


class Daemon:
    """fenced or fence-store with TLS flags on free ports."""

    def __init__(self, prog, name, plain=False, args=()):
        self.prog = prog
        self.name = name
        self.dir = os.path.join(TMP, name)
        os.makedirs(self.dir, exist_ok=True)
        self.log = os.path.join(self.dir, "log")
        self.port = free_port() if plain else 0
        self.tls_port = free_port()
        self.args = list(args)
        self.proc = None

    def start(self):
        argv = [self.prog, "--bind", "127.0.0.1", "--port", str(self.port),
                "--tls-port", str(self.tls_port), "--tls-cert", CERTS["server.crt"],
                "--tls-key", CERTS["server.key"], "--data-dir", os.path.join(self.dir, "data"),
                "--log-level", "debug"] + self.args
        self.proc = spawn(argv, self.log, stdin=subprocess.DEVNULL)
        if not wait_port(self.tls_port, step=0.03):
            raise RuntimeError("%s did not listen: %s" % (self.name, read_log(self.log)))
        return self

    def client(self, cert=None, **kw):
        """A redis-py client over TLS (with a client certificate name)."""
        kw.setdefault("decode_responses", True)
        kw.setdefault("socket_timeout", 30)
        if cert:
            kw["ssl_certfile"] = CERTS[cert + ".crt"]
            kw["ssl_keyfile"] = CERTS[cert + ".key"]
        return redis.Redis(host="127.0.0.1", port=self.tls_port, ssl=True,
                           ssl_ca_certs=CERTS["ca.crt"], ssl_cert_reqs="required", **kw)

    def wait_ready(self, cert=None):
        """fenced: until it leads (over TLS)."""
        end = time.monotonic() + 20
        while time.monotonic() < end:
            try:
                c = self.client(cert)
                info = c.execute_command("INFO")
                c.close()
                if isinstance(info, dict) and str(info.get("leader_ready")) == "1":
                    return
                if isinstance(info, str) and "leader_ready:1" in info:
                    return
            except Exception:
                pass
            time.sleep(0.05)
        raise RuntimeError("%s never ready: %s" % (self.name, read_log(self.log)))

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        rc = stop_process(self.proc)
        self.proc = None
        return rc

    def log_text(self):
        return read_log(self.log)


def cli(d, *args, cert=None, cacert="ca.crt", timeout=30):
    """redis-cli --tls against d's TLS port; returns (rc, output)."""
    argv = ["redis-cli", "-h", "127.0.0.1", "-p", str(d.tls_port), "--tls"]
    if cacert:
        argv += ["--cacert", CERTS[cacert]]
    if cert:
        argv += ["--cert", CERTS[cert + ".crt"], "--key", CERTS[cert + ".key"]]
    p = subprocess.run(argv + list(args), capture_output=True, text=True, timeout=timeout)
    return p.returncode, (p.stdout + p.stderr).strip()


def tls_socket(port, cert=None):
    """A TLS socket to port, verifying the server against the test CA."""
    ctx = ssl.create_default_context(cafile=CERTS["ca.crt"])
    ctx.check_hostname = False
    if cert:
        ctx.load_cert_chain(CERTS[cert + ".crt"], CERTS[cert + ".key"])
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), 10))
    s.settimeout(30)
    return s


def raw_exchange(port, data, wait=10.0):
    """Sends data on a plain TCP connection; returns what came back before
    the server closed it (None if it stayed open for wait seconds)."""
    s = socket.create_connection(("127.0.0.1", port), 5)
    s.settimeout(wait)
    got = b""
    try:
        if data:
            s.sendall(data)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got
            got += chunk
    except socket.timeout:
        return None
    except (ConnectionResetError, BrokenPipeError):
        return got
    finally:
        s.close()


def recv_exactly(s, n):
    """Reads from s until n bytes have come or the peer closed."""
    got = b""
    while len(got) < n:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def wait_log(d, text, secs=10.0):
    """Waits until d's log holds text."""
    end = time.monotonic() + secs
    while time.monotonic() < end:
        if text in d.log_text():
            return True
        time.sleep(0.05)
    return False


def lock_cycles(c, name, n):
    """n LEASE.GRANT / LOCK / UNLOCK cycles on one client; returns the tokens."""
    tokens = []
    for _ in range(n):
        lease = c.execute_command("LEASE.GRANT", 10000)
        tok = c.execute_command("LOCK", name, lease)
        tokens.append(int(tok))
        c.execute_command("UNLOCK", name, tok)
        c.execute_command("LEASE.REVOKE", lease)
    return tokens


def fenced_server_tls():
    """fenced with the plain port off and TLS on (no client certificates)."""
    d = Daemon(FENCED, "fenced-tls").start()
    d.wait_ready()
    log = d.log_text()
    tap.check("listening for TLS on 127.0.0.1:%d" % d.tls_port in log,
              "fenced: TLS listener logged")
    tap.check("listening on 127.0.0.1:" not in log, "fenced: --port 0: no plain TCP listener",
              log[-2000:])
    rc, out = cli(d, "PING")
    tap.eq((0, "PONG"), (rc, out), "fenced: redis-cli --tls --cacert PING")
    rc, out = cli(d, "LEASE.GRANT", "5000")
    tap.check(rc == 0 and out.isdigit(), "fenced: redis-cli --tls LEASE.GRANT", out)
    rc, out = cli(d, "PING", cacert="other-ca.crt")
    tap.check(rc != 0 or "PONG" not in out, "fenced: redis-cli with the wrong CA refuses the server",
              out)

    c = d.client()
    toks = lock_cycles(c, "tls-orders", 20)
    tap.check(all(b > a for a, b in zip(toks, toks[1:])),
              "fenced: redis-py ssl=True grant/lock/unlock cycles, tokens increase")
    p = c.pipeline(transaction=False)
    for i in range(2000):
        p.execute_command("LEASE.GRANT", 60000)
    ids = [int(x) for x in p.execute()]
    tap.check(len(ids) == 2000 and all(b > a for a, b in zip(ids, ids[1:])),
              "fenced: 2000 pipelined LEASE.GRANTs over TLS, in order", ids[:5])
    c.close()
    big = b"v" * 60000
    s = tls_socket(d.tls_port)
    s.sendall(encode_command("PING", big) * 20)
    want = (b"$60000\r\n" + big + b"\r\n") * 20
    got = b""
    while len(got) < len(want):
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    tap.check(got == want, "fenced: 20 pipelined 60 KB PINGs over TLS echo back",
              "got %d bytes, want %d" % (len(got), len(want)))

    errors = []

    def worker(i):
        try:
            cc = d.client()
            lock_cycles(cc, "tls-many-%d" % i, 10)
            if cc.execute_command("PING") is not True:
                errors.append("bad PING")
            cc.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    run_threads(worker, 64)
    tap.eq([], errors[:3], "fenced: 64 concurrent TLS clients, 10 cycles each",
           "\n".join(ln for ln in d.log_text().splitlines()
                     if " warn " in ln or " error " in ln or "TLS error" in ln)[-3000:])

    # An idle connection's record buffers are freed (src/net/tls.c on_sweep)
    # and come back with its next record: a PING, then a 60 KB PING whose
    # records fill both buffers, then a half-sent request left idle across
    # a sweep (its partial record is in the read BIO, not OpenSSL's
    # buffer) and finished.
    s = tls_socket(d.tls_port)
    s.sendall(encode_command("PING"))
    tap.eq(b"+PONG\r\n", s.recv(100), "fenced: a TLS connection answers before it idles")
    freed = "TLS idle, record buffers freed"
    tap.check(wait_log(d, freed, secs=15), "fenced: idle TLS connection's buffers freed",
              d.log_text()[-1500:])
    n_freed = d.log_text().count(freed)
    s.sendall(encode_command("PING", big))
    want = b"$60000\r\n" + big + b"\r\n"
    got = recv_exactly(s, len(want))
    tap.check(got == want, "fenced: after its buffers were freed, a 60 KB PING echoes back",
              "got %d bytes" % len(got))
    req = encode_command("PING", b"w" * 30000)
    s.sendall(req[:1000])
    fencetest.wait_for(lambda: d.log_text().count(freed) > n_freed, timeout=15, step=0.1)
    s.sendall(req[1000:])
    want = b"$30000\r\n" + b"w" * 30000 + b"\r\n"
    got = recv_exactly(s, len(want))
    tap.check(got == want, "fenced: a request half sent across an idle sweep is answered",
              "got %d bytes" % len(got))
    s.close()

    got = raw_exchange(d.tls_port, b"\x42garbage" + os.urandom(4096) + b"\r\n", wait=30)
    tap.check(got is not None, "fenced: garbage on the TLS port: connection closed")
    tap.check(wait_log(d, "TLS handshake failed"), "fenced: garbage logged as a failed handshake")
    got = raw_exchange(d.tls_port, b"*1\r\n$4\r\nPING\r\n")
    tap.check(got is not None and b"PONG" not in got,
              "fenced: plaintext RESP on the TLS port gets no reply, closed", got)
    rc, out = cli(d, "PING")
    tap.eq((0, "PONG"), (rc, out), "fenced: still serving after garbage")
    tap.check(d.alive(), "fenced: daemon unaffected")
    tap.eq(0, d.stop(), "fenced: clean exit with TLS")


def fenced_mtls():
    """fenced with --tls-ca: mutual TLS."""
    d = Daemon(FENCED, "fenced-mtls", args=["--tls-ca", CERTS["ca.crt"]]).start()
    d.wait_ready(cert="alice")
    tap.check("client certificates: yes" in d.log_text(), "mtls: tls-ca makes auth-clients yes")
    rc, out = cli(d, "PING", cert="alice")
    tap.eq((0, "PONG"), (rc, out), "mtls: redis-cli --cert/--key (CA-signed) PING")
    tap.check(wait_log(d, "client CN alice"), "mtls: the verified CN is alice")

    rc, out = cli(d, "PING")
    tap.check(rc != 0 or "PONG" not in out, "mtls: redis-cli without a certificate refused", out)
    tap.check(wait_log(d, "peer did not return a certificate"),
              "mtls: log says the client sent no certificate",
              d.log_text()[-1500:])
    rc, out = cli(d, "PING", cert="mallory")
    tap.check(rc != 0 or "PONG" not in out, "mtls: a certificate of another CA refused", out)
    tap.check(wait_log(d, "client certificate refused: unable to get local issuer certificate"),
              "mtls: log names the unknown issuer", d.log_text()[-1500:])
    rc, out = cli(d, "PING", cert="expired")
    tap.check(rc != 0 or "PONG" not in out, "mtls: an expired certificate refused", out)
    tap.check(wait_log(d, "client certificate refused: certificate has expired"),
              "mtls: log says the certificate has expired", d.log_text()[-1500:])
    tap.check("CN=expired-client" in d.log_text(), "mtls: log names the refused subject")

    c = d.client("alice")
    lock_cycles(c, "mtls", 5)
    c.close()
    tap.check(True, "mtls: redis-py ssl=True with ssl_certfile works")
    try:
        c = d.client()
        c.execute_command("PING")
        ok = False
    except Exception:
        ok = True
    tap.check(ok, "mtls: redis-py without a certificate gets an error")
    tap.check(d.alive(), "mtls: daemon unaffected by the refused clients")
    tap.eq(0, d.stop(), "mtls: clean exit")


def store_tls():
    """fence-store with a plain and a TLS port, client certificates optional,
    and a tiny pipeline bound (plaintext OpenSSL holds while reading pauses)."""
    d = Daemon(STORE, "store-tls", plain=True,
               args=["--tls-ca", CERTS["ca.crt"], "--tls-auth-clients", "optional",
                     "--max-value", "4m", "--max-obuf", "16m",
                     "--max-pipeline", "4"]).start()
    rc, out = cli(d, "PING")
    tap.eq((0, "PONG"), (rc, out), "store: redis-cli --tls without a certificate (optional)")
    rc, out = cli(d, "PING", cert="alice")
    tap.eq((0, "PONG"), (rc, out), "store: redis-cli --tls with a certificate (optional)")
    rc, out = cli(d, "PING", cert="expired")
    tap.check(rc != 0 or "PONG" not in out,
              "store: optional still refuses an expired certificate", out)
    plain = redis.Redis(host="127.0.0.1", port=d.port, decode_responses=True)
    tap.eq(True, plain.ping(), "store: the plain port still works beside TLS")
    c = d.client(decode_responses=False)
    c.execute_command("FSET", "f1", 1, "k-small", "v")
    big = os.urandom(3 * 1024 * 1024)
    tap.eq(b"OK", c.execute_command("FSET", "f1", 2, "k-big", big), "store: 3 MB FSET over TLS")
    tap.eq(big, c.execute_command("FGET", "k-big"), "store: 3 MB FGET over TLS")
    p = c.pipeline(transaction=False)
    for i in range(1000):
        p.execute_command("FSET", "f2", i + 1, "k%d" % (i % 10), b"x" * 100)
    tap.check(all(r == b"OK" for r in p.execute()),
              "store: 1000 pipelined FSETs over TLS (max-pipeline 4: reading pauses, "
              "decrypted input waits)")
    tap.eq(1000, c.execute_command("FENCE.HIGH", "f2"), "store: fence mark after the pipeline")
    c.close()
    raw = redis.Redis(host="127.0.0.1", port=d.port)
    tap.eq(big, raw.execute_command("FGET", "k-big"), "store: the same value over the plain port")
    raw.close()

    errors = []

    def worker(i):
        try:
            cc = d.client()
            for j in range(20):
                cc.execute_command("FSET", "g%d" % i, j + 1, "gk%d" % i, "v%d" % j)
            if cc.execute_command("FGET", "gk%d" % i) != "v19":
                errors.append("bad FGET")
            cc.close()
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))
    run_threads(worker, 64)
    tap.eq([], errors[:3], "store: 64 concurrent TLS clients",
           "\n".join(ln for ln in d.log_text().splitlines()
                     if " warn " in ln or " error " in ln or "TLS error" in ln)[-3000:])
    got = raw_exchange(d.tls_port, b"\x01" + os.urandom(2000), wait=30)
    tap.check(got is not None, "store: garbage on the TLS port: closed")
    rc, out = cli(d, "PING")
    tap.eq((0, "PONG"), (rc, out), "store: still serving after garbage")
    tap.eq(0, d.stop(), "store: clean exit with TLS")


def handshake_timeout():
    """A client that connects and stays silent is closed at the deadline."""
    d = Daemon(STORE, "store-hs", args=["--tls-handshake-timeout-ms", "300"]).start()
    got = raw_exchange(d.tls_port, b"", wait=20)
    tap.check(got is not None, "timeout: a silent client is closed (no handshake)")
    tap.check(wait_log(d, "TLS handshake not finished within 300 ms"),
              "timeout: logged", d.log_text()[-1000:])
    got = raw_exchange(d.tls_port, b"\xff\xff" + os.urandom(100), wait=20)
    tap.check(got is not None,
              "timeout: garbage that claims a long record is closed at the deadline")
    rc, out = cli(d, "PING")
    tap.eq((0, "PONG"), (rc, out), "timeout: others still served")
    tap.eq(0, d.stop(), "timeout: clean exit")


def limit_refusal():
    """Beyond max-clients a TLS client still gets the -LIMIT reply, sent
    once its handshake is done, then the connection closes."""
    d = Daemon(STORE, "store-limit", args=["--max-clients", "2"]).start()
    wait_log(d, "the client hung up")  # the start-up probe's connection has gone
    a, b = d.client(), d.client()
    tap.check(a.ping() and b.ping(), "limit: two TLS clients served")
    s = tls_socket(d.tls_port)
    got = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except (OSError, ssl.SSLError):
        pass
    s.close()
    tap.check(got.startswith(b"-LIMIT"), "limit: the third TLS client gets -LIMIT", got)
    a.close()
    b.close()
    tap.eq(0, d.stop(), "limit: clean exit")


def cn_login():
    """With --acl-file, a verified client certificate whose CN names a user
    that is on logs the connection in as that user (no AUTH); another CN
    stays logged out (-NOAUTH)."""
    acl = os.path.join(TMP, "cn.acl")
    with open(acl, "w") as f:
        f.write("user alice on >al1ce-pw-x ~* +@all -@admin\n"
                "user admin on >adm1n-pw-x ~* +@all\n")
    for prog, name in ((FENCED, "fenced"), (STORE, "fence-store")):
        d = Daemon(prog, "cn-" + name, args=["--tls-ca", CERTS["ca.crt"],
                                             "--tls-auth-clients", "optional",
                                             "--acl-file", acl]).start()
        if prog is FENCED:
            d.wait_ready(cert="alice")
        rc, out = cli(d, "ACL", "WHOAMI", cert="alice")
        tap.eq((0, "alice"), (rc, out), "%s: CN=alice is logged in as alice without AUTH" % name)
        c = d.client("alice")
        if prog is FENCED:
            tap.check(c.execute_command("LEASE.GRANT", 5000) > 0,
                      "%s: CN=alice may grant a lease" % name)
        else:
            tap.eq("OK", c.execute_command("FSET", "f", 1, "k", "v"),
                   "%s: CN=alice may FSET" % name)
        c.close()
        rc, out = cli(d, "ACL", "WHOAMI", cert="nobody")
        tap.check("NOAUTH" in out, "%s: CN=nobody (no such user) is not logged in" % name, out)
        rc, out = cli(d, "ACL", "WHOAMI")
        tap.check("NOAUTH" in out, "%s: no certificate: not logged in" % name, out)
        rc, out = cli(d, "--user", "admin", "--pass", "adm1n-pw-x", "--no-auth-warning",
                      "ACL", "WHOAMI", cert="alice")
        tap.eq((0, "admin"), (rc, out), "%s: AUTH still picks another user over the CN" % name)
        tap.eq(0, d.stop(), "%s: cn login: clean exit" % name)


def bad_options():
    """Refused combinations and files, with clear messages."""
    def run(prog, *args):
        p = subprocess.run([prog, "--data-dir", os.path.join(TMP, "bad"), "--bind",
                            "127.0.0.1"] + list(args), capture_output=True, text=True,
                           timeout=30)
        return p.returncode, p.stdout + p.stderr
    for prog, name in ((FENCED, "fenced"), (STORE, "fence-store")):
        port = str(free_port())
        rc, out = run(prog, "--tls-port", port)
        tap.check(rc != 0 and "tls-port: needs tls-cert and tls-key" in out,
                  "%s: tls-port without a certificate refused" % name, out)
        rc, out = run(prog, "--port", "0")
        tap.check(rc != 0 and "port: 0" in out, "%s: no listener at all refused" % name, out)
        rc, out = run(prog, "--tls-port", port, "--tls-cert", CERTS["server.crt"],
                      "--tls-key", CERTS["server.key"], "--tls-auth-clients", "yes")
        tap.check(rc != 0 and "needs tls-ca" in out,
                  "%s: auth-clients yes without tls-ca refused" % name, out)
        rc, out = run(prog, "--tls-port", port, "--tls-cert", CERTS["server.crt"],
                      "--tls-key", CERTS["alice.key"], "--port", str(free_port()))
        tap.check(rc != 0 and "does not match tls-cert" in out,
                  "%s: a key of another certificate refused" % name, out)
        rc, out = run(prog, "--tls-port", port, "--tls-cert", CERTS["server.key"],
                      "--tls-key", CERTS["server.key"], "--port", str(free_port()))
        tap.check(rc != 0 and "tls-cert" in out and "cannot load" in out,
                  "%s: a key given as the certificate refused" % name, out)
        tap.check("PRIVATE KEY" not in out and "BEGIN" not in out,
                  "%s: no key material in the error" % name)


def no_key_material():
    """No log holds a line of any private key."""
    lines = set()
    for k, path in CERTS.items():
        if k.endswith(".key"):
            with open(path) as f:
                lines.update(ln.strip() for ln in f if ln.strip() and "-----" not in ln)
    bad = []
    for root, _, files in os.walk(TMP):
        for f in files:
            if f == "log":
                text = read_log(os.path.join(root, f))
                if "PRIVATE KEY" in text or any(ln in text for ln in lines):
                    bad.append(os.path.join(root, f))
    tap.eq([], bad, "no key material in any log")


for group in (fenced_server_tls, fenced_mtls, store_tls, handshake_timeout, limit_refusal,
              cn_login, bad_options,
              no_key_material):
    run_group(tap, group)
tap.finish()
