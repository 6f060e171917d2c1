#!/usr/bin/env bash
# Each build target on a fresh Debian 12, in its own clean root: a copy of
# the minbase chroot of scripts/fresh-chroot.sh (build-essential, git and
# ca-certificates only), so a target only gets the packages its own list
# installs.  Proves "every package a target needs is in the list for that
# target" (issue 20):
#
#   run      make run-build (the packages and programs of `make run`), then
#            the README tour against them (tests/integration/test_fencectl_tour.sh;
#            python3 is installed for the test only after the build)
#   make     scripts/deps.sh run (what `make run` installs), then `make`
#   install  the same, then `make install PREFIX=/usr` into the root itself,
#            and the installed programs run (fenced --version, a short
#            fence-torture run, fence-proxy --help)
#   deb      only the packaging tools and debian/control's Build-Depends
#            (apt-get build-dep), then dpkg-buildpackage -us -uc -b, and the
#            packages install with apt (their Depends resolve)
#
#   scripts/fresh-targets.sh [TARGET...]     (default: run make install deb)
#   FRESH_BASE=/srv/fresh   the pristine root (debootstrapped when missing)
#   FRESH_WORK=/srv/fresh-work  the scratch copy (removed after each target)
#
# As root; prints one line per target with its time and exit status and
# exits non-zero if any failed.  The clone is of HEAD: commit first.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
base=${FRESH_BASE:-/srv/fresh}
work=${FRESH_WORK:-/srv/fresh-work}
[ "$(id -u)" -eq 0 ] || { echo "fresh-targets: must run as root" >&2; exit 1; }
[ -x "$base/bin/bash" ] || bash "$here/fresh-chroot.sh" "$base" true || exit 1

declare -A cmd
cmd[run]='make run-build &&
    test -x build/fenced && test -x build/fencectl && test -x build/fence-store &&
    command -v redis-cli &&
    apt-get install -y -qq --no-install-recommends python3 >/dev/null &&
    bash tests/integration/test_fencectl_tour.sh'
cmd[make]='bash scripts/deps.sh run && make -j2'
cmd[install]='bash scripts/deps.sh run && make -j2 && make install PREFIX=/usr &&
    test -f /etc/fenced/fenced.conf && test -f /etc/fenced/fence-proxy.conf &&
    test -f /usr/share/fenced/adapters/postgres/fence_signed.sql &&
    fenced --version && fence-proxy --help >/dev/null &&
    apt-get install -y -qq --no-install-recommends python3 >/dev/null &&
    fence-torture --duration 3 --workers 2 --seed 1 --out /tmp/torture | tail -n 3'
cmd[deb]='apt-get update -qq && apt-get install -y -qq --no-install-recommends dpkg-dev debhelper fakeroot >/dev/null &&
    apt-get build-dep -y -qq ./ >/dev/null &&
    dpkg-buildpackage -us -uc -b >/tmp/deb.log 2>&1 || { tail -n 40 /tmp/deb.log; exit 1; }
    ls ../*.deb && apt-get install -y -qq --no-install-recommends $(ls ../*.deb | sed "s|^|$PWD/|") >/dev/null &&
    fenced --version && fence-proxy --help >/dev/null && man -w fence-proxy 2>/dev/null; dpkg -L fence-proxy'

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(run make install deb)
fails=0
summary=()
for t in "${targets[@]}"; do
    [ -n "${cmd[$t]:-}" ] || { echo "fresh-targets: unknown target $t (run make install deb)" >&2; exit 2; }
    rm -rf "$work"
    cp -a "$base" "$work"
    start=$(date +%s)
    echo "==== fresh-targets: $t"
    bash "$here/fresh-chroot.sh" "$work" "set -e; ${cmd[$t]}"
    rc=$?
    summary+=("$t: exit $rc, $(( $(date +%s) - start )) s")
    [ "$rc" -eq 0 ] || fails=$((fails + 1))
    rm -rf "$work"
done
printf 'fresh-targets: %s\n' "${summary[@]}"
[ "$fails" -eq 0 ]
