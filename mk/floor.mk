# The handoff floor (issue 14): tests/bench/fsync_probe.c measures a
# directory's durable-write time the way libraft's uv backend writes its log
# segments; tests/bench/floor.sh adds a running fenced's 1-client PING round
# trip and prints the floor 1 / (fsync p50 + ping p50) that the contended
# handoff rate of `make bench` is compared with.
#
#   build/release/tests/fsync_probe DIR [N [direct|append|buffered|aio]]
#       -> fsync_p50_us=... fsync_p99_us=... fsync_max_us=... n=... mode=...
#   bash tests/bench/floor.sh HOST PORT DATADIR
#       -> the probe's line, then ping_p50_us=... floor_per_s=...
#   make bench-floor [FLOOR_DIR=dir]      the probe alone (default: /tmp)
FSYNC_PROBE := $(BUILD)/tests/fsync_probe
$(FSYNC_PROBE): tests/bench/fsync_probe.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS)

BINS += $(FSYNC_PROBE)
INTEG_TESTS += tests/integration/test_fsync_probe.sh

FLOOR_DIR ?= /tmp
bench-floor: $(FSYNC_PROBE)
	@$(FSYNC_PROBE) $(FLOOR_DIR)
.PHONY: bench-floor
