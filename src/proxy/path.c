/* fence-proxy's request-target normaliser (path.h). */
#include "proxy/path.h"

#include <stdbool.h>
#include <string.h>

#include "base/hex.h"

/* RFC 3986 unreserved: ALPHA DIGIT - . _ ~ */
static bool unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '.' || c == '_' || c == '~';
}

/* Pass 1: check p[0..q) and decode it into out; returns the length or -1. */
static long decode(const char *p, size_t q, char *out, size_t cap, const char **why)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t w = 0;
    for (size_t i = 0; i < q; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c == '%') {
            if (i + 2 >= q) {
                *why = "a '%' without two hex digits";
                return -1;
            }
            int h = fence__hexval(p[i + 1]), l = fence__hexval(p[i + 2]);
            if (h < 0 || l < 0) {
                *why = "a '%' without two hex digits";
                return -1;
            }
            unsigned char v = (unsigned char)(h * 16 + l);
            if (v == '/' || v == '\\') {
                *why = "an encoded '/' or '\\' (%2F, %5C) is ambiguous";
                return -1;
            }
            if (v == 0) {
                *why = "an encoded NUL (%00)";
                return -1;
            }
            i += 2;
            if (unreserved(v)) {
                if (w + 1 > cap)
                    goto full;
                out[w++] = (char)v;
            } else {
                if (w + 3 > cap)
                    goto full;
                out[w++] = '%';
                out[w++] = hex[v >> 4];
                out[w++] = hex[v & 15];
            }
            continue;
        }
        if (c == '\\') {
            *why = "a '\\' in the path is ambiguous";
            return -1;
        }
        if (w + 1 > cap)
            goto full;
        out[w++] = (char)c;
    }
    return (long)w;
full:
    *why = "the path does not fit the output buffer";
    return -1;
}

int fence__proxy_path_normalize(const char *p, size_t n, char *out, size_t cap,
                                size_t *out_len, size_t *query_off, const char **why)
{
    if (p == NULL || n == 0 || p[0] != '/') {
        *why = "the request target is not a path starting with '/'";
        return -1;
    }
    size_t q = n;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c < 0x21 || c > 0x7e) {
            *why = "the request target holds a byte that is not visible ASCII";
            return -1;
        }
        if (c == '#') {
            *why = "the request target holds a '#'";
            return -1;
        }
        if (c == '?' && q == n)
            q = i;
    }
    long dl = decode(p, q, out, cap, why);
    if (dl < 0)
        return -1;
    size_t len = (size_t)dl;
    /* Pass 2, in place: segments, dot segments, repeated slashes.  The
     * write position o never passes the read position r. */
    size_t r = 0, o = 0;
    bool last_dot = false;
    bool ends_slash = len > 0 && out[len - 1] == '/';
    while (r < len) {
        while (r < len && out[r] == '/')
            r++;
        if (r == len)
            break;
        size_t s = r;
        while (r < len && out[r] != '/')
            r++;
        size_t sl = r - s;
        const char *seg = out + s;
        if (sl == 1 && seg[0] == '.') {
            last_dot = true;
            continue;
        }
        if (sl == 2 && seg[0] == '.' && seg[1] == '.') {
            if (o == 0) {
                *why = "'..' climbs above the root";
                return -1;
            }
            while (o > 0 && out[o - 1] != '/')
                o--;
            o--; /* drop the '/' too */
            last_dot = true;
            continue;
        }
        if ((sl >= 2 && seg[0] == '.' && seg[1] == ';') ||
            (sl >= 3 && seg[0] == '.' && seg[1] == '.' && seg[2] == ';')) {
            *why = "a dot segment with a path parameter ('.;' or '..;')";
            return -1;
        }
        out[o++] = '/';
        memmove(out + o, seg, sl);
        o += sl;
        last_dot = false;
    }
    if ((last_dot || ends_slash) && (o == 0 || out[o - 1] != '/'))
        out[o++] = '/';
    if (o == 0)
        out[o++] = '/';
    *out_len = o;
    *query_off = q;
    return 0;
}
