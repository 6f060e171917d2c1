/* Pure helpers of libfence (see pure.h). */
#include "libfence/pure.h"

#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/num.h"
#include "fence.h"

/* Parse one address from s[0..len) into out.  A Unix socket is written
 * "unix:/path"; an IPv6 literal is bracketed, "[::1]:7700"; anything else
 * is "host:port" split at the last colon. */
int fence__addr_parse(const char *s, size_t len, fence__addr *out)
{
    FENCE_ASSERT(s != NULL);
    FENCE_ASSERT(out != NULL);
    memset(out, 0, sizeof(*out));
    if (len > 5 && memcmp(s, "unix:", 5) == 0) {
        size_t plen = len - 5;
        if (plen == 0 || plen > FENCE__HOST_MAX || memchr(s + 5, '\0', plen))
            return FENCE_EINVAL;
        out->is_unix = true;
        memcpy(out->host, s + 5, plen);
        out->host[plen] = '\0';
        return 0;
    }
    const char *host = s;
    size_t host_len;
    const char *colon;
    if (len > 0 && s[0] == '[') {
        const char *close = memchr(s, ']', len);
        if (close == NULL || close + 1 >= s + len || close[1] != ':')
            return FENCE_EINVAL;
        host = s + 1;
        host_len = (size_t)(close - host);
        colon = close + 1;
    } else {
        colon = NULL;
        for (size_t i = len; i > 0; i--) {
            if (s[i - 1] == ':') {
                colon = s + i - 1;
                break;
            }
        }
        if (colon == NULL)
            return FENCE_EINVAL;
        host_len = (size_t)(colon - s);
    }
    if (host_len == 0 || host_len > FENCE__HOST_MAX)
        return FENCE_EINVAL;
    /* A colon only inside brackets (IPv6); brackets never inside a host. */
    bool bracketed = host != s;
    for (size_t i = 0; i < host_len; i++) {
        unsigned char ch = (unsigned char)host[i];
        if (ch <= ' ' || ch == ',' || ch >= 0x7f || ch == '[' || ch == ']' ||
            (ch == ':' && !bracketed))
            return FENCE_EINVAL;
    }
    uint64_t port;
    const char *p = colon + 1;
    size_t plen = (size_t)(s + len - p);
    if (!fence__parse_u64(p, plen, &port) || port == 0 || port > 65535)
        return FENCE_EINVAL;
    memcpy(out->host, host, host_len);
    out->host[host_len] = '\0';
    out->port = (int)port;
    return 0;
}

