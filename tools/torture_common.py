"""Shared pieces of the torture harness and the demo (standard library only).

- History files: JSON lines, one event per line, written by the workers
  (src/torture/worker.c) and by the orchestrator (nemesis events).  Every
  event has "t" (CLOCK_MONOTONIC in ns, shared by all processes of the
  machine), "proc" (w<id> for workers, "nemesis", "final"), "op", "phase"
  and "n" (the op's sequence number within its process), plus op fields.
- The RESP2 client and the port helpers (Resp, RespError, encode_command,
  free_port, wait_port, wait_fenced_ready) live in fenceproto.py beside this
  file (the tests use it too); they are re-exported here for the tools.
"""

import json
import os
import sys
import threading
import time

# fenceproto.py sits beside this file, in tools/ and where the tools are
# installed (build/<variant>/, TOOLDIR).
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
from fenceproto import (Resp, RespError, encode_command, free_port, wait_fenced_ready,  # noqa: E402,F401
                        wait_port)


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


def tool_dir():
    """Returns the directory of the running script (build/ when installed),
    where fenced, fence-store and the torture binaries are looked up."""
    return os.path.dirname(os.path.realpath(__file__))


