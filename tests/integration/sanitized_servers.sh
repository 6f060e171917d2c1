#!/usr/bin/env bash
# fenced's integration tests again, against ASan/UBSan builds of the
# servers (tests/lib/sanitized.sh); the rest of them in
# sanitized_servers_2.sh, fence-store's in sanitized_store.sh: three
# programs of about the same length, which the runner overlaps.
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/sanitized.sh"
sanitized_run test_fenced_clients.py test_fenced_badinput.py test_fenced_review.py \
    test_fenced_crash.py test_fenced_logs.sh
finish
