#!/usr/bin/env bash
# fence-proxy (the torture harness's fault proxy): forwarding, delay,
# partition/heal, reset, bad input.
. "$(dirname "$0")/../lib/lib.sh"
export BUILD
"$PY" "$(dirname "$0")/proxy_cases.py"
