/* fence-proxy's pure parsing (route.h): token, fence name, route table. */
#include "proxy/route.h"

#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/num.h"
#include "proxy/path.h"

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

/* Check the FENCE template t[0..tn) of a route and copy it into nr.
 * Returns 0 or -1 with err. */
static int fence_set(fence_proxy_route *nr, const char *t, size_t tn, char *err, size_t cap)
{
    if (tn == 0)
        return 0;
    if (tn > FENCE_PROXY_NAME_MAX) {
        snprintf(err, cap, "route '%s': fence longer than %d bytes", nr->prefix,
                 FENCE_PROXY_NAME_MAX);
        return -1;
    }
    size_t holes = 0;
    for (size_t i = 0; i < tn; i++) {
        unsigned char c = (unsigned char)t[i];
        if (c < 0x21 || c > 0x7e) {
            snprintf(err, cap, "route '%s': a fence holds visible ASCII only", nr->prefix);
            return -1;
        }
        if (tn - i >= 6 && memcmp(t + i, "{name}", 6) == 0)
            holes++;
    }
    if (holes > 1) {
        snprintf(err, cap, "route '%s': '{name}' may appear once in a fence", nr->prefix);
        return -1;
    }
    memcpy(nr->fence, t, tn);
    nr->fence[tn] = '\0';
    nr->fence_len = tn;
    return 0;
}

/* Set r to prefix p[0..n) with the methods of list l[0..ln) (comma
 * separated; "*" or "-" alone) and the fence template t[0..tn) (tn 0:
 * none).  Returns 0 or -1 with err. */
static int route_set(fence_proxy_route *r, const char *p, size_t n,
                     const char *l, size_t ln, const char *t, size_t tn,
                     char *err, size_t cap)
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
    /* The prefix in the form request paths are matched in. */
    size_t nl = 0, qo = 0;
    const char *why = NULL;
    if (memchr(p, '?', n) != NULL ||
        fence__proxy_path_normalize(p, n, nr.prefix, sizeof(nr.prefix) - 1, &nl, &qo, &why) != 0) {
        snprintf(err, cap, "route: prefix '%.*s': %s", (int)n, p,
                 why != NULL ? why : "a '?' is not allowed");
        return -1;
    }
    nr.prefix[nl] = '\0';
    nr.prefix_len = nl;
    if (fence_set(&nr, t, tn, err, cap) != 0)
        return -1;
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
                       strlen(FENCE_PROXY_DEFAULT_METHODS), "", 0, err, sizeof(err));
    FENCE_ASSERT(rc == 0);
    rs->n = 1;
    rs->reads = FENCE_PROXY_READ_GET | FENCE_PROXY_READ_HEAD | FENCE_PROXY_READ_OPTIONS;
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
        /* One entry text[i..end): PREFIX, blanks, METHODS, [blanks, FENCE,]
         * blanks. */
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
        size_t f = e;
        while (f < end && !is_blank(text[f]))
            f++;
        size_t g = f;
        while (g < end && is_blank(text[g]))
            g++;
        if (a == end) {
            /* An empty entry (";;" or a trailing ';') is allowed. */
        } else if (g != end) {
            snprintf(err, cap, "route: '%.*s': expected 'PREFIX METHODS [FENCE]'",
                     (int)(end - i), text + i);
            return -1;
        } else {
            fence_proxy_route r;
            if (route_set(&r, text + a, b - a, text + c, d - c, text + e, f - e, err, cap) != 0)
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

/* The read methods by bit. */
static const struct {
    const char *name;
    unsigned bit;
} read_names[] = {
    {"GET", FENCE_PROXY_READ_GET},
    {"HEAD", FENCE_PROXY_READ_HEAD},
    {"OPTIONS", FENCE_PROXY_READ_OPTIONS},
    {"PROPFIND", FENCE_PROXY_READ_PROPFIND},
};
#define N_READ_NAMES (sizeof(read_names) / sizeof(read_names[0]))

int fence__proxy_reads_parse(fence_proxy_routes *rs, const char *text, size_t len,
                             char *err, size_t cap)
{
    FENCE_ASSERT(rs != NULL);
    unsigned mask = 0;
    size_t i = 0;
    while (i <= len) {
        size_t j = i;
        while (j < len && text[j] != ',')
            j++;
        size_t k = 0;
        while (k < N_READ_NAMES &&
               !(strlen(read_names[k].name) == j - i && memcmp(read_names[k].name, text + i, j - i) == 0))
            k++;
        if (k == N_READ_NAMES) {
            snprintf(err, cap, "read-methods: '%.*s' is not GET, HEAD, OPTIONS or PROPFIND",
                     (int)(j - i > 32 ? 32 : j - i), text + i);
            return -1;
        }
        mask |= read_names[k].bit;
        i = j + 1;
    }
    rs->reads = mask;
    return 0;
}

bool fence__proxy_method_is_read(const fence_proxy_routes *rs, const char *method, size_t len)
{
    FENCE_ASSERT(rs != NULL);
    for (size_t k = 0; k < N_READ_NAMES; k++)
        if ((rs->reads & read_names[k].bit) && strlen(read_names[k].name) == len &&
            memcmp(read_names[k].name, method, len) == 0)
            return true;
    return false;
}

bool fence__proxy_route_needs_token(const fence_proxy_routes *rs, const fence_proxy_route *r,
                                    const char *method, size_t len)
{
    FENCE_ASSERT(r != NULL);
    if (r->all)
        return true;
    if (r->n_methods == 0)
        return false; /* "-": an unfenced prefix */
    if (!fence__proxy_method_is_read(rs, method, len))
        return true; /* not a read: lowercase, unknown, TRACE, ... */
    for (size_t k = 0; k < r->n_methods; k++) {
        if (strlen(r->methods[k]) == len && memcmp(r->methods[k], method, len) == 0)
            return true;
    }
    return false;
}

int fence__proxy_route_fence(const fence_proxy_route *r, const char *path, size_t len,
                             char *out, size_t cap, size_t *out_len)
{
    FENCE_ASSERT(r != NULL);
    *out_len = 0;
    if (r->fence_len == 0)
        return 0;
    const char *hole = strstr(r->fence, "{name}");
    if (hole == NULL) {
        if (r->fence_len > cap)
            return -1;
        memcpy(out, r->fence, r->fence_len);
        *out_len = r->fence_len;
        return 0;
    }
    /* The first segment after the prefix. */
    FENCE_ASSERT(len >= r->prefix_len);
    size_t s = r->prefix_len;
    while (s < len && path[s] == '/')
        s++;
    size_t e = s;
    while (e < len && path[e] != '/')
        e++;
    if (e == s)
        return -1;
    size_t before = (size_t)(hole - r->fence), after = r->fence_len - before - 6;
    size_t total = before + (e - s) + after;
    if (total > cap || !fence__proxy_name_valid(path + s, e - s) || total > FENCE_PROXY_NAME_MAX)
        return -1;
    memcpy(out, r->fence, before);
    memcpy(out + before, path + s, e - s);
    memcpy(out + before + (e - s), hole + 6, after);
    *out_len = total;
    return 0;
}
