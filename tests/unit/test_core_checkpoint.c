/* LEASE_CHECKPOINT (issue 23 section 1, docs/leases.md): the leader answers
 * renewals itself and writes the renewed lease ids into one checkpoint
 * entry per interval.  Apply renews each live one at the entry's time, as
 * LEASE_KEEPALIVE would; unknown ids are no-ops; an expired lease is never
 * revived (nothing can be granted to it afterwards); the codec carries the
 * ids in version-5 entries only, and two replicas fed the same entries end
 * byte-identical. */
#define FX_PLAIN
#include "test_core_fx.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"

static uint64_t grant(fence_fsm *f, uint64_t now, uint64_t ttl)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = ttl};
    fence_result r = run(f, now, c);
    REQUIRE(r.status == FENCE_ST_OK);
    return r.lease;
}

/* A checkpoint of n ids (buf: room for them). */
static fence_cmd ckpt(uint8_t *buf, const uint64_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        fence__put_u64(buf + 8 * i, ids[i]);
    fence_cmd c = {.type = FENCE_CMD_LEASE_CHECKPOINT, .ids = buf, .ids_count = n};
    return c;
}

static uint64_t deadline(fence_fsm *f, uint64_t lease, uint64_t now)
{
    fence_fsm_lease_state st;
    if (fence_fsm_lease_info(f, lease, now, &st) != 0)
        return 0;
    return st.deadline_ms;
}

/* Live leases restart their full TTL at the entry's time; unknown ids and
 * duplicates change nothing else. */
static void test_renews_live_leases(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 100, 1000), b = grant(f, 100, 3000), c = grant(f, 100, 500);
    uint8_t buf[64];
    uint64_t ids[] = {a, 999, b, a};
    fence_result r = run(f, 400, ckpt(buf, ids, 4));
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    CHECK_EQ_U64(r.value, 3); /* a twice, b; 999 unknown */
    CHECK_EQ_U64(deadline(f, a, 400), 1400);
    CHECK_EQ_U64(deadline(f, b, 400), 3400);
    CHECK_EQ_U64(deadline(f, c, 400), 600); /* not listed: untouched */
    /* The same as LEASE_KEEPALIVE at the same time. */
    fence_cmd ka = {.type = FENCE_CMD_LEASE_KEEPALIVE, .lease = c};
    CHECK_EQ_U64(run(f, 400, ka).status, FENCE_ST_OK);
    CHECK_EQ_U64(deadline(f, c, 400), 900);
    done(f);
}

/* An expired lease is not revived: it is gone before the checkpoint runs,
 * and a LOCK for it afterwards answers NOLEASE (never a grant). */
static void test_never_revives(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 100);
    uint8_t buf[8];
    uint64_t ids[] = {a};
    fence_result r = run(f, 100, ckpt(buf, ids, 1)); /* deadline == now: expired */
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    CHECK_EQ_U64(r.value, 0);
    CHECK_EQ_U64(deadline(f, a, 100), 0);
    fence_cmd lk = {.type = FENCE_CMD_LOCK, .name = (const uint8_t *)"x", .name_len = 1,
                    .lease = a};
    CHECK_EQ_U64(run(f, 101, lk).status, FENCE_ST_NOLEASE);
    fence_fsm_stats st;
    fence_fsm_stats_get(f, &st);
    CHECK_EQ_U64(st.grants, 0);
    CHECK_EQ_U64(st.expirations, 1);
    done(f);
}

/* A lease holding a lock keeps it across checkpoints and loses it (with a
 * new token for the next holder) only when no checkpoint came in time. */
static void test_holder_kept_then_expires(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 1000), b = grant(f, 0, 60000);
    fence_cmd lk = {.type = FENCE_CMD_LOCK, .name = (const uint8_t *)"x", .name_len = 1,
                    .lease = a};
    fence_result r = run(f, 0, lk);
    REQUIRE(r.status == FENCE_ST_OK);
    uint64_t t1 = r.token;
    uint8_t buf[8];
    uint64_t ids[] = {a};
    for (uint64_t now = 600; now <= 3000; now += 600)
        CHECK_EQ_U64(run(f, now, ckpt(buf, ids, 1)).value, 1);
    CHECK_EQ_U64(deadline(f, a, 3000), 4000);
    lk.lease = b;
    lk.wait_ms = 0;
    CHECK_EQ_U64(run(f, 3999, lk).status, FENCE_ST_NIL);
    r = run(f, 4000, lk);
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    CHECK(r.token > t1);
    done(f);
}

