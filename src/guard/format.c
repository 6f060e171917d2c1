/* The guard's on-disk format (see format.h for the layout and the torn-tail
 * rule).  Pure code: no I/O, no allocation. */
#include "guard/format.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/crc32c.h"
#include "fence_guard.h"


/* Write the file header: magic, version and a checksum over both. */
void fence__guard_file_header(unsigned char out[FENCE__GUARD_FILE_HDR])
{
    memcpy(out, FENCE__GUARD_MAGIC, 8);
    fence__put_u32(out + 8, FENCE__GUARD_VERSION);
    fence__put_u32(out + 12, fence__crc32c(out, 12));
}

/* Encode one record (length, token, name bytes) at p. */
size_t fence__guard_rec_encode(unsigned char *p, const char *name, size_t len,
                               uint64_t token)
{
    FENCE_ASSERT(name != NULL);
    FENCE_ASSERT(len >= 1);
    FENCE_ASSERT(len <= FENCE_GUARD_NAME_MAX);
    fence__put_u16(p, (uint16_t)len);
    fence__put_u64(p + 2, token);
    memcpy(p + FENCE__GUARD_REC_FIXED, name, len);
    return FENCE__GUARD_REC_FIXED + len;
}

/* Fill a frame header: payload length, payload checksum, header checksum. */
void fence__guard_frame_header(unsigned char hdr[FENCE__GUARD_FRAME_HDR],
                               const unsigned char *payload, size_t len)
{
    FENCE_ASSERT(len >= 1);
    FENCE_ASSERT(len <= FENCE__GUARD_PAYLOAD_MAX);
    fence__put_u32(hdr, (uint32_t)len);
    fence__put_u32(hdr + 4, fence__crc32c(payload, len));
    fence__put_u32(hdr + 8, fence__crc32c(hdr, 8));
}

/* True if p[0..n) is all zero bytes. */
static bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != 0)
            return false;
    return true;
}

/* Decode the records of one good frame's payload, calling fn for each.
 * The payload checksum has already been verified, so a record that does
 * not parse means a writer bug or corruption that the checksum missed. */
static int scan_payload(const unsigned char *p, size_t len, uint64_t at,
                        fence__guard_rec_fn fn, void *ctx,
                        fence__guard_scan_result *res)
{
    size_t off = 0;
    while (off < len) {
        if (len - off < FENCE__GUARD_REC_FIXED) {
            snprintf(res->err, sizeof(res->err),
                     "record at offset %" PRIu64 " is cut short",
                     at + (uint64_t)off);
            return FENCE_GUARD_ECORRUPT;
        }
        size_t nlen = fence__get_u16(p + off);
        uint64_t token = fence__get_u64(p + off + 2);
        if (nlen < 1 || nlen > FENCE_GUARD_NAME_MAX ||
            nlen > len - off - FENCE__GUARD_REC_FIXED) {
            snprintf(res->err, sizeof(res->err),
                     "record at offset %" PRIu64 " has bad name length %zu",
                     at + (uint64_t)off, nlen);
            return FENCE_GUARD_ECORRUPT;
        }
        const char *name = (const char *)p + off + FENCE__GUARD_REC_FIXED;
        int rc = fn ? fn(ctx, name, nlen, token) : 0;
        if (rc != 0)
            return rc;
        res->records++;
        off += FENCE__GUARD_REC_FIXED + nlen;
    }
    FENCE_ASSERT(off == len);
    return 0;
}

/* Check and decode a whole log, applying the torn-tail rule of format.h. */
int fence__guard_scan(const unsigned char *buf, size_t len,
                      fence__guard_rec_fn fn, void *ctx,
                      fence__guard_scan_result *res)
{
    FENCE_ASSERT(res != NULL);
    memset(res, 0, sizeof(*res));
    FENCE_ASSERT(buf != NULL || len == 0);
    if (len < FENCE__GUARD_FILE_HDR) {
        snprintf(res->err, sizeof(res->err),
                 "file is %zu bytes, shorter than its 16-byte header", len);
        return FENCE_GUARD_ECORRUPT;
    }
    if (memcmp(buf, FENCE__GUARD_MAGIC, 8) != 0) {
        snprintf(res->err, sizeof(res->err),
                 "not a guard file (bad magic at offset 0)");
        return FENCE_GUARD_ECORRUPT;
    }
    if (fence__get_u32(buf + 12) != fence__crc32c(buf, 12)) {
        snprintf(res->err, sizeof(res->err), "file header checksum mismatch");
        return FENCE_GUARD_ECORRUPT;
    }
    if (fence__get_u32(buf + 8) != FENCE__GUARD_VERSION) {
        snprintf(res->err, sizeof(res->err),
                 "unsupported format version %" PRIu32, fence__get_u32(buf + 8));
        return FENCE_GUARD_ECORRUPT;
    }
    size_t off = FENCE__GUARD_FILE_HDR;
    while (off < len) {
        size_t rem = len - off;
        const unsigned char *h = buf + off;
        if (rem < FENCE__GUARD_FRAME_HDR)
            break; /* partial frame header: torn */
        if (fence__get_u32(h + 8) != fence__crc32c(h, 8)) {
            if (all_zero(h, FENCE__GUARD_FRAME_HDR) &&
                rem <= FENCE__GUARD_FRAME_HDR + FENCE__GUARD_PAYLOAD_MAX)
                break; /* never-written blocks at the end: torn */
            snprintf(res->err, sizeof(res->err),
                     "frame header checksum mismatch at offset %zu "
                     "(%zu bytes follow)", off, rem);
            return FENCE_GUARD_ECORRUPT;
        }
        uint32_t plen = fence__get_u32(h);
        if (plen < 1 || plen > FENCE__GUARD_PAYLOAD_MAX) {
            snprintf(res->err, sizeof(res->err),
                     "frame at offset %zu has impossible length %" PRIu32,
                     off, plen);
            return FENCE_GUARD_ECORRUPT;
        }
        if ((size_t)plen > rem - FENCE__GUARD_FRAME_HDR)
            break; /* payload runs past the end: torn */
        const unsigned char *payload = h + FENCE__GUARD_FRAME_HDR;
        if (fence__get_u32(h + 4) != fence__crc32c(payload, plen)) {
            if (off + FENCE__GUARD_FRAME_HDR + plen == len)
                break; /* the last frame's write was torn */
            snprintf(res->err, sizeof(res->err),
                     "frame payload checksum mismatch at offset %zu "
                     "(frames follow it, so this is not a torn tail)", off);
            return FENCE_GUARD_ECORRUPT;
        }
        int rc = scan_payload(payload, plen, off + FENCE__GUARD_FRAME_HDR, fn,
                              ctx, res);
        if (rc != 0)
            return rc;
        res->frames++;
        off += FENCE__GUARD_FRAME_HDR + plen;
    }
    res->valid_end = off;
    res->torn_bytes = len - off;
    FENCE_ASSERT(res->valid_end <= len);
    return 0;
}
