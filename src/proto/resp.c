/* RESP request parser and RESP2/RESP3 reply encoder (see resp.h for the
 * contract).
 *
 * The parser is stateless: every call parses one request from the start of
 * the buffer and either consumes all of it or nothing.  It never reads past
 * len, never allocates, and decides every error from the bytes it has seen
 * so far, so an error found in a prefix is the same error the whole input
 * gives, and a request that is complete parses the same however its bytes
 * arrived.  Each length and count is checked against the limits before it
 * is used, and lines that have not reached their end yet are bounded too,
 * so no input keeps the parser answering PARTIAL forever.
 */
#include "proto/resp.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/hex.h"
#include "base/num.h"

/* Error texts.  They follow Redis' wording where Redis has one, so that
 * clients and humans see what they are used to. */
#define ERR_MBULK_LEN "Protocol error: invalid multibulk length"
#define ERR_MBULK_BIG "Protocol error: too big mbulk count string"
#define ERR_BULK_LEN "Protocol error: invalid bulk length"
#define ERR_BULK_TOOBIG "Protocol error: invalid bulk length (over the limit)"
#define ERR_BULK_BIG "Protocol error: too big bulk count string"
#define ERR_BULK_CRLF "Protocol error: expected CRLF after bulk string"
#define ERR_TOO_MANY "Protocol error: too many arguments"
#define ERR_INLINE_BIG "Protocol error: too big inline request"
#define ERR_QUOTES "Protocol error: unbalanced quotes in request"

/* Longest decimal rendering of a 64-bit integer, with sign. */
#define DEC_MAX 21

/* Outcome of looking for the end of one line. */
enum line_rc {
    LINE_OK,      /* a whole line was found */
    LINE_PARTIAL, /* no end yet, and the line is still within the limit */
    LINE_TOOBIG,  /* the line is (or must become) longer than the limit */
};

/* One line of input, as found by find_line. */
struct line {
    size_t start;   /* offset of its first byte in the buffer */
    size_t len;     /* bytes of content, without "\r\n" or "\n" */
    bool crlf;      /* ended by "\r\n" (false: by a bare "\n") */
    size_t next;    /* offset just past its terminator */
};

void fence_resp_limits_default(fence_resp_limits *lim)
{
    FENCE_ASSERT(lim != NULL);
    lim->args_max = FENCE_ARGS_MAX;
    lim->bulk_max = FENCE_BULK_DEFAULT;
    lim->inline_max = FENCE_INLINE_MAX;
}

/* Finds the line that starts at buf[start], ended by "\n" (a "\r" right
 * before it belongs to the terminator), whose content may be at most max
 * bytes.  Only max + 2 bytes are ever searched, so a peer that never sends a
 * newline costs a bounded scan, and a line that is already too long is
 * reported as such before its end arrives. */
static enum line_rc find_line(const char *buf, size_t len, size_t start,
                              size_t max, struct line *out)
{
    FENCE_ASSERT(start <= len);
    FENCE_ASSERT(max <= FENCE_INLINE_MAX);
    size_t avail = len - start;
    size_t window = avail < max + 2 ? avail : max + 2;
    const char *nl = memchr(buf + start, '\n', window);
    if (nl == NULL) {
        /* The content seen so far is at least this long; a trailing "\r"
         * may still turn out to be part of the terminator. */
        size_t seen = window;
        if (seen > 0 && buf[start + seen - 1] == '\r')
            seen--;
        return seen > max ? LINE_TOOBIG : LINE_PARTIAL;
    }
    size_t i = (size_t)(nl - (buf + start));
    out->start = start;
    out->crlf = i > 0 && buf[start + i - 1] == '\r';
    out->len = out->crlf ? i - 1 : i;
    out->next = start + i + 1;
    if (out->len > max)
        return LINE_TOOBIG;
    return LINE_OK;
}

/* Parses a decimal the way Redis' string2ll does: an optional "-", then
 * "0" alone or a digit 1-9 followed by digits; no "+", no spaces, no
 * leading zeros, no "-0".  Returns false for anything else or for a value
 * outside [-INT64_MAX, INT64_MAX]. */
