#!/usr/bin/env bash
# fence-faults (the torture harness's fault proxy): forwarding, delay,
# partition/heal, reset, bad input.
. "$(dirname "$0")/../lib/lib.sh"
export BUILD
"$PY" "$(dirname "$0")/faults_cases.py"
