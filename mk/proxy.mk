# src/proxy: fence-proxy, the HTTP/1.1 reverse proxy that enforces fencing
# tokens for an upstream that checks none (issue 10, docs/proxy.md).  Built
# on H2O's libuv flavour (libh2o-dev) and libfence-guard.
#
#   make build/fence-proxy
#   make bench-proxy        requests/s, p50/p99: through the proxy vs nginx
CFLAGS_src_proxy_ := $(shell pkg-config --cflags libh2o libuv 2>/dev/null)
PROXY_LIBS = $(shell pkg-config --libs libh2o libuv 2>/dev/null) $(SODIUM_LIBS) -lssl -lcrypto -pthread

PROXY_SRC := $(wildcard src/proxy/*.c)
PROXY_OBJ := $(PROXY_SRC:%.c=$(BUILD)/%.o)
FENCE_HTTP_PROXY := $(BUILD)/fence-proxy

# The pure parsing (route.c, path.c) and the bindings log (bindlog.c) alone,
# for the fuzz targets and the unit tests.
PROXY_PARSE_LIB := $(BUILD)/libfenceproxyparse.a
$(PROXY_PARSE_LIB): $(BUILD)/src/proxy/route.o $(BUILD)/src/proxy/path.o \
                    $(BUILD)/src/proxy/bindlog.o
	@mkdir -p $(dir $@)
	$(AR) rcs $@ $^

$(FENCE_HTTP_PROXY): $(PROXY_OBJ) $(GUARD_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(PROXY_LIBS)

BINS += $(FENCE_HTTP_PROXY)

# Fuzz target tests/fuzz/proxy_fuzz.c: token, fence name, route table.
FUZZ_TARGETS += proxy
FUZZ_proxy_LIBS := $(BUILD)/libfenceproxyparse.a $(BUILD)/libfencecommon.a
# Fuzz target tests/fuzz/proxy_path_fuzz.c: the request-target normaliser.
FUZZ_TARGETS += proxy_path
FUZZ_proxy_path_LIBS := $(BUILD)/libfenceproxyparse.a $(BUILD)/libfencecommon.a
FUZZ_proxy_path_FLAGS := -max_len=1024
# Fuzz target tests/fuzz/proxy_bindlog_fuzz.c: the bindings log reader.
FUZZ_TARGETS += proxy_bindlog
FUZZ_proxy_bindlog_LIBS := $(BUILD)/libfenceproxyparse.a $(BUILD)/libfencecommon.a
FUZZ_proxy_bindlog_FLAGS := -max_len=4096

# Unit tests: tests/unit/test_proxy*.c over the pure parsing.
PROXY_TEST_SRC := $(wildcard tests/unit/test_proxy*.c)
PROXY_TESTS    := $(PROXY_TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
$(PROXY_TESTS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(PROXY_PARSE_LIB) $(COMMON_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)
UNIT_TESTS += $(PROXY_TESTS)

INTEG_TESTS += tests/integration/test_proxy.py tests/integration/test_proxy_order.py \
               tests/integration/test_proxy_crash.py tests/integration/test_proxy_zk.py \
               tests/integration/test_proxy_asan.sh tests/torture/test_torture_proxy.sh \
               tests/integration/test_proxy_signed.py tests/integration/test_proxy_bypass.py \
               tests/integration/test_proxy_budget.py

# make bench-proxy: small PUTs, 1 and 64 clients, through the proxy and
# straight to nginx in the same run (tests/bench/proxy_bench.py, wrk).
bench-all: bench-proxy
bench-proxy: $(FENCE_HTTP_PROXY)
	/usr/bin/python3 tests/bench/proxy_bench.py

.PHONY: bench-proxy

# The ASan/UBSan build of the proxy for tests/integration/test_proxy_asan.sh
# (scripts/test.sh runs `make tests`, which builds it here).
ASAN_FENCE_PROXY := build/asan/fence-proxy
ifneq ($(SAN),1)
tests: $(ASAN_FENCE_PROXY)
$(ASAN_FENCE_PROXY): FORCE_ASAN_PROXY
	@$(MAKE) --no-print-directory BUILD=build/asan SAN=1 build/asan/fence-proxy
FORCE_ASAN_PROXY:
.PHONY: FORCE_ASAN_PROXY
endif