/* A dedicated lease whose ACQUIRE is queued lives at least as long as its
 * wait, as after LEASE_KEEPALIVE. */
static void test_queued_acquire(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 60000);
    fence_cmd lk = {.type = FENCE_CMD_LOCK, .name = (const uint8_t *)"x", .name_len = 1,
                    .lease = a};
    REQUIRE(run(f, 0, lk).status == FENCE_ST_OK);
    fence_cmd acq = {.type = FENCE_CMD_ACQUIRE, .name = (const uint8_t *)"x", .name_len = 1,
                     .ttl_ms = 100, .wait_ms = 5000};
    fence_result r = run(f, 0, acq);
    REQUIRE(r.status == FENCE_ST_QUEUED);
    uint8_t buf[8];
    uint64_t ids[] = {r.lease};
    CHECK_EQ_U64(run(f, 50, ckpt(buf, ids, 1)).value, 1);
    CHECK_EQ_U64(deadline(f, r.lease, 50), 5000);
    done(f);
}

/* Out-of-range counts answer INVALID and change nothing. */
static void test_invalid(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 1000);
    fence_cmd c = {.type = FENCE_CMD_LEASE_CHECKPOINT};
    CHECK_EQ_U64(run(f, 10, c).status, FENCE_ST_INVALID);
    uint8_t buf[8] = {0};
    c.ids = buf;
    c.ids_count = FENCE_CHECKPOINT_IDS_MAX + 1;
    CHECK_EQ_U64(run(f, 10, c).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(deadline(f, a, 10), 1000);
    done(f);
}

/* The codec: version 5, the ids round-trip, apply_entry on two replicas
 * ends in identical snapshots; the command is refused in older versions
 * and with a count beyond the bound or the entry's end. */
static void test_entry_codec(void)
{
    uint8_t ids_buf[8 * 3], buf[256];
    uint64_t ids[] = {1, 2, 77};
    fence_cmd cmds[2] = {ckpt(ids_buf, ids, 3), {.type = FENCE_CMD_TICK}};
    CHECK_EQ_U64(fence_entry_version_for(cmds, 2), FENCE_ENTRY_VERSION_KINDS);
    size_t n = fence_entry_encode(500, cmds, 2, buf, sizeof(buf));
    REQUIRE(n == fence_entry_size(cmds, 2));
    CHECK_EQ_U64(buf[0], 5);
    fence_entry_iter it;
    fence_cmd c;
    REQUIRE(fence_entry_open(&it, buf, n) == 0);
    REQUIRE(fence_entry_next(&it, &c) == 1);
    CHECK_EQ_U64(c.type, FENCE_CMD_LEASE_CHECKPOINT);
    REQUIRE(c.ids_count == 3);
    CHECK_EQ_U64(fence__get_u64(c.ids + 16), 77);
    REQUIRE(fence_entry_next(&it, &c) == 1);
    CHECK_EQ_U64(fence_entry_next(&it, &c), 0);

    /* Two replicas, same entries, same bytes. */
    fence_fsm *f = new_fsm(), *g = new_fsm();
    uint8_t gbuf[256];
    fence_cmd gr[2] = {{.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = 1000},
                       {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = 2000}};
    size_t gn = fence_entry_encode(0, gr, 2, gbuf, sizeof(gbuf));
    fence_result res[4];
    CHECK_EQ_I64(fence_fsm_apply_entry(f, gbuf, gn, res, 4), 2);
    CHECK_EQ_I64(fence_fsm_apply_entry(g, gbuf, gn, res, 4), 2);
    CHECK_EQ_I64(fence_fsm_apply_entry(f, buf, n, res, 4), 2);
    CHECK_EQ_U64(res[0].value, 2);
    CHECK_EQ_I64(fence_fsm_apply_entry(g, buf, n, res, 4), 2);
    CHECK_EQ_U64(deadline(f, 1, 500), 1500);
    CHECK_EQ_U64(deadline(f, 2, 500), 2500);
    size_t sn = fence_fsm_snapshot_size(f);
    REQUIRE(sn == fence_fsm_snapshot_size(g));
    uint8_t *sa = malloc(sn), *sb = malloc(sn);
    REQUIRE(sa != NULL && sb != NULL);
    REQUIRE(fence_fsm_snapshot(f, sa, sn) == sn);
    REQUIRE(fence_fsm_snapshot(g, sb, sn) == sn);
    CHECK(memcmp(sa, sb, sn) == 0);
    free(sa);
    free(sb);

    /* Version 4 (or 3) with a checkpoint: refused, nothing applied. */
    uint8_t old[256];
    memcpy(old, buf, n);
    old[0] = 4;
    CHECK_EQ_I64(fence_fsm_apply_entry(f, old, n, res, 4), -FENCE_ST_INVALID);
    old[0] = 3;
    CHECK_EQ_I64(fence_fsm_apply_entry(f, old, n, res, 4), -FENCE_ST_INVALID);
    /* A count that runs past the entry, and one beyond the bound. */
    memcpy(old, buf, n);
    size_t count_at = 1 + 8 + 4 + 1 + 1 + 8 + 8;
    fence__put_u32(old + count_at, 4);
    CHECK_EQ_I64(fence_fsm_apply_entry(f, old, n, res, 4), -FENCE_ST_INVALID);
    fence__put_u32(old + count_at, FENCE_CHECKPOINT_IDS_MAX + 1);
    CHECK_EQ_I64(fence_fsm_apply_entry(f, old, n, res, 4), -FENCE_ST_INVALID);
    CHECK_EQ_U64(deadline(f, 1, 500), 1500);
    CHECK(fence_fsm_check(g) == NULL);
    fence_fsm_destroy(g);
    done(f);
}

