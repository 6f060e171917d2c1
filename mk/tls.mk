# Client TLS (src/net/tls.c, tls_conf.c; the flags are in fenced's and
# fence-store's option tables): the integration test against both daemons
# (certificates made by the test with openssl), and the fuzz target over the
# pure option and certificate-name checks.
INTEG_TESTS += tests/integration/test_tls.py tests/integration/test_proxy_tls.py

FUZZ_TARGETS += tls
FUZZ_tls_LIBS := $(BUILD)/libfencecommon.a

# make bench-tls (in make bench-all): cycles/s plain vs TLS at 64 clients
# against one fenced, same run (tests/bench/tls_bench.sh with the load
# client tests/bench/tls_cycles.c, since libfence has no TLS yet).
$(BUILD)/tests/tls_cycles: tests/bench/tls_cycles.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) $(TLS_LIBS) -lpthread
bench-all: bench-tls
bench-tls:
	@$(MAKE) --no-print-directory $(BUILD)/fenced $(BUILD)/tests/tls_cycles
	@BUILD=$(BUILD) bash tests/bench/tls_bench.sh
.PHONY: bench bench-tls
