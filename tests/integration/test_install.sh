#!/usr/bin/env bash
# make install, then the installed tree (issue 20), not the build tree:
# - PREFIX=/usr puts the configurations in /etc (GNU convention), another
#   PREFIX in PREFIX/etc;
# - adapters/postgres/fence_signed.sql is installed;
# - fence-proxy is the HTTP fencing proxy everywhere: its program, man page
#   fence-proxy(8) (no fence-proxy.1 pointing at fence-torture.1), example
#   config, systemd unit and user; the installed fence-proxy starts with the
#   installed configuration;
# - the torture harness's fault proxy is fence-faults in /usr/lib/fenced,
#   and the installed fence-torture runs a short torture run from there
#   (it stopped with "/usr/lib/fenced/fence-faults is missing").
# serial (a torture run with pauses and deadlines)
. "$(dirname "$0")/../lib/lib.sh"
rel=${BUILD#"$ROOT"/}

R=$TEST_TMP/root
make -C "$ROOT" --no-print-directory -j2 BUILD="$rel" install DESTDIR="$R" PREFIX=/usr \
    >"$TEST_TMP/install.log" 2>&1
rc=$?
check_eq "make install DESTDIR=... PREFIX=/usr succeeds" 0 "$rc"
[ "$rc" -eq 0 ] || { tail -n 30 "$TEST_TMP/install.log" | sed 's/^/# /'; finish; }

for f in etc/fenced/fenced.conf etc/fenced/fence-proxy.conf etc/default/fence-store; do
    check "PREFIX=/usr: /$f" test -f "$R/$f"
done
check "PREFIX=/usr: nothing in /usr/etc" test ! -e "$R/usr/etc"
check "adapters/postgres/fence_signed.sql is installed" \
    cmp -s "$ROOT/adapters/postgres/fence_signed.sql" "$R/usr/share/fenced/adapters/postgres/fence_signed.sql"

# ---- fence-proxy is the HTTP proxy --------------------------------------
check "/usr/bin/fence-proxy is the HTTP fencing proxy" \
    eval "\"$R/usr/bin/fence-proxy\" --help | grep -q 'HTTP/1.1 reverse proxy that enforces fencing tokens'"
check "man8/fence-proxy.8 is installed" test -f "$R/usr/share/man/man8/fence-proxy.8"
check "its NAME: the HTTP proxy" \
    eval "sed -n '/^\.SH NAME/{n;p}' \"$R/usr/share/man/man8/fence-proxy.8\" | grep -q 'fence\\\\-proxy .*HTTP'"
check "no man1/fence-proxy.1 (it pointed at fence-torture.1)" test ! -e "$R/usr/share/man/man1/fence-proxy.1"
check "fence-torture.1's NAME does not claim fence-proxy" \
    eval "! sed -n '/^\.SH NAME/{n;p}' \"$R/usr/share/man/man1/fence-torture.1\" | grep -q 'proxy,\\|fence\\\\-proxy'"
if command -v man >/dev/null; then
    out=$(MANPATH="$R/usr/share/man" man -w fence-proxy 2>/dev/null)
    check "man fence-proxy finds fence-proxy.8 ($out)" grep -q 'man8/fence-proxy.8' <<<"$out"
fi
unit=$R/usr/lib/systemd/system/fence-proxy.service
check "fence-proxy.service is installed" test -f "$unit"
check "it runs /usr/bin/fence-proxy --config /etc/fenced/fence-proxy.conf" \
    grep -qx 'ExecStart=/usr/bin/fence-proxy --config /etc/fenced/fence-proxy.conf' "$unit"
check "as its own user, with its state directory" \
    eval "grep -qx User=fence-proxy '$unit' && grep -qx StateDirectory=fence-proxy '$unit'"
check "its sysusers entry" grep -q '^u fence-proxy ' "$R/usr/lib/sysusers.d/fence-proxy.conf"
check "the example config" test -f "$R/usr/share/fenced/examples/fence-proxy.conf"
PP=$(free_port)
spawn proxy "$R/usr/bin/fence-proxy" --config "$R/etc/fenced/fence-proxy.conf" \
    --listen "127.0.0.1:$PP" --data-dir "$TEST_TMP/proxy"
check "the installed fence-proxy starts with the installed config" wait_port "$PP"
stop proxy

# ---- the torture kit runs from the installed tree ----------------------
T=$R/usr/lib/fenced
check "the fault proxy is /usr/lib/fenced/fence-faults" test -x "$T/fence-faults"
check "/usr/lib/fenced/fence-proxy, if any, is the HTTP proxy" \
    eval "[ ! -e '$T/fence-proxy' ] || [ \"\$(readlink -f '$T/fence-proxy')\" = \"\$(readlink -f '$R/usr/bin/fence-proxy')\" ]"
check "no fence-faults on the PATH (bin)" test ! -e "$R/usr/bin/fence-faults"
check "fence-torture --proxy --help runs (torture_proxy.py is installed)" \
    eval "\"$R/usr/bin/fence-torture\" --proxy --help >/dev/null"
cd "$TEST_TMP" || exit 1
"$R/usr/bin/fence-torture" --duration 3 --workers 2 --seed 1 --out "$TEST_TMP/torture" \
    >"$TEST_TMP/torture.log" 2>&1
rc=$?
check_eq "the installed fence-torture runs a short run (exit 0)" 0 "$rc"
check "its checker finds no violation" grep -Eq '^ *violations +0$' "$TEST_TMP/torture.log"
[ "$rc" -eq 0 ] || tail -n 20 "$TEST_TMP/torture.log" | sed 's/^/# /'
check "nothing is missing from the installed kit" eval "! grep -q 'is missing' '$TEST_TMP/torture.log'"

# ---- another PREFIX: PREFIX/etc ----------------------------------------
R2=$TEST_TMP/root2
make -C "$ROOT" --no-print-directory -j2 BUILD="$rel" install-conf DESTDIR="$R2" PREFIX=/opt/fenced \
    >"$TEST_TMP/install2.log" 2>&1
check "PREFIX=/opt/fenced: configs in /opt/fenced/etc" test -f "$R2/opt/fenced/etc/fenced/fenced.conf"
check "and not in /etc" test ! -e "$R2/etc"
finish
