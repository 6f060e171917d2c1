#!/usr/bin/python3
"""libfence's fence-store helper with TLS and a login (fence_store_open_opts):
a fence-store with a TLS port, a plaintext port and an ACL file, certificates
made here with openssl (tls_certs.py), and the C program
build/{asan,release}/tests/test_client_store_tls run against it (its TAP
lines are this test's)."""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fencetest import (ROOT, Tap, binary, free_port, make_tmp, read_log, skip,  # noqa: E402
                       spawn, stop_process, wait_port)
import tls_certs  # noqa: E402

STORE = binary("fence-store", env="FENCE_STORE")


def main():
    if shutil.which("openssl") is None:
        skip("openssl is not installed")
    prog = None
    for variant in ("asan", "release"):
        p = os.path.join(ROOT, "build", variant, "tests", "test_client_store_tls")
        if os.access(p, os.X_OK):
            prog = p
            break
    if prog is None:
        skip("test_client_store_tls is not built")
    t = Tap()
    tmp = make_tmp("client-store-tls")
    certs = tls_certs.make(os.path.join(tmp, "certs"))
    secret = "Store-Pass-31337"
    acl = os.path.join(tmp, "users.acl")
    with open(acl, "w") as f:
        f.write("user app on >%s ~* +@all\n" % secret)
    port, tls_port = free_port(), free_port()
    log = os.path.join(tmp, "store.log")
    proc = spawn([STORE, "--bind", "127.0.0.1", "--port", str(port), "--tls-port", str(tls_port),
                  "--tls-cert", certs["server.crt"], "--tls-key", certs["server.key"],
                  "--acl-file", acl, "--data-dir", os.path.join(tmp, "data")], log)
    try:
        if not (wait_port(port) and wait_port(tls_port)):
            t.check(False, "fence-store listens", read_log(log))
            t.finish()
        env = dict(os.environ, FENCE_STORE_TLS="127.0.0.1:%d" % tls_port,
                   FENCE_STORE_PLAIN="127.0.0.1:%d" % port, FENCE_STORE_CA=certs["ca.crt"],
                   FENCE_STORE_PASS=secret,
                   ASAN_OPTIONS="detect_leaks=1:abort_on_error=1")
        out = subprocess.run([prog], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             timeout=120, universal_newlines=True)
        for line in out.stdout.splitlines():
            if line.startswith("ok - "):
                t.check(True, line[5:])
            elif line.startswith("not ok - "):
                t.check(False, line[9:])
            else:
                print("# " + line if not line.startswith("#") else line)
        t.check(out.returncode == 0, "the C program exits 0", out.returncode)
        t.check(secret not in read_log(log), "the password is not in fence-store's log")
    finally:
        stop_process(proc)
    t.finish()


if __name__ == "__main__":
    main()
