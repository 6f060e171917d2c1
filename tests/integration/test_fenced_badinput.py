#!/usr/bin/python3
"""fenced against bad input and bad clients, over raw sockets.

Malformed protocol (error reply, then the connection is closed), oversized
bulk, too many arguments, overlong inline line, binary garbage, a request
cut off mid-way, unknown command and unknown lease (connection stays),
max-clients (LIMIT), a tiny max-pipeline (replies still complete and in
order), a slow reader (disconnected once max-obuf is exceeded), a client
that disconnects while queued (its wait is cancelled through the log), and
the server answering PING after all of it.
"""
import os
import random
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_fenced_lib import Fenced, Tap  # noqa: E402
from fencetest import info_field, wait_for  # noqa: E402

t = Tap()
srv = Fenced("bad", args=["--max-clients", "8", "--max-obuf", "65536"]).start()


def conn():
    """A raw socket to the server."""
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    return s


def field(name):
    """An INFO field of the server as an int (one raw INFO, one command)."""
    return int(info_field(srv.port, name))


def start_count():
    """Starts counting the commands the server processes besides the INFOs
    that count them; returns a function that waits until n were."""
    base = field("commands_processed")
    polls = [0]

    def wait(n):
        def done():
            polls[0] += 1  # this INFO counts itself
            return field("commands_processed") - base - polls[0] >= n
        return wait_for(done)
    return wait


def barrier():
    """A write through the log: once it is answered, every request the
    server had taken before it (a LOCK, a closed connection's cancel) is
    applied."""
    c.execute_command("LEASE.GRANT", 1000)


def read_all_until_close(s, limit=1 << 20):
    """Read until EOF (or limit bytes); returns (bytes, closed)."""
    buf = b""
    try:
        while len(buf) < limit:
            d = s.recv(65536)
            if not d:
                return buf, True
            buf += d
    except socket.timeout:
        return buf, False
    except ConnectionResetError:
        return buf, True
    return buf, False


def read_reply_line(s):
    """Read one CRLF-terminated line."""
    buf = b""
    while not buf.endswith(b"\r\n"):
        d = s.recv(1)
        if not d:
            break
        buf += d
    return buf


def proto_error_case(what, payload, expect=b"-ERR Protocol error"):
    """Send payload; expect an error reply starting with expect, then EOF."""
    s = conn()
    try:
        s.sendall(payload)
    except OSError:
        pass
    data, closed = read_all_until_close(s)
    s.close()
    t.check(data.startswith(expect) and closed, what + ": error reply, then closed",
            repr(data[:200]) + " closed=%s" % closed)


proto_error_case("bad multibulk length", b"*abc\r\n")
proto_error_case("bad bulk length", b"*1\r\n$x\r\n")
proto_error_case("missing CRLF after bulk", b"*1\r\n$4\r\nPINGxx")
proto_error_case("oversized bulk (over --max-bulk)", b"*2\r\n$4\r\nPING\r\n$70000\r\n")
proto_error_case("too many arguments", b"*81\r\n" + b"$1\r\na\r\n" * 81)  # FENCE_ARGS_MAX + 1
proto_error_case("overlong inline line", b"P" * (70 * 1024))
proto_error_case("unbalanced quotes", b'PING "abc\r\n')
# Garbage: whatever the parser thinks of it, the server must survive.
rnd = random.Random(1234)
for i in range(20):
    s = conn()
    try:
        s.sendall(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 4096))))
        s.shutdown(socket.SHUT_WR)
        read_all_until_close(s)
    except OSError:
        pass
    s.close()
s = conn()
s.sendall(b"*2\r\n$4\r\nPI")  # cut off
s.close()

c = srv.client()
c.set_response_callback("PING", lambda r, **kw: r)
t.eq("PONG", c.execute_command("PING"), "server answers after protocol errors and garbage")

# Errors that keep the connection open.
s = conn()
s.sendall(b"*1\r\n$3\r\nFOO\r\n*2\r\n$15\r\nLEASE.KEEPALIVE\r\n$3\r\n999\r\n*1\r\n$4\r\nPING\r\n")
lines = [read_reply_line(s) for _ in range(3)]
t.eq([b"-ERR unknown command 'FOO'\r\n",
      b"-NOLEASE the lease is unknown, expired or revoked\r\n", b"+PONG\r\n"], lines,
     "unknown command and unknown lease: error replies, connection stays open")
s.close()

# max-clients: 8 allowed; the 9th gets LIMIT and is closed.
held = [conn() for _ in range(7)]  # plus redis-py's c = 8
for h in held:
    h.sendall(b"PING\r\n")
    read_reply_line(h)
s = conn()
data, closed = read_all_until_close(s)
t.check(data.startswith(b"-LIMIT max number of clients reached") and closed,
        "connection over --max-clients: LIMIT, then closed", data)
s.close()
for h in held:
    h.close()
# The slots are free again: c and this INFO's own connection remain.
wait_for(lambda: field("connections") <= 2)

