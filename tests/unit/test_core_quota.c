/* Per-owner limits in the state machine (issue 18, section 6; fsm.h
 * "Quotas"): a command with FENCE_CMD_F_QUOTA carries its user's maxleases
 * and maxlocks; apply refuses with LIMIT a new lease or a new hold/wait of
 * an owner that is full, while another owner still gets leases and locks.
 * The counts are derived state: a snapshot restored into a fresh state
 * machine enforces the same limits and ends byte-identical.  The entry
 * codec carries the two numbers (version 4 only when a command has them).
 */
#define FX_PLAIN
#include "test_core_fx.h"

#include <stdbool.h>

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"

/* c as owner, with quotas (0, 0: no flag at all). */
static fence_cmd as(fence_cmd c, uint64_t owner, uint32_t leases, uint32_t locks)
{
    c.owner = owner;
    if (leases != 0 || locks != 0) {
        c.flags |= FENCE_CMD_F_QUOTA;
        c.quota_leases = leases;
        c.quota_locks = locks;
    }
    return c;
}

static fence_cmd c_grant(void)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = 60000};
    return c;
}

static fence_cmd c_revoke(uint64_t lease)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_REVOKE, .lease = lease};
    return c;
}

static fence_cmd c_lock(const char *name, uint64_t lease, uint64_t wait_ms)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK, .lease = lease, .wait_ms = wait_ms,
                   .name = (const uint8_t *)name, .name_len = (uint16_t)strlen(name)};
    return c;
}

static fence_cmd c_unlock(const char *name, uint64_t token)
{
    fence_cmd c = {.type = FENCE_CMD_UNLOCK, .token = token,
                   .name = (const uint8_t *)name, .name_len = (uint16_t)strlen(name)};
    return c;
}

static fence_cmd c_acquire(const char *name, uint64_t wait_ms)
{
    fence_cmd c = {.type = FENCE_CMD_ACQUIRE, .ttl_ms = 60000, .wait_ms = wait_ms,
                   .name = (const uint8_t *)name, .name_len = (uint16_t)strlen(name)};
    return c;
}

#define ALICE 11
#define BOB 22

/* maxleases: alice fills hers and gets LIMIT; bob still gets leases; a
 * revoke makes room; without the flag there is no own limit. */
