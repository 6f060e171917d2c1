/* A strict RESP2 and RESP3 reply checker, and a RESP3-to-RESP2 converter,
 * for tests and fuzz targets (header only).
 *
 * resp_check_one(buf, len, pos, depth) returns the offset just past the one
 * RESP2 reply that starts at buf[pos], or -1 when it is malformed,
 * incomplete, or nested deeper than depth.  Accepted: "+text", "-text" (no
 * CR/LF inside), ":int", "$n" bulk (or "$-1"), "*n" array (or "*-1"); lines
 * end in CRLF.  resp_check_all tells whether buf holds exactly one reply.
 *
 * resp3_check_one and resp3_check_all do the same for RESP3: everything
 * RESP2 accepts, and "%n" map (n pairs), "~n" set, "_" null, "#t" / "#f"
 * boolean, ",d" double (a decimal strtod reads whole, "inf", "-inf" or
 * "nan"), "=n" verbatim string (at least 4 bytes, "xxx:" first).
 *
 * resp3_to_resp2(in, len, out, cap) rewrites one RESP3 reply as the RESP2
 * reply fenced and fence-store send a connection that did not ask for RESP3:
 * map -> array of 2n, set -> array, null -> "$-1", boolean -> ":1" / ":0",
 * verbatim -> bulk of the text after "xxx:", double -> bulk of its text.
 * Returns the bytes written, or -1 when the input is not exactly one reply
 * or out is too small. */