# Slow reader: ask for a lot of output and never read it.
s = conn()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
big = b"x" * 60000
req = b"*2\r\n$4\r\nPING\r\n$60000\r\n" + big + b"\r\n"


def flood():
    """Send PINGs with big payloads until the server hangs up."""
    try:
        for _ in range(2000):
            s.sendall(req)
    except OSError:
        pass


th = threading.Thread(target=flood)
th.start()
closed_slow = bool(wait_for(lambda: int(srv.info()["slow_readers_closed"]) >= 1))
s.close()
th.join(20)
t.check(closed_slow, "slow reader disconnected once --max-obuf is exceeded")
t.eq("PONG", c.execute_command("PING"), "server answers after the slow reader")

# A client disconnecting while queued: its wait is cancelled through the log.
owner = c.execute_command("LEASE.GRANT", 30000)
c.execute_command("LOCK", "q", owner)
ws = conn()
wl = c.execute_command("LEASE.GRANT", 30000)
ws.sendall(("LOCK q %d WAIT 60000\r\n" % wl).encode())
wait_for(lambda: c.execute_command("LOCK.INFO", "q")[3] == 1)
t.eq(1, c.execute_command("LOCK.INFO", "q")[3], "queued waiter visible in LOCK.INFO")
ws.close()
wait_for(lambda: c.execute_command("LOCK.INFO", "q")[3] == 0)
t.eq(0, c.execute_command("LOCK.INFO", "q")[3], "disconnected waiter's wait is cancelled")
t.check(c.execute_command("UNLOCK", "q", c.execute_command("LOCK.INFO", "q")[0]) == 1 and
        c.execute_command("LOCK.INFO", "q") is None,
        "the lock is free after the holder unlocks (nobody was handed it)")

# The same lease queued twice for one lock shares one wait (the core answers
# the second LOCK with the existing wait): both requests get the outcome,
# and the wait is cancelled only when the last of them goes away.
owner = c.execute_command("LEASE.GRANT", 30000)
otok = c.execute_command("LOCK", "dup", owner)
dl = c.execute_command("LEASE.GRANT", 30000)
ds = conn()
processed = start_count()
ds.sendall(("LOCK dup %d WAIT 60000\r\nLOCK dup %d WAIT 60000\r\n" % (dl, dl)).encode())
processed(2)  # both LOCKs reached the server
barrier()  # and are through the log: the wait is queued
ds.close()
wait_for(lambda: c.execute_command("LOCK.INFO", "dup")[3] == 0)
t.eq(0, c.execute_command("LOCK.INFO", "dup")[3],
     "two pipelined waits of one lease, connection closed: server survives, wait cancelled")
a, b = conn(), conn()
a.sendall(("LOCK dup %d WAIT 20000\r\n" % dl).encode())
wait_for(lambda: c.execute_command("LOCK.INFO", "dup")[3] == 1)
processed = start_count()
b.sendall(("LOCK dup %d WAIT 20000\r\n" % dl).encode())
processed(1)  # b's LOCK reached the server
barrier()  # and joined the wait
conns = field("connections")
a.close()
wait_for(lambda: field("connections") < conns)  # the server saw a go
barrier()  # whatever the close proposed is applied: a cancel would show
t.eq(1, c.execute_command("LOCK.INFO", "dup")[3],
     "one of two connections sharing a wait leaves: the wait stays for the other")
c.execute_command("UNLOCK", "dup", otok)
line = read_reply_line(b)
t.check(line.startswith(b":") and int(line[1:]) > otok,
        "the remaining connection gets the lock", line)
b.close()
c.close()
t.eq(0, srv.stop(), "clean exit after all the abuse")

# A tiny pipeline depth: reading pauses and resumes, replies stay in order.
srv2 = Fenced("pipe", args=["--max-pipeline", "3", "--max-obuf", "4096"]).start()
s = socket.create_connection(("127.0.0.1", srv2.port), timeout=20)
n = 500
s.sendall(b"".join(b"LEASE.GRANT 10000\r\nPING\r\n" for _ in range(n)))
data = b""
while data.count(b"\r\n") < 2 * n:
    d = s.recv(65536)
    if not d:
        break
    data += d
lines = data.split(b"\r\n")[:2 * n]
ids = [int(x[1:]) for x in lines[0::2]]
t.check(ids == list(range(1, n + 1)) and all(x == b"+PONG" for x in lines[1::2]),
        "--max-pipeline 3: %d pipelined requests all answered, in order" % (2 * n),
        lines[:6])
s.close()
# A reply larger than --max-obuf to a client that reads is not a slow reader.
c2 = srv2.client(decode_responses=False)
c2.set_response_callback("PING", lambda r, **kw: r)
t.eq(b"y" * 60000, c2.execute_command("PING", b"y" * 60000),
     "a 60 KB reply with --max-obuf 4096 reaches a client that reads")
t.eq("0", srv2.info()["slow_readers_closed"], "...and nobody was disconnected")
c2.close()
srv2.stop()
t.finish()
