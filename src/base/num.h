/* Decimal numbers from untrusted text: strict, bounded, overflow-checked.
 *
 * One set of parsers for every daemon and tool (flags, config files, RESP
 * arguments, stored counters).  Each takes a pointer and a length, so the
 * text need not be NUL-terminated, and never reads past p[n - 1].  "Strict"
 * means: digits only (i64: one optional leading '-'), no '+', no spaces, no
 * empty string, and a value that fits.  Leading zeros are accepted ("007"
 * is 7) except where a function says otherwise.  Pure code: no errno, no
 * locale, no allocation. */
#ifndef FENCE_COMMON_NUM_H
#define FENCE_COMMON_NUM_H

#include <stddef.h>
#include <stdint.h>

/* Parse p[0..n) as a decimal in [0, max].  Returns 0 and sets *out, or -1
 * (empty, a byte that is not a digit, overflow, or above max); *out is
 * untouched on failure. */
int fence__num_u64(const char *p, size_t n, uint64_t max, uint64_t *out);

/* Parse p[0..n) as a decimal int64 with an optional leading '-' ("-0" is
 * 0).  Returns 0 and sets *out, or -1 (empty, "-" alone, a byte that is not
 * a digit, or outside [INT64_MIN, INT64_MAX]). */
int fence__num_i64(const char *p, size_t n, int64_t *out);

/* Parse a NUL-terminated size: decimal digits, then at most one suffix
 * k/K, m/M or g/G (powers of 1024).  Returns 0 and sets *out, or -1 (not a
 * number, another suffix, or more than UINT64_MAX bytes). */
int fence__num_size(const char *s, uint64_t *out);

/* Parse digits at *pp (up to end) as a decimal in [min, max], stopping at
 * the first byte that is not a digit, and advance *pp past them: a scanner
 * for structured text such as "id=host:port/port".  Returns 0, or -1 (no
 * digit at *pp, overflow, or outside [min, max]; *pp unchanged). */
int fence__num_scan_u64(const char **pp, const char *end, uint64_t min,
                        uint64_t max, uint64_t *out);

#endif /* FENCE_COMMON_NUM_H */
