#!/usr/bin/env bash
# libfence and fencectl log in to a fenced that has an ACL file (issue 9):
# the rightful user locks, renews and releases with --user/--pass or
# $FENCE_PASSWORD; a wrong password is refused; another user cannot revoke
# the lease; no password reaches fenced's log or fencectl's output.
. "$(dirname "$0")/../lib/lib.sh"

cat >"$TEST_TMP/users.acl" <<'ACL'
user alice on >alice-secret-pw ~orders* +@all -@admin
user bob on >bob-secret-pw ~* +@all -@admin
ACL
P=$(free_port)
spawn fenced "$FENCED" --port "$P" --data-dir "$TEST_TMP/data" --acl-file "$TEST_TMP/users.acl" \
    --log-file "$TEST_TMP/fenced.log"
wait_port "$P" || { not_ok "fenced with --acl-file starts"; finish; }
ok "fenced with --acl-file starts"
CTL=("$FENCECTL" --server "127.0.0.1:$P" --timeout 10000)

out=$("${CTL[@]}" --user alice --pass alice-secret-pw lock orders -- sh -c 'echo token=$FENCE_TOKEN' 2>&1)
check_eq "alice: fencectl lock runs the command (--user/--pass)" 0 "$?"
check "alice: the command saw a token ($out)" grep -q '^token=[0-9]' <<<"$out"

out=$(FENCE_PASSWORD=alice-secret-pw "${CTL[@]}" --user alice acquire orders 2>&1)
rc=$?
check_eq "alice: acquire with \$FENCE_PASSWORD" 0 "$rc"
read -r token lease <<<"$out"

out=$("${CTL[@]}" --user bob --pass bob-secret-pw lease revoke "${lease:-0}" 2>&1)
check "bob: revoking alice's lease is refused" test $? -ne 0
check "bob: the refusal says NOPERM ($out)" grep -q 'NOPERM\|permission' <<<"$out"

out=$("${CTL[@]}" --user alice --pass alice-secret-pw release orders "${token:-0}" 2>&1)
check_eq "alice: release by token" 0 "$?"

out=$("${CTL[@]}" --user alice --pass wrong-password acquire orders 2>&1)
check "a wrong password is refused" test $? -ne 0
check "the refusal names the login ($out)" grep -qi 'WRONGPASS\|auth' <<<"$out"

out=$("${CTL[@]}" acquire orders 2>&1)
check "no login: refused" test $? -ne 0
check "no login: NOAUTH ($out)" grep -qi 'NOAUTH\|auth' <<<"$out"

out=$("${CTL[@]}" --user alice --pass alice-secret-pw acquire payments 2>&1)
check "alice: a lock outside ~orders* is refused" test $? -ne 0

stop fenced
check "no password in fenced's log" bash -c "! grep -q 'secret-pw\|wrong-password' '$TEST_TMP/fenced.log'"
finish
