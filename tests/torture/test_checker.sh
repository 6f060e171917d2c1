#!/usr/bin/env bash
# The history checker's own unit tests: hand-made histories, clean ones that
# must pass and broken ones (stale write, lost update, token reuse, missing
# record, grant to an expired lease, no liveness) that must fail.
exec /usr/bin/python3 "$(dirname "$0")/checker_cases.py"
