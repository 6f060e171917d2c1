#!/usr/bin/env bash
# One process per data directory (issue 18, item 1).  Two fenced on one
# --data-dir both led and handed out tokens 1, 2, 3 to different locks, and
# afterwards neither started again.  Now every daemon that owns a directory
# (fenced, fence-store, fence-proxy) holds an flock on a lock file in it for
# its whole life: a second start exits non-zero at once, naming the
# directory and the holder's PID, and the first one and its data are left
# as they were.  Free ports, temp dirs, stop by PID.
. "$(dirname "$0")/../lib/lib.sh"
command -v redis-cli >/dev/null || skip_all "redis-cli is not installed"
[ -x "$FENCED" ] || skip_all "$FENCED is not built"
FENCE_PROXY=${FENCE_PROXY:-$BUILD/fence-proxy}

# ready PORT: wait until the fenced on PORT serves writes.
ready() {
    local i
    for i in $(seq 1 400); do
        redis-cli -p "$1" INFO 2>/dev/null | grep -q '^leader_ready:1' && return 0
        sleep 0.05
    done
    return 1
}

# second_start NAME DIR CMD...: run CMD in the foreground (it must exit by
# itself); sets rc and out.
second_start() {
    local name=$1 dir=$2; shift 2
    out=$(timeout 20 "$@" 2>&1)
    rc=$?
    echo "$out" >"$TEST_TMP/$name.second.log"
}

# ---- fenced ------------------------------------------------------------------
dir=$TEST_TMP/fenced
p1=$(free_port)
spawn first "$FENCED" --port "$p1" --data-dir "$dir"
check "the first fenced starts" ready "$p1"
R() { redis-cli -p "$p1" "$@"; }
R LEASE.GRANT 60000 >/dev/null
check_eq "the first fenced grants token 1" "1" "$(R LOCK a 1)"
check_eq "... and token 2" "2" "$(R ACQUIRE b 60000 | head -1)"

p2=$(free_port)
second_start fenced2 "$dir" "$FENCED" --port "$p2" --data-dir "$dir"
check "a second fenced on the same data-dir exits non-zero" test "$rc" -ne 0 -a "$rc" -ne 124
check "... at once, not by the timeout" test "$rc" -ne 124
case $out in *"$dir"*) ok "... naming the data directory" ;;
*) echo "# $out"; not_ok "... naming the data directory" ;; esac
case $out in *"pid $(pid_of first)"*) ok "... and the holder's PID" ;;
*) echo "# $out"; not_ok "... and the holder's PID" ;; esac
check "... and it never listened on its port" \
    bash -c "! (exec 3<>/dev/tcp/127.0.0.1/$p2) 2>/dev/null"
check_eq "the first fenced still serves: token 3 next" "3" "$(R ACQUIRE c 60000 | head -1)"
check_eq "... with its state untouched" "1" "$(R LOCK.INFO a | head -1)"

# A stale PID in the file (the holder died) does not stop a new start: the
# kernel dropped the flock with the process.
stop first KILL
spawn third "$FENCED" --port "$p1" --data-dir "$dir"
check "after kill -9 of the holder, fenced starts on the directory again" ready "$p1"
tok=$(R ACQUIRE d 60000 | head -1)
check "... and the token counter went on (no token repeats): $tok > 3" test "$tok" -gt 3
check_eq "the lock file names the new holder" "$(pid_of third)" "$(cat "$dir/fenced.lock")"
stop third

# A lock file fenced cannot open is a clear error too (not a silent run).
ro=$TEST_TMP/ro
mkdir -p "$ro"
: >"$ro/fenced.lock"
chmod 000 "$ro/fenced.lock"
if [ "$(id -u)" -ne 0 ]; then
    second_start ro "$ro" "$FENCED" --port "$(free_port)" --data-dir "$ro"
    check "an unopenable lock file: exit non-zero" test "$rc" -ne 0
fi

# ---- fence-store -------------------------------------------------------------
if [ -x "$FENCE_STORE" ]; then
    sdir=$TEST_TMP/store
    sp=$(free_port)
    spawn store1 "$FENCE_STORE" --port "$sp" --data-dir "$sdir"
    check "the first fence-store starts" wait_port "$sp"
    S() { redis-cli -p "$sp" "$@"; }
    check_eq "fence-store takes a write" "OK" "$(S FSET f 5 k v)"
    second_start store2 "$sdir" "$FENCE_STORE" --port "$(free_port)" --data-dir "$sdir"
    check "a second fence-store on the same data-dir exits non-zero at once" \
        test "$rc" -ne 0 -a "$rc" -ne 124
    case $out in *"$sdir"*"pid $(pid_of store1)"*) ok "... naming the directory and the holder's PID" ;;
    *) echo "# $out"; not_ok "... naming the directory and the holder's PID" ;; esac
    check_eq "the first fence-store still has the write" "v" "$(S FGET k)"
    check_eq "... and still refuses the stale token" "STALE" "$(S FSET f 4 k w | cut -d' ' -f1)"
    stop store1
fi

# ---- fence-proxy -------------------------------------------------------------
if [ -x "$FENCE_PROXY" ]; then
    pdir=$TEST_TMP/proxy
    pp=$(free_port)
    up=$(free_port)
    spawn proxy1 "$FENCE_PROXY" --listen "127.0.0.1:$pp" --upstream "http://127.0.0.1:$up" \
        --data-dir "$pdir"
    check "the first fence-proxy starts" wait_port "$pp"
    second_start proxy2 "$pdir" "$FENCE_PROXY" --listen "127.0.0.1:$(free_port)" \
        --upstream "http://127.0.0.1:$up" --data-dir "$pdir"
    check "a second fence-proxy on the same data-dir exits non-zero at once" \
        test "$rc" -ne 0 -a "$rc" -ne 124
    case $out in *"$pdir"*"pid $(pid_of proxy1)"*) ok "... naming the directory and the holder's PID" ;;
    *) echo "# $out"; not_ok "... naming the directory and the holder's PID" ;; esac
    check "the first fence-proxy still accepts" wait_port "$pp" 2
    stop proxy1
fi

finish
