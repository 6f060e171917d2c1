/* Unit tests of libfence's pure parts: address lists, error replies,
 * backoff, valid-until arithmetic, the error map. */
#include <string.h>

#include "../lib/test.h"
#include "libfence/pure.h"
#include "fence.h"

/* Addresses of every accepted form parse to the right fields. */
static void test_addr_parse_forms(void)
{
    fence__addr a;
    CHECK(fence__addr_parse("127.0.0.1:7700", 14, &a) == 0);
    CHECK_STR(a.host, "127.0.0.1");
    CHECK(a.port == 7700);
    CHECK(!a.is_unix);
    CHECK(fence__addr_parse("[::1]:1", 7, &a) == 0);
    CHECK_STR(a.host, "::1");
    CHECK(a.port == 1);
    CHECK(fence__addr_parse("unix:/tmp/x.sock", 16, &a) == 0);
    CHECK(a.is_unix);
    CHECK_STR(a.host, "/tmp/x.sock");
    CHECK(fence__addr_parse("localhost:65535", 15, &a) == 0);
    CHECK(a.port == 65535);
}

/* Malformed addresses are refused. */
static void test_addr_parse_rejects(void)
{
    fence__addr a;
    const char *bad[] = {"", "host", ":7700", "host:", "host:0", "host:65536", "host:7x",
                         "host:-1", "[::1]7700", "[::1", "unix:", "a b:1", "::1:7700", "a:b:1",
                         "[a]b]:1", "x]:1", "[[a]:1",
                         "host:99999999999999999999999"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (fence__addr_parse(bad[i], strlen(bad[i]), &a) == 0) {
            printf("#   accepted \"%s\"\n", bad[i]);
            CHECK(0);
        }
    }
    char longhost[300];
    memset(longhost, 'h', sizeof(longhost));
    memcpy(longhost + 250, ":1", 3);
    CHECK(fence__addr_parse(longhost, strlen(longhost), &a) == FENCE_EINVAL);
}

/* Lists split on commas; empty items and overflows are errors. */
static void test_addr_list(void)
{
    fence__addr a[4];
    size_t n = 0;
    CHECK(fence__addr_parse_list("a:1,b:2,[::1]:3", a, 4, &n) == 0);
    CHECK(n == 3);
    CHECK_STR(a[1].host, "b");
    CHECK(a[2].port == 3);
    CHECK(fence__addr_parse_list("a:1,,b:2", a, 4, &n) == FENCE_EINVAL);
    CHECK(fence__addr_parse_list("a:1,", a, 4, &n) == FENCE_EINVAL);
    CHECK(fence__addr_parse_list("", a, 4, &n) == FENCE_EINVAL);
    CHECK(fence__addr_parse_list("a:1,b:2,c:3,d:4,e:5", a, 4, &n) == FENCE_EINVAL);
    char buf[64];
    fence__addr_format(&a[0], buf, sizeof(buf));
    CHECK(fence__addr_parse_list("[::1]:9,unix:/s", a, 4, &n) == 0);
    fence__addr_format(&a[0], buf, sizeof(buf));
    CHECK_STR(buf, "[::1]:9");
    fence__addr_format(&a[1], buf, sizeof(buf));
    CHECK_STR(buf, "unix:/s");
    CHECK(!fence__addr_equal(&a[0], &a[1]));
    CHECK(fence__addr_equal(&a[0], &a[0]));
}

/* Error replies map by their first word only. */
static void test_error_codes(void)
{
    CHECK(fence__error_code("NOLEASE the lease is gone") == FENCE_ENOLEASE);
    CHECK(fence__error_code("NOLEASE") == FENCE_ENOLEASE);
    CHECK(fence__error_code("LIMIT too many leases") == FENCE_ELIMIT);
    CHECK(fence__error_code("BADTOKEN token 9 is not signed") == FENCE_EBADTOKEN);
    CHECK(fence__error_code("TRYAGAIN retry") == FENCE_ETRYAGAIN);
    CHECK(fence__error_code("NOTLEADER 1.2.3.4:5") == FENCE_ENOTLEADER);
    CHECK(fence__error_code("STALE 3 4") == FENCE_ESTALE);
    CHECK(fence__error_code("ERR syntax") == FENCE_ESERVER);
    CHECK(fence__error_code("NOLEASEX") == FENCE_ESERVER);
    CHECK(fence__error_code("") == FENCE_ESERVER);
    CHECK(fence__error_code(NULL) == FENCE_EPROTO);
}

