/* Log-linear latency histogram (see hist.h). */
#include "fencectl/hist.h"

#include <math.h>
#include <string.h>

#include "base/assert.h"

#define SUB (1u << FENCECTL_HIST_SUB_BITS)

/* Empty the histogram. */
void fencectl_hist_init(fencectl_hist *h)
{
    memset(h, 0, sizeof(*h));
}

/* Position of the highest set bit of v (v > 0). */
static uint32_t msb(uint64_t v)
{
    FENCE_ASSERT(v != 0);
    return 63u - (uint32_t)__builtin_clzll(v);
}

/* Values below SUB get a bucket each; above, bucket = (exponent, the next
 * FENCECTL_HIST_SUB_BITS bits below the leading one). */
uint32_t fencectl_hist_index(uint64_t v)
{
    if (v < SUB)
        return (uint32_t)v;
    uint32_t e = msb(v);
    if (e > FENCECTL_HIST_EXP_MAX)
        return FENCECTL_HIST_BUCKETS - 1;
    uint32_t m = (uint32_t)(v >> (e - FENCECTL_HIST_SUB_BITS)) & (SUB - 1);
    uint32_t i = SUB + (e - FENCECTL_HIST_SUB_BITS) * SUB + m;
    FENCE_ASSERT(i < FENCECTL_HIST_BUCKETS);
    return i;
}

/* The largest value that maps to bucket i. */
uint64_t fencectl_hist_upper(uint32_t i)
{
    FENCE_ASSERT(i < FENCECTL_HIST_BUCKETS);
    if (i < SUB)
        return i;
    uint32_t e = (i - SUB) / SUB + FENCECTL_HIST_SUB_BITS;
    uint64_t m = (i - SUB) % SUB;
    uint64_t low = (uint64_t)(SUB + m) << (e - FENCECTL_HIST_SUB_BITS);
    return low + (1ull << (e - FENCECTL_HIST_SUB_BITS)) - 1;
}

/* Count v. */
void fencectl_hist_add(fencectl_hist *h, uint64_t v)
{
    h->buckets[fencectl_hist_index(v)]++;
    h->count++;
    if (v > h->max)
        h->max = v;
}

/* Sum two histograms. */
void fencectl_hist_merge(fencectl_hist *dst, const fencectl_hist *src)
{
    for (uint32_t i = 0; i < FENCECTL_HIST_BUCKETS; i++)
        dst->buckets[i] += src->buckets[i];
    dst->count += src->count;
    if (src->max > dst->max)
        dst->max = src->max;
}

/* Walk the buckets to the rank ceil(q * count). */
uint64_t fencectl_hist_quantile(const fencectl_hist *h, double q)
{
    if (h->count == 0)
        return 0;
    FENCE_ASSERT(q > 0);
    FENCE_ASSERT(q <= 1);
    uint64_t rank = (uint64_t)ceil(q * (double)h->count);
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (uint32_t i = 0; i < FENCECTL_HIST_BUCKETS; i++) {
        seen += h->buckets[i];
        if (seen >= rank) {
            uint64_t u = fencectl_hist_upper(i);
            return u < h->max ? u : h->max;
        }
    }
    return h->max;
}
