/* fence-proxy's pure parsing: the Fencing-Token and Fencing-Lock header
 * values and the --route table.  No I/O, no allocation, no globals, so a
 * fuzzer (tests/fuzz/proxy_fuzz.c) sees exactly what the daemon runs.
 *
 * Routes.  A route is a path prefix and the set of methods that need a
 * token under it; the longest matching prefix wins, and a built-in route
 * "/" covers every path no configured route matches.  The --route text is
 *
 *     PREFIX METHOD[,METHOD...] [; PREFIX METHOD,... ...]
 *
 * where METHOD is an HTTP method name (case-sensitive, as in HTTP), "*"
 * (every method, reads too) or "-" (no method: every request may pass
 * unfenced).  A later entry for the same prefix replaces the earlier one.
 * A request that carries a token is fenced whatever its route says; the
 * route only decides which methods are refused (428) without one. */
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
} fence_proxy_route;

/* A route table; routes[0] is always the "/" route. */
typedef struct fence_proxy_routes {
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

/* Whether method[0..len) needs a token under route r. */
bool fence__proxy_route_needs_token(const fence_proxy_route *r,
                                    const char *method, size_t len);

#endif /* FENCE_PROXY_ROUTE_H */