/* NOTLEADER carries the leader's address, or nothing when unknown. */
static void test_notleader(void)
{
    fence__addr a;
    CHECK(fence__parse_notleader("NOTLEADER 127.0.0.1:7701", &a) == 0);
    CHECK_STR(a.host, "127.0.0.1");
    CHECK(a.port == 7701);
    CHECK(fence__parse_notleader("NOTLEADER 10.0.0.1:1 leader moved", &a) == 0);
    CHECK(a.port == 1);
    CHECK(fence__parse_notleader("NOTLEADER", &a) == FENCE_ENOTLEADER);
    CHECK(fence__parse_notleader("NOTLEADER garbage", &a) == FENCE_ENOTLEADER);
    CHECK(fence__parse_notleader("ERR 1.2.3.4:5", &a) == FENCE_ENOTLEADER);
}

/* STALE <token> <highest>. */
static void test_stale(void)
{
    uint64_t h = 0;
    CHECK(fence__parse_stale("STALE 33 34", &h) == 0);
    CHECK_EQ_U64(h, 34);
    CHECK(fence__parse_stale("STALE 1 18446744073709551615", &h) == 0);
    CHECK_EQ_U64(h, UINT64_MAX);
    CHECK(fence__parse_stale("STALE 33", &h) == FENCE_EPROTO);
    CHECK(fence__parse_stale("STALE x y", &h) == FENCE_EPROTO);
    CHECK(fence__parse_stale("STALE 1 18446744073709551616", &h) == FENCE_EPROTO);
    CHECK(fence__parse_stale("ERR 1 2", &h) == FENCE_EPROTO);
}

/* Decimal parsing rejects signs, spaces, overflow. */
/* The shape check of signed token replies. */
static void test_parse_signed(void)
{
    char buf[32];
    uint64_t t = 0;
    CHECK(fence__parse_signed("34.k1.abc", 9, &t, buf, sizeof(buf)) && t == 34);
    CHECK(strcmp(buf, "34.k1.abc") == 0);
    CHECK(fence__parse_signed("18446744073709551615.h.x", 24, &t, buf, sizeof(buf)));
    CHECK(t == UINT64_MAX);
    CHECK(!fence__parse_signed("18446744073709551616.h.x", 24, &t, buf, sizeof(buf)));
    CHECK(!fence__parse_signed("034.k1.abc", 10, &t, buf, sizeof(buf)));
    CHECK(!fence__parse_signed("0.k1.abc", 8, &t, buf, sizeof(buf)));
    CHECK(!fence__parse_signed("34", 2, &t, buf, sizeof(buf)));
    CHECK(!fence__parse_signed(".k1.abc", 7, &t, buf, sizeof(buf)));
    CHECK(!fence__parse_signed("34.k1 abc", 9, &t, buf, sizeof(buf)));
    CHECK(!fence__parse_signed("34.k1\nabc", 9, &t, buf, sizeof(buf)));
    CHECK(!fence__parse_signed("", 0, &t, buf, sizeof(buf)));
    CHECK(!fence__parse_signed("34.k1.abc", 9, &t, buf, 9)); /* no room for NUL */
}

static void test_parse_u64(void)
{
    uint64_t v;
    CHECK(fence__parse_u64("0", 1, &v) && v == 0);
    CHECK(fence__parse_u64("18446744073709551615", 20, &v) && v == UINT64_MAX);
    CHECK(!fence__parse_u64("18446744073709551616", 20, &v));
    CHECK(!fence__parse_u64("-1", 2, &v));
    CHECK(!fence__parse_u64(" 1", 2, &v));
    CHECK(!fence__parse_u64("", 0, &v));
}

/* Backoff doubles, is capped, and stays within [b/2, b]. */
static void test_backoff(void)
{
    for (uint32_t r = 0; r < 1000; r += 7) {
        uint32_t b0 = fence__backoff_ms(0, 20, 1000, r);
        CHECK(b0 >= 10 && b0 <= 20);
        uint32_t b3 = fence__backoff_ms(3, 20, 1000, r);
        CHECK(b3 >= 80 && b3 <= 160);
        uint32_t b30 = fence__backoff_ms(30, 20, 1000, r);
        CHECK(b30 >= 500 && b30 <= 1000);
        CHECK(fence__backoff_ms(1000000, 20, 1000, r) <= 1000);
    }
    CHECK(fence__backoff_ms(0, 0, 0, 0) >= 1);
}