static bool parse_i64(const char *p, size_t n, int64_t *out)
{
    bool neg = false;
    if (n > 0 && p[0] == '-') {
        neg = true;
        p++;
        n--;
    }
    if (n == 0 || n > 19)
        return false;
    if (p[0] == '0') {
        if (n != 1 || neg)
            return false;
        *out = 0;
        return true;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(p[i] - '0'); /* 19 digits cannot overflow */
    }
    if (v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return true;
}

/* Reports that a bulk header started with byte c instead of "$", in
 * Redis' words.  The text is built in msg->scratch (the byte is shown
 * as \xHH when it is not printable, so the reply stays one line). */
static ssize_t fail_expected_dollar(fence_resp_msg *out, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    static const char head[] = "Protocol error: expected '$', got '";
    char *s = out->scratch;
    size_t n = sizeof(head) - 1;
    _Static_assert(sizeof(head) + 8 <= sizeof(out->scratch),
                   "the error text must fit the scratch buffer");
    memcpy(s, head, n);
    if (c >= 0x20 && c < 0x7f) {
        s[n++] = (char)c;
    } else {
        s[n++] = '\\';
        s[n++] = 'x';
        s[n++] = hex[c >> 4];
        s[n++] = hex[c & 0xf];
    }
    s[n++] = '\'';
    s[n] = '\0';
    out->argc = 0;
    out->error = s;
    return FENCE_RESP_EPROTO;
}

/* Records a parse failure: rc is FENCE_RESP_EPROTO or FENCE_RESP_ETOOBIG,
 * text a static message. */
static ssize_t fail(fence_resp_msg *out, ssize_t rc, const char *text)
{
    FENCE_ASSERT(rc == FENCE_RESP_EPROTO || rc == FENCE_RESP_ETOOBIG);
    FENCE_ASSERT(text != NULL);
    out->argc = 0;
    out->error = text;
    return rc;
}

/* Parses a multibulk request ("*N\r\n" then N times "$len\r\n<bytes>\r\n")
 * at the start of buf, which begins with "*". */
static ssize_t parse_multibulk(const char *buf, size_t len, uint32_t args_max,
                               uint64_t bulk_max, size_t line_max,
                               fence_resp_msg *out)
{
    FENCE_ASSERT(len > 0);
    FENCE_ASSERT(buf[0] == '*');
    struct line ln;
    switch (find_line(buf, len, 0, line_max, &ln)) {
    case LINE_PARTIAL:
        return FENCE_RESP_PARTIAL;
    case LINE_TOOBIG:
        return fail(out, FENCE_RESP_ETOOBIG, ERR_MBULK_BIG);
    case LINE_OK:
        break;
    }
    int64_t count;
    if (!ln.crlf || !parse_i64(buf + 1, ln.len - 1, &count) || count < -1)
        return fail(out, FENCE_RESP_EPROTO, ERR_MBULK_LEN);
    if (count > (int64_t)args_max)
        return fail(out, FENCE_RESP_ETOOBIG, ERR_TOO_MANY);
    size_t pos = ln.next;
    /* "*0" and "*-1" are empty requests: consumed and ignored. */
    uint32_t n = count <= 0 ? 0 : (uint32_t)count;
    for (uint32_t i = 0; i < n; i++) {
        if (pos == len)
            return FENCE_RESP_PARTIAL;
        if (buf[pos] != '$')
            return fail_expected_dollar(out, (unsigned char)buf[pos]);
        switch (find_line(buf, len, pos, line_max, &ln)) {
        case LINE_PARTIAL:
            return FENCE_RESP_PARTIAL;
        case LINE_TOOBIG:
            return fail(out, FENCE_RESP_ETOOBIG, ERR_BULK_BIG);
        case LINE_OK:
            break;
        }
        int64_t blen;
        if (!ln.crlf || !parse_i64(buf + pos + 1, ln.len - 1, &blen) ||
            blen < 0)
            return fail(out, FENCE_RESP_EPROTO, ERR_BULK_LEN);
        if ((uint64_t)blen > bulk_max)
            return fail(out, FENCE_RESP_ETOOBIG, ERR_BULK_TOOBIG);
        pos = ln.next;
        FENCE_ASSERT(pos <= len);
        size_t avail = len - pos;
        /* The terminator is checked byte by byte as it arrives, so that a
         * wrong byte is an error as soon as it is seen. */
        if (avail > (uint64_t)blen && buf[pos + blen] != '\r')
            return fail(out, FENCE_RESP_EPROTO, ERR_BULK_CRLF);
        if (avail > (uint64_t)blen + 1 && buf[pos + blen + 1] != '\n')
            return fail(out, FENCE_RESP_EPROTO, ERR_BULK_CRLF);
        if (avail < (uint64_t)blen + 2)
            return FENCE_RESP_PARTIAL;
        out->argv[i].ptr = buf + pos;
        out->argv[i].len = (size_t)blen;
        pos += (size_t)blen + 2;
    }
    out->argc = n;
    out->error = NULL;
    FENCE_ASSERT(pos > 0);
    FENCE_ASSERT(pos <= len);
    return (ssize_t)pos;
}

/* Tells whether c separates inline words (Redis' isspace(); "\n" never
 * occurs inside a line). */
static bool is_sep(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Splits one inline line p[0..n) into words, as redis-cli and Redis'
 * sdssplitargs do: words are separated by whitespace; "..." quotes with
 * the escapes \xHH \n \r \t \b \a and \<any> for that character; '...'
 * quotes literally except \' for a quote; a quote may start inside a word
 * ("a"b" is not allowed, a"b" is "ab"), and a closing quote must be
 * followed by whitespace or the end of the line.  Unescaped words go to
 * out->scratch, which is large enough because unescaping never lengthens
 * and n <= FENCE_INLINE_MAX.  Returns 0, or a failure code. */
static ssize_t split_inline(const char *p, size_t n, uint32_t args_max,
                            fence_resp_msg *out)
{
    FENCE_ASSERT(n <= sizeof(out->scratch));
    char *dst = out->scratch;
    size_t w = 0; /* bytes written to scratch */
    uint32_t argc = 0;
    size_t i = 0;
    for (;;) {
        while (i < n && is_sep(p[i]))
            i++;
        if (i == n)
            break;
        if (argc == args_max)
            return fail(out, FENCE_RESP_ETOOBIG, ERR_TOO_MANY);
        size_t word = w;
        bool dq = false, sq = false, done = false;
        while (!done) {
            if (dq) {
                if (i == n)
                    return fail(out, FENCE_RESP_EPROTO, ERR_QUOTES);
                if (p[i] == '\\' && i + 3 < n && p[i + 1] == 'x' &&
                    fence__hexval(p[i + 2]) >= 0 && fence__hexval(p[i + 3]) >= 0) {
                    dst[w++] = (char)(fence__hexval(p[i + 2]) * 16 +
                                      fence__hexval(p[i + 3]));
                    i += 4;
                } else if (p[i] == '\\' && i + 1 < n) {
                    char c = p[i + 1];
                    switch (c) {
                    case 'n': c = '\n'; break;
                    case 'r': c = '\r'; break;
                    case 't': c = '\t'; break;
                    case 'b': c = '\b'; break;
                    case 'a': c = '\a'; break;
                    default: break;
                    }
                    dst[w++] = c;
                    i += 2;
                } else if (p[i] == '"') {
                    i++;
                    if (i < n && !is_sep(p[i]))
                        return fail(out, FENCE_RESP_EPROTO, ERR_QUOTES);
                    done = true;
                } else {
                    dst[w++] = p[i++];
                }
            } else if (sq) {
                if (i == n)
                    return fail(out, FENCE_RESP_EPROTO, ERR_QUOTES);
                if (p[i] == '\\' && i + 1 < n && p[i + 1] == '\'') {
                    dst[w++] = '\'';
                    i += 2;
                } else if (p[i] == '\'') {
                    i++;
                    if (i < n && !is_sep(p[i]))
                        return fail(out, FENCE_RESP_EPROTO, ERR_QUOTES);
                    done = true;
                } else {
                    dst[w++] = p[i++];
                }
            } else {
                if (i == n || is_sep(p[i])) {
                    done = true;
                } else if (p[i] == '"') {
                    dq = true;
                    i++;
                } else if (p[i] == '\'') {
                    sq = true;
                    i++;
                } else {
                    dst[w++] = p[i++];
                }
            }
            FENCE_ASSERT(w <= i);
        }
        out->argv[argc].ptr = dst + word;
        out->argv[argc].len = w - word;
        argc++;
    }
    out->argc = argc;
    return 0;
}

/* Parses an inline request: one line of words (see split_inline). */
static ssize_t parse_inline(const char *buf, size_t len, uint32_t args_max,
                            size_t line_max, fence_resp_msg *out)
{
    struct line ln;
    switch (find_line(buf, len, 0, line_max, &ln)) {
    case LINE_PARTIAL:
        return FENCE_RESP_PARTIAL;
    case LINE_TOOBIG:
        return fail(out, FENCE_RESP_ETOOBIG, ERR_INLINE_BIG);
    case LINE_OK:
        break;
    }
    ssize_t rc = split_inline(buf, ln.len, args_max, out);
    if (rc != 0)
        return rc;
    out->error = NULL;
    FENCE_ASSERT(ln.next > 0);
    return (ssize_t)ln.next;
}

ssize_t fence_resp_parse(const char *buf, size_t len,
                         const fence_resp_limits *lim, fence_resp_msg *out)
{
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(buf != NULL || len == 0);
    fence_resp_limits def;
    if (lim == NULL) {
        fence_resp_limits_default(&def);
        lim = &def;
    }
    /* The message's arrays set hard ceilings on what a limit can allow. */
    uint32_t args_max = lim->args_max < FENCE_ARGS_MAX ? lim->args_max
                                                       : FENCE_ARGS_MAX;
    size_t line_max = lim->inline_max < FENCE_INLINE_MAX
                          ? (size_t)lim->inline_max
                          : FENCE_INLINE_MAX;
    uint64_t bulk_max = lim->bulk_max < (uint64_t)INT64_MAX
                            ? lim->bulk_max
                            : (uint64_t)INT64_MAX;
    out->argc = 0;
    out->error = NULL;
    if (len == 0)
        return FENCE_RESP_PARTIAL;
    if (buf[0] == '*')
        return parse_multibulk(buf, len, args_max, bulk_max, line_max, out);
    return parse_inline(buf, len, args_max, line_max, out);
}

/* ---- Encoding ------------------------------------------------------------ */

/* Writes the decimal digits of v into tmp (at least DEC_MAX bytes, no NUL)
 * and returns how many there are. */
static size_t fmt_u64(char *tmp, uint64_t v)
{
    char rev[DEC_MAX];
    size_t n = 0;
    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++)
        tmp[i] = rev[n - 1 - i];
    return n;
}

/* Writes the decimal form of v (with "-" when negative) into tmp and
 * returns its length. */
static size_t fmt_i64(char *tmp, int64_t v)
{
    if (v >= 0)
        return fmt_u64(tmp, (uint64_t)v);
    tmp[0] = '-';
    /* -(v + 1) + 1 avoids overflowing on INT64_MIN. */
    return 1 + fmt_u64(tmp + 1, (uint64_t)(-(v + 1)) + 1);
}

/* Writes a reply that is a type byte, a decimal, and "\r\n" (":5", "$3",
 * "*2") when it fits; returns its length either way. */
static size_t put_header(char *buf, size_t cap, char type, int64_t v)
{
    char tmp[DEC_MAX];
    size_t d = fmt_i64(tmp, v);
    FENCE_ASSERT(d >= 1);
    FENCE_ASSERT(d <= DEC_MAX);
    size_t need = 1 + d + 2;
    if (need <= cap) {
        buf[0] = type;
        for (size_t i = 0; i < d; i++)
            buf[1 + i] = tmp[i];
        buf[1 + d] = '\r';
        buf[2 + d] = '\n';
    }
    return need;
}

/* Copies n bytes of a single-line text into dst, turning "\r" and "\n"
 * into spaces (as Redis does for error replies) so that the reply cannot
 * be split into two. */
static void copy_line(char *dst, const char *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = (src[i] == '\r' || src[i] == '\n') ? ' ' : src[i];
}

size_t fence_resp_simple(char *buf, size_t cap, const char *s)
{
    FENCE_ASSERT(s != NULL);
    FENCE_ASSERT(buf != NULL || cap == 0);
    size_t n = strlen(s);
    size_t need = 1 + n + 2;
    if (need <= cap) {
        buf[0] = '+';
        copy_line(buf + 1, s, n);
        buf[1 + n] = '\r';
        buf[2 + n] = '\n';
    }
    return need;
}

size_t fence_resp_error(char *buf, size_t cap, const char *code,
                        const char *msg)
{
    FENCE_ASSERT(code != NULL);
    FENCE_ASSERT(code[0] != '\0');
    FENCE_ASSERT(buf != NULL || cap == 0);
    size_t c = strlen(code);
    size_t m = msg != NULL && msg[0] != '\0' ? strlen(msg) : 0;
    size_t need = 1 + c + (m > 0 ? 1 + m : 0) + 2;
    if (need <= cap) {
        size_t w = 0;
        buf[w++] = '-';
        copy_line(buf + w, code, c);
        w += c;
        if (m > 0) {
            buf[w++] = ' ';
            copy_line(buf + w, msg, m);
            w += m;
        }
        buf[w++] = '\r';
        buf[w++] = '\n';
        FENCE_ASSERT(w == need);
    }
    return need;
}

size_t fence_resp_int(char *buf, size_t cap, int64_t v)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    return put_header(buf, cap, ':', v);
}

size_t fence_resp_uint(char *buf, size_t cap, uint64_t v)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    FENCE_ASSERT(v <= (uint64_t)INT64_MAX);
    return put_header(buf, cap, ':', (int64_t)v);
}

