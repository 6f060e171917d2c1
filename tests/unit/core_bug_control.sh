#!/usr/bin/env bash
# Control run: the core's tests must catch the planted etcd#11456 bug
# (tests/mutants/grant_expired.patch: expired leases queued as waiters are
# not reaped, and hand-off skips the liveness check): test_core_lock (the
# lock and lease commands) and test_core_model must FAIL against it.
set -u
. "$(dirname "${BASH_SOURCE[0]}")/bug_control.sh"
bug_control grant_expired test_core_lock test_core_model
