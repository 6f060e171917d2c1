/* A strict RESP2 reply checker for tests and fuzz targets (header only).
 *
 * resp_check_one(buf, len, pos, depth) returns the offset just past the one
 * reply that starts at buf[pos], or -1 when it is malformed, incomplete, or
 * nested deeper than depth.  Accepted: "+text", "-text" (no CR/LF inside),
 * ":int", "$n" bulk (or "$-1"), "*n" array (or "*-1"); lines end in CRLF.
 * resp_check_all tells whether buf holds exactly one reply. */
#ifndef FENCE_TEST_RESP_CHECK_H
#define FENCE_TEST_RESP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The end of the line starting at pos (offset of its "\r"), or -1. */
static inline long resp_check__eol(const char *b, size_t len, size_t pos)
{
    for (size_t i = pos; i + 1 < len; i++) {
        if (b[i] == '\r')
            return b[i + 1] == '\n' ? (long)i : -1;
        if (b[i] == '\n')
            return -1;
    }
    return -1;
}

/* Parse the integer in b[p..e) (optional '-'), into *v; false if bad. */
static inline bool resp_check__int(const char *b, size_t p, size_t e, int64_t *v)
{
    bool neg = p < e && b[p] == '-';
    if (neg)
        p++;
    if (p == e || e - p > 19)
        return false;
    uint64_t x = 0; /* 19 digits fit; INT64_MIN's magnitude too */
    for (; p < e; p++) {
        if (b[p] < '0' || b[p] > '9')
            return false;
        x = x * 10 + (uint64_t)(b[p] - '0');
    }
    if (x > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
        return false;
    *v = neg ? (int64_t)(0 - x) : (int64_t)x;
    return true;
}

static inline long resp_check_one(const char *b, size_t len, size_t pos, int depth)
{
    if (pos >= len || depth < 0)
        return -1;
    long e = resp_check__eol(b, len, pos + 1);
    if (e < 0)
        return -1;
    int64_t n;
    switch (b[pos]) {
    case '+':
    case '-':
        return e + 2;
    case ':':
        return resp_check__int(b, pos + 1, (size_t)e, &n) ? e + 2 : -1;
    case '$':
        if (!resp_check__int(b, pos + 1, (size_t)e, &n) || n < -1)
            return -1;
        if (n == -1)
            return e + 2;
        if ((size_t)e + 2 + (size_t)n + 2 > len)
            return -1;
        if (b[e + 2 + n] != '\r' || b[e + 3 + n] != '\n')
            return -1;
        return e + 4 + (long)n;
    case '*': {
        if (!resp_check__int(b, pos + 1, (size_t)e, &n) || n < -1)
            return -1;
        long p = e + 2;
        for (int64_t i = 0; i < n; i++) {
            p = resp_check_one(b, len, (size_t)p, depth - 1);
            if (p < 0)
                return -1;
        }
        return p;
    }
    default:
        return -1;
    }
}

static inline bool resp_check_all(const char *b, size_t len)
{
    return len > 0 && resp_check_one(b, len, 0, 16) == (long)len;
}

#endif /* FENCE_TEST_RESP_CHECK_H */
