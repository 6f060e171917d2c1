"""Test certificates made with the openssl command (imported, not run).

make(dir) writes, in dir, a test CA and what the TLS tests need:
  ca.crt/ca.key           the test CA
  server.crt/server.key   CN localhost, SAN IP 127.0.0.1 and DNS localhost
  alice.crt/alice.key     a client certificate, CN alice
  nobody.crt/nobody.key   a client certificate, CN nobody
  expired.crt/.key        a client certificate of the CA that expired a day ago
  other-ca.crt/.key       another CA
  mallory.crt/.key        a client certificate of the other CA
Every key is EC P-256, unencrypted.  Returns a dict of name -> path.
"""
import os
import subprocess


def _run(args, cwd):
    subprocess.run(["openssl"] + args, cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ca(d, name, cn):
    _run(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
          "-nodes", "-keyout", name + ".key", "-out", name + ".crt", "-days", "30",
          "-subj", "/CN=" + cn], d)


def _leaf(d, name, cn, ca, days, ext=None):
    _run(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn], d)
    args = ["x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".crt", "-days", str(days)]
    if ext:
        with open(os.path.join(d, name + ".ext"), "w") as f:
            f.write(ext)
        args += ["-extfile", name + ".ext"]
    _run(args, d)


def make(d):
    """Writes the certificates into d; returns {name: path}."""
    os.makedirs(d, exist_ok=True)
    _ca(d, "ca", "fence-test-ca")
    _ca(d, "other-ca", "other-test-ca")
    _leaf(d, "server", "localhost", "ca", 30,
          "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _leaf(d, "alice", "alice", "ca", 30)
    _leaf(d, "nobody", "nobody", "ca", 30)
    _leaf(d, "expired", "expired-client", "ca", -1)
    _leaf(d, "mallory", "mallory", "other-ca", 30)
    out = {}
    for n in ("ca", "other-ca", "server", "alice", "nobody", "expired", "mallory"):
        out[n + ".crt"] = os.path.join(d, n + ".crt")
        out[n + ".key"] = os.path.join(d, n + ".key")
    return out
