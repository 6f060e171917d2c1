# Client TLS (src/common/tls.c, tls_conf.c; the flags are in fenced's and
# fence-store's option tables): the integration test against both daemons
# (certificates made by the test with openssl), and the fuzz target over the
# pure option and certificate-name checks.
INTEG_TESTS += tests/integration/test_tls.py

FUZZ_TARGETS += tls
FUZZ_tls_LIBS := $(BUILD)/libfencecommon.a
