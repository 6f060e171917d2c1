/* fence-proxy's pure parsing: the Fencing-Token and Fencing-Lock header
 * values and the --route table.  No I/O, no allocation, no globals, so a
 * fuzzer (tests/fuzz/proxy_fuzz.c) sees exactly what the daemon runs.
 *
 * Routes.  A route is a path prefix and the set of methods that need a
 * token under it; the longest matching prefix wins, and a built-in route
 * "/" covers every path no configured route matches.  The --route text is
 *
 *     PREFIX METHOD[,METHOD...] [FENCE] [; PREFIX METHOD,... [FENCE] ...]
 *
 * where METHOD is an HTTP method name (case-sensitive, as in HTTP), "*"
 * (every method, reads too) or "-" (no method: every request may pass
 * unfenced).  A later entry for the same prefix replaces the earlier one.
 * Prefixes are normalised like request paths (path.h) and matched against
 * the normalised path.
 *
 * Reads.  Only the methods of the read list (--read-methods: GET, HEAD,
 * OPTIONS by default; PROPFIND may be added) are reads.  Under a route
 * with a METHOD list, every method that is not a read needs a token,
 * whether listed or not (so "put", "FOO" and "TRACE" do), and a listed
 * read needs one too.  "-" routes need none, "*" routes need one always.
 *
 * Fences.  FENCE (optional) names the fence that guards the paths under
 * the prefix: a fixed name ("reports"), or a template holding "{name}",
 * replaced by the first path segment after the prefix ("/docs/ * doc:{name}"
 * puts /docs/a/b under fence "doc:a").  A fenced request whose Fencing-Lock
 * is not that fence is refused.  Without FENCE, a path belongs to the first
 * fence that wrote it (bindings, proxy_fence.c).
 *
 * A request that carries a token is fenced whatever its route says; the
 * route decides which methods are refused (428) without one. */
#ifndef FENCE_PROXY_ROUTE_H
#define FENCE_PROXY_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proxy/limits.h"

/* The methods of the built-in "/" route: HTTP's and WebDAV's writers. */
#define FENCE_PROXY_DEFAULT_METHODS "PUT,POST,PATCH,DELETE,MKCOL,COPY,MOVE,PROPPATCH,LOCK,UNLOCK"

/* One route. */
typedef struct fence_proxy_route {
    char prefix[FENCE_PROXY_PREFIX_MAX];   /* path prefix, NUL-terminated */
    size_t prefix_len;                     /* strlen(prefix), >= 1 */
    bool all;                              /* "*": every method needs a token */
    size_t n_methods;                      /* entries used in methods */
    char methods[FENCE_PROXY_METHODS_MAX][FENCE_PROXY_METHOD_LEN_MAX];
                                           /* methods that need a token */
    char fence[FENCE_PROXY_NAME_MAX + 1];  /* FENCE template, NUL-terminated, or "" */
    size_t fence_len;                      /* strlen(fence); 0: the route names none */
} fence_proxy_route;

/* The read methods (bits of fence_proxy_routes.reads). */
enum fence_proxy_read {
    FENCE_PROXY_READ_GET = 1,
    FENCE_PROXY_READ_HEAD = 2,
    FENCE_PROXY_READ_OPTIONS = 4,
    FENCE_PROXY_READ_PROPFIND = 8,
};
#define FENCE_PROXY_READS_DEFAULT "GET,HEAD,OPTIONS"

/* A route table; routes[0] is always the "/" route. */
typedef struct fence_proxy_routes {
    unsigned reads;                                /* enum fence_proxy_read bits */
    size_t n;                                      /* routes used, >= 1 */
    fence_proxy_route routes[FENCE_PROXY_ROUTES_MAX]; /* the routes */
} fence_proxy_routes;

/* Parse a Fencing-Token value p[0..n): a decimal in 0..2^64-1, digits
 * only.  Returns 0 and sets *out, or -1 (empty, not a number, too big). */
int fence__proxy_token_parse(const char *p, size_t n, uint64_t *out);

/* Whether p[0..n) is an acceptable fence name (Fencing-Lock value): 1 ..
 * FENCE_PROXY_NAME_MAX bytes, each a visible ASCII character (0x21-0x7e). */
bool fence__proxy_name_valid(const char *p, size_t n);

/* Fill *rs with the built-in table (the "/" route only). */
void fence__proxy_routes_default(fence_proxy_routes *rs);

/* Parse the --route text[0..len) into *rs (which must hold the defaults
 * or an earlier table; entries are added or replace same-prefix ones).
 * Returns 0, or -1 with the reason in err[0..cap) (*rs may then be
 * partly updated; the caller exits). */
int fence__proxy_routes_parse(fence_proxy_routes *rs, const char *text,
                              size_t len, char *err, size_t cap);

/* The route for path[0..len): the longest prefix match; never NULL. */
const fence_proxy_route *fence__proxy_route_match(const fence_proxy_routes *rs,
                                                  const char *path, size_t len);

/* Parse the --read-methods text[0..len) (comma separated, from GET, HEAD,
 * OPTIONS, PROPFIND) into rs->reads.  Returns 0, or -1 with err. */
int fence__proxy_reads_parse(fence_proxy_routes *rs, const char *text, size_t len,
                             char *err, size_t cap);

/* Whether method[0..len) is a read of rs (case-sensitive). */
bool fence__proxy_method_is_read(const fence_proxy_routes *rs, const char *method, size_t len);

/* Whether method[0..len) needs a token under route r of table rs. */
bool fence__proxy_route_needs_token(const fence_proxy_routes *rs, const fence_proxy_route *r,
                                    const char *method, size_t len);

/* The fence route r assigns to the normalised path[0..len), matched to r.
 * Returns 0 and sets *out_len (0 when r names no fence) with the name in
 * out[0..cap); or -1 when r's template needs a "{name}" the path does not
 * give (no segment after the prefix) or the name would not be a valid
 * fence name. */
int fence__proxy_route_fence(const fence_proxy_route *r, const char *path, size_t len,
                             char *out, size_t cap, size_t *out_len);

#endif /* FENCE_PROXY_ROUTE_H */
