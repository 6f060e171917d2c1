#!/usr/bin/env bash
# fencectl's scripting subcommands against a real fenced: acquire/release/
# info, lease grant/keepalive/revoke/info, status, --help everywhere, a
# one-second bench, demo's message when fence-demo is absent, and
# $FENCE_SERVER vs --server.
. "$(dirname "$0")/../lib/lib.sh"
[ -x "$FENCED" ] || skip_all "$FENCED not built"
[ -x "$FENCECTL" ] || skip_all "$FENCECTL not built"
port=$(free_port)
spawn fenced "$FENCED" --port "$port" --data-dir "$TEST_TMP/fenced" \
    --unix-socket "$TEST_TMP/fenced.sock"
wait_port "$port" 20 || { cat "$TEST_TMP/fenced.log"; not_ok "fenced listens"; finish; }
S=127.0.0.1:$port
F=$FENCECTL
T=$TEST_TMP

# ---- --help on every subcommand --------------------------------------------
helps=0
for sub in lock acquire release info "lease grant" "lease keepalive" "lease revoke" \
           "lease info" lease status bench; do
    # shellcheck disable=SC2086
    out=$("$F" $sub --help) && [[ "$out" == usage:\ fencectl* ]] && helps=$((helps + 1))
done
check_eq "--help works on all 11 subcommand forms" 11 "$helps"
"$F" --help | grep -q "exit codes"
check "top-level --help lists the exit codes" [ $? -eq 0 ]

# ---- acquire / info / release ----------------------------------------------
read -r tok lease < <("$F" --server "$S" acquire job --ttl 5000 --wait 0)
check "acquire prints TOKEN LEASE" [ -n "${lease:-}" ]
check_eq "info shows the holder" "token=$tok lease=$lease" "$("$F" --server "$S" info job | cut -d' ' -f1,2)"
"$F" --server "$S" release job $((tok + 100)) 2>/dev/null
check_eq "release with a wrong token exits 1" 1 $?
check_eq "release with the right token" released "$("$F" --server "$S" release job "$tok")"
check_eq "info shows it free" free "$("$F" --server "$S" info job)"
"$F" --server "$S" lease keepalive "$lease" >/dev/null 2>&1
check_eq "release revoked the acquire's dedicated lease (keepalive exits 79)" 79 $?
eval "$("$F" --server "$S" acquire "it's" --env --wait 0)"
check_eq "--env output evals (quoting)" "it's" "$FENCE_LOCK"
check "--env sets FENCE_TOKEN" [ "$FENCE_TOKEN" -gt "$tok" ]
"$F" --server "$S" release "it's" "$FENCE_TOKEN" >/dev/null

# ---- leases -------------------------------------------------------------------
export FENCE_SERVER=$S   # from here on the environment names the server
l=$("$F" lease grant 3000)
check "lease grant prints an id" [ "${l:-0}" -gt 0 ]
check_eq "lease keepalive prints the TTL" 3000 "$("$F" lease keepalive "$l")"
read -r ltok _ < <("$F" acquire shared --lease "$l" --wait 0)
check "acquire --lease locks under that lease" [ "${ltok:-0}" -gt 0 ]
check_eq "lease info" "ttl_ms=3000 locks_held=1" "$("$F" lease info "$l" | sed 's/ remaining_ms=[0-9]*//')"
check_eq "lease revoke" revoked "$("$F" lease revoke "$l")"
check_eq "revoking released its lock" free "$("$F" info shared)"
"$F" lease info "$l" 2>"$T/err"
check_eq "lease info of a revoked lease exits 79" 79 $?
check "with a NOLEASE message" grep -q NOLEASE "$T/err"
check_eq "lease revoke is idempotent" revoked "$("$F" lease revoke "$l")"

# ---- a Unix socket ---------------------------------------------------------------
read -r utok _ < <("$F" --server "unix:$T/fenced.sock" acquire unix.lock --wait 0)
check "acquire over the Unix socket (--server unix:PATH)" [ "${utok:-0}" -gt 0 ]
check_eq "release over the Unix socket" released "$("$F" --server "unix:$T/fenced.sock" release unix.lock "$utok")"

# ---- status -------------------------------------------------------------------
"$F" status >"$T/status"
check "status prints the server and aligned INFO" grep -Eq '^  last_token +[0-9]+' "$T/status"
check "status names the server" grep -q "^server $S" "$T/status"

# ---- --server wins over $FENCE_SERVER; unreachable gives 69 ---------------------
dead=$(free_port)
FENCE_SERVER=127.0.0.1:$dead "$F" --server "$S" info job >/dev/null
check_eq "--server overrides \$FENCE_SERVER" 0 $?
FENCE_SERVER=127.0.0.1:$dead "$F" --timeout 300 status 2>/dev/null
check_eq "status against nothing exits 69" 69 $?
"$F" --server "garbage" status 2>"$T/err"
check_eq "a malformed --server exits 64" 64 $?

# ---- bench (one second, small) -------------------------------------------------------
"$F" bench --duration 1 --conns 1,4 >"$T/bench" 2>&1
check_eq "bench exits 0" 0 $?
check "bench prints 4 rows" [ "$(grep -cE '^(uncontended|contended) ' "$T/bench")" -eq 4 ]
check "contended rows show min/max cycles" grep -Eq '^contended +4 .* [0-9]+/[0-9]+ ' "$T/bench"
check "no errors in the bench" [ "$(awk '/^(un)?contended /{s+=$NF} END{print s+0}' "$T/bench")" -eq 0 ]
sed 's/^/# /' "$T/bench"
"$F" bench --duration 1 --conns 2 --mode uncontended --format tsv >"$T/tsv" 2>&1
check_eq "bench --format tsv exits 0" 0 $?
check "tsv header ends with the window and its CPU" \
    grep -q $'\terrors\tstart_us\tstop_us\tcpu_s$' "$T/tsv"
# The row: 14 fields, a window of the 1 s asked for, CPU within it.
check "tsv row: window of 1 s, CPU seconds in [0, cores x 1 s]" awk -F'\t' -v cores="$(nproc)" '
    NR == 2 && NF == 14 && $13 - $12 == 1000000 && $14 >= 0 && $14 <= cores * 1.01 {ok = 1}
    END {exit !ok}' "$T/tsv"
sed 's/^/# /' "$T/tsv"

# ---- demo -------------------------------------------------------------------------------
if [ -x "$(dirname "$F")/fence-demo" ]; then
    ok "fence-demo exists (its own tests cover it)"
else
    "$F" demo 2>"$T/err"
    check_eq "demo without fence-demo exits 127" 127 $?
    check "and says where it looked" grep -q "fence-demo does not exist\|fence-demo.*does not exist" "$T/err"
fi
finish
