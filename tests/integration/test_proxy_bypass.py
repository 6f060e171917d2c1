#!/usr/bin/python3
"""fence-proxy must not be walked around (issue 18, section 2), in front of
a real nginx that checks nothing (WebDAV PUT/DELETE), with the documented
routes '/reports/ PUT,DELETE; /secret/ *; /public/ -':

- paths: `PUT /public/../reports/r` (sent as is, like curl --path-as-is),
  `%2e%2e`, `..%2f`, `..%5c`, `..;/`, `//secret/x`, '..' above the root:
  refused (428 or 400), and nginx writes nothing; a fenced write through a
  dotted path lands at the normalised path the proxy decided on;
- methods: `put`, `FOO`, `TRACE`, `PROPFIND` need a token (428); GET,
  HEAD, OPTIONS do not, unless they carry X-HTTP-Method-Override (or its
  kin); with --read-methods PROPFIND is a read;
- obsolete line folding: 400, nothing forwarded;
- one fence per resource: a route that names the fence (fixed, and
  doc:{name}) refuses another fence's token, plain and signed (fenced
  --token-signing-key), with 409 WRONGFENCE and Fencing-Expected; without a
  named fence the first fence that wrote a path owns it, also after a
  kill -9 and restart of the proxy;
- WebDAV COPY/MOVE: the Destination is routed, fenced and bound like the
  request path (an unfenced COPY from /public/ into /reports/, a MOVE over
  another fence's file: refused);
- --max-bindings: a clear 503 past it.
"""
import os
import socket
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_proxy_lib import (PROXY, Nginx, Proxy, Tap, binary, fenced_headers,  # noqa: E402
                            make_tmp, need_nginx, need_proxy, request)
from fencetest import run_group  # noqa: E402

need_proxy()
need_nginx()
tap = Tap()
TMP = make_tmp("fence-proxy-bypass.")
ROUTES = "/reports/ PUT,DELETE; /secret/ *; /public/ -"