#ifndef FENCE_TEST_RESP_CHECK_H
#define FENCE_TEST_RESP_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Whether b[p..e) is a double's text as RESP3 allows it. */
static inline bool resp_check__double(const char *b, size_t p, size_t e)
{
    size_t n = e - p;
    if (n == 0 || n > 40)
        return false;
    char tmp[48];
    memcpy(tmp, b + p, n);
    tmp[n] = '\0';
    if (strcmp(tmp, "inf") == 0 || strcmp(tmp, "-inf") == 0 || strcmp(tmp, "nan") == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        char c = tmp[i];
        if (!((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' ||
              c == 'E'))
            return false;
    }
    char *end = NULL;
    (void)strtod(tmp, &end);
    return end == tmp + n;
}

/* The one checker: the reply at b[pos] in RESP2, or RESP3 when resp3. */
static inline long resp_check__reply(const char *b, size_t len, size_t pos, int depth,
                                     bool resp3)
{
    if (pos >= len || depth < 0)
        return -1;
    long e = resp_check__eol(b, len, pos + 1);
    if (e < 0)
        return -1;
    int64_t n;
    char t = b[pos];
    switch (t) {
    case '+':
    case '-':
        return e + 2;
    case ':':
        return resp_check__int(b, pos + 1, (size_t)e, &n) ? e + 2 : -1;
    case '_':
        return resp3 && e == (long)pos + 1 ? e + 2 : -1;
    case '#':
        return resp3 && e == (long)pos + 2 && (b[pos + 1] == 't' || b[pos + 1] == 'f')
                   ? e + 2
                   : -1;
    case ',':
        return resp3 && resp_check__double(b, pos + 1, (size_t)e) ? e + 2 : -1;
    case '=':
    case '$':
        /* A bulk string, or "$-1"; a verbatim one has at least "xxx:". */
        if ((t == '=' && !resp3) || !resp_check__int(b, pos + 1, (size_t)e, &n) ||
            n < (t == '=' ? 4 : -1))
            return -1;
        if (n == -1)
            return e + 2;
        if ((size_t)n > len || (size_t)e + 2 + (size_t)n + 2 > len)
            return -1;
        if (t == '=' && b[e + 2 + 3] != ':')
            return -1;
        if (b[e + 2 + n] != '\r' || b[e + 3 + n] != '\n')
            return -1;
        return e + 4 + (long)n;
    case '%':
    case '~':
    case '*': {
        /* An array (or "*-1"), a set, a map of n pairs. */
        if ((t != '*' && !resp3) || !resp_check__int(b, pos + 1, (size_t)e, &n) ||
            n < (t == '*' ? -1 : 0) || n > (int64_t)len)
            return -1;
        int64_t items = t == '%' ? 2 * n : n;
        long p = e + 2;
        for (int64_t i = 0; i < items; i++) {
            p = resp_check__reply(b, len, (size_t)p, depth - 1, resp3);
            if (p < 0)
                return -1;
        }
        return p;
    }
    default:
        return -1;
    }
}

static inline long resp_check_one(const char *b, size_t len, size_t pos, int depth)
{
    return resp_check__reply(b, len, pos, depth, false);
}

static inline bool resp_check_all(const char *b, size_t len)
{
    return len > 0 && resp_check_one(b, len, 0, 16) == (long)len;
}

static inline long resp3_check_one(const char *b, size_t len, size_t pos, int depth)
{
    return resp_check__reply(b, len, pos, depth, true);
}

static inline bool resp3_check_all(const char *b, size_t len)
{
    return len > 0 && resp3_check_one(b, len, 0, 16) == (long)len;
}

/* ---- RESP3 to RESP2 ------------------------------------------------------ */

/* Appends "<type><v>\r\n" to out at *w; false when it does not fit. */
static inline bool resp3__hdr(char *out, size_t cap, size_t *w, char type, int64_t v)
{
    char tmp[32];
    int k = snprintf(tmp, sizeof(tmp), "%c%lld\r\n", type, (long long)v);
    if (k < 0 || (size_t)k > cap - *w)
        return false;
    memcpy(out + *w, tmp, (size_t)k);
    *w += (size_t)k;
    return true;
}

static inline bool resp3__raw(char *out, size_t cap, size_t *w, const char *p, size_t n)
{
    if (n > cap - *w)
        return false;
    memcpy(out + *w, p, n);
    *w += n;
    return true;
}

/* Converts the reply at in[*pos] (already checked) and advances *pos. */
static inline bool resp3__conv(const char *in, size_t len, size_t *pos, char *out,
                               size_t cap, size_t *w)
{
    size_t p = *pos;
    long e = resp_check__eol(in, len, p + 1);
    if (e < 0)
        return false;
    int64_t n = 0;
    switch (in[p]) {
    case '_':
        *pos = (size_t)e + 2;
        return resp3__raw(out, cap, w, "$-1\r\n", 5);
    case '#':
        *pos = (size_t)e + 2;
        return resp3__raw(out, cap, w, in[p + 1] == 't' ? ":1\r\n" : ":0\r\n", 4);
    case ',':
        *pos = (size_t)e + 2;
        return resp3__hdr(out, cap, w, '$', (int64_t)((size_t)e - p - 1)) &&
               resp3__raw(out, cap, w, in + p + 1, (size_t)e - p - 1) &&
               resp3__raw(out, cap, w, "\r\n", 2);
    case '=':
        if (!resp_check__int(in, p + 1, (size_t)e, &n) || n < 4)
            return false;
        *pos = (size_t)e + 2 + (size_t)n + 2;
        return resp3__hdr(out, cap, w, '$', n - 4) &&
               resp3__raw(out, cap, w, in + e + 2 + 4, (size_t)n - 4) &&
               resp3__raw(out, cap, w, "\r\n", 2);
    case '%':
    case '~':
    case '*': {
        if (!resp_check__int(in, p + 1, (size_t)e, &n) || n > (int64_t)len)
            return false;
        int64_t items = in[p] == '%' ? 2 * n : n;
        if (!resp3__hdr(out, cap, w, '*', items))
            return false;
        *pos = (size_t)e + 2;
        for (int64_t i = 0; i < items; i++)
            if (!resp3__conv(in, len, pos, out, cap, w))
                return false;
        return true;
    }
    default: {
        long end = resp_check_one(in, len, p, 0);
        if (end < 0)
            return false;
        *pos = (size_t)end;
        return resp3__raw(out, cap, w, in + p, (size_t)end - p);
    }
    }
}

static inline long resp3_to_resp2(const char *in, size_t len, char *out, size_t cap)
{
    if (!resp3_check_all(in, len))
        return -1;
    size_t pos = 0, w = 0;
    if (!resp3__conv(in, len, &pos, out, cap, &w) || pos != len)
        return -1;
    return (long)w;
}

#endif /* FENCE_TEST_RESP_CHECK_H */
