/* FNV-1a, the one non-cryptographic hash of the tree: 64-bit for owner ids
 * (src/auth/acl.c: the id goes into the replicated log, so its output is
 * part of the on-disk format and must never change), request fingerprints
 * (src/core/dedup.c, also replicated), hash-table buckets (guard, proxy)
 * and the simulation's cross-node comparisons; 32-bit for the metrics
 * label table.  Pure and inline, so src/core may use it (no I/O, clock or
 * allocation).  Not for anything an attacker must not steer: a peer who
 * picks the keys can make them collide at will. */
#ifndef FENCE_COMMON_HASH_H
#define FENCE_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"

/* The offset bases and primes of FNV-1a (Fowler, Noll, Vo). */
#define FENCE_FNV64_INIT  14695981039346656037ULL
#define FENCE_FNV64_PRIME 1099511628211ULL
#define FENCE_FNV32_INIT  2166136261u
#define FENCE_FNV32_PRIME 16777619u

/* Feed data[0..len) into the 64-bit hash h (start from FENCE_FNV64_INIT)
 * and return the new value; data may be NULL when len is 0. */
static inline uint64_t fence__fnv1a64_add(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FENCE_FNV64_PRIME;
    }
    return h;
}

/* Feed the 8 bytes of v, least significant first, into h: the same value
 * on every host whatever its byte order or padding. */
static inline uint64_t fence__fnv1a64_add_u64(uint64_t h, uint64_t v)
{
    uint8_t b[8];
    fence__put_u64(b, v);
    return fence__fnv1a64_add(h, b, sizeof(b));
}

/* The 64-bit FNV-1a hash of data[0..len). */
static inline uint64_t fence__fnv1a64(const void *data, size_t len)
{
    return fence__fnv1a64_add(FENCE_FNV64_INIT, data, len);
}

/* The 32-bit FNV-1a hash of data[0..len). */
static inline uint32_t fence__fnv1a32(const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t h = FENCE_FNV32_INIT;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= FENCE_FNV32_PRIME;
    }
    return h;
}

#endif