/* Parse a comma-separated address list; see pure.h. */
int fence__addr_parse_list(const char *s, fence__addr *out, size_t cap,
                           size_t *n_out)
{
    FENCE_ASSERT(s != NULL);
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(n_out != NULL);
    size_t n = 0;
    size_t total = strlen(s);
    if (total == 0 || total > FENCE__SERVERS_MAX)
        return FENCE_EINVAL;
    const char *p = s;
    const char *end = s + total;
    while (p <= end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *item_end = comma ? comma : end;
        if (n == cap)
            return FENCE_EINVAL;
        if (fence__addr_parse(p, (size_t)(item_end - p), &out[n]) != 0)
            return FENCE_EINVAL;
        n++;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    *n_out = n;
    return 0;
}

/* Format an address the way fence__addr_parse reads it. */
void fence__addr_format(const fence__addr *a, char *buf, size_t cap)
{
    FENCE_ASSERT(a != NULL);
    FENCE_ASSERT(buf != NULL);
    if (cap == 0)
        return;
    if (a->is_unix)
        snprintf(buf, cap, "unix:%s", a->host);
    else if (strchr(a->host, ':') != NULL)
        snprintf(buf, cap, "[%s]:%d", a->host, a->port);
    else
        snprintf(buf, cap, "%s:%d", a->host, a->port);
}

/* Compare two addresses field by field. */
bool fence__addr_equal(const fence__addr *a, const fence__addr *b)
{
    return a->is_unix == b->is_unix && a->port == b->port &&
           strcmp(a->host, b->host) == 0;
}

/* True if err starts with the word w (followed by a space or the end). */
static bool starts_with_word(const char *err, const char *w)
{
    size_t n = strlen(w);
    return strncmp(err, w, n) == 0 && (err[n] == ' ' || err[n] == '\0');
}

/* Map an error reply's first word to a code; see pure.h. */
int fence__error_code(const char *err)
{
    if (err == NULL)
        return FENCE_EPROTO;
    if (starts_with_word(err, "NOLEASE"))
        return FENCE_ENOLEASE;
    if (starts_with_word(err, "LIMIT"))
        return FENCE_ELIMIT;
    if (starts_with_word(err, "TRYAGAIN"))
        return FENCE_ETRYAGAIN;
    if (starts_with_word(err, "NOTLEADER"))
        return FENCE_ENOTLEADER;
    if (starts_with_word(err, "STALE"))
        return FENCE_ESTALE;
    if (starts_with_word(err, "BADTOKEN"))
        return FENCE_EBADTOKEN;
    if (starts_with_word(err, "NOAUTH") || starts_with_word(err, "WRONGPASS"))
        return FENCE_EAUTH;
    if (starts_with_word(err, "NOPERM"))
        return FENCE_ENOPERM;
    return FENCE_ESERVER;
}

/* Parse the leader address out of a NOTLEADER error; see pure.h. */
int fence__parse_notleader(const char *err, fence__addr *out)
{
    if (err == NULL || !starts_with_word(err, "NOTLEADER"))
        return FENCE_ENOTLEADER;
    const char *p = err + strlen("NOTLEADER");
    while (*p == ' ')
        p++;
    size_t len = strcspn(p, " \r\n");
    if (len == 0)
        return FENCE_ENOTLEADER;
    if (fence__addr_parse(p, len, out) != 0)
        return FENCE_ENOTLEADER;
    return 0;
}

/* Parse "STALE <token> <highest>"; see pure.h. */
int fence__parse_stale(const char *err, uint64_t *highest_out)
{
    if (err == NULL || !starts_with_word(err, "STALE"))
        return FENCE_EPROTO;
    const char *p = err + strlen("STALE");
    uint64_t v[2];
    for (int i = 0; i < 2; i++) {
        while (*p == ' ')
            p++;
        size_t len = strspn(p, "0123456789");
        if (!fence__parse_u64(p, len, &v[i]))
            return FENCE_EPROTO;
        p += len;
    }
    if (highest_out != NULL)
        *highest_out = v[1];
    return 0;
}

/* The shape of a signed token reply; see pure.h. */
bool fence__parse_signed(const char *s, size_t len, uint64_t *token_out,
                         char *buf, size_t cap)
{
    if (s == NULL || len == 0 || len >= cap)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
            return false;
    const char *dot = memchr(s, '.', len);
    if (dot == NULL || dot == s || s[0] == '0')
        return false;
    uint64_t t;
    if (!fence__parse_u64(s, (size_t)(dot - s), &t) || t == 0)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    *token_out = t;
    return true;
}

/* Decimal u64 with overflow check; see pure.h. */
bool fence__parse_u64(const char *s, size_t len, uint64_t *out)
{
    /* At most 20 bytes: "000...1" longer than that is refused, as always. */
    return len <= 20 && fence__num_u64(s, len, UINT64_MAX, out) == 0;
}

/* Exponential backoff with jitter; see pure.h. */
uint32_t fence__backoff_ms(uint32_t attempt, uint32_t min_ms, uint32_t max_ms,
                           uint32_t rand_u32)
{
    if (min_ms == 0)
        min_ms = 1;
    if (max_ms < min_ms)
        max_ms = min_ms;
    uint64_t b = min_ms;
    for (uint32_t i = 0; i < attempt && b < max_ms; i++)
        b *= 2;
    if (b > max_ms)
        b = max_ms;
    /* Scale into [b/2, b]. */
    uint64_t half = b / 2;
    uint64_t jitter = half ? (uint64_t)rand_u32 % (half + 1) : 0;
    uint64_t r = b - half + jitter;
    FENCE_ASSERT(r <= max_ms);
    return r ? (uint32_t)r : 1;
}

/* The valid-until margin; see pure.h. */
uint64_t fence__margin_ms(uint64_t ttl_ms, uint64_t margin_ms)
{
    uint64_t m = margin_ms ? margin_ms : ttl_ms / 10 + 5;
    if (m > ttl_ms / 2)
        m = ttl_ms / 2;
    return m;
}

/* valid-until from the send time; see pure.h. */
uint64_t fence__valid_until(uint64_t sent_ms, uint64_t ttl_ms,
                            uint64_t margin_ms)
{
    if (margin_ms >= ttl_ms)
        return sent_ms;
    return sent_ms + (ttl_ms - margin_ms);
}

/* The next renewal time; see pure.h. */
uint64_t fence__renew_at(uint64_t sent_ms, uint64_t ttl_ms)
{
    uint64_t third = ttl_ms / 3;
    return sent_ms + (third ? third : 1);
}

/* ACQUIRE or LEASE.GRANT + LOCK; see pure.h.  With a wait of at most half
 * the TTL the dedicated lease still has half its TTL when granted. */
bool fence__use_acquire(uint64_t ttl_ms, uint64_t wait_ms)
{
    return wait_ms <= ttl_ms / 2;
}
