/* Fuzz target for the snapshot decoder (fence_fsm_restore, src/core).
 *
 * The first byte of the input picks how the rest is used:
 *   even: the rest is passed to fence_fsm_restore as it is;
 *   odd:  the rest is a snapshot body, and the target appends the CRC32C
 *         trailer the format ends with (see src/core/snapshot.c), so that
 *         the fuzzer gets past the checksum and into the decoder.
 * A restore into a fresh state machine must either fail with
 * FENCE_ST_INVALID or FENCE_ST_LIMIT and leave the state as it was, or
 * succeed with a state that passes fence_fsm_check and snapshots back to
 * exactly the same bytes (the encoding is deterministic and canonical).
 * An older version (2) that restores must snapshot to the current version,
 * and that snapshot must be canonical in its turn.
 * A restored state must also survive time passing to its next deadline,
 * and restoring the same bytes over a non-empty state must give the same
 * state again.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "fuzz.h"

#ifndef FENCE_TIME_MS_MAX
#define FENCE_TIME_MS_MAX (1ULL << 62)
#endif

/* The injected allocator: plain malloc. */
static void *fz_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

/* Frees what fz_alloc returned. */
static void fz_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

/* Creates an empty state machine (events dropped). */
static fence_fsm *new_fsm(void)
{
    fence_fsm_opts o = {
        .alloc = {.alloc = fz_alloc, .free = fz_free, .ctx = NULL},
    };
    fence_fsm *f = NULL;
    FUZZ_CHECK(fence_fsm_create(&o, &f) == 0);
    FUZZ_CHECK(f != NULL);
    return f;
}

/* Returns a malloc'ed snapshot of f, its length in *len. */
static uint8_t *snapshot(const fence_fsm *f, size_t *len)
{
    size_t need = fence_fsm_snapshot_size(f);
    uint8_t *buf = malloc(need ? need : 1);
    FUZZ_CHECK(buf != NULL);
    *len = fence_fsm_snapshot(f, buf, need);
    FUZZ_CHECK(*len == need);
    return buf;
}

/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit. */
static uint32_t crc32c(const uint8_t *p, size_t n)
{
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
    }
    return crc ^ 0xffffffffu;
}

/* Checks that buf, restored times times into one fresh state machine (the
 * later times over a non-empty state), snapshots back to exactly buf. */
static void restores_to_itself(const uint8_t *buf, size_t len, int times)
{
    fence_fsm *g = new_fsm();
    for (int i = 0; i < times; i++)
        FUZZ_CHECK(fence_fsm_restore(g, buf, len) == 0);
    size_t again_len;
    uint8_t *again = snapshot(g, &again_len);
    FUZZ_CHECK(again_len == len);
    FUZZ_CHECK(memcmp(again, buf, len) == 0);
    free(again);
    fence_fsm_destroy(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    bool fix_crc = data[0] & 1;
    size_t len = size - 1 + (fix_crc ? 4 : 0);
    uint8_t *buf = malloc(len ? len : 1);
    FUZZ_CHECK(buf != NULL);
    memcpy(buf, data + 1, size - 1);
    if (fix_crc) {
        uint32_t crc = crc32c(buf, size - 1);
        for (int i = 0; i < 4; i++)
            buf[size - 1 + i] = (uint8_t)(crc >> (8 * i));
    }

    fence_fsm *f = new_fsm();
    size_t empty_len;
    uint8_t *empty = snapshot(f, &empty_len);
    int rc = fence_fsm_restore(f, buf, len);
    FUZZ_CHECK(fence_fsm_check(f) == NULL);
    size_t got_len;
    uint8_t *got = snapshot(f, &got_len);
    if (rc != 0) {
        FUZZ_CHECK(rc == FENCE_ST_INVALID || rc == FENCE_ST_LIMIT);
        FUZZ_CHECK(got_len == empty_len);
        FUZZ_CHECK(memcmp(got, empty, empty_len) == 0);
    } else if (len >= 8 && buf[4] < got[4]) {
        /* An older version: the current encoding of the same state must
         * restore and snapshot back to itself. */
        FUZZ_CHECK(buf[5] == 0 && buf[6] == 0 && buf[7] == 0);
        restores_to_itself(got, got_len, 1);
    } else {
        FUZZ_CHECK(got_len == len);
        FUZZ_CHECK(memcmp(got, buf, len) == 0);

        /* The same bytes over a non-empty state give the same state. */
        restores_to_itself(buf, len, 2);

        /* Time passing must keep every invariant. */
        uint64_t token = fence_fsm_last_token(f);
        uint64_t next = fence_fsm_next_deadline(f);
        if (next != UINT64_MAX && next <= FENCE_TIME_MS_MAX) {
            fence_fsm_advance(f, next);
            FUZZ_CHECK(fence_fsm_check(f) == NULL);
            FUZZ_CHECK(fence_fsm_last_token(f) >= token);
        }
    }
    free(got);
    free(empty);
    fence_fsm_destroy(f);
    free(buf);
    return 0;
}