/* The largest checkpoint encodes and applies. */
static void test_largest(void)
{
    fence_fsm *f = new_fsm();
    uint64_t *ids = malloc(sizeof(uint64_t) * FENCE_CHECKPOINT_IDS_MAX);
    uint8_t *raw = malloc(8 * (size_t)FENCE_CHECKPOINT_IDS_MAX);
    REQUIRE(ids != NULL && raw != NULL);
    for (uint32_t i = 0; i < FENCE_CHECKPOINT_IDS_MAX; i++)
        ids[i] = i % 2 ? grant(f, 0, 100) : 1000000 + i;
    fence_cmd c = ckpt(raw, ids, FENCE_CHECKPOINT_IDS_MAX);
    size_t sz = fence_entry_size(&c, 1);
    uint8_t *buf = malloc(sz);
    REQUIRE(buf != NULL);
    REQUIRE(fence_entry_encode(50, &c, 1, buf, sz) == sz);
    fence_result r;
    CHECK_EQ_I64(fence_fsm_apply_entry(f, buf, sz, &r, 1), 1);
    CHECK_EQ_U64(r.value, FENCE_CHECKPOINT_IDS_MAX / 2);
    CHECK_EQ_U64(deadline(f, ids[1], 50), 150);
    free(buf);
    free(raw);
    free(ids);
    done(f);
}


/* The snapshot of f (malloc'd; *n its length). */
static uint8_t *snap(const fence_fsm *f, size_t *n)
{
    *n = fence_fsm_snapshot_size(f);
    uint8_t *b = malloc(*n);
    REQUIRE(b != NULL);
    REQUIRE(fence_fsm_snapshot(f, b, *n) == *n);
    return b;
}

/* A renewal (checkpoint or KEEPALIVE) moves a deadline later without
 * moving the lease in the deadline heap; its early key is re-keyed when it
 * comes due (src/core/heap.h).  The lease lives to its new deadline,
 * next_deadline names the true earliest, and a replica restored from a
 * snapshot (every key exact) expires the same leases at the same times
 * with the same events and ends byte-identical. */
