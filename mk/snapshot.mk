# fenced's snapshots taken by a forked child (src/server/snapfork.c): the
# single-node integration test (many async snapshots under load compared
# with the in-loop encoder's bytes, restarts, failing children).  The
# cluster test of the same path (test_cluster_snapshot_async.py) is picked
# up by mk/cluster.mk's wildcard.
INTEG_TESTS += tests/integration/test_snapshot_async.py
