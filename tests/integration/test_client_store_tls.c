/* libfence's fence-store helper over TLS with a login
 * (fence_store_open_opts), against a real fence-store started by
 * tests/integration/test_client_store_tls.py, which passes its TLS port,
 * plain port, CA file and the user's password in the environment:
 * FENCE_STORE_TLS (host:port), FENCE_STORE_PLAIN (host:port of a plaintext
 * port without a login), FENCE_STORE_CA, FENCE_STORE_PASS. */
#include "../lib/test.h"
#include "fence.h"

static const char *tls_addr, *plain_addr, *ca, *pass;

/* A store handle over TLS as user app with password pw. */
static fence_store *open_tls(const char *cafile, const char *pw)
{
    fence_store_opts o;
    fence_store_opts_init(&o);
    o.addr = tls_addr;
    o.timeout_ms = 10000;
    o.tls = true;
    o.tls_ca_file = cafile;
    o.user = "app";
    o.password = pw;
    fence_store *s = NULL;
    REQUIRE(fence_store_open_opts(&o, &s) == 0);
    return s;
}

/* Admit, write, read back and a stale refusal, all over TLS after AUTH. */
static void test_tls_login_set_get_stale(void)
{
    fence_store *s = open_tls(ca, pass);
    CHECK(fence_store_admit(s, "tls.f", 5, NULL) == 0);
    CHECK(fence_store_set(s, "tls.f", 5, "tls.k", 5, "five", 4, NULL) == 0);
    char *v = NULL;
    size_t n = 0;
    CHECK(fence_store_get(s, "tls.k", 5, &v, &n) == 0);
    CHECK(v != NULL && n == 4 && memcmp(v, "five", 4) == 0);
    fence_free(v);
    uint64_t high = 0;
    CHECK(fence_store_set(s, "tls.f", 4, "tls.k", 5, "four", 4, &high) == FENCE_ESTALE);
    CHECK_EQ_U64(high, 5);
    fence_store_close(s);
}

/* A wrong password: FENCE_EAUTH, and the password is in no message. */
static void test_wrong_password(void)
{
    fence_store *s = open_tls(ca, "Wrong-Secret-99");
    CHECK(fence_store_admit(s, "tls.f", 9, NULL) == FENCE_EAUTH);
    CHECK(strstr(fence_store_errmsg(s), "login") != NULL);
    CHECK(strstr(fence_store_errmsg(s), "Wrong-Secret-99") == NULL);
    fence_store_close(s);
    /* The refused admit moved nothing: token 6 still passes. */
    s = open_tls(ca, pass);
    CHECK(fence_store_admit(s, "tls.f", 6, NULL) == 0);
    fence_store_close(s);
}

/* Without the test CA (the system's CAs) the certificate is refused. */
static void test_untrusted_certificate(void)
{
    fence_store *s = open_tls(NULL, pass);
    CHECK(fence_store_admit(s, "tls.f", 7, NULL) == FENCE_EUNREACHABLE);
    CHECK(strstr(fence_store_errmsg(s), "certificate") != NULL);
    fence_store_close(s);
}

/* Option mistakes are refused at open. */
static void test_bad_options(void)
{
    fence_store_opts o;
    fence_store_opts_init(&o);
    o.addr = tls_addr;
    o.tls_ca_file = ca; /* without tls */
    fence_store *s = NULL;
    CHECK(fence_store_open_opts(&o, &s) == FENCE_EINVAL && s == NULL);
    fence_store_opts_init(&o);
    o.addr = tls_addr;
    o.user = "app"; /* without a password */
    CHECK(fence_store_open_opts(&o, &s) == FENCE_EINVAL && s == NULL);
    fence_store_opts_init(&o);
    o.addr = tls_addr;
    o.tls = true;
    o.tls_ca_file = "/nonexistent/ca.pem";
    CHECK(fence_store_open_opts(&o, &s) == FENCE_EINVAL && s == NULL);
    CHECK(fence_store_open_opts(NULL, &s) == FENCE_EINVAL);
}

/* Plaintext against the TLS port fails; the plain form still works on
 * the plain port, where the store asks for a login (NOAUTH). */
static void test_plain_forms(void)
{
    fence_store *s = NULL;
    REQUIRE(fence_store_open(tls_addr, 3000, &s) == 0);
    int rc = fence_store_admit(s, "tls.f", 8, NULL);
    CHECK(rc == FENCE_EIO || rc == FENCE_ETIMEOUT || rc == FENCE_EUNREACHABLE);
    fence_store_close(s);
    REQUIRE(fence_store_open(plain_addr, 3000, &s) == 0);
    rc = fence_store_admit(s, "tls.f", 8, NULL);
    CHECK(rc != 0 && strstr(fence_store_errmsg(s), "NOAUTH") != NULL);
    fence_store_close(s);
    fence_store_opts o;
    fence_store_opts_init(&o);
    o.addr = plain_addr;
    o.user = "app";
    o.password = pass;
    REQUIRE(fence_store_open_opts(&o, &s) == 0);
    CHECK(fence_store_admit(s, "tls.f", 8, NULL) == 0);
    fence_store_close(s);
}

int main(void)
{
    tls_addr = getenv("FENCE_STORE_TLS");
    plain_addr = getenv("FENCE_STORE_PLAIN");
    ca = getenv("FENCE_STORE_CA");
    pass = getenv("FENCE_STORE_PASS");
    if (tls_addr == NULL || plain_addr == NULL || ca == NULL || pass == NULL) {
        printf("# skipped: run by test_client_store_tls.py\n");
        return 77;
    }
    TEST_RUN(test_tls_login_set_get_stale);
    TEST_RUN(test_wrong_password);
    TEST_RUN(test_untrusted_certificate);
    TEST_RUN(test_bad_options);
    TEST_RUN(test_plain_forms);
    return TEST_DONE();
}
