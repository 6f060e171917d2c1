#!/usr/bin/env bash
# fencectl's exit statuses and waits (issue 13):
# - a refused connection fails at once with 69, not after --timeout;
# - a server that answers TRYAGAIN (no leader, no quorum) until --timeout
#   gives 69 ("unreachable"), for a request and for `lock`;
# - while `fencectl lock` / `acquire` waits for a held lock it says
#   "waiting for lock X held by lease L" when stderr is a terminal, and
#   nothing when it is not.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli not installed (redis-tools)"

ms_of() { local s=$1; echo $(( ($(date +%s%N) - s) / 1000000 )); }

# Refused: nothing listens on DEAD.
DEAD=$(free_port)
start=$(date +%s%N)
"$FENCECTL" --server "127.0.0.1:$DEAD" --timeout 5000 lease grant 1000 2>"$TEST_TMP/err"
rc=$?; took=$(ms_of "$start")
check_eq "refused: lease grant exits 69" 69 "$rc"
check "refused: it fails at once (${took} ms, --timeout 5000)" test "$took" -lt 1500
check "refused: the message says so" grep -q 'Connection refused' "$TEST_TMP/err"
start=$(date +%s%N)
"$FENCECTL" --server "127.0.0.1:$DEAD" --timeout 5000 lock x -- true 2>/dev/null
rc=$?; took=$(ms_of "$start")
check_eq "refused: lock exits 69" 69 "$rc"
check "refused: lock fails at once (${took} ms)" test "$took" -lt 1500

# TRYAGAIN: a scripted server that answers it to everything.
TP=$(free_port)
spawn tryagain "$PY" -c '
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
def serve(c):
    f = c.makefile("rb")
    try:
        while True:
            line = f.readline()
            if not line: return
            for _ in range(int(line[1:])):
                n = int(f.readline()[1:]); f.read(n + 2)
            c.sendall(b"-TRYAGAIN no leader is elected yet; retry shortly\r\n")
    except (OSError, ValueError):
        return
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
' "$TP"
wait_port "$TP" || { not_ok "the TRYAGAIN server starts"; finish; }
start=$(date +%s%N)
"$FENCECTL" --server "127.0.0.1:$TP" --timeout 600 lease grant 1000 2>"$TEST_TMP/err"
rc=$?; took=$(ms_of "$start")
check_eq "TRYAGAIN: lease grant exits 69 (unreachable)" 69 "$rc"
check "TRYAGAIN: after about --timeout (${took} ms)" test "$took" -ge 500 -a "$took" -lt 3000
check "TRYAGAIN: the message names it" grep -q 'TRYAGAIN' "$TEST_TMP/err"
"$FENCECTL" --server "127.0.0.1:$TP" --timeout 600 lock x --wait 100 -- true 2>/dev/null
check_eq "TRYAGAIN: lock exits 69" 69 "$?"
"$FENCECTL" --server "127.0.0.1:$TP" --timeout 600 info x 2>/dev/null
check_eq "TRYAGAIN: info exits 69" 69 "$?"

# The waiting message, on a terminal only.
FP=$(free_port)
spawn fenced "$FENCED" --port "$FP" --data-dir "$TEST_TMP/fenced"
wait_fenced "$FP" || { cat "$TEST_TMP/fenced.log"; not_ok "fenced starts"; finish; }
for _ in $(seq 1 100); do
    redis-cli -p "$FP" INFO 2>/dev/null | grep -q '^leader_ready:1' && break
    sleep 0.05
done
held=$(redis-cli -p "$FP" ACQUIRE busy 1500 | tail -n 1)   # [token, lease]: the lease
# stderr on a pseudo-terminal (stdin/stdout stay pipes).
out=$("$PY" - "$FENCECTL" "$FP" <<'PYEOF'
import os, pty, subprocess, sys
master, slave = pty.openpty()
p = subprocess.Popen([sys.argv[1], "--server", "127.0.0.1:" + sys.argv[2], "lock", "busy",
                      "--wait", "5000", "--", "sh", "-c", "echo token=$FENCE_TOKEN"],
                     stderr=slave, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
os.close(slave)
err = b""
while True:
    try:
        chunk = os.read(master, 4096)
    except OSError:
        break
    if not chunk:
        break
    err += chunk
out = p.communicate()[0]
print(err.decode().strip())
print(out.decode().strip())
print("rc=%d" % p.returncode)
PYEOF
)
check "tty: 'waiting for lock busy held by lease $held'" \
    grep -q "waiting for lock busy held by lease $held (up to 5000 ms)" <<<"$out"
check "tty: the lock is granted once the holder's lease expires" grep -q '^token=[0-9]' <<<"$out"
check "tty: exit 0" grep -q '^rc=0$' <<<"$out"
[ $_failures -eq 0 ] || echo "$out" | sed 's/^/# /'
redis-cli -p "$FP" ACQUIRE busy 1000 >/dev/null
"$FENCECTL" --server "127.0.0.1:$FP" lock busy --wait 3000 -- true 2>"$TEST_TMP/err"
check_eq "no tty: lock still succeeds" 0 "$?"
check "no tty: no waiting message" test ! -s "$TEST_TMP/err"
redis-cli -p "$FP" ACQUIRE busy 1000 >/dev/null
out=$("$PY" -c '
import os, pty, subprocess, sys
m, s = pty.openpty()
r = subprocess.run(sys.argv[1:], stderr=s, stdout=subprocess.PIPE)
os.close(s)
print(os.read(m, 4096).decode(errors="replace"))
' "$FENCECTL" --server "127.0.0.1:$FP" acquire busy --wait 3000)
check "tty: acquire says it is waiting too" grep -q 'waiting for lock busy held by lease' <<<"$out"
finish
