"""Shared pieces of the torture harness and the demo (standard library only).

- History files: JSON lines, one event per line, written by the workers
  (src/torture/worker.c) and by the orchestrator (nemesis events).  Every
  event has "t" (CLOCK_MONOTONIC in ns, shared by all processes of the
  machine), "proc" (w<id> for workers, "nemesis", "final"), "op", "phase"
  and "n" (the op's sequence number within its process), plus op fields.
- A minimal blocking RESP2 client (enough for PING, FGET, INFO ...).
- Process helpers: free ports, waiting for a port.
- tests/lib/fencetest.py (the Python tests' helpers) reuses the RESP
  encoder and the port helpers from here, so keep them standard-library only.
"""

import json
import os
import socket
import threading
import time


class HistoryError(Exception):
    """A history file that cannot be read: the message names file and line."""


def mono_ns():
    """Returns CLOCK_MONOTONIC in nanoseconds, the history's time base."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


# Fields that must be integers when present, and the phases an event may have.
_INT_FIELDS = ("t", "n", "token", "lease", "ttl", "highest", "read", "released", "ms", "term", "hold_max",
               "slack_ms", "liveness_ms", "inflight_ms", "seed", "workers", "nodes")
_PHASES = ("invoke", "ok", "fail", "info", "start", "end")


def _validate(ev):
    """Raises ValueError when an event's fields have the wrong types, so the
    checker only ever sees well-formed events."""
    for f in _INT_FIELDS:
        if f in ev and (not isinstance(ev[f], int) or isinstance(ev[f], bool) or ev[f] < 0):
            raise ValueError("field %r is not a non-negative integer" % f)
    for f in ("proc", "op", "phase"):
        if not isinstance(ev[f], str):
            raise ValueError("field %r is not a string" % f)
    if ev["phase"] not in _PHASES:
        raise ValueError("unknown phase %r" % ev["phase"])
    for f in ("key", "fence", "lock", "target", "kind", "err"):
        if f in ev and ev[f] is not None and not isinstance(ev[f], str):
            raise ValueError("field %r is not a string" % f)
    if ev["op"] == "write" and "value" in ev and not isinstance(ev["value"], (int, str)):
        raise ValueError("write value is neither an integer nor a string")


def read_history(paths):
    """Reads and merges history files into one list sorted by time.

    A line that is not a JSON object is an error, except for the very last
    line of a file when it is incomplete (its writer was killed mid-line);
    such a line is dropped.  Events keep their file order for equal times.
    """
    events = []
    seq = 0
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().split("\n")
        except OSError as e:
            raise HistoryError("%s: cannot read: %s" % (path, e.strerror))
        last = len(lines) - 1
        while last >= 0 and lines[last] == "":
            last -= 1
        for i, line in enumerate(lines):
            if line.strip() == "":
                continue
            try:
                ev = json.loads(line)
                if not isinstance(ev, dict):
                    raise ValueError("not an object")
                for field in ("t", "proc", "op", "phase"):
                    if field not in ev:
                        raise ValueError("missing field %r" % field)
                _validate(ev)
            except ValueError as e:
                if i == last and not line.endswith("}"):
                    continue  # torn last line of a killed writer
                raise HistoryError("%s:%d: bad history line (%s): %.120s" % (path, i + 1, e, line))
            ev["_seq"] = seq
            seq += 1
            events.append(ev)
    events.sort(key=lambda e: (e["t"], e["_seq"]))
    return events


class HistoryWriter:
    """Appends events for one process (e.g. the nemesis) to a history file,
    one flushed line per event; safe to use from several threads."""

    def __init__(self, path, proc):
        self.f = open(path, "a", encoding="utf-8")
        self.proc = proc
        self.n = 0
        self.mu = threading.Lock()

    def event(self, op, phase, n=None, **fields):
        """Writes one event stamped now; returns its sequence number."""
        with self.mu:
            if n is None:
                self.n += 1
                n = self.n
            ev = {"t": mono_ns(), "proc": self.proc, "op": op, "phase": phase, "n": n}
            ev.update(fields)
            self.f.write(json.dumps(ev, separators=(",", ":")) + "\n")
            self.f.flush()
            return n

    def close(self):
        self.f.close()


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


def tool_dir():
    """Returns the directory of the running script (build/ when installed),
    where fenced, fence-store and the torture binaries are looked up."""
    return os.path.dirname(os.path.realpath(__file__))


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
