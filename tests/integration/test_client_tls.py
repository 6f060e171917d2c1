#!/usr/bin/python3
"""libfence / fencectl TLS and login options against a real fenced.

Until fenced itself serves TLS (--tls-port, branch `tls`), the TLS side is a
small TLS terminator written here with Python's ssl module: it accepts TLS
on 127.0.0.1 (its certificate made by the test with openssl, CN localhost,
SAN IP 127.0.0.1) and pumps bytes to a plain fenced.  Checked:

- fencectl --tls --cacert CA runs acquire / info / release through it;
- the same without --cacert (system CAs), with another CA, or with --sni
  naming another host fails with a certificate error (exit 69);
- a terminator that requires client certificates (mTLS) refuses fencectl
  without --cert/--key and serves it with them;
- --user/--pass and $FENCE_PASSWORD send AUTH: fenced without an ACL answers
  the compat layer's error ("AUTH <password> called without any password
  configured ...", "AUTH <username> <password> called, but this server has no
  users or passwords configured"), shown by fencectl, and the password appears in no output nor in the server log.
"""
import os
import socket
import ssl
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import TMP, Fenced, Tap, read_log  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fencetest import binary  # noqa: E402

FENCECTL = binary("fencectl", env="FENCECTL")


def openssl(*args):
    """Run the openssl command line tool quietly."""
    subprocess.run(["openssl"] + list(args), check=True, capture_output=True)


def make_ca(name):
    """A self-signed CA; returns (cert, key)."""
    crt, key = os.path.join(TMP, name + ".crt"), os.path.join(TMP, name + ".key")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=" + name)
    return crt, key


def make_cert(ca, cn, name, san=None):
    """A certificate signed by ca (with an optional subjectAltName)."""
    crt, key = os.path.join(TMP, name + ".crt"), os.path.join(TMP, name + ".key")
    csr = os.path.join(TMP, name + ".csr")
    ext = os.path.join(TMP, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\n" % (san or "DNS:" + cn))
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=" + cn)
    openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
            "-out", crt, "-days", "2", "-extfile", ext)
    return crt, key


class Terminator:
    """TLS on a free 127.0.0.1 port, bytes pumped to 127.0.0.1:backend."""

    def __init__(self, cert, backend, client_ca=None):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert[0], cert[1])
        if client_ca:
            self.ctx.verify_mode = ssl.CERT_REQUIRED
            self.ctx.load_verify_locations(client_ca)
        self.backend = backend
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.handshakes_failed = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            raw, _ = self.sock.accept()
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw):
        try:
            s = self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            self.handshakes_failed += 1
            raw.close()
            return
        b = socket.create_connection(("127.0.0.1", self.backend))

        def pump(src, dst):
            try:
                while True:
                    d = src.recv(65536)
                    if not d:
                        break
                    dst.sendall(d)
            except OSError:
                pass
            for x in (src, dst):
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        threading.Thread(target=pump, args=(b, s), daemon=True).start()
        pump(s, b)


def ctl(*args, env=None):
    """Run fencectl; (rc, stdout, stderr)."""
    e = dict(os.environ)
    e.pop("FENCE_PASSWORD", None)
    if env:
        e.update(env)
    p = subprocess.run([FENCECTL] + list(args), capture_output=True, text=True, timeout=60,
                       env=e)
    return p.returncode, p.stdout, p.stderr


def no_login(err):
    """Whether err is fenced's answer to AUTH without an ACL: Redis's text
    where the compat layer answers AUTH, "unknown command" before it does
    (the ACL engineer's branch replaces both with real logins)."""
    return "AUTH refused" in err and ("without any password configured" in err
                                      or "no users or passwords configured" in err
                                      or "unknown command 'AUTH'" in err)


