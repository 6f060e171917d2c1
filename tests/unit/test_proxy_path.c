/* src/proxy/path.c and route.c: the request-target normaliser, the read
 * allow-list and the fences routes name (issue 18, section 2). */
#include <string.h>

#include "proxy/path.h"
#include "proxy/route.h"
#include "../lib/test.h"

/* Normalise s; returns the result (static) or NULL when refused. */
static const char *norm(const char *s)
{
    static char out[4096];
    size_t ol = 0, qo = 0;
    const char *why = NULL;
    if (fence__proxy_path_normalize(s, strlen(s), out, sizeof(out) - 1, &ol, &qo, &why) != 0) {
        if (why == NULL || why[0] == '\0')
            return "(no reason)";
        return NULL;
    }
    out[ol] = '\0';
    return out;
}

static void test_plain(void)
{
    CHECK_STR(norm("/"), "/");
    CHECK_STR(norm("/a/b"), "/a/b");
    CHECK_STR(norm("/a/b/"), "/a/b/");
    CHECK_STR(norm("/reports/r.csv?x=1&y=..%2f"), "/reports/r.csv");
    CHECK_STR(norm("/a/b.txt"), "/a/b.txt");
    CHECK_STR(norm("/..."), "/...");
    CHECK_STR(norm("/a/.b/..c"), "/a/.b/..c");
}

/* The bypasses of issue 18 through '/reports/ PUT,DELETE; /secret/ *;
 * /public/ -'. */
static void test_bypasses(void)
{
    CHECK_STR(norm("/public/../reports/r"), "/reports/r");
    CHECK_STR(norm("/public/%2e%2e/reports/r"), "/reports/r");
    CHECK_STR(norm("/public/%2E%2e/reports/r"), "/reports/r");
    CHECK_STR(norm("/public/.%2e/reports/r"), "/reports/r");
    CHECK(norm("/public/..%2freports/r") == NULL);
    CHECK(norm("/public/..%2Freports/r") == NULL);
    CHECK(norm("/public/..%5creports/r") == NULL);
    CHECK(norm("/public/..\\reports/r") == NULL);
    CHECK_STR(norm("//secret/x"), "/secret/x");
    CHECK_STR(norm("/public//..//secret/x"), "/secret/x");
    CHECK_STR(norm("/./secret/./x"), "/secret/x");
    CHECK_STR(norm("/public/a/../../secret/x"), "/secret/x");
    CHECK_STR(norm("/%72eports/r"), "/reports/r");
    CHECK(norm("/public/..;/reports/r") == NULL);
    CHECK(norm("/public/.;x/reports/r") == NULL);
    CHECK_STR(norm("/public/a;b/r"), "/public/a;b/r");
}

static void test_dots(void)
{
    CHECK_STR(norm("/a/b/.."), "/a/");
    CHECK_STR(norm("/a/b/."), "/a/b/");
    CHECK_STR(norm("/a/.."), "/");
    CHECK_STR(norm("/."), "/");
    CHECK_STR(norm("/./"), "/");
    CHECK_STR(norm("////"), "/");
    CHECK(norm("/..") == NULL);
    CHECK(norm("/../a") == NULL);
    CHECK(norm("/a/../..") == NULL);
    CHECK(norm("/a/../../b") == NULL);
    CHECK(norm("/%2e%2e/a") == NULL);
}

static void test_encoding(void)
{
    CHECK_STR(norm("/a%20b"), "/a%20b");
    CHECK_STR(norm("/a%3fb"), "/a%3Fb");
    CHECK_STR(norm("/%41%7a%2D%5f%7E"), "/Az-_~");
    CHECK_STR(norm("/%c3%a9"), "/%C3%A9");
    CHECK_STR(norm("/a%25"), "/a%25");
    CHECK(norm("/a%00b") == NULL);
    CHECK(norm("/a%") == NULL);
    CHECK(norm("/a%4") == NULL);
    CHECK(norm("/a%zz") == NULL);
    CHECK(norm("/a%4?x") == NULL);
}

static void test_refused_forms(void)
{
    CHECK(norm("") == NULL);
    CHECK(norm("a/b") == NULL);
    CHECK(norm("*") == NULL);
    CHECK(norm("http://h/x") == NULL);
    CHECK(norm("/a#frag") == NULL);
    CHECK(norm("/a?x#y") == NULL);
    CHECK(norm("/a b") == NULL);
    CHECK(norm("/a\x7f") == NULL);
    CHECK(norm("/caf\xc3\xa9") == NULL);
    const char nul[] = "/a\0b";
    char out[16];
    size_t ol, qo;
    const char *why = NULL;
    CHECK(fence__proxy_path_normalize(nul, 4, out, sizeof(out), &ol, &qo, &why) == -1);
    CHECK(why != NULL);
}

/* The query offset, and an output buffer of exactly the input's size. */
static void test_query_and_cap(void)
{
    const char *t = "/a/./b?q=/../x";
    char out[14];
    size_t ol = 0, qo = 0;
    const char *why = NULL;
    CHECK(fence__proxy_path_normalize(t, strlen(t), out, 6, &ol, &qo, &why) == 0);
    CHECK_EQ_U64(qo, 6);
    CHECK_EQ_U64(ol, 4);
    CHECK(memcmp(out, "/a/b", 4) == 0);
}

