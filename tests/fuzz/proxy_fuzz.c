/* Fuzz target for fence-proxy's own parsing (src/proxy/route.c): the
 * Fencing-Token value, the Fencing-Lock name and the --route table.
 *
 * The first input byte picks what the rest is:
 *   0  a Fencing-Token value: parse succeeds exactly when the text is 1..20
 *      digits whose value fits 64 bits (checked against a reference), and
 *      printing the value gives the text without its leading zeros;
 *   1  a Fencing-Lock value: valid exactly when 1..256 visible ASCII bytes;
 *   2+ a --route text (PREFIX METHODS [FENCE]), then (after the first NUL,
 *      if any) a path: a parse
 *      that succeeds leaves "/" as routes[0], every prefix starting with
 *      '/', at most FENCE_PROXY_ROUTES_MAX routes; printing the table back
 *      as route text parses to the same table; the route matched for the
 *      path is a prefix of it (or "/"), and no longer matching prefix
 *      exists; a method that is not a read ("put") needs a token exactly
 *      when the route is not "-"; the fence built for the path is a valid
 *      name (or none when the route names none).
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "proxy/route.h"

/* Reference: decimal digits only, 1..20 of them, value <= UINT64_MAX. */
static bool token_ref(const uint8_t *p, size_t n, uint64_t *v)
{
    if (n == 0 || n > 20)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
    }
    *v = x;
    return true;
}

static void check_token(const uint8_t *p, size_t n)
{
    uint64_t got = 0, want = 0;
    bool ok = fence__proxy_token_parse((const char *)p, n, &got) == 0;
    bool ref = token_ref(p, n, &want);
    FUZZ_CHECK(ok == ref);
    if (!ok)
        return;
    FUZZ_CHECK(got == want);
    char buf[32];
    int len = snprintf(buf, sizeof(buf), "%" PRIu64, got);
    size_t z = 0;
    while (z + 1 < n && p[z] == '0')
        z++;
    FUZZ_CHECK((size_t)len == n - z);
    FUZZ_CHECK(memcmp(buf, p + z, n - z) == 0);
}

static void check_name(const uint8_t *p, size_t n)
{
    bool want = n >= 1 && n <= FENCE_PROXY_NAME_MAX;
    for (size_t i = 0; i < n && want; i++)
        want = p[i] >= 0x21 && p[i] <= 0x7e;
    FUZZ_CHECK(fence__proxy_name_valid((const char *)p, n) == want);
}

/* Print rs as --route text into out (big enough for any table). */
static size_t print_routes(const fence_proxy_routes *rs, char *out, size_t cap)
{
    size_t len = 0;
    for (size_t k = 0; k < rs->n; k++) {
        const fence_proxy_route *r = &rs->routes[k];
        len += (size_t)snprintf(out + len, cap - len, "%s ", r->prefix);
        if (r->all)
            len += (size_t)snprintf(out + len, cap - len, "*");
        else if (r->n_methods == 0)
            len += (size_t)snprintf(out + len, cap - len, "-");
        for (size_t m = 0; m < r->n_methods; m++)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", m ? "," : "", r->methods[m]);
        if (r->fence_len > 0)
            len += (size_t)snprintf(out + len, cap - len, " %s", r->fence);
        len += (size_t)snprintf(out + len, cap - len, ";");
        FUZZ_CHECK(len < cap);
    }
    return len;
}

static fence_proxy_routes a, b;
static char text[FENCE_PROXY_ROUTES_MAX *
                 (FENCE_PROXY_PREFIX_MAX + FENCE_PROXY_METHODS_MAX * FENCE_PROXY_METHOD_LEN_MAX +
                  FENCE_PROXY_NAME_MAX + 8)];

static void check_routes(const uint8_t *p, size_t n)
{
    const uint8_t *nul = memchr(p, '\0', n);
    size_t tlen = nul ? (size_t)(nul - p) : n;
    const char *path = nul ? (const char *)nul + 1 : "/";
    size_t plen = nul ? n - tlen - 1 : 1;
    char err[256];

    fence__proxy_routes_default(&a);
    if (fence__proxy_routes_parse(&a, (const char *)p, tlen, err, sizeof(err)) != 0) {
        FUZZ_CHECK(strlen(err) > 0);
        return;
    }
    FUZZ_CHECK(a.n >= 1 && a.n <= FENCE_PROXY_ROUTES_MAX);
    FUZZ_CHECK(strcmp(a.routes[0].prefix, "/") == 0);
    for (size_t k = 0; k < a.n; k++) {
        FUZZ_CHECK(a.routes[k].prefix[0] == '/');
        FUZZ_CHECK(a.routes[k].prefix_len == strlen(a.routes[k].prefix));
        for (size_t j = 0; j < k; j++)
            FUZZ_CHECK(strcmp(a.routes[j].prefix, a.routes[k].prefix) != 0);
    }
    size_t len = print_routes(&a, text, sizeof(text));
    fence__proxy_routes_default(&b);
    FUZZ_CHECK(fence__proxy_routes_parse(&b, text, len, err, sizeof(err)) == 0);
    FUZZ_CHECK(b.n == a.n);
    for (size_t k = 0; k < a.n; k++) {
        FUZZ_CHECK(strcmp(a.routes[k].prefix, b.routes[k].prefix) == 0);
        FUZZ_CHECK(a.routes[k].all == b.routes[k].all);
        FUZZ_CHECK(a.routes[k].n_methods == b.routes[k].n_methods);
        for (size_t m = 0; m < a.routes[k].n_methods; m++)
            FUZZ_CHECK(strcmp(a.routes[k].methods[m], b.routes[k].methods[m]) == 0);
        FUZZ_CHECK(strcmp(a.routes[k].fence, b.routes[k].fence) == 0);
    }
    const fence_proxy_route *r = fence__proxy_route_match(&a, path, plen);
    FUZZ_CHECK(r != NULL);
    FUZZ_CHECK(r == &a.routes[0] ||
               (r->prefix_len <= plen && memcmp(r->prefix, path, r->prefix_len) == 0));
    for (size_t k = 1; k < a.n; k++) {
        const fence_proxy_route *o = &a.routes[k];
        if (o->prefix_len <= plen && memcmp(o->prefix, path, o->prefix_len) == 0)
            FUZZ_CHECK(o->prefix_len <= r->prefix_len || r == &a.routes[0]);
    }
    for (size_t m = 0; m < r->n_methods; m++)
        FUZZ_CHECK(fence__proxy_route_needs_token(&a, r, r->methods[m], strlen(r->methods[m])));
    if (r->all)
        FUZZ_CHECK(fence__proxy_route_needs_token(&a, r, "ANY", 3));
    /* Not a read: needs a token unless the route is "-". */
    FUZZ_CHECK(fence__proxy_route_needs_token(&a, r, "put", 3) == (r->all || r->n_methods > 0));
    char fn[FENCE_PROXY_NAME_MAX + 1];
    size_t fl = 0;
    if (r->prefix_len <= plen && memcmp(r->prefix, path, r->prefix_len) == 0 &&
        fence__proxy_route_fence(r, path, plen, fn, sizeof(fn), &fl) == 0) {
        FUZZ_CHECK(fl <= FENCE_PROXY_NAME_MAX);
        FUZZ_CHECK(fl == 0 ? r->fence_len == 0 : fence__proxy_name_valid(fn, fl));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] == 0)
        check_token(data + 1, size - 1);
    else if (data[0] == 1)
        check_name(data + 1, size - 1);
    else
        check_routes(data + 1, size - 1);
    return 0;
}
