"""Shared helpers for the fence-proxy tests (imported, not run).

Built on tests/lib/fencetest.py (Tap, ports, processes, temp dirs):
- Nginx: a real nginx (Debian's, WebDAV module: dav_methods PUT DELETE, or
  what dav_methods= says) on a
  free 127.0.0.1 port with its own config, pid file, logs and temp paths in
  a temp dir; "daemon off; master_process off;", stopped by PID.  It checks
  no tokens.  Never the system nginx service.
- SlowUpstream: a tiny Python http.server in a thread that records when each
  request arrives and ends and sleeps as the request asks (X-Sleep-Ms), so a
  test controls how long a request stays in flight.
- Proxy: build/fence-proxy on a free port, a data dir, stopped by PID
  (SIGTERM or SIGKILL) and restarted on the same data dir.
- request(): one request over a fresh connection (http.client), returns
  (status, headers dict with lower-case names, body bytes).
"""
import http.client
import http.server
import os
import shutil
import signal
import socket
import socketserver
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from fencetest import (Tap, binary, free_port, make_tmp, read_log,  # noqa: E402,F401 - re-exported
                       run_threads, skip, spawn, stop_process, wait_port)

PROXY = binary("fence-proxy", env="FENCE_PROXY")
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def need_proxy():
    """Skips the test when fence-proxy is not built."""
    if not os.access(PROXY, os.X_OK):
        skip("%s is not built (make build/fence-proxy)" % PROXY)


def need_nginx():
    """Skips the test when nginx is not installed."""
    if not os.access(NGINX, os.X_OK):
        skip("nginx is not installed (scripts/deps.sh test installs it)")


def request(port, method, path, body=None, headers=None, timeout=30):
    """One request to 127.0.0.1:port on a new connection."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, data
    finally:
        c.close()


def fenced_headers(lock, token):
    """The two fencing headers."""
    return {"Fencing-Lock": lock, "Fencing-Token": str(token)}


class Nginx:
    """One nginx with WebDAV PUT/DELETE on a free port; files under root."""

    def __init__(self, tmp, name="nginx", dav_methods="PUT DELETE"):
        self.dir = os.path.join(tmp, name)
        self.root = os.path.join(self.dir, "root")
        os.makedirs(self.root, exist_ok=True)
        os.makedirs(os.path.join(self.dir, "tmp"), exist_ok=True)
        self.port = free_port()
        self.log = os.path.join(self.dir, "nginx.out")
        self.conf = os.path.join(self.dir, "nginx.conf")
        d = self.dir
        with open(self.conf, "w") as f:
            f.write("""daemon off;
master_process off;
worker_processes 1;
pid %(d)s/nginx.pid;
error_log %(d)s/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path %(d)s/tmp/body;
    proxy_temp_path %(d)s/tmp/proxy;
    fastcgi_temp_path %(d)s/tmp/fastcgi;
    uwsgi_temp_path %(d)s/tmp/uwsgi;
    scgi_temp_path %(d)s/tmp/scgi;
    client_max_body_size 64m;
    keepalive_requests 100000;
    server {
        listen 127.0.0.1:%(port)d;
        root %(root)s;
        location / {
            dav_methods %(dav)s;
            create_full_put_path on;
        }
    }
}
""" % {"d": d, "port": self.port, "root": self.root, "dav": dav_methods})
        self.proc = None

    def start(self):
        """Start nginx and wait for its port."""
        self.proc = spawn([NGINX, "-p", self.dir, "-c", self.conf], self.log)
        if not wait_port(self.port, step=0.03):
            raise RuntimeError("nginx did not listen; log:\n%s\n%s" % (
                read_log(self.log), read_log(os.path.join(self.dir, "error.log"))))
        return self

    def stop(self):
        """Stop nginx by PID."""
        if self.proc is not None:
            stop_process(self.proc, signal.SIGQUIT)

    def file(self, name):
        """The content of root/name, or None."""
        try:
            with open(os.path.join(self.root, name), "rb") as f:
                return f.read()
        except OSError:
            return None


class Proxy:
    """One fence-proxy on a free port in front of upstream_port."""

    def __init__(self, tmp, upstream_port, name="proxy", args=()):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir, exist_ok=True)
        self.data = os.path.join(self.dir, "data")
        self.port = free_port()
        self.upstream_port = upstream_port
        self.args = list(args)
        self.log = os.path.join(self.dir, "proxy.log")
        self.proc = None

    def start(self, extra=()):
        """Start (or restart on the same data dir and port)."""
        cmd = [PROXY, "--listen", "127.0.0.1:%d" % self.port,
               "--upstream", "http://127.0.0.1:%d" % self.upstream_port,
               "--data-dir", self.data] + self.args + list(extra)
        self.proc = spawn(cmd, self.log)
        if not wait_port(self.port, step=0.02):
            raise RuntimeError("fence-proxy did not listen; log:\n%s" % read_log(self.log))
        return self

    def stop(self, sig=signal.SIGTERM):
        """Stop by PID (SIGKILL for a crash); returns the exit status."""
        return stop_process(self.proc, sig)

    def alive(self):
        """Whether the process still runs."""
        return self.proc is not None and self.proc.poll() is None

    def log_text(self, tail=4000):
        """The end of the proxy's log."""
        return read_log(self.log, tail)


class SlowUpstream:
    """An upstream we control: every request is answered 200 after
    X-Sleep-Ms milliseconds (0 when absent); each request's arrival and end
    (monotonic seconds), method, path, body and headers (lower-case names)
    are recorded in events."""

    def __init__(self):
        outer = self
        self.events = []           # (kind "start"/"end", time, method, path, body, headers)
        self.mu = threading.Lock()  # protects events

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                hdrs = {k.lower(): v for k, v in self.headers.items()}
                with outer.mu:
                    outer.events.append(("start", time.monotonic(), self.command, self.path, body,
                                         hdrs))
                ms = int(self.headers.get("X-Sleep-Ms") or 0)
                if ms:
                    time.sleep(ms / 1000.0)
                with outer.mu:
                    outer.events.append(("end", time.monotonic(), self.command, self.path, body,
                                         hdrs))
                out = b"ok " + body
                self.send_response(200)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                try:
                    self.wfile.write(out)
                except OSError:
                    pass

            do_GET = do_PUT = do_POST = do_DELETE = _any

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def snapshot(self):
        """A copy of the events so far."""
        with self.mu:
            return list(self.events)

    def close(self):
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def raw_exchange(port, data, timeout=5.0, read_all=True):
    """Send raw bytes on a new connection and return what comes back
    (until the peer closes or timeout)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            # The peer answered (say 431) and closed before it read all of
            # an oversized request; what it sent back is still readable.
            pass
        out = b""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                chunk = s.recv(65536)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            out += chunk
            if not read_all and b"\r\n\r\n" in out:
                break
        return out
    finally:
        s.close()
