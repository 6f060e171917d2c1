# src/ops/metrics.c + metrics_http.c: the metrics registry and its HTTP
# endpoint (libmicrohttpd).  Both objects live in libfencecommon.a (see
# common.mk); a program that serves metrics links $(METRICS_LIBS) too.
METRICS_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null || echo -lmicrohttpd) -lpthread -lm

# Unit test of the registry, the renderer and the endpoint (threads: also
# in the tsan variant).
$(BUILD)/tests/test_metrics: $(BUILD)/tests/unit/test_metrics.o $(BUILD)/libfencecommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(METRICS_LIBS) $(LDFLAGS)
UNIT_TESTS += $(BUILD)/tests/test_metrics
TSAN_TESTS += $(BUILD)/tests/test_metrics

# Fuzz target: render a registry built from the input and check that the
# output is well-formed exposition text (tests/fuzz/metrics_fuzz.c).
FUZZ_TARGETS += metrics
FUZZ_metrics_LIBS := $(BUILD)/libfencecommon.a
FUZZ_metrics_LDLIBS := -lpthread -lm

# A stand-alone exporter for the Prometheus harness test (not a unit test).
$(BUILD)/tests/metrics_demo: $(BUILD)/tests/unit/metrics_demo.o $(BUILD)/libfencecommon.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(METRICS_LIBS) $(LDFLAGS)
BINS += $(BUILD)/tests/metrics_demo

# A real Prometheus scraping the demo exporter; promtool on its output and
# on docs/metrics.md's alert rules.
INTEG_TESTS += tests/integration/test_metrics_prom.py

# The daemons serve /metrics: they link libmicrohttpd (target-specific, so
# the order of the mk fragments does not matter).
$(BUILD)/fenced: LDFLAGS += $(METRICS_LIBS)
$(BUILD)/fence-store: LDFLAGS += $(METRICS_LIBS)
$(BUILD)/fence-proxy: LDFLAGS += $(METRICS_LIBS)
# fenced, fence-store and fence-proxy under a real Prometheus: promtool,
# the pause scenario through the query API, the dashboard's names, bad
# input and many scrapers.
INTEG_TESTS += tests/integration/test_metrics_daemons.py
# The metrics port under idle sockets, per-address limits, its loopback default.
INTEG_TESTS += $(sort $(wildcard tests/integration/test_metrics_port*.py))

# make bench-metrics (in make bench-all): cycles/s with and without
# --metrics-port (and a scraper), same run, alternating.
bench-all: bench-metrics
bench-metrics:
	@$(MAKE) --no-print-directory $(BUILD)/fenced $(BUILD)/fencectl
	@BUILD=$(BUILD) bash tests/bench/metrics_bench.sh

.PHONY: bench bench-metrics