static void test_lease_quota(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a[3];
    for (int i = 0; i < 3; i++) {
        fence_result r = run(f, 10, as(c_grant(), ALICE, 3, 0));
        CHECK_EQ_U64(r.status, FENCE_ST_OK);
        a[i] = r.lease;
    }
    CHECK_EQ_U64(run(f, 10, as(c_grant(), ALICE, 3, 0)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(f, 10, as(c_grant(), BOB, 3, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 10, as(c_grant(), BOB, 3, 0)).status, FENCE_ST_OK);
    /* A lower limit refuses more but takes nothing away. */
    CHECK_EQ_U64(run(f, 10, as(c_grant(), ALICE, 1, 0)).status, FENCE_ST_LIMIT);
    fence_fsm_lease_state ls;
    CHECK(fence_fsm_lease_info(f, a[2], 10, &ls) == 0);
    CHECK_EQ_U64(run(f, 10, as(c_revoke(a[0]), ALICE, 3, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 10, as(c_grant(), ALICE, 3, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 10, as(c_grant(), ALICE, 3, 0)).status, FENCE_ST_LIMIT);
    /* The same owner without the flag: only the global limits. */
    CHECK_EQ_U64(run(f, 10, as(c_grant(), ALICE, 0, 0)).status, FENCE_ST_OK);
    /* Expiry gives the room back too. */
    CHECK_EQ_U64(run(f, 70000, as(c_grant(), ALICE, 1, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 70000, as(c_grant(), ALICE, 1, 0)).status, FENCE_ST_LIMIT);
    done(f);
}

/* maxlocks counts holds and waits; a reentrant LOCK and a LOCK that joins
 * its own wait are not new; a hand-off does not exceed it. */
static void test_lock_quota(void)
{
    fence_fsm *f = new_fsm();
    uint64_t la = run(f, 10, as(c_grant(), ALICE, 0, 2)).lease;
    uint64_t lb = run(f, 10, as(c_grant(), BOB, 0, 2)).lease;
    fence_result x = run(f, 10, as(c_lock("x", la, 0), ALICE, 0, 2));
    CHECK_EQ_U64(x.status, FENCE_ST_OK);
    fence_result y = run(f, 10, as(c_lock("y", la, 0), ALICE, 0, 2));
    CHECK_EQ_U64(y.status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 10, as(c_lock("z", la, 0), ALICE, 0, 2)).status, FENCE_ST_LIMIT);
    fence_fsm_lock_state ks;
    CHECK(!fence_fsm_lock_info(f, (const uint8_t *)"z", 1, &ks)); /* nothing left behind */
    fence_result again = run(f, 10, as(c_lock("x", la, 0), ALICE, 0, 2));
    CHECK_EQ_U64(again.status, FENCE_ST_OK); /* reentrant */
    CHECK_EQ_U64(again.token, x.token);
    /* Bob is not affected. */
    fence_result bz = run(f, 10, as(c_lock("z", lb, 0), BOB, 0, 2));
    CHECK_EQ_U64(bz.status, FENCE_ST_OK);
    /* A wait counts: alice frees y, waits for bob's z (2 of 2). */
    CHECK_EQ_U64(run(f, 10, as(c_unlock("y", y.token), ALICE, 0, 2)).value, 1);
    fence_result w = run(f, 10, as(c_lock("z", la, 30000), ALICE, 0, 2));
    CHECK_EQ_U64(w.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(f, 10, as(c_lock("y", la, 0), ALICE, 0, 2)).status, FENCE_ST_LIMIT);
    fence_result w2 = run(f, 10, as(c_lock("z", la, 30000), ALICE, 0, 2));
    CHECK_EQ_U64(w2.status, FENCE_ST_QUEUED); /* joins its wait: not new */
    CHECK_EQ_U64(w2.wait_id, w.wait_id);
    /* Hand-off: bob unlocks z, alice gets it; still 2 of 2. */
    CHECK_EQ_U64(run(f, 20, as(c_unlock("z", bz.token), BOB, 0, 2)).value, 1);
    REQUIRE(fence_fsm_lock_info(f, (const uint8_t *)"z", 1, &ks));
    CHECK_EQ_U64(ks.lease, la);
    CHECK_EQ_U64(run(f, 20, as(c_lock("y", la, 0), ALICE, 0, 2)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(f, 20, as(c_lock("y", lb, 0), BOB, 0, 2)).status, FENCE_ST_OK);
    /* A revoke frees both. */
    CHECK_EQ_U64(run(f, 20, as(c_revoke(la), ALICE, 0, 2)).status, FENCE_ST_OK);
    uint64_t la2 = run(f, 20, as(c_grant(), ALICE, 0, 2)).lease;
    CHECK_EQ_U64(run(f, 20, as(c_lock("p", la2, 0), ALICE, 0, 2)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 20, as(c_lock("q", la2, 0), ALICE, 0, 2)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 20, as(c_lock("r", la2, 0), ALICE, 0, 2)).status, FENCE_ST_LIMIT);
    done(f);
}

/* ACQUIRE makes a lease and a hold (or a wait): both quotas apply. */
static void test_acquire_quota(void)
{
    fence_fsm *f = new_fsm();
    CHECK_EQ_U64(run(f, 10, as(c_acquire("a", 0), ALICE, 2, 5)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 10, as(c_acquire("b", 0), ALICE, 2, 5)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 10, as(c_acquire("c", 0), ALICE, 2, 5)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(f, 10, as(c_acquire("c", 0), ALICE, 5, 2)).status, FENCE_ST_LIMIT);
    fence_result bc = run(f, 10, as(c_acquire("c", 0), BOB, 2, 2));
    CHECK_EQ_U64(bc.status, FENCE_ST_OK);
    /* A queued ACQUIRE counts as a lease and a lock. */
    CHECK_EQ_U64(run(f, 10, as(c_acquire("c", 30000), ALICE, 3, 3)).status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(f, 10, as(c_grant(), ALICE, 3, 3)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(f, 10, as(c_acquire("d", 0), ALICE, 4, 3)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(f, 10, as(c_unlock("c", bc.token), BOB, 2, 2)).value, 1);
    fence_fsm_lock_state ks;
    REQUIRE(fence_fsm_lock_info(f, (const uint8_t *)"c", 1, &ks));
    CHECK_EQ_U64(ks.owner, ALICE);
    done(f);
}

/* The counts are rebuilt by restore: the same limits hold after it, the
 * snapshot is the same bytes, and an entry applied to both ends alike. */
static void test_restore_keeps_counts(void)
{
    fence_fsm *f = new_fsm();
    uint64_t la = run(f, 10, as(c_grant(), ALICE, 2, 2)).lease;
    run(f, 10, as(c_grant(), ALICE, 2, 2));
    uint64_t lb = run(f, 10, as(c_grant(), BOB, 2, 2)).lease;
    run(f, 10, as(c_lock("x", la, 0), ALICE, 2, 2));
    run(f, 10, as(c_lock("y", lb, 0), BOB, 2, 2));
    CHECK_EQ_U64(run(f, 10, as(c_lock("y", la, 30000), ALICE, 2, 2)).status, FENCE_ST_QUEUED);
    size_t n = fence_fsm_snapshot_size(f);
    uint8_t *a = malloc(n), *b = malloc(n);
    REQUIRE(a != NULL && b != NULL);
    REQUIRE(fence_fsm_snapshot(f, a, n) == n);
    fence_fsm *g = new_fsm();
    REQUIRE(fence_fsm_restore(g, a, n) == 0);
    CHECK(fence_fsm_check(g) == NULL);
    REQUIRE(fence_fsm_snapshot(g, b, n) == n);
    CHECK(memcmp(a, b, n) == 0);
    fence_fsm *both[2] = {f, g};
    for (int i = 0; i < 2; i++) {
        fence_fsm *h = both[i];
        CHECK_EQ_U64(run(h, 11, as(c_grant(), ALICE, 2, 2)).status, FENCE_ST_LIMIT);
        CHECK_EQ_U64(run(h, 11, as(c_lock("z", la, 0), ALICE, 2, 2)).status, FENCE_ST_LIMIT);
        CHECK_EQ_U64(run(h, 11, as(c_grant(), BOB, 2, 2)).status, FENCE_ST_OK);
        CHECK_EQ_U64(run(h, 11, as(c_lock("z", lb, 0), BOB, 2, 2)).status, FENCE_ST_OK);
    }
    REQUIRE(fence_fsm_snapshot_size(f) == fence_fsm_snapshot_size(g));
    n = fence_fsm_snapshot_size(f);
    free(a);
    free(b);
    a = malloc(n);
    b = malloc(n);
    REQUIRE(a != NULL && b != NULL);
    REQUIRE(fence_fsm_snapshot(f, a, n) == n);
    REQUIRE(fence_fsm_snapshot(g, b, n) == n);
    CHECK(memcmp(a, b, n) == 0);
    free(a);
    free(b);
    fence_fsm_destroy(g);
    done(f);
}

/* The codec: quotas round-trip in a version-4 entry; a batch without them
 * stays version 3; malformed version-4 entries are refused. */
static void test_entry_codec(void)
{
    fence_cmd cmds[2] = {as(c_grant(), ALICE, 7, 9), as(c_revoke(3), BOB, 0, 0)};
    uint8_t buf[256];
    size_t n = fence_entry_encode(20, cmds, 2, buf, sizeof(buf));
    REQUIRE(n > 0);
    CHECK_EQ_U64(n, fence_entry_size(cmds, 2));
    CHECK_EQ_U64(buf[0], 4);
    CHECK_EQ_U64(fence_entry_version_for(cmds, 2), 4);
    fence_entry_iter it;
    REQUIRE(fence_entry_open(&it, buf, n) == 0);
    fence_cmd d;
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.flags, FENCE_CMD_F_QUOTA);
    CHECK_EQ_U64(d.owner, ALICE);
    CHECK_EQ_U64(d.quota_leases, 7);
    CHECK_EQ_U64(d.quota_locks, 9);
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.flags, 0);
    CHECK_EQ_U64(d.quota_leases, 0);
    CHECK_EQ_U64(d.quota_locks, 0);
    CHECK_EQ_I64(fence_entry_next(&it, &d), 0);
    /* Every truncation is refused. */
    for (size_t cut = 0; cut < n; cut++) {
        int rc = 0;
        if (fence_entry_open(&it, buf, cut) == 0) {
            while ((rc = fence_entry_next(&it, &d)) == 1) {
            }
        } else {
            rc = -1;
        }
        CHECK(rc != 0);
    }
    /* Without quotas: version 3, as before. */
    size_t n3 = fence_entry_encode(20, &cmds[1], 1, buf, sizeof(buf));
    REQUIRE(n3 > 0);
    CHECK_EQ_U64(buf[0], 3);
    /* Version 4 without a quota command: refused (one encoding). */
    buf[0] = 4;
    REQUIRE(fence_entry_open(&it, buf, n3) == 0);
    CHECK_EQ_I64(fence_entry_next(&it, &d), 1);
    CHECK_EQ_I64(fence_entry_next(&it, &d), -FENCE_ST_INVALID);
    /* Version 3 with the quota flag: refused. */
    n = fence_entry_encode(20, cmds, 1, buf, sizeof(buf));
    REQUIRE(n > 0);
    buf[0] = 3;
    if (fence_entry_open(&it, buf, n) == 0)
        CHECK_EQ_I64(fence_entry_next(&it, &d), -FENCE_ST_INVALID);
    /* Applied through the entry path, the quota works as in apply. */
    fence_fsm *f = new_fsm();
    fence_cmd g2[3] = {as(c_grant(), ALICE, 2, 0), as(c_grant(), ALICE, 2, 0),
                       as(c_grant(), ALICE, 2, 0)};
    n = fence_entry_encode(30, g2, 3, buf, sizeof(buf));
    REQUIRE(n > 0);
    fence_result res[3];
    CHECK_EQ_I64(fence_fsm_apply_entry(f, buf, n, res, 3), 3);
    CHECK_EQ_U64(res[0].status, FENCE_ST_OK);
    CHECK_EQ_U64(res[1].status, FENCE_ST_OK);
    CHECK_EQ_U64(res[2].status, FENCE_ST_LIMIT);
    done(f);
}

int main(void)
{
    TEST_RUN(test_lease_quota);
    TEST_RUN(test_lock_quota);
    TEST_RUN(test_acquire_quota);
    TEST_RUN(test_restore_keeps_counts);
    TEST_RUN(test_entry_codec);
    return TEST_DONE();
}
