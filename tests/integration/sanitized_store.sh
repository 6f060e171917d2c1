#!/usr/bin/env bash
# fence-store's integration tests again, against ASan/UBSan builds of the
# servers (tests/lib/sanitized.sh; see sanitized_servers.sh).
. "$(dirname "$0")/../lib/lib.sh"
. "$(dirname "$0")/../lib/sanitized.sh"
sanitized_run test_store.sh test_store_py.py test_store_crash.py test_store_keys.py \
    test_store_logs.sh test_store_batch.py test_store_wal.py test_store_upgrade.py \
    test_store_pipeline_timer.py
finish
