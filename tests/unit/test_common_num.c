/* src/base/num: the strict decimal parsers every daemon shares. */
#include <string.h>

#include "base/num.h"
#include "../lib/test.h"

/* fence__num_u64 over a C string. */
static int u64(const char *s, uint64_t max, uint64_t *out)
{
    return fence__num_u64(s, strlen(s), max, out);
}

/* fence__num_i64 over a C string. */
static int i64(const char *s, int64_t *out)
{
    return fence__num_i64(s, strlen(s), out);
}

/* Digits only, within the bound, overflow refused, output untouched on
 * failure. */
static void test_u64(void)
{
    uint64_t v = 7;
    CHECK(u64("0", 10, &v) == 0 && v == 0);
    CHECK(u64("10", 10, &v) == 0 && v == 10);
    CHECK(u64("007", 10, &v) == 0 && v == 7);
    CHECK(u64("18446744073709551615", UINT64_MAX, &v) == 0 && v == UINT64_MAX);
    v = 42;
    CHECK(u64("18446744073709551616", UINT64_MAX, &v) == -1);
    CHECK(u64("99999999999999999999999", UINT64_MAX, &v) == -1);
    CHECK(u64("11", 10, &v) == -1);
    CHECK(u64("1", 0, &v) == -1); /* a bound below one digit: no wrap */
    CHECK(u64("5", 3, &v) == -1);
    CHECK(u64("03", 3, &v) == 0 && v == 3);
    v = 42;
    CHECK(u64("", 10, &v) == -1);
    CHECK(u64("-1", 10, &v) == -1);
    CHECK(u64("+1", 10, &v) == -1);
    CHECK(u64(" 1", 10, &v) == -1);
    CHECK(u64("1 ", 10, &v) == -1);
    CHECK(u64("1x", 10, &v) == -1);
    CHECK_EQ_U64(v, 42);
    CHECK(fence__num_u64("123", 2, 1000, &v) == 0 && v == 12); /* length, not NUL */
    CHECK(fence__num_u64(NULL, 0, 10, &v) == -1);
}

/* An optional '-', the full int64 range, nothing beyond. */
static void test_i64(void)
{
    int64_t v = 0;
    CHECK(i64("0", &v) == 0 && v == 0);
    CHECK(i64("-0", &v) == 0 && v == 0);
    CHECK(i64("-12", &v) == 0 && v == -12);
    CHECK(i64("9223372036854775807", &v) == 0 && v == INT64_MAX);
    CHECK(i64("-9223372036854775808", &v) == 0 && v == INT64_MIN);
    v = 5;
    CHECK(i64("9223372036854775808", &v) == -1);
    CHECK(i64("-9223372036854775809", &v) == -1);
    CHECK(i64("-", &v) == -1);
    CHECK(i64("", &v) == -1);
    CHECK(i64("--1", &v) == -1);
    CHECK(i64("1.5", &v) == -1);
    CHECK_EQ_I64(v, 5);
}

/* k/m/g are powers of 1024; one suffix at most; overflow refused. */
static void test_size(void)
{
    uint64_t v = 0;
    CHECK(fence__num_size("512", &v) == 0 && v == 512);
    CHECK(fence__num_size("4k", &v) == 0 && v == 4096);
    CHECK(fence__num_size("2M", &v) == 0 && v == 2 * 1024 * 1024);
    CHECK(fence__num_size("1g", &v) == 0 && v == 1024ull * 1024 * 1024);
    CHECK(fence__num_size("16777216g", &v) == 0);
    CHECK(fence__num_size("17179869184g", &v) == -1); /* 2^64 */
    CHECK(fence__num_size("1kb", &v) == -1);
    CHECK(fence__num_size("1t", &v) == -1);
    CHECK(fence__num_size("k", &v) == -1);
    CHECK(fence__num_size("", &v) == -1);
    CHECK(fence__num_size("-1k", &v) == -1);
}

/* The scanner stops at the first non-digit and checks [min, max]. */
static void test_scan(void)
{
    const char *s = "12=host:7701/7801";
    const char *p = s, *end = s + strlen(s);
    uint64_t v = 0;
    CHECK(fence__num_scan_u64(&p, end, 1, 100, &v) == 0 && v == 12);
    CHECK(p == s + 2);
    CHECK(fence__num_scan_u64(&p, end, 1, 100, &v) == -1); /* at '=' */
    CHECK(p == s + 2);
    p = s;
    CHECK(fence__num_scan_u64(&p, end, 13, 100, &v) == -1); /* below min */
    CHECK(fence__num_scan_u64(&p, end, 0, 11, &v) == -1);   /* above max */
    CHECK(p == s);
    const char *t = "65536";
    p = t;
    CHECK(fence__num_scan_u64(&p, t + 5, 1, 65535, &v) == -1);
    p = t;
    CHECK(fence__num_scan_u64(&p, t + 4, 1, 65535, &v) == 0 && v == 6553);
}

int main(void)
{
    TEST_RUN(test_u64);
    TEST_RUN(test_i64);
    TEST_RUN(test_size);
    TEST_RUN(test_scan);
    return TEST_DONE();
}
