#!/usr/bin/env bash
# Control run: the multi-lock tests must catch a multi-lock granted partly
# (tests/mutants/multi_partial.patch: a waiting multi-lock first in every
# queue gets the free names and not the held ones): test_core_multi must
# FAIL against it.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/bug_control.sh"
bug_control multi_partial test_core_multi