size_t fence_resp_bulk(char *buf, size_t cap, const char *p, size_t n)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    FENCE_ASSERT(p != NULL || n == 0);
    FENCE_ASSERT(n <= (size_t)INT64_MAX - 64);
    size_t h = put_header(NULL, 0, '$', (int64_t)n);
    size_t need = h + n + 2;
    if (need <= cap) {
        put_header(buf, cap, '$', (int64_t)n);
        if (n > 0)
            memcpy(buf + h, p, n);
        buf[h + n] = '\r';
        buf[h + n + 1] = '\n';
    }
    return need;
}

size_t fence_resp_nil(char *buf, size_t cap)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    return put_header(buf, cap, '$', -1);
}

size_t fence_resp_array(char *buf, size_t cap, int64_t n)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    FENCE_ASSERT(n >= -1);
    return put_header(buf, cap, '*', n);
}

/* ---- RESP3 ---------------------------------------------------------------- */

size_t fence_resp_map(char *buf, size_t cap, int64_t n)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    FENCE_ASSERT(n >= 0);
    return put_header(buf, cap, '%', n);
}

size_t fence_resp_set(char *buf, size_t cap, int64_t n)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    FENCE_ASSERT(n >= 0);
    return put_header(buf, cap, '~', n);
}

/* Writes the fixed reply s (with its "\r\n") when it fits. */
static size_t put_fixed(char *buf, size_t cap, const char *s, size_t n)
{
    if (n <= cap)
        memcpy(buf, s, n);
    return n;
}