/* valid-until = send time + TTL - margin; renewal at a third. */
static void test_valid_until(void)
{
    CHECK_EQ_U64(fence__margin_ms(10000, 0), 1005);
    CHECK_EQ_U64(fence__margin_ms(10000, 200), 200);
    CHECK_EQ_U64(fence__margin_ms(100, 90), 50); /* never more than half */
    CHECK_EQ_U64(fence__valid_until(1000, 500, 55), 1445);
    CHECK_EQ_U64(fence__valid_until(1000, 500, 600), 1000);
    CHECK_EQ_U64(fence__renew_at(1000, 900), 1300);
    CHECK_EQ_U64(fence__renew_at(1000, 2), 1001);
    /* The renewal always comes well before valid-until. */
    for (uint64_t ttl = 10; ttl < 100000; ttl = ttl * 3 / 2) {
        uint64_t m = fence__margin_ms(ttl, 0);
        CHECK(fence__renew_at(0, ttl) < fence__valid_until(0, ttl, m));
    }
}

/* ACQUIRE only when the wait is at most half the TTL. */
static void test_use_acquire(void)
{
    CHECK(fence__use_acquire(10000, 0));
    CHECK(fence__use_acquire(10000, 5000));
    CHECK(!fence__use_acquire(10000, 5001));
    CHECK(!fence__use_acquire(500, 30000));
}

/* Every code has a distinct name and a message; unknown codes are safe. */
static void test_error_map(void)
{
    CHECK_STR(fence_strerror(0), "success");
    CHECK_STR(fence_err_name(FENCE_EBUSY), "FENCE_EBUSY");
    CHECK_STR(fence_strerror(FENCE_ESTALE),
              "fencing token is older than one the resource has seen");
    CHECK(FENCE_EINVAL == -1);
    CHECK_STR(fence_strerror(1), "unknown error");
    CHECK_STR(fence_strerror(-10000), "unknown error");
    CHECK_STR(fence_err_name(-10000), "FENCE_E?");
    for (int rc = -1; rc > -FENCE_ERRNO_COUNT_; rc--) {
        CHECK(strcmp(fence_strerror(rc), "unknown error") != 0);
        CHECK(strncmp(fence_err_name(rc), "FENCE_E", 7) == 0);
        for (int o = rc - 1; o > -FENCE_ERRNO_COUNT_; o--)
            CHECK(strcmp(fence_err_name(rc), fence_err_name(o)) != 0);
    }
}

/* Bad options are refused without a handle; a good list is kept. */
static void test_client_open(void)
{
    fence_client *c = (fence_client *)1;
    fence_client_opts o;
    fence_client_opts_init(&o);
    o.servers = "nope";
    CHECK(fence_client_open(&o, &c) == FENCE_EINVAL);
    CHECK(c == NULL);
    CHECK(strstr(fence_client_errmsg(NULL), "nope") != NULL);
    CHECK(fence_client_open(NULL, &c) == FENCE_EINVAL);
    o.servers = "127.0.0.1:1,127.0.0.1:2";
    REQUIRE(fence_client_open(&o, &c) == 0);
    char buf[64];
    fence_client_server(c, buf, sizeof(buf));
    CHECK_STR(buf, "127.0.0.1:1");
    fence_lock *l = NULL;
    CHECK(fence_lock_acquire(c, "", 1000, 0, &l) == FENCE_EINVAL);
    CHECK(fence_lock_acquire(c, "x", 5, 0, &l) == FENCE_EINVAL);
    char big[300];
    memset(big, 'n', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    CHECK(fence_lock_acquire(c, big, 1000, 0, &l) == FENCE_EINVAL);
    CHECK(l == NULL);
    fence_client_close(c);
    fence_client_close(NULL);
    CHECK(fence_lock_release(NULL) == 0);
}

/* $FENCE_SERVER is the default server list. */
static void test_env_default(void)
{
    setenv("FENCE_SERVER", "10.1.2.3:4567", 1);
    fence_client_opts o;
    fence_client_opts_init(&o);
    fence_client *c;
    REQUIRE(fence_client_open(&o, &c) == 0);
    char buf[64];
    fence_client_server(c, buf, sizeof(buf));
    CHECK_STR(buf, "10.1.2.3:4567");
    fence_client_close(c);
    unsetenv("FENCE_SERVER");
    REQUIRE(fence_client_open(&o, &c) == 0);
    fence_client_server(c, buf, sizeof(buf));
    CHECK_STR(buf, "127.0.0.1:7700");
    fence_client_close(c);
}

int main(void)
{
    TEST_RUN(test_addr_parse_forms);
    TEST_RUN(test_parse_signed);
    TEST_RUN(test_addr_parse_rejects);
    TEST_RUN(test_addr_list);
    TEST_RUN(test_error_codes);
    TEST_RUN(test_notleader);
    TEST_RUN(test_stale);
    TEST_RUN(test_parse_u64);
    TEST_RUN(test_backoff);
    TEST_RUN(test_valid_until);
    TEST_RUN(test_use_acquire);
    TEST_RUN(test_error_map);
    TEST_RUN(test_client_open);
    TEST_RUN(test_env_default);
    return TEST_DONE();
}
