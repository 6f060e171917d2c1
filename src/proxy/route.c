/* fence-proxy's pure parsing (route.h): token, fence name, route table. */
#include "proxy/route.h"

#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "common/num.h"

int fence__proxy_token_parse(const char *p, size_t n, uint64_t *out)
{
    FENCE_ASSERT(out != NULL);
    if (p == NULL || n == 0 || n > 20)
        return -1;
    return fence__num_u64(p, n, UINT64_MAX, out);
}

bool fence__proxy_name_valid(const char *p, size_t n)
{
    if (p == NULL || n == 0 || n > FENCE_PROXY_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x21 || c > 0x7e)
            return false;
    }
    return true;
}

/* Set r to prefix p[0..n) with the methods of list l[0..ln) (comma
 * separated; "*" or "-" alone).  Returns 0 or -1 with err. */
static int route_set(fence_proxy_route *r, const char *p, size_t n,
                     const char *l, size_t ln, char *err, size_t cap)
{
    if (n == 0 || p[0] != '/') {
        snprintf(err, cap, "route: a prefix must start with '/'");
        return -1;
    }
    if (n >= sizeof(r->prefix)) {
        snprintf(err, cap, "route: prefix longer than %d bytes", FENCE_PROXY_PREFIX_MAX - 1);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)p[i] < 0x21 || (unsigned char)p[i] > 0x7e) {
            snprintf(err, cap, "route: a prefix holds visible ASCII only");
            return -1;
        }
    }
    if (ln == 0) {
        snprintf(err, cap, "route '%.*s': no methods (use '-' for none, '*' for all)", (int)n, p);
        return -1;
    }
    fence_proxy_route nr;
    memset(&nr, 0, sizeof(nr));
    memcpy(nr.prefix, p, n);
    nr.prefix_len = n;
    if (ln == 1 && l[0] == '*') {
        nr.all = true;
    } else if (!(ln == 1 && l[0] == '-')) {
        size_t i = 0;
        while (i <= ln) {
            size_t j = i;
            while (j < ln && l[j] != ',')
                j++;
            size_t m = j - i;
            if (m == 0 || m >= FENCE_PROXY_METHOD_LEN_MAX) {
                snprintf(err, cap, "route '%.*s': empty or too long method in '%.*s'",
                         (int)n, p, (int)ln, l);
                return -1;
            }
            for (size_t k = i; k < j; k++) {
                char c = l[k];
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '-' || c == '_')) {
                    snprintf(err, cap, "route '%.*s': bad method '%.*s'", (int)n, p, (int)m, l + i);
                    return -1;
                }
            }
            if (nr.n_methods == FENCE_PROXY_METHODS_MAX) {
                snprintf(err, cap, "route '%.*s': more than %d methods", (int)n, p,
                         FENCE_PROXY_METHODS_MAX);
                return -1;
            }
            memcpy(nr.methods[nr.n_methods], l + i, m);
            nr.methods[nr.n_methods][m] = '\0';
            nr.n_methods++;
            i = j + 1;
        }
    }
    *r = nr;
    return 0;
}

void fence__proxy_routes_default(fence_proxy_routes *rs)
{
    char err[128];
    FENCE_ASSERT(rs != NULL);
    memset(rs, 0, sizeof(*rs));
    int rc = route_set(&rs->routes[0], "/", 1, FENCE_PROXY_DEFAULT_METHODS,
                       strlen(FENCE_PROXY_DEFAULT_METHODS), err, sizeof(err));
    FENCE_ASSERT(rc == 0);
    rs->n = 1;
}

/* Whether c is a space or a tab. */
static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

int fence__proxy_routes_parse(fence_proxy_routes *rs, const char *text,
                              size_t len, char *err, size_t cap)
{
    FENCE_ASSERT(rs != NULL);
    FENCE_ASSERT(rs->n >= 1);
    size_t i = 0;
    while (i < len) {
        size_t end = i;
        while (end < len && text[end] != ';')
            end++;
        /* One entry text[i..end): PREFIX, blanks, METHODS, blanks. */
        size_t a = i;
        while (a < end && is_blank(text[a]))
            a++;
        size_t b = a;
        while (b < end && !is_blank(text[b]))
            b++;
        size_t c = b;
        while (c < end && is_blank(text[c]))
            c++;
        size_t d = c;
        while (d < end && !is_blank(text[d]))
            d++;
        size_t e = d;
        while (e < end && is_blank(text[e]))
            e++;
        if (a == end) {
            /* An empty entry (";;" or a trailing ';') is allowed. */
        } else if (e != end) {
            snprintf(err, cap, "route: '%.*s': expected 'PREFIX METHODS'", (int)(end - i), text + i);
            return -1;
        } else {
            fence_proxy_route r;
            if (route_set(&r, text + a, b - a, text + c, d - c, err, cap) != 0)
                return -1;
            size_t k = 0;
            while (k < rs->n && strcmp(rs->routes[k].prefix, r.prefix) != 0)
                k++;
            if (k == rs->n) {
                if (rs->n == FENCE_PROXY_ROUTES_MAX) {
                    snprintf(err, cap, "route: more than %d routes", FENCE_PROXY_ROUTES_MAX);
                    return -1;
                }
                rs->n++;
            }
            rs->routes[k] = r;
        }
        i = end + 1;
    }
    return 0;
}

const fence_proxy_route *fence__proxy_route_match(const fence_proxy_routes *rs,
                                                  const char *path, size_t len)
{
    FENCE_ASSERT(rs != NULL);
    FENCE_ASSERT(rs->n >= 1);
    const fence_proxy_route *best = &rs->routes[0];
    for (size_t k = 1; k < rs->n; k++) {
        const fence_proxy_route *r = &rs->routes[k];
        if (r->prefix_len <= len && r->prefix_len > best->prefix_len &&
            memcmp(r->prefix, path, r->prefix_len) == 0)
            best = r;
    }
    return best;
}

bool fence__proxy_route_needs_token(const fence_proxy_route *r,
                                    const char *method, size_t len)
{
    FENCE_ASSERT(r != NULL);
    if (r->all)
        return true;
    for (size_t k = 0; k < r->n_methods; k++) {
        if (strlen(r->methods[k]) == len && memcmp(r->methods[k], method, len) == 0)
            return true;
    }
    return false;
}
