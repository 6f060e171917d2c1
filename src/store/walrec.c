/* fence-store's WAL record codec (see walrec.h). */
#include "store/walrec.h"

#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/bytes.h"
#include "base/crc32c.h"

/* Bytes an operation takes before its key. */
#define OP_HDR 8

/* Round n up to a multiple of 8. */
static size_t pad8(size_t n)
{
    return (n + 7) & ~(size_t)7;
}

/* The header CRC: CRC32C of the 24 header bytes with hcrc taken as 0. */
static uint32_t header_crc(const uint8_t *h)
{
    uint8_t tmp[FENCE_STORE_WALREC_HDR];
    memcpy(tmp, h, sizeof(tmp));
    memset(tmp + 4, 0, 4);
    return fence__crc32c(tmp, sizeof(tmp));
}

/* Next operation (walrec.h). */
int fence__store_walrec_op_next(const uint8_t *payload, size_t len,
                                size_t *off, fence_store_walop *op)
{
    FENCE_ASSERT(*off <= len);
    if (*off == len)
        return 0;
    if (len - *off < OP_HDR)
        return -1;
    const uint8_t *p = payload + *off;
    op->op = p[0];
    op->dbi = p[1];
    op->key_len = fence__get_u16(p + 2);
    op->value_len = fence__get_u32(p + 4);
    if (op->op != FENCE_STORE_WALOP_PUT && op->op != FENCE_STORE_WALOP_DEL)
        return -1;
    if (op->dbi >= FENCE_STORE_WALDB_N)
        return -1;
    if (op->key_len < 1 || op->key_len > FENCE_STORE_WALREC_KEY_MAX)
        return -1;
    if (op->op == FENCE_STORE_WALOP_DEL && op->value_len != 0)
        return -1;
    size_t left = len - *off - OP_HDR;
    if (op->key_len > left || op->value_len > left - op->key_len)
        return -1;
    op->key = p + OP_HDR;
    op->value = p + OP_HDR + op->key_len;
    *off += OP_HDR + op->key_len + op->value_len;
    return 1;
}

/* Parse one record (walrec.h). */
size_t fence__store_walrec_parse(const uint8_t *p, size_t n,
                                 fence_store_walrec *out)
{
    if (n < FENCE_STORE_WALREC_HDR)
        return 0;
    uint32_t len = fence__get_u32(p);
    uint64_t lsn = fence__get_u64(p + 8);
    if (len > FENCE_STORE_WALREC_PAYLOAD_MAX || lsn == 0)
        return 0; /* (zeros end here, before any CRC) */
    if (fence__get_u32(p + 4) != header_crc(p))
        return 0;
    size_t total = pad8(FENCE_STORE_WALREC_HDR + (size_t)len);
    if (total > n)
        return 0; /* torn: the header made it, the payload did not */
    const uint8_t *payload = p + FENCE_STORE_WALREC_HDR;
    if (fence__get_u32(p + 16) != fence__crc32c(payload, len))
        return 0;
    uint32_t nops = fence__get_u32(p + 20);
    size_t off = 0;
    fence_store_walop op;
    for (uint32_t i = 0; i < nops; i++)
        if (fence__store_walrec_op_next(payload, len, &off, &op) != 1)
            return 0;
    if (off != len)
        return 0;
    for (size_t i = FENCE_STORE_WALREC_HDR + len; i < total; i++)
        if (p[i] != 0)
            return 0;
    out->lsn = lsn;
    out->payload = payload;
    out->payload_len = len;
    out->nops = nops;
    return total;
}

/* Room for need more bytes in b; 0 or -1. */
static int reserve(fence_store_walbuf *b, size_t need)
{
    if (b->cap - b->len >= need)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap - b->len < need) {
        if (cap > SIZE_MAX / 2)
            return -1;
        cap *= 2;
    }
    uint8_t *p = realloc(b->p, cap);
    if (p == NULL)
        return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Start a record (walrec.h). */
void fence__store_walbuf_reset(fence_store_walbuf *b)
{
    b->len = 0;
    b->nops = 0;
}

/* Append an operation (walrec.h). */
int fence__store_walbuf_op(fence_store_walbuf *b, uint8_t op, uint8_t dbi,
                           const void *key, size_t key_len, const void *value,
                           size_t value_len)
{
    FENCE_ASSERT(op == FENCE_STORE_WALOP_PUT || op == FENCE_STORE_WALOP_DEL);
    FENCE_ASSERT(dbi < FENCE_STORE_WALDB_N);
    FENCE_ASSERT(key_len >= 1);
    FENCE_ASSERT(key_len <= FENCE_STORE_WALREC_KEY_MAX);
    FENCE_ASSERT(op == FENCE_STORE_WALOP_PUT || value_len == 0);
    if (value_len > FENCE_STORE_WALREC_PAYLOAD_MAX)
        return -1;
    size_t hdr = b->len == 0 ? FENCE_STORE_WALREC_HDR : 0;
    if (reserve(b, hdr + OP_HDR + key_len + value_len) != 0)
        return -1;
    if (hdr != 0) {
        memset(b->p, 0, hdr);
        b->len = hdr;
    }
    uint8_t *p = b->p + b->len;
    p[0] = op;
    p[1] = dbi;
    fence__put_u16(p + 2, (uint16_t)key_len);
    fence__put_u32(p + 4, (uint32_t)value_len);
    memcpy(p + OP_HDR, key, key_len);
    if (value_len > 0)
        memcpy(p + OP_HDR + key_len, value, value_len);
    b->len += OP_HDR + key_len + value_len;
    b->nops++;
    return 0;
}

/* Finish the record (walrec.h). */
int fence__store_walbuf_finish(fence_store_walbuf *b, uint64_t lsn)
{
    FENCE_ASSERT(lsn > 0);
    if (b->len == 0) {
        if (reserve(b, FENCE_STORE_WALREC_HDR) != 0)
            return -1;
        memset(b->p, 0, FENCE_STORE_WALREC_HDR);
        b->len = FENCE_STORE_WALREC_HDR;
    }
    size_t len = b->len - FENCE_STORE_WALREC_HDR;
    if (len > FENCE_STORE_WALREC_PAYLOAD_MAX)
        return -1;
    size_t total = pad8(b->len);
    if (reserve(b, total - b->len) != 0)
        return -1;
    memset(b->p + b->len, 0, total - b->len);
    uint8_t *h = b->p;
    fence__put_u32(h, (uint32_t)len);
    fence__put_u32(h + 4, 0);
    fence__put_u64(h + 8, lsn);
    fence__put_u32(h + 16, fence__crc32c(h + FENCE_STORE_WALREC_HDR, len));
    fence__put_u32(h + 20, b->nops);
    fence__put_u32(h + 4, header_crc(h));
    b->len = total;
    return 0;
}

/* Free the buffer (walrec.h). */
void fence__store_walbuf_free(fence_store_walbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}
