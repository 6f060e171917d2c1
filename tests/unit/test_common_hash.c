/* src/base/hash.h and hex.h: FNV-1a pinned to the published vectors and
 * to the values the tree used before the helper existed (the owner id
 * goes into the replicated log and the request fingerprint into
 * snapshots, so neither may change by one bit), and the hex digit table. */
#include <string.h>

#include "auth/acl.h"
#include "base/hash.h"
#include "base/hex.h"
#include "../lib/test.h"

/* The FNV authors' test vectors for "", "a" and "foobar". */
static void test_fnv_vectors(void)
{
    CHECK_EQ_U64(fence__fnv1a64("", 0), 0xcbf29ce484222325ULL);
    CHECK_EQ_U64(fence__fnv1a64(NULL, 0), FENCE_FNV64_INIT);
    CHECK_EQ_U64(fence__fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
    CHECK_EQ_U64(fence__fnv1a64("foobar", 6), 0x85944171f73967e8ULL);
    CHECK_EQ_U64(fence__fnv1a32("", 0), 0x811c9dc5u);
    CHECK_EQ_U64(fence__fnv1a32("a", 1), 0xe40c292cu);
    CHECK_EQ_U64(fence__fnv1a32("foobar", 6), 0xbf9cf968u);
}

/* Feeding in pieces equals feeding at once; a u64 is fed low byte first. */
static void test_fnv_incremental(void)
{
    uint64_t h = fence__fnv1a64_add(FENCE_FNV64_INIT, "foo", 3);
    CHECK_EQ_U64(fence__fnv1a64_add(h, "bar", 3), 0x85944171f73967e8ULL);
    const uint8_t le[8] = {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01};
    CHECK_EQ_U64(fence__fnv1a64_add_u64(FENCE_FNV64_INIT, 0x0102030405060708ULL),
                 fence__fnv1a64(le, sizeof(le)));
    /* Values computed with the loops the tree had before (sim.c's fnv_u64,
     * dedup.c's per-field loop). */
    CHECK_EQ_U64(fence__fnv1a64_add_u64(FENCE_FNV64_INIT, 0), 0xa8c7f832281a39c5ULL);
    CHECK_EQ_U64(fence__fnv1a64_add_u64(FENCE_FNV64_INIT, 1), 0x89cd31291d2aefa4ULL);
}

/* Owner ids as fenced wrote them into the log before the helper: the
 * default user is 0, every other name its FNV-1a (never 0). */
static void test_owner_ids(void)
{
    CHECK_EQ_U64(fence_acl_owner_id("default"), 0);
    CHECK_EQ_U64(fence_acl_owner_id("alice"), 0x508b2abb65a03907ULL);
    CHECK_EQ_U64(fence_acl_owner_id("bob"), 0x004d4419134a0a54ULL);
    CHECK_EQ_U64(fence_acl_owner_id("admin"), 0xe5cde7fdda328454ULL);
    CHECK_EQ_U64(fence_acl_owner_id(""), 0xcbf29ce484222325ULL);
}

/* Every byte value: the 22 hex digits map to 0..15, the rest to -1. */
static void test_hexval(void)
{
    const char *digits = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        CHECK_EQ_I64(fence__hexval(digits[i]), i);
        if (i >= 10)
            CHECK_EQ_I64(fence__hexval((char)(digits[i] - 'a' + 'A')), i);
    }
    int valid = 0;
    for (int c = -128; c < 128; c++)
        if (fence__hexval((char)c) >= 0)
            valid++;
    CHECK_EQ_I64(valid, 22);
    CHECK_EQ_I64(fence__hexval('g'), -1);
    CHECK_EQ_I64(fence__hexval('G'), -1);
    CHECK_EQ_I64(fence__hexval('/'), -1);
    CHECK_EQ_I64(fence__hexval(':'), -1);
    CHECK_EQ_I64(fence__hexval('@'), -1);
    CHECK_EQ_I64(fence__hexval('`'), -1);
    CHECK_EQ_I64(fence__hexval('\0'), -1);
}

int main(void)
{
    TEST_RUN(test_fnv_vectors);
    TEST_RUN(test_fnv_incremental);
    TEST_RUN(test_owner_ids);
    TEST_RUN(test_hexval);
    return TEST_DONE();
}
