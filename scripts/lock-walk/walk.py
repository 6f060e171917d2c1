#!/usr/bin/env python3
"""Run one LOCK through an instrumented fenced and print the files it enters.

Used by scripts/lock-walk.sh, which builds the fenced (gcc
-finstrument-functions) and the hook (hook.c) first:

    walk.py FENCED HOOK.so [--all]

fenced starts on a free port of 127.0.0.1 in a temporary directory (one
node), a lease is granted, then `LOCK walk LEASE` runs, then a PING, and
fenced is stopped by its PID.  The trace of the loop thread is resolved
with addr2line.  The walk starts at the read callback that parses the
LOCK and ends when its reply is written.  A row is one entry into a room
(a file; src/core and src/proto count as one room each), with the
functions entered there in a row; calls from one room into the next that
follow each other are one entry.  By default it shows the
request's path: a loop turn that does nothing for the LOCK (an idle loop
check) is left out, and so is what a turn does after its part for the
LOCK; so are the side rooms every request visits and all they call (the
base helpers, the ACL gate and Redis-client commands of src/daemon and
src/auth, metrics, the guard), the questions the leader's step asks its
shell (is_leader, now_ms) and the services called on the way (the
core's allocator, RESP's number parser and encoders).  --all shows every file entry but the base helpers.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

SIDE = ('src/base/', 'src/daemon/', 'src/auth/', 'src/ops/', 'src/server/acl_hook.c',
        'src/server/compat_hook.c', 'src/server/metrics.c', 'src/server/owners.c',
        'src/server/commands_table.c', 'src/net/conn_guard.c')
QUERIES = {'op_is_leader', 'op_now_ms', 'fence_fsm_now', 'fence__node_is_leader',
           'fence__leader_results', 'fence__leader_ready', 'fence__leader_timer_take',
           # services called on the way, not steps of it: the core's
           # injected allocator, the RESP number parser and encoders
           'core_alloc', 'core_free'}
# A loop turn is on the LOCK's path when it runs one of these.
CARRIERS = {'fence__cmd_dispatch', 'op_propose', 'fsm_apply', 'batch_applied', 'write_out'}


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


def command(sock, *args):
    """Send one RESP command, return its one-line reply."""
    req = b'*%d\r\n' % len(args) + b''.join(b'$%d\r\n%s\r\n' % (len(a), a) for a in args)
    sock.sendall(req)
    reply = b''
    while not reply.endswith(b'\r\n'):
        chunk = sock.recv(4096)
        if not chunk:
            raise SystemExit('lock-walk: fenced closed the connection')
        reply += chunk
    return reply


def run(fenced, hook, trace):
    """Start fenced under the hook, run the LOCK, stop it by PID."""
    port = free_port()
    data = tempfile.mkdtemp(prefix='fence-walk.')
    env = dict(os.environ, FENCE_WALK_OUT=trace, LD_PRELOAD=hook)
    log = open(os.path.join(data, 'fenced.log'), 'w')
    proc = subprocess.Popen([fenced, '--port', str(port), '--data-dir', data], env=env,
                            stdout=subprocess.DEVNULL, stderr=log)
    try:
        sock = None
        deadline = time.monotonic() + 30
        while sock is None:
            try:
                sock = socket.create_connection(('127.0.0.1', port), timeout=10)
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit('lock-walk: fenced did not start (log: %s)' % log.name)
                time.sleep(0.02)
        while True:  # until the leader serves writes (LEADER_START applied)
            reply = command(sock, b'LEASE.GRANT', b'10000')
            if reply.startswith(b':'):
                break
            if time.monotonic() > deadline:
                raise SystemExit('lock-walk: no lease: %r' % reply)
            time.sleep(0.02)
        command(sock, b'PING', b'before')
        reply = command(sock, b'LOCK', b'walk', reply[1:].strip())
        if not reply.startswith(b':'):
            raise SystemExit('lock-walk: LOCK answered %r' % reply)
        command(sock, b'PING', b'after')
        sock.close()
    finally:
        proc.terminate()
        proc.wait()


def resolve(fenced, trace):
    """The trace as (kind, function, file) events of the loop thread."""
    base = None
    raw = []
    real = os.path.realpath(fenced)
    with open(trace) as f:
        for line in f:
            if line.startswith('M '):
                fields = line.split()
                if (base is None and len(fields) >= 7 and fields[3] == '00000000'
                        and os.path.realpath(fields[6]) == real):
                    base = int(fields[1].split('-')[0], 16)
            else:
                kind, addr = line.split()
                raw.append((kind, int(addr, 16)))
    if base is None:
        raise SystemExit('lock-walk: %s is not in the trace\'s memory map' % fenced)
    addrs = sorted({a for _, a in raw})
    out = subprocess.run(['addr2line', '-f', '-e', fenced],
                         input='\n'.join(hex(a - base) for a in addrs),
                         capture_output=True, text=True, check=True).stdout.split('\n')
    names = {}
    for i, a in enumerate(addrs):
        loc = out[2 * i + 1].split(':')[0]
        k = loc.find('/src/')
        names[a] = (out[2 * i], loc[k + 1:] if k >= 0 else loc)
    return [(kind,) + names[a] for kind, a in raw]


def room_of(f):
    """The room a file is in: src/core and src/proto are one each (libraries
    the daemon calls into, whatever file of theirs answers)."""
    if f is None:
        return None
    for lib in ('src/core/', 'src/proto/'):
        if f.startswith(lib):
            return lib.rstrip('/')
    return f


def walk(events, show_all):
    """The file entries of the LOCK's walk: (file, function) rows."""
    disp = [i for i, (k, fn, _) in enumerate(events) if k == 'E' and fn == 'fence__cmd_dispatch']
    if len(disp) < 2:
        raise SystemExit('lock-walk: the LOCK was not found in the trace')
    lock_at = disp[-2]  # LEASE.GRANT..., PING, LOCK, PING
    # Cut the trace into loop turns (each call from libuv into fenced).
    turns, depth, cur = [], 0, None
    for i, (k, fn, f) in enumerate(events):
        if k == 'E':
            depth += 1
            if depth == 2:  # main() is depth 1: libuv's callbacks are below it
                cur = []
                turns.append((i, cur))
            if cur is not None:
                cur.append((depth, fn, f))
        else:
            depth -= 1
    rows, replied, started = [], False, False
    for start, calls in turns:
        if start > lock_at and not started:
            break
        fns = {fn for _, fn, _ in calls}
        if not started:
            if not any(fn == 'fence__cmd_dispatch' for fn in fns) or \
               start < max(s for s, _ in turns if s <= lock_at):
                continue
            started = True
        elif not show_all and not (fns & CARRIERS):
            continue
        if not show_all:
            # The turn's part for the LOCK ends with its last carrier's call.
            last = max(j for j, (_, fn, _) in enumerate(calls) if fn in CARRIERS)
            end = next((j for j in range(last + 1, len(calls)) if calls[j][0] <= calls[last][0]),
                       len(calls))
            calls = calls[:end]
        stack = []
        for d, fn, f in calls:
            del stack[d - 2:]
            caller = next((g for g, _ in reversed(stack) if not g.startswith('src/base/')), None)
            hidden = any(h for _, h in stack)
            skip = f.startswith('src/base/') or (not show_all and (
                hidden or f.startswith(SIDE) or fn in QUERIES or
                (f.startswith('src/proto/') and fn != 'fence_resp_parse')))
            stack.append((f, skip and not f.startswith('src/base/')))
            if skip:
                continue
            room = room_of(f)
            if room != room_of(caller) and not (rows and rows[-1][0] == room):
                rows.append((room, fn))
            elif rows and rows[-1][0] == room and room != room_of(caller) and fn not in rows[-1][1]:
                rows[-1] = (room, rows[-1][1] + ', ' + fn)
            if fn == 'fence__net_slot_reply':
                replied = True
            if replied and fn == 'write_out':
                return rows
    return rows


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    fenced, hook = sys.argv[1], os.path.abspath(sys.argv[2])
    show_all = '--all' in sys.argv[3:]
    trace = tempfile.mktemp(prefix='fence-walk.', suffix='.trace')
    try:
        run(fenced, hook, trace)
        rows = walk(resolve(fenced, trace), show_all)
    finally:
        if os.path.exists(trace):
            os.unlink(trace)
    print('# a LOCK granted at once, through one fenced (%s)' % ('every file entry but src/base'
                                                              if show_all else 'its path'))
    counts = {}
    for n, (f, fn) in enumerate(rows, 1):
        counts[f] = counts.get(f, 0) + 1
        print('%3d  %-26s %s' % (n, f, fn))
    again = ['%s %dx' % (f, c) for f, c in sorted(counts.items()) if c > 1]
    print('# %d entries, %d rooms; entered more than once: %s'
          % (len(rows), len(counts), ', '.join(again) if again else 'none'))


if __name__ == '__main__':
    main()
