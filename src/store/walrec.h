/* fence-store's write-ahead log record codec (pure: no I/O, no globals).
 *
 * One record holds one batch (one loop turn's writes): the LMDB puts and
 * deletes the batch made, after every check ran, so replaying a record
 * needs no check.  Layout, little-endian, 8-byte aligned:
 *
 *   u32 len    payload bytes
 *   u32 hcrc   CRC32C of the 24 header bytes with hcrc taken as 0
 *   u64 lsn    the batch's number (monotonic, from 1)
 *   u32 pcrc   CRC32C of the payload
 *   u32 nops   operations in the payload
 *   payload    nops operations: u8 op (PUT 1, DEL 2), u8 dbi (0 data,
 *              1 fences, 2 owners), u16 key length (1..511), u32 value
 *              length (0 for DEL), key bytes, value bytes
 *   zeros      to the next multiple of 8
 *
 * A region of zeros, a torn write or a flipped bit is not a record (the
 * header CRC or the payload CRC fails), so a scan stops there. */
#ifndef FENCE_STORE_WALREC_H
#define FENCE_STORE_WALREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Header bytes before the payload. */
#define FENCE_STORE_WALREC_HDR 24
/* Largest payload a record may declare (a WAL file holds more than one
 * batch of FENCE_STORE_BATCH_BYTES; a bigger batch bypasses the WAL). */
#define FENCE_STORE_WALREC_PAYLOAD_MAX (256u * 1024 * 1024)
/* Longest key an operation carries (LMDB's default key limit). */
#define FENCE_STORE_WALREC_KEY_MAX 511

/* Operation kinds. */
enum { FENCE_STORE_WALOP_PUT = 1, FENCE_STORE_WALOP_DEL = 2 };
/* Databases an operation names. */
enum {
    FENCE_STORE_WALDB_DATA = 0,
    FENCE_STORE_WALDB_FENCES = 1,
    FENCE_STORE_WALDB_OWNERS = 2,
    FENCE_STORE_WALDB_N = 3
};

/* A parsed record; payload points into the parsed buffer. */
typedef struct fence_store_walrec {
    uint64_t lsn;           /* batch number */
    const uint8_t *payload; /* the operations */
    size_t payload_len;     /* bytes in payload */
    uint32_t nops;          /* operations in payload */
} fence_store_walrec;

/* One operation; key and value point into the payload. */
typedef struct fence_store_walop {
    uint8_t op;             /* FENCE_STORE_WALOP_PUT or _DEL */
    uint8_t dbi;            /* FENCE_STORE_WALDB_* */
    const uint8_t *key;     /* key bytes */
    size_t key_len;         /* 1..FENCE_STORE_WALREC_KEY_MAX */
    const uint8_t *value;   /* PUT: value bytes */
    size_t value_len;       /* PUT: bytes in value; DEL: 0 */
} fence_store_walop;

/* Parse the record at p[0..n): the bytes it takes (header, payload and
 * padding, > 0) with *out filled, or 0 when p does not start a whole
 * valid record (zeros, a torn tail, a bad CRC, a malformed operation). */
size_t fence__store_walrec_parse(const uint8_t *p, size_t n,
                                 fence_store_walrec *out);

/* The next operation of a parsed payload at *off: 1 with *op filled and
 * *off advanced, 0 at the end, -1 on a malformed operation (never for a
 * payload fence__store_walrec_parse accepted). */
int fence__store_walrec_op_next(const uint8_t *payload, size_t len,
                                size_t *off, fence_store_walop *op);

/* A record being built in a growable buffer. */
typedef struct fence_store_walbuf {
    uint8_t *p;   /* header, payload (malloc) */
    size_t len;   /* bytes used (header included once begun) */
    size_t cap;   /* bytes allocated */
    uint32_t nops; /* operations appended */
} fence_store_walbuf;

/* Start a new record in b (keeps its memory): room for the header. */
void fence__store_walbuf_reset(fence_store_walbuf *b);

/* Append one operation; 0, or -1 out of memory (b is unchanged).  The key
 * is 1..FENCE_STORE_WALREC_KEY_MAX bytes; DEL takes no value. */
int fence__store_walbuf_op(fence_store_walbuf *b, uint8_t op, uint8_t dbi,
                           const void *key, size_t key_len, const void *value,
                           size_t value_len);

/* Finish the record with its lsn: header filled, padding added.  Returns
 * the record's bytes (b->p[0..b->len)), or -1 out of memory. */
int fence__store_walbuf_finish(fence_store_walbuf *b, uint64_t lsn);

/* Free b's memory. */
void fence__store_walbuf_free(fence_store_walbuf *b);

#endif /* FENCE_STORE_WALREC_H */
