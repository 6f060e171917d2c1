#!/usr/bin/env bash
# More of fenced's integration tests against ASan/UBSan builds of the
# servers (tests/lib/sanitized.sh; see sanitized_servers.sh).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/sanitized.sh"
sanitized_run test_fenced_list.py test_tls.py test_fenced_authfail.py
finish
