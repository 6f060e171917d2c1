#!/usr/bin/python3
"""fence-proxy --tls-cert/--tls-key: HTTPS on --listen (H2O's own TLS),
with a certificate made here by openssl: a GET and a fenced PUT through
HTTPS reach the upstream, a stale token is still refused, plaintext HTTP
on the TLS port gets no HTTP reply, and --tls-cert without --tls-key is
refused."""
import http.client
import os
import ssl
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_proxy_lib import (PROXY, Proxy, SlowUpstream, Tap, fenced_headers,  # noqa: E402
                            make_tmp, need_proxy, raw_exchange)
from fencetest import run_group  # noqa: E402
import tls_certs  # noqa: E402

need_proxy()
TMP = make_tmp("fence-proxy-tls.")
CERTS = tls_certs.make(os.path.join(TMP, "certs"))
tap = Tap()


def https(port, method, path, body=None, headers=None):
    """One HTTPS request, verifying the proxy against the test CA."""
    ctx = ssl.create_default_context(cafile=CERTS["ca.crt"])
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=30)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    out = (r.status, r.read())
    c.close()
    return out


def serve():
    up = SlowUpstream()
    p = Proxy(TMP, up.port, args=["--tls-cert", CERTS["server.crt"],
                                  "--tls-key", CERTS["server.key"]]).start()
    tap.check("serving HTTPS" in p.log_text(), "proxy: HTTPS logged at start")
    st, body = https(p.port, "GET", "/a")
    tap.eq((200, b"ok "), (st, body), "proxy: GET through HTTPS")
    st, body = https(p.port, "PUT", "/a", b"v1", fenced_headers("orders", 5))
    tap.eq((200, b"ok v1"), (st, body), "proxy: fenced PUT (token 5) through HTTPS")
    st, _ = https(p.port, "PUT", "/a", b"v0", fenced_headers("orders", 4))
    tap.check(st == 409 or st == 412 or st == 403, "proxy: a stale token still refused over HTTPS",
              st)
    got = raw_exchange(p.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    tap.check(b"HTTP/1.1 200" not in (got or b""), "proxy: plaintext HTTP on the TLS port refused")
    st, _ = https(p.port, "GET", "/b")
    tap.eq(200, st, "proxy: still serving HTTPS after that")
    tap.check(p.alive(), "proxy: alive")
    p.stop()
    up.close()
    log = p.log_text(100000)
    tap.check("PRIVATE KEY" not in log, "proxy: no key material in the log")


def bad():
    r = subprocess.run([PROXY, "--listen", "127.0.0.1:1", "--upstream", "http://127.0.0.1:2",
                        "--data-dir", os.path.join(TMP, "bad"), "--tls-cert", CERTS["server.crt"]],
                       capture_output=True, text=True, timeout=30)
    tap.check(r.returncode != 0 and "--tls-cert and --tls-key go together" in r.stderr + r.stdout,
              "proxy: --tls-cert without --tls-key refused", r.stderr)


run_group(tap, serve)
run_group(tap, bad)
tap.finish()
