/* src/store/walrec: fence-store's WAL record codec.  A record round-trips
 * (header, LSN, every operation); every truncation, every flipped bit and
 * zeros are not a record; malformed operations are refused even under a
 * valid CRC. */
#include "store/walrec.h"

#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "../lib/test.h"

/* A record with a put into each database and a delete. */
static void build(fence_store_walbuf *b, uint64_t lsn)
{
    fence__store_walbuf_reset(b);
    CHECK(fence__store_walbuf_op(b, FENCE_STORE_WALOP_PUT, FENCE_STORE_WALDB_DATA,
                                 "key1", 4, "\x01\x00" "fvalue", 8) == 0);
    CHECK(fence__store_walbuf_op(b, FENCE_STORE_WALOP_PUT,
                                 FENCE_STORE_WALDB_FENCES, "f", 1,
                                 "\x07\0\0\0\0\0\0\0", 8) == 0);
    CHECK(fence__store_walbuf_op(b, FENCE_STORE_WALOP_DEL, FENCE_STORE_WALDB_DATA,
                                 "gone", 4, NULL, 0) == 0);
    CHECK(fence__store_walbuf_op(b, FENCE_STORE_WALOP_PUT,
                                 FENCE_STORE_WALDB_OWNERS, "gone", 4, "f", 1) == 0);
    CHECK(fence__store_walbuf_finish(b, lsn) == 0);
}

/* Encode, parse, walk the operations. */
static void test_round_trip(void)
{
    fence_store_walbuf b = {0};
    build(&b, 42);
    CHECK_EQ_U64(b.len % 8, 0);
    fence_store_walrec r;
    CHECK_EQ_U64(fence__store_walrec_parse(b.p, b.len, &r), b.len);
    CHECK_EQ_U64(r.lsn, 42);
    CHECK_EQ_U64(r.nops, 4);
    size_t off = 0;
    fence_store_walop op;
    CHECK(fence__store_walrec_op_next(r.payload, r.payload_len, &off, &op) == 1);
    CHECK_EQ_U64(op.op, FENCE_STORE_WALOP_PUT);
    CHECK_EQ_U64(op.dbi, FENCE_STORE_WALDB_DATA);
    CHECK(op.key_len == 4 && memcmp(op.key, "key1", 4) == 0);
    CHECK(op.value_len == 8 && memcmp(op.value, "\x01\x00" "fvalue", 8) == 0);
    CHECK(fence__store_walrec_op_next(r.payload, r.payload_len, &off, &op) == 1);
    CHECK_EQ_U64(op.dbi, FENCE_STORE_WALDB_FENCES);
    CHECK_EQ_U64(fence__get_u64(op.value), 7);
    CHECK(fence__store_walrec_op_next(r.payload, r.payload_len, &off, &op) == 1);
    CHECK_EQ_U64(op.op, FENCE_STORE_WALOP_DEL);
    CHECK_EQ_U64(op.value_len, 0);
    CHECK(fence__store_walrec_op_next(r.payload, r.payload_len, &off, &op) == 1);
    CHECK_EQ_U64(op.dbi, FENCE_STORE_WALDB_OWNERS);
    CHECK(fence__store_walrec_op_next(r.payload, r.payload_len, &off, &op) == 0);
    /* Two records back to back parse one after the other. */
    size_t n1 = b.len;
    uint8_t *two = malloc(2 * n1);
    CHECK(two != NULL);
    memcpy(two, b.p, n1);
    build(&b, 43);
    memcpy(two + n1, b.p, b.len);
    CHECK_EQ_U64(fence__store_walrec_parse(two, n1 + b.len, &r), n1);
    CHECK_EQ_U64(fence__store_walrec_parse(two + n1, b.len, &r), b.len);
    CHECK_EQ_U64(r.lsn, 43);
    free(two);
    /* A record with no operations. */
    fence__store_walbuf_reset(&b);
    CHECK(fence__store_walbuf_finish(&b, 1) == 0);
    CHECK_EQ_U64(fence__store_walrec_parse(b.p, b.len, &r), FENCE_STORE_WALREC_HDR);
    CHECK_EQ_U64(r.nops, 0);
    fence__store_walbuf_free(&b);
}

/* Torn records, flipped bits and zeros are not records. */
static void test_damage(void)
{
    fence_store_walbuf b = {0};
    build(&b, 7);
    fence_store_walrec r;
    for (size_t n = 0; n < b.len; n++)
        CHECK_EQ_U64(fence__store_walrec_parse(b.p, n, &r), 0);
    for (size_t i = 0; i < b.len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b.p[i] ^= (uint8_t)(1u << bit);
            CHECK_EQ_U64(fence__store_walrec_parse(b.p, b.len, &r), 0);
            b.p[i] ^= (uint8_t)(1u << bit);
        }
    }
    CHECK_EQ_U64(fence__store_walrec_parse(b.p, b.len, &r), b.len);
    uint8_t zeros[256] = {0};
    CHECK_EQ_U64(fence__store_walrec_parse(zeros, sizeof(zeros), &r), 0);
    fence__store_walbuf_free(&b);
}

/* Re-seal a hand-edited record: payload CRC and header CRC. */
static void reseal(uint8_t *p)
{
    uint32_t len = fence__get_u32(p);
    fence__put_u32(p + 16, fence__crc32c(p + FENCE_STORE_WALREC_HDR, len));
    fence__put_u32(p + 4, 0);
    uint8_t h[FENCE_STORE_WALREC_HDR];
    memcpy(h, p, sizeof(h));
    fence__put_u32(p + 4, fence__crc32c(h, sizeof(h)));
}

/* Malformed operations under valid CRCs are refused. */
static void test_bad_ops(void)
{
    fence_store_walbuf b = {0};
    fence_store_walrec r;
    size_t opoff = FENCE_STORE_WALREC_HDR;
    /* op kind, database, key length 0, DEL with a value, a value past the
     * end, an operation count that does not match */
    struct { size_t at; uint8_t v; } edits[] = {
        {opoff + 0, 3}, {opoff + 1, FENCE_STORE_WALDB_N}, {opoff + 2, 0},
        {opoff + 4, 200},
    };
    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
        build(&b, 9);
        if (edits[i].at == opoff + 2)
            b.p[opoff + 3] = 0; /* key length 0 */
        b.p[edits[i].at] = edits[i].v;
        reseal(b.p);
        CHECK_EQ_U64(fence__store_walrec_parse(b.p, b.len, &r), 0);
    }
    build(&b, 9);
    fence__put_u32(b.p + 20, 3); /* nops one short */
    reseal(b.p);
    CHECK_EQ_U64(fence__store_walrec_parse(b.p, b.len, &r), 0);
    build(&b, 9);
    fence__put_u64(b.p + 8, 0); /* LSN 0 */
    reseal(b.p);
    CHECK_EQ_U64(fence__store_walrec_parse(b.p, b.len, &r), 0);
    build(&b, 9);
    b.p[b.len - 1] = 1; /* a non-zero pad byte */
    CHECK_EQ_U64(fence__store_walrec_parse(b.p, b.len, &r), 0);
    fence__store_walbuf_free(&b);
}

int main(void)
{
    TEST_RUN(test_round_trip);
    TEST_RUN(test_damage);
    TEST_RUN(test_bad_ops);
    return TEST_DONE();
}
