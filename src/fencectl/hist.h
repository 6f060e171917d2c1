/* A fixed-size log-linear latency histogram (pure; used by fencectl bench).
 * Values are microseconds; each power of two is split into 32 buckets, so a
 * percentile is reported within about 3% of the true value. */
#ifndef FENCECTL_HIST_H
#define FENCECTL_HIST_H

#include <stdint.h>

/* Sub-buckets per power of two (as a shift). */
#define FENCECTL_HIST_SUB_BITS 5
/* Largest exponent tracked; larger values land in the last bucket. */
#define FENCECTL_HIST_EXP_MAX 40
/* Number of buckets. */
#define FENCECTL_HIST_BUCKETS \
    ((1u << FENCECTL_HIST_SUB_BITS) * (FENCECTL_HIST_EXP_MAX - FENCECTL_HIST_SUB_BITS + 2))

typedef struct fencectl_hist {
    uint64_t count;                          /* values recorded */
    uint64_t max;                            /* largest value recorded */
    uint64_t buckets[FENCECTL_HIST_BUCKETS]; /* counts per bucket */
} fencectl_hist;

/* Reset to empty. */
void fencectl_hist_init(fencectl_hist *h);
/* Record one value. */
void fencectl_hist_add(fencectl_hist *h, uint64_t v);
/* Add every count of src into dst. */
void fencectl_hist_merge(fencectl_hist *dst, const fencectl_hist *src);
/* The value at quantile q (0 < q <= 1): the upper edge of the bucket that
 * holds the ceil(q * count)-th smallest value, capped at max.  0 if empty. */
uint64_t fencectl_hist_quantile(const fencectl_hist *h, double q);
/* Bucket index of v, and the largest value in bucket i (for tests). */
uint32_t fencectl_hist_index(uint64_t v);
uint64_t fencectl_hist_upper(uint32_t i);

#endif /* FENCECTL_HIST_H */
