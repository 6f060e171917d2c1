#!/usr/bin/env bash
# Prints the files a LOCK enters on its way through fenced, as it runs
# (docs/architecture.md, "A LOCK's walk through fenced").  Builds fenced
# with gcc's -finstrument-functions in build/walk (apart from the normal
# build), runs one LOCK through it on 127.0.0.1 and resolves the trace of
# the loop thread with addr2line.  Needs gcc, addr2line (binutils) and
# python3.
#
#   scripts/lock-walk.sh          the request's path (side rooms left out)
#   scripts/lock-walk.sh --all    every file entry but the base helpers
set -eu
cd "$(dirname "$0")/.."
out=build/walk
CFLAGS="-O0 -g" nice make -s -j2 BUILD="$out" EXTRA_CFLAGS=-finstrument-functions "$out/fenced" >&2
cc -O2 -shared -fPIC -o "$out/lock-walk-hook.so" scripts/lock-walk/hook.c -lpthread
exec python3 scripts/lock-walk/walk.py "$out/fenced" "$out/lock-walk-hook.so" "$@"
