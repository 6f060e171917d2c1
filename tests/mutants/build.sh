#!/usr/bin/env bash
# Build programs with a planted bug: the one way to make a mutant.
#
#   tests/mutants/build.sh MUTANT OUTDIR TARGET...
#
# Copies the source tree (the files git tracks plus untracked, unignored
# ones, so uncommitted work is included; without git: Makefile, mk/, src/,
# include/, tests/, tools/) to a scratch directory, applies
# tests/mutants/MUTANT.patch there, and runs
#   make -C SCRATCH BUILD=OUTDIR OUTDIR/TARGET...
# so each TARGET is named relative to OUTDIR (fenced, tests/fence_sim,
# tests/test_core).  The real tree is never modified.  If the patch does not
# apply exactly (no fuzz), it stops with a message saying so: a mutant that
# silently lost its bug would make every control pass for nothing.
#
# A mutant cannot be mistaken for a real build: the patch makes
# fence_fsm_build_note() return "MUTANT <name>: planted bug, not for
# production" (fenced shows it at start-up and in INFO), OUTDIR gets a
# MUTANT file naming the patch, and OUTDIR must not be the normal build
# directory itself.
#
# Mutants (one .patch each, a unified diff against the tree, made with
# `git diff`):
#   grant_expired  etcd#11456: a waiter whose lease expired while queued is
#                  not reaped, and the hand-off skips the liveness check
#   leader_read_early  the leader module (src/leader/batch.c) answers a read
#                  as soon as its batch is proposed, before the writes ahead
#                  of it in its pipeline are applied
#   sem_slot_twice  a waiter handed a semaphore's slot (src/core/sem.c) is
#                  told slot 0 whatever slot it got: it and slot 0's holder
#                  both believe they hold slot 0 (a slot granted twice)
#   shared_new_token  a shared holder joining a phase is given a new token
#                  (issue 21: the holders of one phase share one token)
#   multi_partial  core/multi.c grants a waiting multi-lock that is first
#                  in every queue the names that are free and skips the
#                  held ones: a multi-lock granted partly (issue 21)
#   renew_unrecorded  the leader module (src/leader/renew.c) answers a
#                  LEASE.KEEPALIVE without an entry but records only every
#                  other one for its checkpoint: a lease expires before the
#                  TTL of its last answered renewal ran out (docs/leases.md)
#   heap_stale     the core (src/core/grant.c) takes the early heap key a
#                  renewal leaves (src/core/heap.h) for the deadline: a
#                  renewed lease expires at its old deadline
#   elect_lost_revision  (src/core/elect.c) a leader that resigns or loses
#                  its lease takes no new election revision, so observers
#                  never see that the election has no leader
#   observe_wake_dropped  (src/server/observe_set.c) a poll wakes one parked
#                  ELECTION.OBSERVE and leaves the others due in the same
#                  loop turn parked: a wake-up dropped
#
# Environment: MAKE (default make), MUTANT_JOBS (make -j, default 2; an
# enclosing make's jobserver is used when there is one), MUTANT_KEEP=1
# keeps the scratch copy.
set -u
if [ $# -lt 3 ]; then
    echo "usage: $0 MUTANT OUTDIR TARGET..." >&2
    exit 2
fi
mutant=$1
outdir=$2
shift 2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
patchfile=$ROOT/tests/mutants/$mutant.patch
if [ ! -f "$patchfile" ]; then
    echo "mutant $mutant: no $patchfile (known: $(cd "$ROOT/tests/mutants" && ls ./*.patch 2>/dev/null | sed 's|^\./||; s|\.patch$||' | tr '\n' ' '))" >&2
    exit 2
fi
mkdir -p "$outdir" || exit 2
outdir=$(cd "$outdir" && pwd)
case "$outdir" in
"$ROOT" | "$ROOT/build" | "$ROOT/build/asan")
    echo "mutant $mutant: OUTDIR $outdir is a real build directory; use a directory of its own (e.g. build/mutant/$mutant)" >&2
    exit 2
    ;;
esac

# One build of an OUTDIR at a time (make -j may start two controls that
# share it).
if command -v flock >/dev/null; then
    exec 9>"$outdir/.lock"
    flock 9
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/fence-mutant-$mutant.XXXXXX") || exit 2
if [ "${MUTANT_KEEP:-0}" = 1 ]; then
    echo "# mutant $mutant: scratch copy kept in $scratch" >&2
else
    trap 'rm -rf "$scratch"' EXIT
fi

# Copy the tree, keeping modification times (so an unchanged OUTDIR is not
# rebuilt from scratch each time; the patched files are newer anyway).
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done |
        tar --null -T - -cf -) | tar -C "$scratch" -xf - || {
        echo "mutant $mutant: copying the tree failed" >&2
        exit 2
    }
else
    (cd "$ROOT" && tar -cf - Makefile mk src include tests tools 2>/dev/null) |
        tar -C "$scratch" -xf - || {
        echo "mutant $mutant: copying the tree failed" >&2
        exit 2
    }
fi

# Apply exactly, or stop.
if ! (cd "$scratch" && patch -p1 --forward --fuzz=0 --batch --dry-run <"$patchfile" >"$scratch/.patch.log" 2>&1); then
    sed 's/^/#   /' "$scratch/.patch.log" >&2
    echo "mutant $mutant: tests/mutants/$mutant.patch NO LONGER APPLIES to this tree." >&2
    echo "mutant $mutant: re-plant the bug in the current sources and regenerate the patch (git diff > tests/mutants/$mutant.patch)." >&2
    exit 3
fi
(cd "$scratch" && patch -p1 --forward --fuzz=0 --batch --quiet <"$patchfile") || {
    echo "mutant $mutant: applying the patch failed" >&2
    exit 3
}
# A patched file whose content is what the last build of OUTDIR compiled
# keeps that build's time, so an up-to-date mutant is not rebuilt.
mkdir -p "$outdir/.patched"
for f in $(sed -n 's|^+++ b/||p' "$patchfile"); do
    kept=$outdir/.patched/$f
    if [ -f "$kept" ] && cmp -s "$kept" "$scratch/$f"; then
        touch -r "$kept" "$scratch/$f"
    else
        mkdir -p "$(dirname "$kept")"
        cp -p "$scratch/$f" "$kept"
    fi
done
if ! grep -rq "MUTANT $mutant" "$scratch/src"; then
    echo "mutant $mutant: the patch does not make the build say 'MUTANT $mutant' (fence_fsm_build_note)" >&2
    exit 3
fi

printf 'MUTANT %s: built from tests/mutants/%s.patch; planted bug, not for production\n' \
    "$mutant" "$mutant" >"$outdir/MUTANT"
targets=()
for t in "$@"; do
    targets+=("$outdir/$t")
done
jobs=()
case " ${MAKEFLAGS:-} " in
*jobserver* | *" -j"*) ;;
*) jobs=(-j"${MUTANT_JOBS:-2}") ;;
esac
${MAKE:-make} --no-print-directory -C "$scratch" "${jobs[@]}" BUILD="$outdir" "${targets[@]}" || {
    echo "mutant $mutant: make ${targets[*]} failed" >&2
    exit 1
}
