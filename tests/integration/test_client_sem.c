/* libfence's semaphore calls (include/fence.h "Semaphores of slots")
 * against a real fenced ($FENCE_SERVER, started by test_client_sem.sh):
 * two leases get distinct slots, a third gets FENCE_EBUSY without a wait
 * and the freed slot (with a higher token) with one, a retry by a lease
 * that holds a slot answers that slot, info, release (and again), the
 * fence name of a slot, WRONGTYPE, and the argument checks. */
#include <string.h>

#include "../lib/test.h"
#include "fence.h"

static fence_client *client(void)
{
    fence_client_opts o;
    fence_client_opts_init(&o);
    o.timeout_ms = 10000;
    fence_client *c = NULL;
    REQUIRE(fence_client_open(&o, &c) == 0);
    return c;
}

static void test_sem_calls(void)
{
    fence_client *c = client();
    uint64_t la = 0, lb = 0, lc = 0, ta = 0, tb = 0, tc = 0, t2 = 0;
    uint32_t sa = 9, sb = 9, sc = 9, s2 = 9;
    REQUIRE(fence_lease_grant(c, 30000, &la) == 0);
    REQUIRE(fence_lease_grant(c, 30000, &lb) == 0);
    REQUIRE(fence_lease_grant(c, 30000, &lc) == 0);
    fence_sem_info si;
    fence_sem_slot slots[4];
    CHECK_EQ_I64(fence_sem_info_get(c, "c.s", &si, slots, 4), 0);
    CHECK(!si.exists);
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", 2, la, 0, &sa, &ta), 0);
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", 2, lb, 0, &sb, &tb), 0);
    CHECK_EQ_U64(sa, 0);
    CHECK_EQ_U64(sb, 1);
    CHECK(tb > ta);
    /* The same lease again: its slot and token (safe to retry). */
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", 2, la, 0, &s2, &t2), 0);
    CHECK_EQ_U64(s2, sa);
    CHECK_EQ_U64(t2, ta);
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", 2, lc, 0, &sc, &tc), FENCE_EBUSY);
    CHECK(strstr(fence_client_errmsg(c), "no slot free") != NULL);
    CHECK_EQ_I64(fence_sem_info_get(c, "c.s", &si, slots, 1), 0);
    CHECK(si.exists);
    CHECK_EQ_U64(si.n, 2);
    CHECK_EQ_U64(si.slots_count, 2);
    CHECK_EQ_U64(si.waiters, 0);
    CHECK_EQ_U64(slots[0].slot, 0);
    CHECK_EQ_U64(slots[0].token, ta);
    CHECK_EQ_U64(slots[0].lease, la);
    CHECK(slots[0].remaining_ms > 0 && slots[0].remaining_ms <= 30000);
    CHECK_EQ_I64(fence_sem_info_get(c, "c.s", &si, NULL, 0), 0);
    CHECK_EQ_U64(si.slots_count, 2);
    /* Another n while it exists: WRONGTYPE naming the semaphore's. */
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", 3, lc, 0, &sc, &tc), FENCE_ESERVER);
    CHECK(strstr(fence_client_errmsg(c), "semaphore of 2 permits") != NULL);
    /* Release slot 1: the waiter gets it with a higher token. */
    bool released = false;
    CHECK_EQ_I64(fence_sem_release(c, "c.s", sb, tb, &released), 0);
    CHECK(released);
    CHECK_EQ_I64(fence_sem_release(c, "c.s", sb, tb, &released), 0);
    CHECK(!released);
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", 2, lc, 1000, &sc, &tc), 0);
    CHECK_EQ_U64(sc, sb);
    CHECK(tc > tb);
    /* A stale token does not free its successor's slot. */
    CHECK_EQ_I64(fence_sem_release(c, "c.s", sc, tb, &released), 0);
    CHECK(!released);
    char fence[FENCE_SEM_FENCE_BUF_SIZE];
    CHECK_EQ_I64(fence_sem_fence_name("c.s", sc, fence, sizeof(fence)), 0);
    CHECK_STR(fence, "c.s#1");
    /* The slot's fence is a lock name LOCK.INFO knows. */
    fence_lock_info li;
    CHECK_EQ_I64(fence_lock_info_get(c, fence, &li), 0);
    CHECK(li.held && li.token == tc && li.lease == lc);
    /* Bad input. */
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", 0, la, 0, &sa, &ta), FENCE_EINVAL);
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", FENCE_SEM_N_MAX + 1, la, 0, &sa, &ta),
                 FENCE_EINVAL);
    CHECK_EQ_I64(fence_sem_acquire(c, "", 2, la, 0, &sa, &ta), FENCE_EINVAL);
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s", 2, la, 0, NULL, &ta), FENCE_EINVAL);
    char longname[FENCE_SEM_FENCE_BUF_SIZE - 1];
    memset(longname, 'x', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0'; /* 255 bytes: "name#10" does not fit */
    CHECK_EQ_I64(fence_sem_acquire(c, longname, 11, la, 0, &sa, &ta), FENCE_EINVAL);
    CHECK_EQ_I64(fence_sem_fence_name(longname, 10, fence, sizeof(fence)), FENCE_EINVAL);
    CHECK_EQ_I64(fence_sem_acquire(c, "c.s2", 2, 999999, 0, &sa, &ta), FENCE_ENOLEASE);
    CHECK_EQ_I64(fence_sem_release(c, "c.s", FENCE_SEM_N_MAX, 1, NULL), FENCE_EINVAL);
    char sbuf[FENCE_SIGNED_TOKEN_BUF_SIZE];
    /* This server has no signing key: refused, nothing granted. */
    CHECK_EQ_I64(fence_sem_acquire_signed(c, "c.s3", 1, la, 0, &sa, &ta, sbuf, sizeof(sbuf)),
                 FENCE_ESERVER);
    CHECK_EQ_I64(fence_sem_info_get(c, "c.s3", &si, NULL, 0), 0);
    CHECK(!si.exists);
    CHECK_EQ_I64(fence_sem_acquire_signed(c, "c.s3", 1, la, 0, &sa, &ta, sbuf, 8),
                 FENCE_EINVAL);
    /* The one name space: a lock's name is not a semaphore's. */
    uint64_t tok = 0;
    REQUIRE(fence_lease_lock(c, la, "c.lock", 0, &tok) == 0);
    CHECK_EQ_I64(fence_sem_acquire(c, "c.lock", 2, lb, 0, &sa, &ta), FENCE_ESERVER);
    CHECK(strstr(fence_client_errmsg(c), "WRONGTYPE") != NULL);
    fence_client_close(c);
}

int main(void)
{
    TEST_RUN(test_sem_calls);
    return TEST_DONE();
}