size_t fence_resp_null(char *buf, size_t cap)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    return put_fixed(buf, cap, "_\r\n", 3);
}

size_t fence_resp_bool(char *buf, size_t cap, int v)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    return put_fixed(buf, cap, v ? "#t\r\n" : "#f\r\n", 4);
}

/* The text of v as RESP3 writes a double, into tmp (at least 40 bytes);
 * returns its length. */
static size_t fmt_double(char *tmp, size_t cap, double v)
{
    int d;
    if (isnan(v))
        d = snprintf(tmp, cap, "nan");
    else if (isinf(v))
        d = snprintf(tmp, cap, v > 0 ? "inf" : "-inf");
    else
        d = snprintf(tmp, cap, "%.17g", v);
    /* "%.17g" of a double is at most 24 bytes ("-1.2345678901234567e-308"). */
    FENCE_ASSERT(d > 0);
    FENCE_ASSERT((size_t)d < cap);
    return (size_t)d;
}

size_t fence_resp_double(char *buf, size_t cap, double v)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    char tmp[40];
    size_t d = fmt_double(tmp, sizeof(tmp), v);
    size_t need = 1 + d + 2;
    if (need <= cap) {
        buf[0] = ',';
        memcpy(buf + 1, tmp, d);
        buf[1 + d] = '\r';
        buf[2 + d] = '\n';
    }
    return need;
}