static void test_renewal_keeps_heap_place(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 1000), b = grant(f, 0, 1200);
    CHECK_EQ_U64(fence_fsm_next_deadline(f), 1000);
    uint8_t buf[8 * 64];
    uint64_t ids[64] = {a};
    CHECK_EQ_U64(run(f, 400, ckpt(buf, ids, 1)).value, 1);
    /* a's old key (1000, more than ttl/2 ahead) is at the top; its
     * deadline is 1400: b's 1200 is the earliest. */
    CHECK_EQ_U64(fence_fsm_next_deadline_by(f, 600), 1000); /* a lower bound */
    CHECK_EQ_U64(fence_fsm_next_deadline_by(f, 1000), 1200); /* due: settled */
    CHECK_EQ_U64(fence_fsm_next_deadline(f), 1200);
    fence_cmd tick = {.type = FENCE_CMD_TICK};
    CHECK_EQ_U64(run(f, 1100, tick).status, FENCE_ST_OK);
    CHECK_EQ_U64(deadline(f, a, 1100), 1400);
    CHECK_EQ_U64(run(f, 1300, tick).status, FENCE_ST_OK);
    CHECK_EQ_U64(deadline(f, b, 1300), 0); /* b expired at 1200 */
    CHECK_EQ_U64(deadline(f, a, 1300), 1400);
    CHECK_EQ_U64(run(f, 1400, tick).status, FENCE_ST_OK);
    CHECK_EQ_U64(deadline(f, a, 1400), 0);
    done(f);

    /* Random renewals of leases that hold locks, then f and a restored
     * copy g advance side by side. */
    srand(23);
    for (int round = 0; round < 20; round++) {
        f = new_fsm();
        uint64_t now = 0, lease[48];
        for (int i = 0; i < 48; i++) {
            lease[i] = grant(f, now, 300 + 100 * (uint64_t)(rand() % 8));
            if (i % 3 == 0) {
                char nm[8];
                snprintf(nm, sizeof(nm), "k%d", i % 9);
                fence_cmd lk = {.type = FENCE_CMD_LOCK, .name = (const uint8_t *)nm,
                                .name_len = (uint16_t)strlen(nm), .lease = lease[i],
                                .wait_ms = 5000};
                (void)run(f, now, lk);
            }
            now += (uint64_t)(rand() % 20);
        }
        for (int k = 0; k < 30; k++) {
            now += 1 + (uint64_t)(rand() % 60);
            uint32_t n = 1 + (uint32_t)(rand() % 64);
            for (uint32_t i = 0; i < n; i++)
                ids[i] = lease[rand() % 48];
            if (rand() % 4 == 0) {
                fence_cmd ka = {.type = FENCE_CMD_LEASE_KEEPALIVE, .lease = ids[0]};
                (void)run(f, now, ka);
            } else {
                CHECK_EQ_U64(run(f, now, ckpt(buf, ids, n)).status, FENCE_ST_OK);
            }
        }
        size_t n;
        uint8_t *s0 = snap(f, &n);
        fence_fsm *g = new_fsm();
        REQUIRE(fence_fsm_restore(g, s0, n) == 0);
        free(s0);
        while (fence_fsm_next_deadline(g) != UINT64_MAX || fence_fsm_next_deadline(f) != UINT64_MAX) {
            CHECK_EQ_U64(fence_fsm_next_deadline(f), fence_fsm_next_deadline(g));
            now += 1 + (uint64_t)(rand() % 40);
            fence_fsm_advance(f, now);
            fence_fsm_advance(g, now);
            size_t ef, eg;
            const fence_event *xf = fence_fsm_events(f, &ef), *xg = fence_fsm_events(g, &eg);
            CHECK_EQ_U64(ef, eg);
            for (size_t i = 0; i < ef && i < eg; i++) {
                CHECK_EQ_U64(xf[i].wait_id, xg[i].wait_id);
                CHECK_EQ_U64(xf[i].result.status, xg[i].result.status);
                CHECK_EQ_U64(xf[i].result.token, xg[i].result.token);
                CHECK_EQ_U64(xf[i].result.lease, xg[i].result.lease);
            }
            CHECK(fence_fsm_check(f) == NULL);
            size_t na, nb;
            uint8_t *sa = snap(f, &na), *sb = snap(g, &nb);
            CHECK(na == nb && memcmp(sa, sb, na) == 0);
            free(sa);
            free(sb);
            for (int i = 0; i < 48; i++) {
                fence_fsm_lease_state st;
                int lf = fence_fsm_lease_info(f, lease[i], now, &st);
                int lg = fence_fsm_lease_info(g, lease[i], now, &st);
                CHECK_EQ_I64(lf, lg);
            }
        }
        fence_fsm_destroy(g);
        done(f);
    }
}

int main(void)
{
    TEST_RUN(test_renews_live_leases);
    TEST_RUN(test_never_revives);
    TEST_RUN(test_holder_kept_then_expires);
    TEST_RUN(test_queued_acquire);
    TEST_RUN(test_invalid);
    TEST_RUN(test_entry_codec);
    TEST_RUN(test_largest);
    TEST_RUN(test_renewal_keeps_heap_place);
    return TEST_DONE();
}
