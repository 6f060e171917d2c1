/* The guard's on-disk format: pure encoders and a bounded decoder over bytes.
 *
 * No I/O, no allocation, no globals, so the decoder behaves the same under a
 * fuzzer (tests/fuzz/guard_fuzz.c) as when a guard is opened.
 *
 * Layout (all integers little-endian):
 *
 *   file header (16 bytes): "FNCGUARD", u32 version (1), u32 crc32c of the
 *                           first 12 bytes
 *   frame*:                 u32 payload_len (1..FENCE__GUARD_PAYLOAD_MAX),
 *                           u32 crc32c(payload), u32 crc32c of these first
 *                           8 header bytes, then payload_len bytes
 *   payload:                record+, each u16 name_len (1..256),
 *                           u64 token, name_len name bytes
 *
 * One frame is one append (one write(2), one fsync): a group-commit batch.
 * Replaying the frames in order, the last record of a fence gives its mark.
 *
 * Torn tail rule.  A crash in the middle of an append can leave a partial or
 * zero-filled last frame; that frame was never acknowledged, so it is
 * discarded.  The decoder calls the bytes from offset o to the end of the
 * file a torn tail iff one of these holds:
 *   - fewer than 12 bytes remain (a partial frame header);
 *   - the frame header is all zero bytes and at most one maximal frame
 *     remains (the blocks were allocated but never written);
 *   - the header checksum is good but the payload runs past the end;
 *   - the header checksum is good, the payload ends exactly at the end of
 *     the file and its checksum is bad (the last write was torn).
 * Anything else that fails a check (a bad header checksum with data after
 * it, a bad payload checksum with frames after it, an impossible record
 * inside a frame whose checksum is good) is corruption: the guard refuses
 * to open rather than forget acknowledged marks.
 */
#ifndef FENCE_GUARD_FORMAT_H
#define FENCE_GUARD_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "base/crc32c.h"

#define FENCE__GUARD_MAGIC "FNCGUARD"
#define FENCE__GUARD_VERSION 1u
#define FENCE__GUARD_FILE_HDR 16u
#define FENCE__GUARD_FRAME_HDR 12u
/* Largest payload of one frame (one group-commit batch). */
#define FENCE__GUARD_PAYLOAD_MAX (1024u * 1024u)
/* Fixed part of a record (u16 length + u64 token). */
#define FENCE__GUARD_REC_FIXED 10u
/* Largest record. */
#define FENCE__GUARD_REC_MAX (FENCE__GUARD_REC_FIXED + 256u)

_Static_assert(FENCE__GUARD_REC_MAX <= FENCE__GUARD_PAYLOAD_MAX,
               "a record must fit a frame");

/* Called for each record, in file order.  A non-zero return stops the scan
 * and is returned by fence__guard_scan. */
typedef int (*fence__guard_rec_fn)(void *ctx, const char *name, size_t len,
                                   uint64_t token);

/* What fence__guard_scan found. */
typedef struct fence__guard_scan_result {
    uint64_t valid_end;  /* offset just past the last good frame */
    uint64_t torn_bytes; /* bytes after valid_end that are a torn tail */
    uint64_t frames;     /* good frames seen */
    uint64_t records;    /* records passed to the callback */
    char err[200];       /* why the scan failed (ECORRUPT), else "" */
} fence__guard_scan_result;


/* Write the 16-byte file header into out. */
void fence__guard_file_header(unsigned char out[FENCE__GUARD_FILE_HDR]);

/* Encode one record at p (room for FENCE__GUARD_REC_FIXED + len bytes).
 * len must be 1..256.  Returns the bytes written. */
size_t fence__guard_rec_encode(unsigned char *p, const char *name, size_t len,
                               uint64_t token);

/* Fill the 12-byte header of a frame whose payload is payload[0..len)
 * (len 1..FENCE__GUARD_PAYLOAD_MAX). */
void fence__guard_frame_header(unsigned char hdr[FENCE__GUARD_FRAME_HDR],
                               const unsigned char *payload, size_t len);

/* Check and decode a whole log file buf[0..len), calling fn for each record
 * of each good frame.  Returns 0 (res->valid_end and res->torn_bytes say
 * where the good part ends), FENCE_GUARD_ECORRUPT with res->err set, or the
 * callback's non-zero return. */
int fence__guard_scan(const unsigned char *buf, size_t len,
                      fence__guard_rec_fn fn, void *ctx,
                      fence__guard_scan_result *res);

#endif /* FENCE_GUARD_FORMAT_H */