size_t fence_resp_verbatim(char *buf, size_t cap, const char *fmt,
                           const char *p, size_t n)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    FENCE_ASSERT(fmt != NULL && strlen(fmt) == 3);
    FENCE_ASSERT(p != NULL || n == 0);
    FENCE_ASSERT(n <= (size_t)INT64_MAX - 64);
    size_t body = 4 + n; /* "txt:" and the text */
    size_t h = put_header(NULL, 0, '=', (int64_t)body);
    size_t need = h + body + 2;
    if (need <= cap) {
        put_header(buf, cap, '=', (int64_t)body);
        memcpy(buf + h, fmt, 3);
        buf[h + 3] = ':';
        if (n > 0)
            memcpy(buf + h + 4, p, n);
        buf[h + body] = '\r';
        buf[h + body + 1] = '\n';
    }
    return need;
}

size_t fence_resp_nil_v(char *buf, size_t cap, int resp)
{
    FENCE_ASSERT(resp == 2 || resp == 3);
    return resp == 3 ? fence_resp_null(buf, cap) : fence_resp_nil(buf, cap);
}

size_t fence_resp_map_v(char *buf, size_t cap, int64_t n, int resp)
{
    FENCE_ASSERT(resp == 2 || resp == 3);
    FENCE_ASSERT(n >= 0);
    FENCE_ASSERT(n <= INT64_MAX / 2);
    return resp == 3 ? fence_resp_map(buf, cap, n) : fence_resp_array(buf, cap, 2 * n);
}

