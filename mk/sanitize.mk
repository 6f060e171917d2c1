# The servers' integration tests once more against ASan/UBSan builds of
# fenced and fence-store (scripts/test.sh builds them in the asan variant,
# build/asan/), in three programs that run side by side
# (tests/integration/sanitized_*.sh over tests/lib/sanitized.sh).
INTEG_TESTS += $(sort $(wildcard tests/integration/sanitized_*.sh))
