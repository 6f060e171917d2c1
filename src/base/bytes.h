/* Little-endian integers in byte buffers: the one helper every on-disk and
 * on-wire format of fenced uses (log entries and snapshots in src/core, the
 * guard's state file in src/guard).  Byte by byte, so alignment and host
 * byte order do not matter.  The caller has checked that the bytes are
 * there. */
#ifndef FENCE_COMMON_BYTES_H
#define FENCE_COMMON_BYTES_H

#include <stdint.h>

/* Store v little-endian at p[0..2). */
static inline void fence__put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Store v little-endian at p[0..4). */
static inline void fence__put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* Store v little-endian at p[0..8). */
static inline void fence__put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

/* Load a little-endian u16 from p[0..2). */
static inline uint16_t fence__get_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (uint16_t)(p[1] << 8));
}

/* Load a little-endian u32 from p[0..4). */
static inline uint32_t fence__get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

/* Load a little-endian u64 from p[0..8). */
static inline uint64_t fence__get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = (v << 8) | p[i];
    }
    return v;
}

#endif /* FENCE_COMMON_BYTES_H */
