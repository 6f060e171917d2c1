/* src/net/tls_conf.c: the client-TLS option checks and the CN rule
 * (the transport itself is tested with real processes in
 * tests/integration/test_tls.py). */
#include <string.h>

#include "base/limits.h"
#include "net/tls.h"
#include "../lib/test.h"

/* fence__tls_conf_check over the fields; the message in err. */
static int check(const char *cert, const char *key, const char *ca,
                 const char *word, uint64_t port, uint64_t tls_port,
                 bool unix_sock, int *auth, char *err)
{
    fence_tls_conf tc = {cert, key, ca, word, port, tls_port, unix_sock};
    err[0] = '\0';
    return fence__tls_conf_check(&tc, auth, err, 256);
}

/* What combinations pass and what mode they give. */
static void test_conf(void)
{
    char err[256];
    int auth = -1;
    CHECK(check("", "", "", "", 7700, 0, false, &auth, err) == 0);
    CHECK(auth == FENCE_TLS_AUTH_NO);
    CHECK(check("c", "k", "", "", 7700, 7701, false, &auth, err) == 0);
    CHECK(auth == FENCE_TLS_AUTH_NO);
    CHECK(check("c", "k", "ca", "", 0, 7701, false, &auth, err) == 0);
    CHECK(auth == FENCE_TLS_AUTH_YES);
    CHECK(check("c", "k", "ca", "optional", 0, 7701, false, &auth, err) == 0);
    CHECK(auth == FENCE_TLS_AUTH_OPTIONAL);
    CHECK(check("c", "k", "ca", "no", 0, 7701, false, &auth, err) == 0);
    CHECK(auth == FENCE_TLS_AUTH_NO);
    CHECK(check("", "", "", "", 0, 0, true, &auth, err) == 0); /* unix only */

    CHECK(check("", "", "", "", 0, 0, false, &auth, err) == -1);
    CHECK(strstr(err, "port: 0") != NULL);
    CHECK(check("c", "", "", "", 7700, 7701, false, &auth, err) == -1);
    CHECK_STR(err, "tls-port: needs tls-cert and tls-key");
    CHECK(check("c", "k", "", "", 7700, 0, false, &auth, err) == -1);
    CHECK_STR(err, "tls-cert: set, but no tls-port to serve TLS on");
    CHECK(check("", "", "ca", "", 7700, 0, false, &auth, err) == -1);
    CHECK_STR(err, "tls-ca: set, but no tls-port to serve TLS on");
    CHECK(check("", "", "", "yes", 7700, 0, false, &auth, err) == -1);
    CHECK(check("c", "k", "", "yes", 7700, 7701, false, &auth, err) == -1);
    CHECK(strstr(err, "needs tls-ca") != NULL);
    CHECK(check("c", "k", "", "optional", 7700, 7701, false, &auth, err) == -1);
    CHECK(check("c", "k", "ca", "maybe", 7700, 7701, false, &auth, err) == -1);
    CHECK(strstr(err, "'maybe' is not yes, no or optional") != NULL);
    CHECK(check("c", "k", "ca", "YES", 7700, 7701, false, &auth, err) == -1);
    CHECK(check("c", "k", "", "", 7700, 7700, false, &auth, err) == -1);
    CHECK(strstr(err, "also the plain port") != NULL);
}

/* Words and names. */
static void test_words(void)
{
    int a = -1;
    CHECK(fence__tls_auth_parse("", true, &a) == 0 && a == FENCE_TLS_AUTH_YES);
    CHECK(fence__tls_auth_parse("", false, &a) == 0 && a == FENCE_TLS_AUTH_NO);
    CHECK(fence__tls_auth_parse("yes ", true, &a) == -1);
    CHECK_STR(fence__tls_auth_name(FENCE_TLS_AUTH_YES), "yes");
    CHECK_STR(fence__tls_auth_name(FENCE_TLS_AUTH_NO), "no");
    CHECK_STR(fence__tls_auth_name(FENCE_TLS_AUTH_OPTIONAL), "optional");
    CHECK_STR(fence__tls_auth_name(99), "?");
}

/* The CN rule: 1..FENCE_TLS_CN_MAX bytes, no control bytes, UTF-8 ok. */
static void test_cn(void)
{
    char big[FENCE_TLS_CN_MAX + 1];
    memset(big, 'a', sizeof(big));
    CHECK(fence__tls_cn_valid("alice", 5));
    CHECK(fence__tls_cn_valid("J\xc3\xb6rg", 5));
    CHECK(fence__tls_cn_valid(big, FENCE_TLS_CN_MAX));
    CHECK(!fence__tls_cn_valid(big, FENCE_TLS_CN_MAX + 1));
    CHECK(!fence__tls_cn_valid("", 0));
    CHECK(!fence__tls_cn_valid(NULL, 3));
    CHECK(!fence__tls_cn_valid("a\0b", 3));
    CHECK(!fence__tls_cn_valid("a\nb", 3));
    CHECK(!fence__tls_cn_valid("a\x7f", 2));
}

int main(void)
{
    TEST_RUN(test_conf);
    TEST_RUN(test_words);
    TEST_RUN(test_cn);
    return TEST_DONE();
}
