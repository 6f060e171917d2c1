/* fence-proxy's request-target normaliser: pure code (no I/O, no
 * allocation, no globals), fuzzed by tests/fuzz/proxy_path_fuzz.c.
 *
 * Routes, fences and bindings are decided on the normalised path, and the
 * proxy forwards exactly that path (plus the query, unchanged), so the
 * upstream cannot resolve a path to another resource than the one that was
 * checked (issue 18: `PUT /public/../reports/r` was forwarded unfenced and
 * nginx wrote /reports/r).
 *
 * Normalisation (RFC 3986 section 6.2.2, stricter where a server could
 * read the path in two ways):
 *   - the target must be origin-form ("/..."), visible ASCII only
 *     (0x21-0x7e); a '#' (fragment) is refused;
 *   - percent-encoding: "%XX" with two hex digits; an unreserved character
 *     (ALPHA DIGIT '-' '.' '_' '~') is decoded, every other byte stays
 *     encoded with upper-case hex; "%2F" ('/'), "%5C" ('\') and "%00" are
 *     refused (a server may or may not split or cut on them), and so is a
 *     raw '\';
 *   - repeated slashes become one;
 *   - dot segments ("." and "..", also spelled "%2e") are removed; a ".."
 *     that would climb above the root is refused, and so is a dot segment
 *     with a path parameter (".;x", "..;x": Tomcat reads "..;/" as "../");
 *   - a path that ended in '/' (or in a dot segment) keeps its final '/'.
 * The query (from the first '?') is returned as is, after the same
 * visible-ASCII check. */
#ifndef FENCE_PROXY_PATH_H
#define FENCE_PROXY_PATH_H

#include <stddef.h>

/* Normalise the request target p[0..n) (path and optional "?query").
 * out[0..cap) receives the normalised path (no query, no NUL); cap >= n is
 * always enough (the result is never longer than the path it came from).
 * On success returns 0, sets *out_len and *query_off (the offset of '?' in
 * p, or n when there is no query).  On failure returns -1 and sets *why to
 * a static reason (the request is ambiguous: answer 400). */
int fence__proxy_path_normalize(const char *p, size_t n, char *out, size_t cap,
                                size_t *out_len, size_t *query_off, const char **why);

#endif /* FENCE_PROXY_PATH_H */
