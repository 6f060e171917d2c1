/* Redis-client compatibility: the reply buffer (inline, growing up to
 * FENCE_COMPAT_REPLY_MAX), the RESP2/RESP3 encoders over it, and the
 * helpers that read a request's words (compat_int.h). */
#include "daemon/compat_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/assert.h"

/* ---- Reply buffer ---------------------------------------------------------- */

void fence_compat_reply_init(fence_compat_reply *r)
{
    FENCE_ASSERT(r != NULL);
    r->ptr = r->inline_buf;
    r->len = 0;
    r->cap = sizeof(r->inline_buf);
    r->failed = false;
    r->resp = 2;
}

void fence_compat_reply_reset(fence_compat_reply *r)
{
    FENCE_ASSERT(r != NULL);
    FENCE_ASSERT(r->ptr != NULL);
    r->len = 0;
    r->failed = false;
}

void fence_compat_reply_free(fence_compat_reply *r)
{
    FENCE_ASSERT(r != NULL);
    if (r->ptr != r->inline_buf)
        free(r->ptr);
    fence_compat_reply_init(r);
}

/* Make room for n more bytes: false (and failed set) when that would pass
 * FENCE_COMPAT_REPLY_MAX or memory is short. */
static bool reserve(fence_compat_reply *r, size_t n)
{
    FENCE_ASSERT(r->len <= r->cap);
    if (r->failed)
        return false;
    if (n <= r->cap - r->len)
        return true;
    if (n > FENCE_COMPAT_REPLY_MAX - r->len) {
        r->failed = true;
        return false;
    }
    size_t want = r->len + n;
    size_t cap = r->cap * 2;
    while (cap < want)
        cap *= 2;
    if (cap > FENCE_COMPAT_REPLY_MAX)
        cap = FENCE_COMPAT_REPLY_MAX;
    char *p;
    if (r->ptr == r->inline_buf) {
        p = malloc(cap);
        if (p != NULL)
            memcpy(p, r->inline_buf, r->len);
    } else {
        p = realloc(r->ptr, cap);
    }
    if (p == NULL) {
        r->failed = true;
        return false;
    }
    r->ptr = p;
    r->cap = cap;
    return true;
}

/* Append raw bytes. */
void fence__compat_put(fence_compat_reply *r, const char *p, size_t n)
{
    if (n == 0 || !reserve(r, n))
        return;
    memcpy(r->ptr + r->len, p, n);
    r->len += n;
}

/* Append a NUL-terminated string as raw bytes. */
void fence__compat_puts(fence_compat_reply *r, const char *s)
{
    fence__compat_put(r, s, strlen(s));
}

/* Append printf-formatted raw text (lines of CLIENT LIST, INFO fields). */
__attribute__((format(printf, 2, 3)))
void fence__compat_putf(fence_compat_reply *r, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    FENCE_ASSERT(n >= 0);
    /* Every caller bounds its fields, so a line always fits. */
    FENCE_ASSERT((size_t)n < sizeof(buf));
    fence__compat_put(r, buf, (size_t)n);
}

/* The encoders write at most this much for a header, integer or status. */
#define SMALL_MAX 64

/* Append "+s". */
void fence__compat_put_simple(fence_compat_reply *r, const char *s)
{
    size_t need = fence_resp_simple(NULL, 0, s);
    if (!reserve(r, need))
        return;
    fence_resp_simple(r->ptr + r->len, need, s);
    r->len += need;
}

/* Append "-CODE msg". */
void fence__compat_put_error(fence_compat_reply *r, const char *code, const char *msg)
{
    size_t need = fence_resp_error(NULL, 0, code, msg);
    if (!reserve(r, need))
        return;
    fence_resp_error(r->ptr + r->len, need, code, msg);
    r->len += need;
}

/* Append "-CODE <formatted text>". */
__attribute__((format(printf, 3, 4)))
void fence__compat_put_errorf(fence_compat_reply *r, const char *code, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    FENCE_ASSERT(n >= 0);
    fence__compat_put_error(r, code, buf);
}

/* Append ":v". */
void fence__compat_put_int(fence_compat_reply *r, int64_t v)
{
    char buf[SMALL_MAX];
    size_t n = fence_resp_int(buf, sizeof(buf), v);
    FENCE_ASSERT(n <= sizeof(buf));
    fence__compat_put(r, buf, n);
}

/* Append "*n". */
void fence__compat_put_array(fence_compat_reply *r, int64_t n)
{
    char buf[SMALL_MAX];
    size_t len = fence_resp_array(buf, sizeof(buf), n);
    FENCE_ASSERT(len <= sizeof(buf));
    fence__compat_put(r, buf, len);
}

/* Append "$-1" (RESP2) or "_" (RESP3). */
void fence__compat_put_nil(fence_compat_reply *r)
{
    char buf[SMALL_MAX];
    size_t len = fence_resp_nil_v(buf, sizeof(buf), r->resp);
    FENCE_ASSERT(len <= sizeof(buf));
    fence__compat_put(r, buf, len);
}

