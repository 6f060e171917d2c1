#!/usr/bin/env bash
# Prove the README contract on a fresh Debian 12: a minbase bookworm chroot
# with only build-essential, git and ca-certificates, a clean clone of this
# checkout's HEAD (committed work only), then `make test` (or any command)
# inside it, as root.  scripts/fresh-targets.sh runs each build target in
# its own copy of the root.
#
#   scripts/fresh-chroot.sh [ROOT] [COMMAND]
#     ROOT     the chroot (default /srv/fresh); debootstrapped when missing
#              (needs the debootstrap package: apt-get install debootstrap)
#     COMMAND  run in the clone, /root/fenced (default: bash .ci/run)
#   FRESH_SELFBIND=1  bind ROOT onto itself so the chroot's / is a mount point
#                     as in a container; `ip netns` (the partition test)
#                     needs that, and skips (exit 77) without it
#   FRESH_MIRROR=URL  the Debian mirror (default: the first URI in this
#                     machine's apt sources, else deb.debian.org)
#
# The chroot gets this machine's apt sources and a /usr/sbin/policy-rc.d that
# exits 101, as Debian container images have: package postinst scripts
# (redis-server, postgresql) start no services.  Everything is mounted in a
# private mount namespace (unshare -m), so nothing leaks to the host, and the
# mounts are undone in reverse order on exit, even on failure.  The clone is
# made anew each run (the old one is removed); the chroot itself is kept
# for reuse.
set -euo pipefail
root=${1:-/srv/fresh}
cmd=${2:-bash .ci/run}
src=$(cd "$(dirname "$0")/.." && pwd)

if [ -z "${FRESH_INNER:-}" ]; then
    [ "$(id -u)" -eq 0 ] || { echo "fresh-chroot: must run as root" >&2; exit 1; }
    if [ ! -x "$root/bin/bash" ]; then
        mirror=${FRESH_MIRROR:-$(grep -hsE '^(URIs:|deb) ' /etc/apt/sources.list.d/*.sources \
            /etc/apt/sources.list | grep -oE 'https?://[^ ]+' | grep -v security | head -n 1 || true)}
        mirror=${mirror:-http://deb.debian.org/debian}
        command -v debootstrap >/dev/null || { echo "fresh-chroot: apt-get install debootstrap" >&2; exit 1; }
        debootstrap --variant=minbase --include=build-essential,git,ca-certificates \
            bookworm "$root" "$mirror"
        if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
            rm -f "$root/etc/apt/sources.list"
            cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/"
        fi
        printf '#!/bin/sh\n# As in Debian container images: postinst scripts start no services.\nexit 101\n' \
            >"$root/usr/sbin/policy-rc.d"
        chmod 755 "$root/usr/sbin/policy-rc.d"
    fi
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    # The clone's source: a bundle of HEAD, so that a git worktree (whose
    # .git points outside the tree) clones as well as a plain checkout.
    mkdir -p "$root/var/tmp"
    git -C "$src" bundle create "$root/var/tmp/fenced.bundle" HEAD 2>/dev/null
    exec env FRESH_INNER=1 unshare --mount --propagation private bash "$0" "$root" "$cmd"
fi

mounted=()
# Undo the mounts made so far, last first.
unmount_all() {
    local i
    for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
        umount -l "${mounted[i]}" || echo "fresh-chroot: cannot unmount ${mounted[i]}" >&2
    done
}
trap unmount_all EXIT
# mnt ARGS... DIR: mount, and remember DIR for unmount_all.
mnt() { mount "$@" && mounted+=("${@: -1}"); }

[ -z "${FRESH_SELFBIND:-}" ] || mnt --bind "$root" "$root"
mnt -t proc proc "$root/proc"
mnt -t sysfs sysfs "$root/sys"
mnt --bind /dev "$root/dev"
mount --make-rslave "$root/dev"
mnt --bind /dev/pts "$root/dev/pts"
mnt -t tmpfs shm "$root/dev/shm"
mnt -t tmpfs tmp "$root/tmp"
mnt -t tmpfs run "$root/run"
mkdir -p "$root/mnt/src"
mnt --bind "$src" "$root/mnt/src"
mount -o remount,bind,ro "$root/mnt/src"

set +e
chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -lc "
    set -e
    rm -rf /root/fenced
    git -c safe.directory='*' clone -q /var/tmp/fenced.bundle /root/fenced
    cd /root/fenced
    echo \"fresh-chroot: \$(git log --oneline -1)\"
    start=\$(date +%s)
    set +e
    $cmd
    rc=\$?
    echo \"fresh-chroot: \$(( \$(date +%s) - start ))s, exit \$rc\"
    exit \$rc"
