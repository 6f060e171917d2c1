#!/usr/bin/env bash
# make test: install what is missing, build the normal and the sanitizer
# variants, then run every registered test through tests/run.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
jobs=$(nproc 2>/dev/null || echo 2)
make -s -j"$jobs" tests
make -s -j"$jobs" BUILD=build/asan SAN=1 unit-tests build/asan/fenced build/asan/fence-store
unit=$(make -s --no-print-directory list-unit)
asan=$(make -s --no-print-directory BUILD=build/asan SAN=1 list-unit)
integ=$(make -s --no-print-directory list-integ)
# shellcheck disable=SC2086
exec bash tests/run.sh $unit $asan $integ