/* Append a map header of n pairs ("*2n" in RESP2, "%n" in RESP3). */
void fence__compat_put_map(fence_compat_reply *r, int64_t n)
{
    char buf[SMALL_MAX];
    size_t len = fence_resp_map_v(buf, sizeof(buf), n, r->resp);
    FENCE_ASSERT(len <= sizeof(buf));
    fence__compat_put(r, buf, len);
}

/* Append a set header of n elements ("*n" in RESP2, "~n" in RESP3). */
void fence__compat_put_set(fence_compat_reply *r, int64_t n)
{
    char buf[SMALL_MAX];
    size_t len = fence_resp_set_v(buf, sizeof(buf), n, r->resp);
    FENCE_ASSERT(len <= sizeof(buf));
    fence__compat_put(r, buf, len);
}

/* Append a bulk string of n bytes. */
void fence__compat_put_bulk(fence_compat_reply *r, const char *p, size_t n)
{
    size_t need = fence_resp_bulk(NULL, 0, p, n);
    if (!reserve(r, need))
        return;
    fence_resp_bulk(r->ptr + r->len, need, p, n);
    r->len += need;
}

/* Append a bulk string holding s. */
void fence__compat_put_str(fence_compat_reply *r, const char *s)
{
    fence__compat_put_bulk(r, s, strlen(s));
}

/* Append a bulk string holding s in lower case (command names). */
void fence__compat_put_lower(fence_compat_reply *r, const char *s)
{
    char buf[FENCE_NAME_MAX];
    size_t n = strlen(s);
    FENCE_ASSERT(n < sizeof(buf));
    for (size_t i = 0; i < n; i++)
        buf[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
    fence__compat_put_bulk(r, buf, n);
}

/* If building the reply failed, replace it by a short error (which always
 * fits the inline buffer, so it cannot fail again). */
void fence__compat_finish(fence_compat_reply *r)
{
    if (!r->failed)
        return;
    r->len = 0;
    r->failed = false;
    fence__compat_put_error(r, "ERR", "reply too large or out of memory");
    FENCE_ASSERT(!r->failed);
    r->failed = true;
}

/* ---- Small helpers ---------------------------------------------------------- */

/* Whether argument a equals word, ignoring case. */
bool fence__compat_arg_is(const fence_resp_arg *a, const char *word)
{
    return strlen(word) == a->len && strncasecmp(word, a->ptr, a->len) == 0;
}

/* Copy a command word into buf as lower case, truncated, for messages. */
const char *fence__compat_word_lower(const fence_resp_arg *a, char *buf, size_t cap)
{
    FENCE_ASSERT(cap > 0);
    size_t n = a->len < cap - 1 ? a->len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        char ch = a->ptr[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch + 32);
        else if ((unsigned char)ch < 0x20 || (unsigned char)ch > 0x7e)
            ch = '?';
        buf[i] = ch;
    }
    buf[n] = '\0';
    return buf;
}

/* Copy a word into buf as is (non-printable bytes as '?'), for messages. */
const char *fence__compat_word_print(const fence_resp_arg *a, char *buf, size_t cap)
{
    FENCE_ASSERT(cap > 0);
    size_t n = a->len < cap - 1 ? a->len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        buf[i] = (ch < 0x20 || ch > 0x7e) ? '?' : (char)ch;
    }
    buf[n] = '\0';
    return buf;
}

/* Reply Redis' arity error for command name (e.g. "client|setname"). */
void fence__compat_put_arity_error(fence_compat_reply *r, const char *name)
{
    fence__compat_put_errorf(r, "ERR", "wrong number of arguments for '%s' command", name);
}

/* Whether a name (client name, lib-name/lib-ver) is acceptable: printable
 * ASCII without spaces, as Redis requires. */
bool fence__compat_name_ok(const fence_resp_arg *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->ptr[i] < '!' || a->ptr[i] > '~')
            return false;
    return true;
}

/* Copy a validated name into dst (capacity cap including the NUL). */
void fence__compat_copy_name(char *dst, size_t cap, const fence_resp_arg *a)
{
    FENCE_ASSERT(a->len < cap);
    memcpy(dst, a->ptr, a->len);
    dst[a->len] = '\0';
}

/* Parse a signed decimal for SELECT/HELLO/CLIENT LIST ID: 0 and *out on
 * success, -1 when it is not an integer. */
int fence__compat_parse_i64(const fence_resp_arg *a, int64_t *out)
{
    if (a->len == 0)
        return -1;
    bool neg = a->ptr[0] == '-';
    uint64_t v;
    if (fence_resp_parse_u64(a->ptr + neg, a->len - neg,
                             neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &v) != 0)
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}