def main():
    """Run the checks; see the module docstring."""
    t = Tap()
    ca = make_ca("test-ca")
    other = make_ca("other-ca")
    srv = make_cert(ca, "localhost", "server", san="DNS:localhost,IP:127.0.0.1")
    cli = make_cert(ca, "alice", "client")
    f = Fenced(args=["--log-level", "info"]).start()
    term = Terminator(srv, f.port)
    mterm = Terminator(srv, f.port, client_ca=ca[0])
    addr = "127.0.0.1:%d" % term.port
    maddr = "127.0.0.1:%d" % mterm.port
    tls = ["--tls", "--cacert", ca[0]]

    rc, out, err = ctl("--server", addr, *tls, "acquire", "tls.lock", "--ttl", "30000")
    t.eq(0, rc, "fencectl --tls --cacert acquires through TLS", err)
    tok, lease = (out.split() + ["", ""])[:2]
    rc, out, err = ctl("--server", addr, *tls, "info", "tls.lock")
    t.check(rc == 0 and tok in out, "fencectl --tls info shows the holder's token", out + err)
    rc, out, err = ctl("--server", addr, *tls, "release", "tls.lock", tok)
    t.eq(0, rc, "fencectl --tls release", err)
    rc, out, err = ctl("--server", addr, *tls, "--sni", "localhost", "info", "tls.lock")
    t.eq(0, rc, "--sni localhost matches the certificate's DNS name", err)

    rc, out, err = ctl("--server", addr, "--tls", "info", "tls.lock")
    t.check(rc == 69 and "certificate" in err,
            "without --cacert (system CAs) the test certificate is refused", (rc, err))
    rc, out, err = ctl("--server", addr, "--tls", "--cacert", other[0], "info", "tls.lock")
    t.check(rc == 69 and "certificate" in err,
            "a server certificate from another CA is refused", (rc, err))
    rc, out, err = ctl("--server", addr, *tls, "--sni", "db.example", "info", "tls.lock")
    t.check(rc == 69 and "certificate" in err,
            "--sni naming another host is refused (name check)", (rc, err))
    rc, out, err = ctl("--server", "127.0.0.1:%d" % f.port, *tls, "--timeout", "1500",
                       "info", "tls.lock")
    t.check(rc == 69 and "TLS" in err, "--tls against the plaintext port fails clearly",
            (rc, err))
    rc, out, err = ctl("--server", addr, "--tls", "--cacert", "/nonexistent.pem", "info", "x")
    t.check(rc == 64 and "/nonexistent.pem" in err, "an unreadable --cacert is a usage error",
            (rc, err))

    rc, out, err = ctl("--server", maddr, *tls, "--timeout", "2000", "info", "tls.lock")
    t.check(rc != 0, "an mTLS server refuses fencectl without --cert", (rc, err))
    rc, out, err = ctl("--server", maddr, *tls, "--cert", cli[0], "--key", cli[1],
                       "acquire", "tls.m", "--ttl", "30000")
    t.eq(0, rc, "with --cert/--key the mTLS server serves fencectl", err)

    rc, out, err = ctl(*tls, "--server", addr, "cluster", "info")
    t.check(rc == 0 and "role:" in out, "fencectl --tls ... cluster info works through TLS",
            out + err)
    rc, out, err = ctl("--tls", "--cacert", other[0], "--server", addr, "--timeout", "1500",
                       "cluster", "info")
    t.check(rc == 69 and "TLS" in err,  # the last try may end in a handshake timeout
            "fencectl cluster with another CA is refused", (rc, err))

    secret = "pw-Very-Secret-42"
    rc, out, err = ctl("--server", addr, *tls, "--user", "alice", "--pass", secret,
                       "info", "tls.lock")
    t.check(rc != 0 and no_login(err),
            "--user/--pass sends AUTH: fenced without an ACL says so", err)
    rc2, out2, err2 = ctl("--server", "127.0.0.1:%d" % f.port, "info", "tls.lock",
                          env={"FENCE_PASSWORD": secret})
    t.check(rc2 != 0 and no_login(err2),
            "$FENCE_PASSWORD sends AUTH password (plaintext port too)", err2)
    rc3, out3, err3 = ctl(*tls, "--server", addr, "--user", "alice", "cluster", "info",
                          env={"FENCE_PASSWORD": secret})
    t.check(rc3 == 1 and no_login(err3),
            "fencectl cluster --user sends AUTH too (refused at once: exit 1)", (rc3, err3))
    t.check(secret not in out + err + out2 + err2 + out3 + err3,
            "the password is in no fencectl output")
    t.check(secret not in read_log(f.log), "the password is not in the server log")
    f.stop()
    t.finish()


if __name__ == "__main__":
    main()
