# src/torture + tools/: the pause demo and the fault-injection torture harness
# (issue 6).  C programs: the workload client (fence-torture-worker) and the
# TCP fault proxy (fence-faults).  The orchestrator, the history checker and
# the demo are Python 3 (standard library only), installed next to the
# binaries so that they find fenced, fence-store and each other there.
#
#   make demo                         the pause demo (lease-only run too)
#   make torture DURATION=600 SEED=7  a long torture run against fencing
#   make torture-controls             the two runs that must fail the checker
#   make torture-proxy DURATION=60    proxy mode: HTTP through fence-proxy to
#                                     nginx, then its control straight to nginx
CFLAGS_src_torture_ := $(shell pkg-config --cflags hiredis 2>/dev/null)
TORTURE_LIBS := $(shell pkg-config --libs hiredis 2>/dev/null) -lpthread

TORTURE_WORKER := $(BUILD)/fence-torture-worker
FENCE_FAULTS    := $(BUILD)/fence-faults
TORTURE_PY     := $(BUILD)/fence-torture $(BUILD)/fence-demo $(BUILD)/torture_check.py \
                  $(BUILD)/torture_common.py $(BUILD)/fenceproto.py \
                  $(BUILD)/torture_proxy.py
# fenced built with the planted etcd#11456 bug (grant to an expired lease),
# for the checker's second control: the grant_expired mutant
# (tests/mutants/grant_expired.patch, built by tests/mutants/build.sh).
BUG_FENCED     := $(BUILD)/mutant/grant_expired/fenced

$(TORTURE_WORKER): $(BUILD)/src/torture/worker.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(TORTURE_LIBS)

$(FENCE_FAULTS): $(BUILD)/src/torture/faults.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)

$(BUILD)/fence-torture: tools/torture.py
	@mkdir -p $(dir $@)
	install -m 755 $< $@
$(BUILD)/fence-demo: tools/fence_demo.py
	@mkdir -p $(dir $@)
	install -m 755 $< $@
$(BUILD)/torture_check.py: tools/torture_check.py
	@mkdir -p $(dir $@)
	install -m 755 $< $@
$(BUILD)/torture_common.py: tools/torture_common.py
	@mkdir -p $(dir $@)
	install -m 644 $< $@
$(BUILD)/fenceproto.py: tools/fenceproto.py
	@mkdir -p $(dir $@)
	install -m 644 $< $@
$(BUILD)/torture_proxy.py: tools/torture_proxy.py
	@mkdir -p $(dir $@)
	install -m 755 $< $@

$(BUG_FENCED): FORCE_BUG_FENCED
	+@bash tests/mutants/build.sh grant_expired $(BUILD)/mutant/grant_expired fenced
FORCE_BUG_FENCED:

BINS += $(TORTURE_WORKER) $(FENCE_FAULTS) $(TORTURE_PY)

# The torture tests need the planted-bug fenced (only in the release build).
ifeq ($(VARIANT),release)
tests: $(BUG_FENCED)
endif

INTEG_TESTS += tests/torture/test_checker.sh tests/torture/test_faults.sh \
               tests/torture/test_demo.sh tests/torture/test_torture_short.sh \
               tests/torture/test_torture_cluster.sh tests/torture/test_torture_elect.sh \
               tests/torture/test_torture_shared.sh \
               tests/torture/test_control_lease_only.sh tests/torture/test_control_bug.sh

DURATION ?= 600
SEED     ?=
TORTURE_WORKERS ?= 4

demo: $(BUILD)/fenced $(BUILD)/fence-store $(TORTURE_WORKER) $(TORTURE_PY)
	/usr/bin/python3 $(BUILD)/fence-demo --svg $(BUILD)/demo.svg

torture: $(BUILD)/fenced $(BUILD)/fence-store $(TORTURE_WORKER) $(FENCE_FAULTS) $(TORTURE_PY)
	/usr/bin/python3 $(BUILD)/fence-torture --duration $(DURATION) --workers $(TORTURE_WORKERS) \
	    $(if $(SEED),--seed $(SEED)) --out $(BUILD)/torture

torture-controls: $(BUILD)/fenced $(BUILD)/fence-store $(TORTURE_WORKER) $(FENCE_FAULTS) $(TORTURE_PY) $(BUG_FENCED)
	bash tests/torture/test_control_lease_only.sh
	bash tests/torture/test_control_bug.sh

torture-proxy: $(BUILD)/fenced $(FENCE_HTTP_PROXY) $(TORTURE_PY)
	/usr/bin/python3 $(BUILD)/fence-torture --proxy --duration $(DURATION) \
	    --workers $(TORTURE_WORKERS) $(if $(SEED),--seed $(SEED))
	/usr/bin/python3 $(BUILD)/fence-torture --proxy --direct --expect-violation \
	    --duration $(DURATION) --workers $(TORTURE_WORKERS) $(if $(SEED),--seed $(SEED))

.PHONY: demo torture torture-controls torture-proxy FORCE_BUG_FENCED
