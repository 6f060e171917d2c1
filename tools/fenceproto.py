"""RESP and process helpers shared by the torture tools and the Python tests
(standard library only; imported, never run).

The torture tools (tools/, through tools/torture_common.py) ship with this
module: `make` installs it next to them in build/<variant>/ and
`make install-torture` in TOOLDIR.  The tests (tests/lib/fencetest.py,
tests/bench/run.py) import it from tools/.

- encode_command(): one command as a RESP2 array of bulk strings.
- Resp, RespError: a tiny blocking RESP2 client over TCP.
- free_port(): a free 127.0.0.1 port, never the same one twice per process.
- wait_port(), wait_fenced_ready(): poll until a server accepts / is ready.
"""

import socket
import time


class RespError(Exception):
    """An error reply from a RESP server (the message is the reply text)."""


def encode_command(*args):
    """Returns one command as a RESP2 array of bulk strings; arguments that
    are not bytes are sent as their str() in UTF-8."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(parts)


class Resp:
    """A tiny blocking RESP2 client over TCP."""

    def __init__(self, host, port, timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def _line(self):
        while b"\r\n" not in self.buf:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("connection closed by server")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("connection closed by server")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n + 2:]
        return out

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ConnectionError("bad reply line %r" % line[:60])

    def call(self, *args):
        """Sends one command; returns the reply, or raises RespError."""
        self.sock.sendall(encode_command(*args))
        r = self._reply()
        if isinstance(r, RespError):
            raise r
        return r


_ports_given = set()


def free_port():
    """Returns a TCP port that is free on 127.0.0.1 right now, and never one
    this process was already given (the kernel may hand the same ephemeral
    port out twice in a row once the probe socket is closed; two servers
    told the same port would fail in confusing ways)."""
    for _ in range(100):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        if port not in _ports_given:
            _ports_given.add(port)
            return port
    raise RuntimeError("free_port: no new free port found")


def wait_port(port, seconds=10.0, host="127.0.0.1", step=0.05):
    """Waits until something accepts on host:port, trying every step
    seconds; returns True if it did."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(step)
    return False


def wait_fenced_ready(port, seconds=15.0):
    """Waits until fenced on 127.0.0.1:port reports leader_ready:1 in INFO
    (it answers TRYAGAIN while it replays its log); True if it did."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            r = Resp("127.0.0.1", port, timeout=2)
            try:
                info = r.call("INFO")
            finally:
                r.close()
            text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
            if "leader_ready:1" in text or "leader_ready" not in text:
                return True
        except (OSError, RespError, ConnectionError):
            pass
        time.sleep(0.05)
    return False
