# The servers' integration tests once more against ASan/UBSan builds of
# fenced and fence-store (scripts/test.sh builds them in the asan variant,
# build/asan/).
INTEG_TESTS += tests/integration/sanitized_servers.sh
