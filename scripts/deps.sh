#!/usr/bin/env bash
# Install the Debian packages a target needs, when they are missing.
#   scripts/deps.sh run    packages to build and run fenced and fence-store
#   scripts/deps.sh test   everything make test needs (servers, clients, tools)
#   scripts/deps.sh packages   what building the Debian packages needs
#                              (tests/integration/test_packages.sh)
set -euo pipefail

# run: everything `make run` and then a plain `make` (all) build: every
# library header of src/ (libh2o-dev: fence-proxy), and redis-tools for the
# README's tour against `make run` with redis-cli.  debian/control's
# Build-Depends name the same libraries (tests/integration/test_packages.sh
# compares them; scripts/fresh-targets.sh builds each target in a clean root).
run_pkgs=(build-essential pkg-config libraft-dev libuv1-dev liblmdb-dev libhiredis-dev libsodium-dev libssl-dev openssl redis-tools
          libmicrohttpd-dev libh2o-dev)
test_pkgs=("${run_pkgs[@]}" redis-server postgresql python3 python3-redis
           python3-psycopg2 faketime libfaketime iproute2 procps clang libclang-rt-14-dev
           valgrind libh2o-dev nginx zookeeper python3-kazoo wrk prometheus openssl
           lmdb-utils mypy golang-go)

# Only for dpkg-buildpackage (FENCE_TEST_PACKAGES=1 make test, or by hand).
pkg_pkgs=("${run_pkgs[@]}" dpkg-dev debhelper devscripts lintian fakeroot)

case "${1:-test}" in
    run)  want=("${run_pkgs[@]}") ;;
    test) want=("${test_pkgs[@]}") ;;
    packages) want=("${pkg_pkgs[@]}") ;;
    *) echo "usage: $0 run|test|packages" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing+=("$p")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
    echo "deps: not root; please install: apt-get install ${missing[*]}" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
