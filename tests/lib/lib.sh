# Helpers for the shell tests; source it: . "$(dirname "$0")/../lib/lib.sh"
#
# - ok/not_ok/check print TAP-like lines for tests/run.sh and count failures;
#   finish prints a summary and exits non-zero if anything failed.
# - free_port finds a free TCP port on 127.0.0.1.
# - spawn NAME CMD... starts a process in the background, remembers its PID;
#   every process spawned is killed (by PID) when the script exits.
# - TEST_TMP is a temporary directory removed at exit (kept if KEEP_TMP=1).
# - Waits on conditions, never on the clock: wait_port, wait_for, wait_log,
#   wait_exit.  Their time limits only bound a hang (generous: 30 s by
#   default); they return non-zero then and the caller's check fails.
set -u
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build/release}
FENCED=${FENCED:-$BUILD/fenced}
FENCE_STORE=${FENCE_STORE:-$BUILD/fence-store}
FENCECTL=${FENCECTL:-$BUILD/fencectl}
PY=/usr/bin/python3
TEST_TMP=$(mktemp -d /tmp/fence-test.XXXXXX)
_failures=0
_passes=0
declare -A _pids=()

ok()     { _passes=$((_passes + 1)); echo "ok - $*"; }
not_ok() { _failures=$((_failures + 1)); echo "not ok - $*"; }
# check "description" command...: ok if the command succeeds.
check()  { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
# check_eq "description" expected actual
check_eq() {
    if [ "$2" == "$3" ]; then ok "$1"; else echo "#   expected: [$2]"; echo "#   actual:   [$3]"; not_ok "$1"; fi
}
finish() { echo "# $_passes passed, $_failures failed in $(basename "$0")"; [ "$_failures" -eq 0 ]; exit $?; }
skip_all() { echo "# skipped: $*"; exit 77; }

# free_port: a TCP port free on 127.0.0.1 now, never one this script was
# already given (the kernel may return the same ephemeral port twice in a
# row).  Given ports are kept in a file: callers use $(free_port), a subshell.
free_port() {
    local p _
    for _ in $(seq 1 100); do
        p=$("$PY" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
        grep -qx "$p" "$TEST_TMP/.ports_given" 2>/dev/null && continue
        echo "$p" >>"$TEST_TMP/.ports_given"
        echo "$p"
        return 0
    done
    return 1
}

# spawn NAME CMD...: run CMD in the background with output in $TEST_TMP/NAME.log.
spawn() {
    local name=$1; shift
    "$@" >>"$TEST_TMP/$name.log" 2>&1 &
    _pids[$name]=$!
}
pid_of() { echo "${_pids[$1]}"; }
# stop NAME [SIGNAL]: signal the process (default TERM) and wait for it.
stop() {
    local name=$1 sig=${2:-TERM} pid=${_pids[$1]:-}
    [ -n "$pid" ] || return 0
    kill -s "$sig" "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    unset "_pids[$name]"
    return 0
}
_cleanup() {
    local n
    for n in "${!_pids[@]}"; do kill -9 "${_pids[$n]}" 2>/dev/null; done
    wait 2>/dev/null
    [ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$TEST_TMP"
}
trap _cleanup EXIT

# wait_port PORT [SECONDS]: wait until something accepts on 127.0.0.1:PORT.
wait_port() {
    local port=$1 secs=${2:-10} i
    for i in $(seq 1 $((secs * 20))); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

# wait_for SECONDS CMD...: run CMD every 0.05 s until it succeeds; 1 if it
# has not after SECONDS (a bound on a hang, not a delay; giving up is noted
# on stderr, so that a wait that costs its whole bound shows in the log).
wait_for() {
    local secs=$1; shift
    local end=$((SECONDS + secs + 1))
    while :; do
        "$@" && return 0
        [ "$SECONDS" -lt "$end" ] || { echo "# wait_for: gave up after ${secs} s: $*" >&2; return 1; }
        sleep 0.05
    done
}

# wait_log FILE REGEX [SECONDS] [COUNT]: wait until FILE has COUNT (default
# 1) lines matching the extended REGEX.
wait_log() {
    local file=$1 rx=$2 secs=${3:-30} count=${4:-1}
    _log_has() { [ "$(grep -Ec -- "$2" "$1" 2>/dev/null)" -ge "$3" ]; }
    wait_for "$secs" _log_has "$file" "$rx" "$count"
}

# wait_exit PID [SECONDS]: wait until process PID has exited.
wait_exit() {
    local pid=$1 secs=${2:-30}
    _gone() { ! kill -0 "$1" 2>/dev/null; }
    wait_for "$secs" _gone "$pid"
}

# wait_ready PORT [SECONDS]: wait until fenced on PORT says leader_ready:1.
wait_ready() {
    local port=$1 secs=${2:-30}
    _ready() { redis-cli -p "$1" INFO 2>/dev/null | grep -q '^leader_ready:1'; }
    wait_for "$secs" _ready "$port"
}

# wait_fenced PORT [SECS]: fenced on PORT accepts connections (within SECS,
# default 10) and leads (INFO leader_ready:1, within 30 s), so that a
# redis-cli request sent next is not answered "TRYAGAIN the leader is
# starting" on a loaded machine (libfence's clients retry that; redis-cli
# does not).
wait_fenced() {
    wait_port "$1" "${2:-10}" && wait_ready "$1"
}
