#!/usr/bin/env bash
# make test: install what is missing, build the three variants (release,
# asan, tsan; see the Makefile), then run every registered test through
# tests/run.sh, as many at a time as there are cores (TEST_JOBS overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
jobs=$(nproc 2>/dev/null || echo 2)
make -s -j"$jobs" tests
make -s -j"$jobs" VARIANT=asan unit-tests build/asan/fenced build/asan/fence-store
make -s -j"$jobs" VARIANT=tsan tsan-tests
unit=$(make -s --no-print-directory list-unit)
asan=$(make -s --no-print-directory VARIANT=asan list-unit)
tsan=$(make -s --no-print-directory VARIANT=tsan list-tsan)
integ=$(make -s --no-print-directory list-integ)
# Integration tests first: they are the long ones, and run.sh starts tests
# in the order given (longest first, once it has timings from a run).
# shellcheck disable=SC2086
exec bash tests/run.sh -j "${TEST_JOBS:-$jobs}" $integ $unit $asan $tsan
