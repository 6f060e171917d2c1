# fenced clusters: the cluster integration tests (real processes on
# 127.0.0.1, and network namespaces for the partition test), the failover
# benchmark and the 3-node `fencectl bench`.  The daemon's cluster code
# (src/server/cluster.c) and `fencectl cluster` (src/fencectl/cluster.c) are
# built by mk/server.mk and mk/cli.mk through their wildcards.
#
# Knobs (environment): FENCE_CLUSTER_LOAD_S (seconds of load before and
# after the kill, default 2), KEEP_TMP=1 keeps the node dirs.
CLUSTER_TESTS := $(filter-out tests/integration/test_cluster_lib.py, \
                   $(sort $(wildcard tests/integration/test_cluster_*.py \
                                     tests/integration/test_cluster_*.sh)))
INTEG_TESTS += $(CLUSTER_TESTS)

# make bench-cluster: failover time over KILLS (default 10) kill -9s of the
# leader of a 3-node cluster (median, max), then `fencectl bench` against a
# 3-node cluster.  `make bench-all` gets only the 3-node table
# (bench-cluster3, the same table as the single-node one; BENCH_ARGS applies
# to both); `make bench` has one 3-node row (tests/bench/run.py).
KILLS ?= 10
bench-cluster: bench-failover bench-cluster3
bench-failover:
	@$(MAKE) --no-print-directory $(BUILD)/fenced $(BUILD)/fencectl
	@BUILD=$(BUILD) bash tests/bench/cluster_failover_bench.sh $(KILLS)
bench-cluster3:
	@$(MAKE) --no-print-directory $(BUILD)/fenced $(BUILD)/fencectl
	@BUILD=$(BUILD) bash tests/bench/cluster_bench.sh $(BENCH_ARGS)
bench-all: bench-cluster3

.PHONY: bench-cluster bench-failover bench-cluster3

# Unit test and fuzz target of the pure address parsing (cluster_addr.c).
CLUSTER_ADDR_OBJ := $(BUILD)/src/server/cluster_addr.o $(BUILD)/src/base/assert.o
$(BUILD)/tests/test_cluster_addr: $(BUILD)/tests/unit/test_cluster_addr.o $(CLUSTER_ADDR_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)
UNIT_TESTS += $(BUILD)/tests/test_cluster_addr

FUZZ_TARGETS += cluster_addr
FUZZ_cluster_addr_LIBS := $(CLUSTER_ADDR_OBJ)

# Unit test and fuzz target of the raft transport's hello (peer_hello.c).
PEER_HELLO_OBJ := $(BUILD)/src/server/peer_hello.o $(BUILD)/src/base/assert.o
$(BUILD)/tests/test_peer_hello: $(BUILD)/tests/unit/test_peer_hello.o $(PEER_HELLO_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)
UNIT_TESTS += $(BUILD)/tests/test_peer_hello

FUZZ_TARGETS += peer_hello
FUZZ_peer_hello_LIBS := $(PEER_HELLO_OBJ)

# make soak-cluster ROUNDS=N: the long kill/restart soak (skipped in make
# test): N rounds of kill -9 and restart under load, invariants checked.
ROUNDS ?= 20
soak-cluster:
	@$(MAKE) --no-print-directory $(BUILD)/fenced
	@BUILD=$(BUILD) FENCE_CLUSTER_SOAK=$(ROUNDS) tests/integration/test_cluster_soak.py
.PHONY: soak-cluster
