/* Strict decimal parsers (see num.h). */
#include "base/num.h"

#include <stdbool.h>

#include "base/assert.h"

/* Accumulate the digits p[0..n) into *v (n >= 1, all digits checked by
 * the caller's loop here); -1 on a non-digit or on overflow past max. */
static int digits(const char *p, size_t n, uint64_t max, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (d > max || x > (max - d) / 10) /* d > max: max - d would wrap */
            return -1;
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

/* Parse an unsigned decimal bounded by max. */
int fence__num_u64(const char *p, size_t n, uint64_t max, uint64_t *out)
{
    FENCE_ASSERT(out != NULL);
    uint64_t v;
    if (p == NULL || n == 0 || digits(p, n, max, &v) != 0)
        return -1;
    *out = v;
    return 0;
}

/* Parse a signed decimal; the magnitude bound depends on the sign. */
int fence__num_i64(const char *p, size_t n, int64_t *out)
{
    FENCE_ASSERT(out != NULL);
    if (p == NULL || n == 0)
        return -1;
    bool neg = p[0] == '-';
    if (neg) {
        p++;
        n--;
        if (n == 0)
            return -1;
    }
    uint64_t v;
    uint64_t max = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (digits(p, n, max, &v) != 0)
        return -1;
    if (neg)
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    else
        *out = (int64_t)v;
    return 0;
}

/* Parse digits and an optional single k/m/g suffix. */
int fence__num_size(const char *s, uint64_t *out)
{
    FENCE_ASSERT(out != NULL);
    if (s == NULL)
        return -1;
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9')
        n++;
    if (n == 0)
        return -1;
    uint64_t mult = 1;
    switch (s[n]) {
    case '\0': break;
    case 'k': case 'K': mult = 1024; break;
    case 'm': case 'M': mult = 1024 * 1024; break;
    case 'g': case 'G': mult = 1024ull * 1024 * 1024; break;
    default: return -1;
    }
    if (mult != 1 && s[n + 1] != '\0')
        return -1;
    uint64_t v;
    if (digits(s, n, UINT64_MAX / mult, &v) != 0)
        return -1;
    *out = v * mult;
    return 0;
}

/* Scan a run of digits at *pp within [min, max]. */
int fence__num_scan_u64(const char **pp, const char *end, uint64_t min,
                        uint64_t max, uint64_t *out)
{
    FENCE_ASSERT(pp != NULL);
    FENCE_ASSERT(out != NULL);
    const char *p = *pp;
    size_t n = 0;
    while (p + n < end && p[n] >= '0' && p[n] <= '9')
        n++;
    uint64_t v;
    if (n == 0 || digits(p, n, max, &v) != 0 || v < min)
        return -1;
    *pp = p + n;
    *out = v;
    return 0;
}