static const fence_proxy_routes *routes(const char *text)
{
    static fence_proxy_routes rs;
    char err[256];
    fence__proxy_routes_default(&rs);
    if (fence__proxy_routes_parse(&rs, text, strlen(text), err, sizeof(err)) != 0) {
        printf("#   route parse: %s\n", err);
        return NULL;
    }
    return &rs;
}

static bool needs(const fence_proxy_routes *rs, const char *path, const char *method)
{
    const fence_proxy_route *r = fence__proxy_route_match(rs, path, strlen(path));
    return fence__proxy_route_needs_token(rs, r, method, strlen(method));
}

/* A read only if on the allow-list; "-" still means unfenced. */
static void test_methods(void)
{
    const fence_proxy_routes *rs = routes("/reports/ PUT,DELETE; /secret/ *; /public/ -");
    REQUIRE(rs != NULL);
    CHECK(needs(rs, "/reports/r", "PUT"));
    CHECK(needs(rs, "/reports/r", "put"));
    CHECK(needs(rs, "/reports/r", "POST"));
    CHECK(needs(rs, "/reports/r", "FOO"));
    CHECK(needs(rs, "/reports/r", "TRACE"));
    CHECK(needs(rs, "/reports/r", "get"));
    CHECK(needs(rs, "/reports/r", "PROPFIND"));
    CHECK(!needs(rs, "/reports/r", "GET"));
    CHECK(!needs(rs, "/reports/r", "HEAD"));
    CHECK(!needs(rs, "/reports/r", "OPTIONS"));
    CHECK(needs(rs, "/secret/x", "GET"));
    CHECK(!needs(rs, "/public/x", "PUT"));
    CHECK(!needs(rs, "/public/x", "FOO"));
    CHECK(needs(rs, "/other", "put"));
    CHECK(needs(rs, "/other", "FOO"));
    CHECK(!needs(rs, "/other", "GET"));
    fence_proxy_routes r2 = *rs;
    char err[128];
    CHECK(fence__proxy_reads_parse(&r2, "GET,HEAD,OPTIONS,PROPFIND", 25, err, sizeof(err)) == 0);
    CHECK(!needs(&r2, "/reports/r", "PROPFIND"));
    CHECK(fence__proxy_reads_parse(&r2, "GET,TRACE", 9, err, sizeof(err)) == -1);
    CHECK(fence__proxy_reads_parse(&r2, "", 0, err, sizeof(err)) == -1);
    CHECK(fence__proxy_reads_parse(&r2, "get", 3, err, sizeof(err)) == -1);
}

/* Prefixes are normalised like paths. */
static void test_prefixes(void)
{
    const fence_proxy_routes *rs = routes("//a/./b/ *; /%63/ *");
    REQUIRE(rs != NULL);
    CHECK_STR(rs->routes[1].prefix, "/a/b/");
    CHECK_STR(rs->routes[2].prefix, "/c/");
    CHECK(routes("/a/../../ *") == NULL);
    CHECK(routes("/a%2fb/ *") == NULL);
    CHECK(routes("/a?b *") == NULL);
}

static const char *fence_of(const fence_proxy_routes *rs, const char *path)
{
    static char out[FENCE_PROXY_NAME_MAX + 1];
    size_t ol = 0;
    const fence_proxy_route *r = fence__proxy_route_match(rs, path, strlen(path));
    if (fence__proxy_route_fence(r, path, strlen(path), out, sizeof(out) - 1, &ol) != 0)
        return NULL;
    out[ol] = '\0';
    return out;
}

static void test_fences(void)
{
    const fence_proxy_routes *rs =
        routes("/reports/ PUT,DELETE reports; /docs/ * doc:{name}; /v/ - {name}-v");
    REQUIRE(rs != NULL);
    CHECK_STR(fence_of(rs, "/reports/r"), "reports");
    CHECK_STR(fence_of(rs, "/docs/a"), "doc:a");
    CHECK_STR(fence_of(rs, "/docs/a/b/c"), "doc:a");
    CHECK_STR(fence_of(rs, "/v/x/"), "x-v");
    CHECK(fence_of(rs, "/docs/") == NULL);
    CHECK_STR(fence_of(rs, "/other"), "");
    CHECK(routes("/d/ * a{name}{name}") == NULL);
    CHECK(routes("/d/ * a b") == NULL);
    char big[400];
    memset(big, 'x', sizeof(big));
    memcpy(big, "/d/ * ", 6);
    big[sizeof(big) - 1] = '\0';
    CHECK(routes(big) == NULL);
}

int main(void)
{
    TEST_RUN(test_plain);
    TEST_RUN(test_bypasses);
    TEST_RUN(test_dots);
    TEST_RUN(test_encoding);
    TEST_RUN(test_refused_forms);
    TEST_RUN(test_query_and_cap);
    TEST_RUN(test_methods);
    TEST_RUN(test_prefixes);
    TEST_RUN(test_fences);
    return TEST_DONE();
}