def raw(port, data, timeout=5.0):
    """Send one raw request (Connection: close) and return (status, body)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(data)
        out = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    try:
        status = int(head.split(b" ")[1])
    except (IndexError, ValueError):
        status = None
    return status, body


def req(method, target, body=b"", headers=None):
    """A raw request with the target exactly as given."""
    h = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items())
    return ("%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n%s\r\n" %
            (method, target, len(body), h)).encode() + body


def test_paths(ng, px):
    os.makedirs(os.path.join(ng.root, "secret"), exist_ok=True)
    with open(os.path.join(ng.root, "secret", "x"), "wb") as f:
        f.write(b"the secret")
    for target in ("/public/../reports/r", "/public/%2e%2e/reports/r", "/public/%2E%2E/reports/r",
                   "/public/.%2e/reports/r", "/public//../reports/r", "/public/x/../../reports/r"):
        st, body = raw(px.port, req("PUT", target, b"bypass"))
        tap.check(st == 428 and body.startswith(b"NOTOKEN"),
                  "PUT %s without a token: 428 NOTOKEN (routed as /reports/r)" % target, (st, body))
    tap.eq(None, ng.file("reports/r"), "nginx wrote no /reports/r")
    for target in ("/public/..%2freports/r", "/public/..%2Freports/r", "/public/..%5creports/r",
                   "/public/..;/reports/r", "/../reports/r", "/public/../../reports/r",
                   "/public/%00/r", "/public/a%zz"):
        st, body = raw(px.port, req("PUT", target, b"bypass"))
        tap.check(st == 400 and body.startswith(b"BADPATH"),
                  "PUT %s: 400 BADPATH (ambiguous)" % target, (st, body))
    tap.eq(None, ng.file("reports/r"), "still no /reports/r at nginx")
    for target in ("//secret/x", "/public/../secret/x", "/./secret/x", "/%73ecret/x"):
        st, body = raw(px.port, req("GET", target))
        tap.check(st == 428 and b"the secret" not in body,
                  "GET %s without a token: 428, the secret is not read" % target, (st, body))
    st, body = raw(px.port, req("GET", "/secret/x", headers=fenced_headers("secret", 1)))
    tap.eq((200, b"the secret"), (st, body), "GET /secret/x with a token is served")
    # A fenced write through a dotted path lands where it was decided.
    st, _ = raw(px.port, req("PUT", "/public/../reports/r2?v=1", b"fenced",
                             fenced_headers("reports", 3)))
    tap.check(st in (201, 204), "PUT /public/../reports/r2 with a token is forwarded (%s)" % st)
    tap.eq(b"fenced", ng.file("reports/r2"), "nginx wrote it at the normalised /reports/r2")
    tap.eq(None, ng.file("public/r2"), "and nowhere else")
    st, _ = raw(px.port, req("PUT", "/public/open", b"open"))
    tap.check(st in (201, 204), "PUT /public/open needs no token ('-') (%s)" % st)
    tap.eq(b"open", ng.file("public/open"), "nginx wrote /public/open")


def test_methods(ng, px):
    for m in ("put", "Put", "FOO", "TRACE", "PROPFIND", "get", "CONNECT2"):
        st, body = raw(px.port, req(m, "/reports/m", b"m"))
        tap.check(st == 428 and body.startswith(b"NOTOKEN"),
                  "%s /reports/m without a token: 428 NOTOKEN" % m, (st, body))
        st, body = raw(px.port, req(m, "/elsewhere", b"m"))
        tap.check(st == 428, "%s /elsewhere (default route) without a token: 428" % m, (st, body))
    tap.eq(None, ng.file("reports/m"), "nginx got none of them")
    for m in ("GET", "HEAD", "OPTIONS"):
        st, _ = raw(px.port, req(m, "/public/open"))
        tap.check(st is not None and st != 428, "%s needs no token (%s)" % (m, st))
    for h in ("X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"):
        st, body = raw(px.port, req("GET", "/reports/r2", headers={h: "DELETE"}))
        tap.check(st == 428, "GET /reports/r2 with %s: DELETE needs a token (428)" % h, (st, body))


def test_destination(tmp):
    """WebDAV COPY/MOVE write their Destination: it is routed, fenced and
    bound like the request path (nginx with COPY and MOVE enabled)."""
    ng = Nginx(tmp, name="nginx-dav", dav_methods="PUT DELETE COPY MOVE").start()
    os.makedirs(os.path.join(ng.root, "reports"), exist_ok=True)
    px = Proxy(tmp, ng.port, name="proxy-dav", args=["--route", ROUTES,
                                                     "--restart-hold-ms", "0"]).start()
    try:
        st, _, _ = request(px.port, "PUT", "/public/src", b"public")
        tap.check(st in (201, 204), "PUT /public/src needs no token (%d)" % st)
        here = "http://127.0.0.1:%d" % px.port  # nginx wants the Host's authority
        for dest in (here + "/reports/r", "/reports/r", here + "/public/../reports/r",
                     here + "//reports/r"):
            st, _, body = request(px.port, "COPY", "/public/src", None, {"Destination": dest})
            tap.check(st == 428, "COPY /public/src to %s without a token: 428" % dest, (st, body))
        st, _, body = request(px.port, "MOVE", "/public/src", None,
                              {"Destination": here + "/public/..%2freports/r"})
        tap.eq(400, st, "MOVE to an encoded-slash Destination: 400")
        tap.eq(None, ng.file("reports/r"), "nginx copied nothing into /reports/")
        st, _, _ = request(px.port, "PUT", "/acct", b"acct", fenced_headers("acct", 1))
        tap.check(st in (201, 204), "PUT /acct through acct (%d)" % st)
        st, _, _ = request(px.port, "PUT", "/mine", b"mine", fenced_headers("other", 1))
        tap.check(st in (201, 204), "PUT /mine through other (%d)" % st)
        st, hd, body = request(px.port, "MOVE", "/mine", None,
                               dict(fenced_headers("other", 1), Destination=here + "/./acct"))
        tap.check(st == 409 and hd.get("fencing-expected") == "acct",
                  "MOVE /mine over /acct through 'other': 409, expected acct", (st, body))
        tap.eq(b"acct", ng.file("acct"), "/acct is untouched")
        st, _, _ = request(px.port, "COPY", "/mine", None,
                           dict(fenced_headers("other", 1),
                                Destination=here + "/a/../mine2"))
        tap.check(st in (201, 204), "a fenced COPY to a dotted Destination is forwarded (%d)" % st)
        tap.eq(b"mine", ng.file("mine2"), "nginx wrote the normalised Destination /mine2")
        st, _, _ = request(px.port, "PUT", "/mine2", b"x", fenced_headers("acct", 5))
        tap.eq(409, st, "the Destination now belongs to 'other'")
    finally:
        px.stop()
        ng.stop()


def test_read_methods(tmp, ng):
    px = Proxy(tmp, ng.port, name="proxy-reads",
               args=["--route", ROUTES, "--read-methods", "GET,HEAD,OPTIONS,PROPFIND",
                     "--restart-hold-ms", "0"]).start()
    try:
        st, _ = raw(px.port, req("PROPFIND", "/reports/"))
        tap.check(st != 428, "with --read-methods ...,PROPFIND: PROPFIND needs no token (%s)" % st)
        st, _ = raw(px.port, req("put", "/reports/x", b"x"))
        tap.eq(428, st, "put still needs one")
    finally:
        px.stop()
    r = subprocess.run([PROXY, "--upstream",
                        "http://127.0.0.1:1", "--data-dir", os.path.join(tmp, "d"),
                        "--read-methods", "GET,TRACE"], capture_output=True, timeout=10)
    tap.check(r.returncode == 2 and b"TRACE" in r.stderr,
              "--read-methods GET,TRACE is refused at start", r.stderr)


def test_obs_fold(ng, px):
    data = (b"PUT /public/folded HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n"
            b"Connection: close\r\nContent-Length: 1\r\n\r\nz")
    st, body = raw(px.port, data)
    tap.check(st == 400 and body.startswith(b"BADHEADER"),
              "a folded header line: 400 BADHEADER", (st, body))
    data = (b"PUT /public/folded HTTP/1.1\r\nHost: x\r\nX-A: one\r\n\ttwo\r\n"
            b"Connection: close\r\nContent-Length: 1\r\n\r\nz")
    st, body = raw(px.port, data)
    tap.eq(400, st, "folded with a tab: 400")
    tap.eq(None, ng.file("public/folded"), "nothing was forwarded")


def test_route_fence(tmp, ng):
    px = Proxy(tmp, ng.port, name="proxy-named",
               args=["--route", "/docs/ PUT,DELETE doc:{name}; /ledger/ * ledger",
                     "--restart-hold-ms", "0"]).start()
    try:
        st, _, _ = request(px.port, "PUT", "/docs/a", b"A", fenced_headers("doc:a", 5))
        tap.check(st in (201, 204), "PUT /docs/a through doc:a is forwarded (%d)" % st)
        st, hd, body = request(px.port, "PUT", "/docs/a", b"X", fenced_headers("other", 100))
        tap.check(st == 409 and body.startswith(b"WRONGFENCE"),
                  "PUT /docs/a through fence 'other' (token 100): 409 WRONGFENCE", (st, body))
        tap.eq("doc:a", hd.get("fencing-expected"), "Fencing-Expected: doc:a")
        st, hd, _ = request(px.port, "PUT", "/docs/a/../b", b"X", fenced_headers("doc:a", 100))
        tap.eq((409, "doc:b"), (st, hd.get("fencing-expected")),
               "/docs/a/../b belongs to doc:b, not doc:a")
        st, _, _ = request(px.port, "PUT", "/docs/a", b"X", fenced_headers("doc:b", 100))
        tap.eq(409, st, "doc:b's token cannot write /docs/a")
        tap.eq(b"A", ng.file("docs/a"), "nginx still holds doc:a's write")
        st, hd, _ = request(px.port, "PUT", "/ledger/x", b"L")
        tap.eq((428, "ledger"), (st, hd.get("fencing-expected")),
               "428 names the expected fence of a fixed route")
        st, _, _ = request(px.port, "GET", "/ledger/x", None, fenced_headers("doc:a", 1))
        tap.eq(409, st, "a GET with another fence's token under a fixed route: 409")
        st, _, body = request(px.port, "PUT", "/docs/", b"x", fenced_headers("doc:", 1))
        tap.check(st == 400 and body.startswith(b"BADFENCE"),
                  "PUT /docs/ (no {name}): 400 BADFENCE", (st, body))
    finally:
        px.stop()


def test_first_writer(tmp, ng):
    px = Proxy(tmp, ng.port, name="proxy-bind", args=["--restart-hold-ms", "0"]).start()
    try:
        st, _, _ = request(px.port, "PUT", "/doc", b"one", fenced_headers("acct", 1))
        tap.check(st in (201, 204), "PUT /doc through fence acct is forwarded (%d)" % st)
        st, hd, body = request(px.port, "PUT", "/doc", b"evil", fenced_headers("other", 9))
        tap.check(st == 409 and body.startswith(b"WRONGFENCE"),
                  "PUT /doc through fence 'other': 409 WRONGFENCE", (st, body))
        tap.eq("acct", hd.get("fencing-expected"), "Fencing-Expected: acct")
        st, _, _ = request(px.port, "DELETE", "//./doc", None, fenced_headers("other", 9))
        tap.eq(409, st, "DELETE //./doc through 'other': 409 (same path once normalised)")
        tap.eq(b"one", ng.file("doc"), "nginx still holds acct's write")
        st, _, _ = request(px.port, "GET", "/doc", None, fenced_headers("other", 9))
        tap.eq(409, st, "a GET admit through 'other': 409")
        st, _, body = request(px.port, "GET", "/doc")
        tap.eq((200, b"one"), (st, body), "an unfenced GET still reads it")
        px.stop(9)
        px.start()
        st, _, _ = request(px.port, "PUT", "/doc", b"evil", fenced_headers("other", 10))
        tap.eq(409, st, "after kill -9 and a restart: 'other' is still refused")
        st, _, _ = request(px.port, "PUT", "/doc", b"two", fenced_headers("acct", 2))
        tap.check(st in (201, 204), "and acct still writes (%d)" % st)
        tap.eq(b"two", ng.file("doc"), "nginx holds acct's second write")
    finally:
        px.stop()
    px = Proxy(tmp, ng.port, name="proxy-maxbind",
               args=["--max-bindings", "2", "--restart-hold-ms", "0"]).start()
    try:
        for i in range(2):
            st, _, _ = request(px.port, "PUT", "/b%d" % i, b"x", fenced_headers("f", 1))
            tap.check(st in (201, 204), "binding %d of --max-bindings 2 (%d)" % (i + 1, st))
        st, _, body = request(px.port, "PUT", "/b2", b"x", fenced_headers("f", 1))
        tap.check(st == 503 and body.startswith(b"BINDINGS"),
                  "a third path: 503 BINDINGS", (st, body))
        tap.eq(None, ng.file("b2"), "nothing was forwarded")
        st, _, _ = request(px.port, "PUT", "/b1", b"y", fenced_headers("f", 1))
        tap.check(st in (201, 204), "a bound path is still written (%d)" % st)
    finally:
        px.stop()


def test_signed(tmp, ng):
    fencectl = binary("fencectl", env="FENCECTL")
    if not os.access(fencectl, os.X_OK):
        tap.note("skipped the signed part: %s is not built" % fencectl)
        return
    from test_fenced_lib import Fenced
    kd = os.path.join(tmp, "keys")
    subprocess.run([fencectl, "keygen", kd, "--key-id", "k1"], check=True,
                   stdout=subprocess.DEVNULL)
    fd = Fenced(name="fenced-signed",
                args=["--token-signing-key", os.path.join(kd, "signing.key")])
    px = Proxy(tmp, ng.port, name="proxy-signed",
               args=["--token-verify-keys", os.path.join(kd, "verify.keys"),
                     "--route", "/named/ PUT,DELETE named", "--restart-hold-ms", "0"])
    try:
        fd.start()
        px.start()
        r = fd.client(decode_responses=True)
        lease = r.execute_command("LEASE.GRANT", 60000)
        acct = r.execute_command("LOCK", "acct", lease, "SIGNED")
        other = r.execute_command("LOCK", "other", lease, "SIGNED")
        named = r.execute_command("LOCK", "named", lease, "SIGNED")
        r.close()
        st, _, _ = request(px.port, "PUT", "/sdoc", b"acct", fenced_headers("acct", acct))
        tap.check(st in (201, 204), "a signed acct token writes /sdoc (%d)" % st)
        st, hd, _ = request(px.port, "PUT", "/sdoc", b"evil", fenced_headers("other", other))
        tap.eq((409, "acct"), (st, hd.get("fencing-expected")),
               "a valid signed token of another lock: 409, expected acct")
        st, _, _ = request(px.port, "PUT", "/named/x", b"evil", fenced_headers("other", other))
        tap.eq(409, st, "a valid signed token of another lock under a named route: 409")
        st, _, _ = request(px.port, "PUT", "/named/x", b"ok", fenced_headers("named", named))
        tap.check(st in (201, 204), "the named lock's signed token writes (%d)" % st)
        tap.eq(b"acct", ng.file("sdoc"), "nginx holds acct's write")
    finally:
        px.stop()
        fd.stop()


def main():
    ng = Nginx(TMP).start()
    px = Proxy(TMP, ng.port, args=["--route", ROUTES, "--restart-hold-ms", "0"]).start()
    run_group(tap, test_paths, ng, px)
    run_group(tap, test_methods, ng, px)
    run_group(tap, test_obs_fold, ng, px)
    run_group(tap, test_destination, TMP)
    run_group(tap, test_read_methods, TMP, ng)
    run_group(tap, test_route_fence, TMP, ng)
    run_group(tap, test_first_writer, TMP, ng)
    run_group(tap, test_signed, TMP, ng)
    tap.check(px.alive(), "the proxy survived the whole run", px.log_text())
    px.stop()
    ng.stop()
    tap.finish()


if __name__ == "__main__":
    main()