size_t fence_resp_set_v(char *buf, size_t cap, int64_t n, int resp)
{
    FENCE_ASSERT(resp == 2 || resp == 3);
    return resp == 3 ? fence_resp_set(buf, cap, n) : fence_resp_array(buf, cap, n);
}

size_t fence_resp_bool_v(char *buf, size_t cap, int v, int resp)
{
    FENCE_ASSERT(resp == 2 || resp == 3);
    FENCE_ASSERT(buf != NULL || cap == 0);
    return resp == 3 ? fence_resp_bool(buf, cap, v) : put_header(buf, cap, ':', v ? 1 : 0);
}

size_t fence_resp_double_v(char *buf, size_t cap, double v, int resp)
{
    FENCE_ASSERT(resp == 2 || resp == 3);
    if (resp == 3)
        return fence_resp_double(buf, cap, v);
    char tmp[40];
    size_t d = fmt_double(tmp, sizeof(tmp), v);
    return fence_resp_bulk(buf, cap, tmp, d);
}

size_t fence_resp_verbatim_v(char *buf, size_t cap, const char *fmt,
                             const char *p, size_t n, int resp)
{
    FENCE_ASSERT(resp == 2 || resp == 3);
    if (resp == 3)
        return fence_resp_verbatim(buf, cap, fmt, p, n);
    return fence_resp_bulk(buf, cap, p, n);
}

size_t fence_resp_request(char *buf, size_t cap, uint32_t argc,
                          const fence_resp_arg *argv)
{
    FENCE_ASSERT(buf != NULL || cap == 0);
    FENCE_ASSERT(argv != NULL || argc == 0);
    size_t need = put_header(NULL, 0, '*', argc);
    for (uint32_t i = 0; i < argc; i++) {
        size_t b = fence_resp_bulk(NULL, 0, argv[i].ptr, argv[i].len);
        FENCE_ASSERT(need + b >= need);
        need += b;
    }
    if (need > cap)
        return need;
    size_t w = put_header(buf, cap, '*', argc);
    for (uint32_t i = 0; i < argc; i++)
        w += fence_resp_bulk(buf + w, cap - w, argv[i].ptr, argv[i].len);
    FENCE_ASSERT(w == need);
    return need;
}

int fence_resp_parse_u64(const char *p, size_t n, uint64_t max, uint64_t *out)
{
    FENCE_ASSERT(out != NULL);
    /* At most 20 bytes (leading zeros included), then base/num.h. */
    if (n > 20)
        return -1;
    return fence__num_u64(p, n, max, out);
}
