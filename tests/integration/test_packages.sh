#!/usr/bin/env bash
# The Debian packages (issues 13 and 20): `dpkg-buildpackage -us -uc -b` on
# a copy of the tree builds fenced, fence-store, fence-proxy, libfence0,
# libfence-guard0, libfence-dev, fencectl and fence-torture; lintian reports
# no errors; the packages are unpacked into a scratch root (dpkg -x, nothing
# touches the machine) and the installed files run: fenced --version, a
# fenced and a fence-store from the root, a lock taken with the installed
# fencectl, a program built against the installed libfence-dev
# (pkg-config), fence-proxy with its packaged config, and a short torture
# run of the installed fence-torture (its fault proxy is fence-faults; `man
# fence-proxy` is fence-proxy(8), the HTTP proxy).  Every Build-Depends is
# in scripts/deps.sh's packages list.  scripts/fresh-targets.sh deb builds
# them from Build-Depends alone in a fresh root.
#
# Opt-in: it runs only with FENCE_TEST_PACKAGES=1, because it installs
# packaging tools that nothing else needs (scripts/deps.sh packages:
# dpkg-dev, debhelper, devscripts, lintian, fakeroot; minutes of apt on a
# fresh machine) and then takes a full optimized build (~1-2 minutes on two
# shared cores).
. "$(dirname "$0")/../lib/lib.sh"
[ "${FENCE_TEST_PACKAGES:-0}" = 1 ] || skip_all "set FENCE_TEST_PACKAGES=1 to build the Debian packages (slow)"
bash "$ROOT/scripts/deps.sh" packages || skip_all "cannot install the packaging tools (scripts/deps.sh packages)"
for t in dpkg-buildpackage dh lintian git; do
    command -v "$t" >/dev/null || skip_all "$t is missing (bash scripts/deps.sh packages)"
done

# debian/control's Build-Depends are in deps.sh's packages list.
pkgs=$(bash -c 'source <(sed -n "/^run_pkgs=/,/^pkg_pkgs=.*)/p" "$1"); echo "${pkg_pkgs[@]}"' _ "$ROOT/scripts/deps.sh")
for b in $(sed -n '/^Build-Depends:/,/^[A-Z]/p' "$ROOT/debian/control" | sed 's/^Build-Depends://' |
           tr ',' '\n' | sed 's/(.*//; s/^ *//; s/ *$//' | grep -v '^$\|^debhelper-compat\|^[A-Z]'); do
    check "Build-Depends $b is in scripts/deps.sh packages" grep -qw -- "$b" <<<"$pkgs"
done

# A copy of the tree (tracked and new files, not build/): the package build
# runs `make clean`, which must not touch this checkout's build/.
mkdir -p "$TEST_TMP/src"
(cd "$ROOT" && git ls-files -co --exclude-standard -z | xargs -0 tar cf - --no-recursion) |
    tar xf - -C "$TEST_TMP/src"
cd "$TEST_TMP/src" || exit 1
start=$(date +%s)
DEB_BUILD_OPTIONS="parallel=${FENCE_PACKAGES_JOBS:-2}" \
    dpkg-buildpackage -us -uc -b >"$TEST_TMP/build.log" 2>&1
rc=$?
echo "# dpkg-buildpackage took $(( $(date +%s) - start )) s"
check_eq "dpkg-buildpackage -us -uc -b succeeds" 0 "$rc"
[ "$rc" -eq 0 ] || { tail -n 40 "$TEST_TMP/build.log" | sed 's/^/# /'; finish; }
cd "$TEST_TMP" || exit 1
for p in fenced fence-store fence-proxy libfence0 libfence-guard0 libfence-dev fencectl fence-torture; do
    f=$(ls "$TEST_TMP"/${p}_0.1.0_*.deb 2>/dev/null | head -n 1)
    check "package $p is built" test -n "$f"
done

# lintian: no errors (warnings and infos are printed for the record).
lintian --tag-display-limit 0 "$TEST_TMP"/fenced_0.1.0_*.changes >"$TEST_TMP/lintian.log" 2>&1
sed 's/^/# lintian: /' "$TEST_TMP/lintian.log"
check "lintian reports no errors" test "$(grep -c '^E:' "$TEST_TMP/lintian.log")" -eq 0

