/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of the
 * guard's log and the snapshot format.  crc32c("123456789") = 0xE3069283.
 * Pure code, no state: safe from any thread (SSE4.2 crc32 where the CPU
 * has it, else one table lookup per byte). */
#ifndef FENCE_COMMON_CRC32C_H
#define FENCE_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C of p[0..n).  (The same signature as the copy src/core/snapshot.c
 * still carries, so that copy can go by including this header.) */
uint32_t fence__crc32c(const void *p, size_t n);

#endif /* FENCE_COMMON_CRC32C_H */
