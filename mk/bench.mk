# make bench: one table from one run (tests/bench/run.py, docs/performance.md):
# fenced uncontended and contended with the handoff floor, fence-store FSET
# next to Redis appendfsync always, the 1M-lock rows, keepalive load, a
# 3-node cluster, TLS / signed / metrics, fence-proxy vs nginx.  Every process is started by the
# driver (free ports on 127.0.0.1, one temp dir) and stopped by PID.
# BENCH_SECONDS=N lengthens the cells (default 3); BENCH_ONLY=a,b runs some
# sections.  make bench-all: the table, then every older per-part target
# (bench-client, bench-store, bench-cluster3, bench-metrics, bench-signed,
# bench-tls, bench-proxy, bench-guard), which each print their own format.

# The keepalive row's load generator (epoll + hiredis's reader, the CLI's
# histogram; the LOCK probe in a thread of its own).
KEEPALIVE_LOAD := $(BUILD)/tests/keepalive_load
$(KEEPALIVE_LOAD): $(BUILD)/tests/bench/keepalive_load.o $(BUILD)/tests/bench/loadgen.o $(BUILD)/src/fencectl/hist.o $(COMMON_ASSERT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -pthread -o $@ $^ $(LDFLAGS) $(HIREDIS_LIBS) -lm

# The contended rows' event-loop client (same reader and histogram; the
# two share tests/bench/loadgen.c, with cycle_load: its cycle driver).
HANDOFF_LOAD := $(BUILD)/tests/handoff_load
$(HANDOFF_LOAD): $(BUILD)/tests/bench/handoff_load.o $(BUILD)/tests/bench/loadgen.o $(BUILD)/src/fencectl/hist.o $(COMMON_ASSERT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(HIREDIS_LIBS) -lm

# The fenced-vs-Redis row's client (uncontended lock cycles, the same
# epoll loop against both servers).
CYCLE_LOAD := $(BUILD)/tests/cycle_load
$(CYCLE_LOAD): $(BUILD)/tests/bench/cycle_load.o $(BUILD)/tests/bench/loadgen.o $(BUILD)/src/fencectl/hist.o $(COMMON_ASSERT_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(HIREDIS_LIBS) -lm

BENCH_BINS := $(BUILD)/fenced $(BUILD)/fencectl $(BUILD)/fence-store $(BUILD)/fence-proxy \
              $(KEEPALIVE_LOAD) $(HANDOFF_LOAD) $(CYCLE_LOAD) $(BUILD)/tests/fsync_probe

# (The fsync probe of the handoff rows: tests/bench/fsync_probe.c, mk/floor.mk.)
bench:
	@$(MAKE) -s --no-print-directory $(BENCH_BINS)
	@FSYNC_PROBE=$(BUILD)/tests/fsync_probe BUILD=$(BUILD) /usr/bin/python3 tests/bench/run.py

bench-all: bench

# The smoke test: the driver end to end with tiny cells (1 s, 10k held
# locks), checking only that every row printed a number.
INTEG_TESTS += tests/integration/test_bench_smoke.sh
tests: $(KEEPALIVE_LOAD) $(HANDOFF_LOAD) $(CYCLE_LOAD) $(BUILD)/tests/fsync_probe

.PHONY: bench bench-all