R=$TEST_TMP/root
for f in "$TEST_TMP"/*.deb; do dpkg -x "$f" "$R"; done
for f in usr/bin/fenced usr/bin/fence-store usr/bin/fencectl usr/bin/fence-torture \
         usr/include/fence.h usr/include/fence_guard.h \
         lib/systemd/system/fenced.service lib/systemd/system/fence-store.service \
         usr/lib/sysusers.d/fenced.conf etc/fenced/fenced.conf \
         usr/share/man/man8/fenced.8.gz usr/share/man/man8/fence-store.8.gz \
         usr/share/man/man1/fencectl.1.gz usr/share/man/man1/fence-torture.1.gz \
         usr/share/fenced/adapters/postgres/fence.sql usr/share/fenced/adapters/postgres/fence_signed.sql \
         usr/share/fenced/adapters/redis/fence.lua \
         usr/bin/fence-proxy usr/share/man/man8/fence-proxy.8.gz etc/fenced/fence-proxy.conf \
         lib/systemd/system/fence-proxy.service usr/lib/sysusers.d/fence-proxy.conf \
         usr/lib/fenced/fence-faults usr/lib/fenced/torture_proxy.py; do
    check "installed /$f" test -e "$R/$f"
done
check "no man1/fence-proxy.1 (man fence-proxy is the HTTP proxy's fence-proxy.8)" \
    test ! -e "$R/usr/share/man/man1/fence-proxy.1.gz"
check "fence-proxy is its own package" eval "dpkg -c \"$TEST_TMP\"/fence-proxy_0.1.0_*.deb | grep -q './usr/bin/fence-proxy\$'"
check "and not in fence-torture" eval "! dpkg -c \"$TEST_TMP\"/fence-torture_0.1.0_*.deb | grep -q 'usr/bin/fence-proxy'"
check "fence-faults is in fence-torture" eval "dpkg -c \"$TEST_TMP\"/fence-torture_0.1.0_*.deb | grep -q 'usr/lib/fenced/fence-faults'"
multi=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
for f in libfence.so.0 libfence-guard.so.0 libfence.a libfence-guard.a pkgconfig/libfence.pc \
         pkgconfig/libfence-guard.pc; do
    check "installed /usr/lib/$multi/$f" test -e "$R/usr/lib/$multi/$f"
done
unit=$R/lib/systemd/system/fenced.service
check "fenced.service: dedicated user, state dir, restart, hardening" \
    grep -q '^User=fenced' "$unit" -a
grep -q '^StateDirectory=fenced' "$unit" && grep -q '^Restart=on-failure' "$unit" &&
    grep -q '^ProtectSystem=strict' "$unit" && grep -q '^ExecStart=/usr/bin/fenced ' "$unit"
check_eq "fenced.service has StateDirectory, Restart, ProtectSystem, /usr/bin/fenced" 0 $?

out=$("$R/usr/bin/fenced" --version 2>&1)
rc=$?
check "installed fenced --version works ($out)" test "$rc" -eq 0 -a -n "$out"

FP=$(free_port); SP=$(free_port)
spawn fenced "$R/usr/bin/fenced" --config "$R/etc/fenced/fenced.conf" --port "$FP" \
    --data-dir "$TEST_TMP/fenced-data"
spawn store "$R/usr/bin/fence-store" --port "$SP" --bind 127.0.0.1 --data-dir "$TEST_TMP/store-data"
wait_fenced "$FP" || { cat "$TEST_TMP/fenced.log"; not_ok "the installed fenced listens"; finish; }
wait_port "$SP" || { cat "$TEST_TMP/store.log"; not_ok "the installed fence-store listens"; finish; }
ok "the installed fenced (with the packaged fenced.conf) and fence-store listen"
out=$("$R/usr/bin/fencectl" --server "127.0.0.1:$FP" --timeout 10000 lock pkg -- \
      sh -c 'echo token=$FENCE_TOKEN' 2>&1)
check "the installed fencectl takes a lock ($out)" grep -qx 'token=[1-9][0-9]*' <<<"$out"
tok=${out#token=}
check_eq "fence-store admits it" OK "$(redis-cli -p "$SP" FSET pkg "$tok" k v 2>&1)"

cat >"$TEST_TMP/app.c" <<'C'
#include <fence.h>
#include <fence_guard.h>
#include <stdio.h>
int main(void)
{
    fence_client_opts o;
    fence_client_opts_init(&o);
    fence_client *c;
    if (fence_client_open(&o, &c) != 0)
        return 2;
    fence_lock *l;
    if (fence_lock_acquire(c, "pkg.app", 2000, 1000, &l) != 0)
        return 1;
    printf("token %llu\n", (unsigned long long)fence_lock_token(l));
    fence_lock_release(l);
    fence_client_close(c);
    return 0;
}
C
export PKG_CONFIG_SYSROOT_DIR=$R PKG_CONFIG_LIBDIR=$R/usr/lib/$multi/pkgconfig:/usr/lib/$multi/pkgconfig:/usr/share/pkgconfig
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$TEST_TMP/app" "$TEST_TMP/app.c" $(pkg-config --cflags --libs libfence libfence-guard) 2>"$TEST_TMP/cc.log"
check "a program builds against the installed libfence-dev (pkg-config)" test $? -eq 0 ||
    sed 's/^/# /' "$TEST_TMP/cc.log"
out=$(FENCE_SERVER=127.0.0.1:$FP LD_LIBRARY_PATH=$R/usr/lib/$multi "$TEST_TMP/app" 2>&1)
check "and takes a lock with the installed libfence0 ($out)" grep -q '^token [1-9]' <<<"$out"
check "the installed fence-torture runs (--help)" eval "\"$R/usr/bin/fence-torture\" --help >/dev/null"
check "fence-torture finds the installed fenced next to it" test -x "$R/usr/lib/fenced/fenced"
(cd "$TEST_TMP" && "$R/usr/bin/fence-torture" --duration 3 --workers 2 --seed 1 \
     --out "$TEST_TMP/torture" >"$TEST_TMP/torture.log" 2>&1)
check "the installed fence-torture runs a short torture run" \
    grep -Eq '^ *violations +0$' "$TEST_TMP/torture.log"
grep -Eq '^ *violations +0$' "$TEST_TMP/torture.log" || tail -n 20 "$TEST_TMP/torture.log" | sed 's/^/# /'
PP=$(free_port)
spawn proxy "$R/usr/bin/fence-proxy" --config "$R/etc/fenced/fence-proxy.conf" \
    --listen "127.0.0.1:$PP" --data-dir "$TEST_TMP/proxy-data"
check "the installed fence-proxy starts with its packaged config" wait_port "$PP"
stop proxy
finish
