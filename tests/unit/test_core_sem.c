/* Semaphores of slots in the state machine (issue 21 section 3; fsm.h
 * "Semaphores"): SEM_ACQUIRE grants the lowest free slot with the next
 * token, queues FIFO when all N are taken, and a freed slot goes to the
 * first waiter; each slot is the lock name#slot, so LOCK/ACQUIRE/UNLOCK of
 * a slot's name (or the semaphore's) answer WRONGTYPE while the semaphore
 * exists; lease expiry, revoke and lock-delay act on slots as on locks;
 * dedicated leases, REQID retries, CANCEL, limits, quotas, LEADER_START;
 * and after every step a snapshot restores into a fresh state machine that
 * snapshots to the same bytes. */
#define FX_PLAIN
#define FX_HASH_SEED 0x5eed
#define FX_OWN_RUN
#include "test_core_fx.h"

#include <stdbool.h>

#include "base/crc32c.h"
#include "core/elect.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"

/* The state's snapshot (malloc'd). */
static uint8_t *snap(const fence_fsm *f, size_t *n)
{
    *n = fence_fsm_snapshot_size(f);
    uint8_t *b = malloc(*n);
    REQUIRE(b != NULL);
    REQUIRE(fence_fsm_snapshot(f, b, *n) == *n);
    return b;
}

/* A snapshot of f restores into a fresh state with the same bytes. */
static void roundtrip(const fence_fsm *f)
{
    size_t n = 0;
    uint8_t *a = snap(f, &n);
    fence_fsm *g = new_fsm();
    int rc = fence_fsm_restore(g, a, n);
    if (rc != 0)
        printf("#   restore failed: %d\n", rc);
    REQUIRE(rc == 0);
    size_t m = 0;
    uint8_t *b = snap(g, &m);
    REQUIRE(m == n);
    CHECK(memcmp(a, b, n) == 0);
    free(a);
    free(b);
    fence_fsm_destroy(g);
}

/* The events of the last call. */
static fence_event last_ev[64];
static size_t n_ev;

/* Apply c at now, check every invariant and the snapshot round trip. */
static fence_result run(fence_fsm *f, uint64_t now, fence_cmd c)
{
    fence_result r;
    fence_fsm_apply(f, now, &c, &r);
    size_t n = 0;
    const fence_event *ev = fence_fsm_events(f, &n);
    REQUIRE(n <= 64);
    if (n > 0)
        memcpy(last_ev, ev, n * sizeof(*ev));
    n_ev = n;
    const char *e = fence_fsm_check(f);
    if (e != NULL)
        printf("#   check failed: %s\n", e);
    REQUIRE(e == NULL);
    roundtrip(f);
    return r;
}

#define NAME(s) .name = (const uint8_t *)(s), .name_len = (uint16_t)strlen(s)

static fence_cmd c_grant(uint64_t ttl, uint64_t delay)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = ttl, .lock_delay_ms = delay};
    return c;
}

static fence_cmd c_revoke(uint64_t lease)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_REVOKE, .lease = lease};
    return c;
}

static fence_cmd c_tick(void)
{
    fence_cmd c = {.type = FENCE_CMD_TICK};
    return c;
}

static fence_cmd c_sem(const char *name, uint32_t n, uint64_t lease, uint64_t wait_ms)
{
    fence_cmd c = {.type = FENCE_CMD_SEM_ACQUIRE, NAME(name), .permits = n, .lease = lease,
                   .wait_ms = wait_ms};
    return c;
}

/* The dedicated-lease form: a lease of ttl made for the acquire. */
static fence_cmd c_sem_ttl(const char *name, uint32_t n, uint64_t ttl, uint64_t wait_ms)
{
    fence_cmd c = {.type = FENCE_CMD_SEM_ACQUIRE, NAME(name), .permits = n, .ttl_ms = ttl,
                   .wait_ms = wait_ms};
    return c;
}

static fence_cmd c_release(const char *name, uint32_t slot, uint64_t token)
{
    fence_cmd c = {.type = FENCE_CMD_SEM_RELEASE, NAME(name), .slot = slot, .token = token};
    return c;
}

static fence_cmd c_lock(const char *name, uint64_t lease, uint64_t wait_ms)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK, NAME(name), .lease = lease, .wait_ms = wait_ms};
    return c;
}

static fence_cmd c_unlock(const char *name, uint64_t token)
{
    fence_cmd c = {.type = FENCE_CMD_UNLOCK, NAME(name), .token = token};
    return c;
}

static fence_cmd c_acquire(const char *name, uint64_t ttl)
{
    fence_cmd c = {.type = FENCE_CMD_ACQUIRE, NAME(name), .ttl_ms = ttl};
    return c;
}

static fence_cmd with_req(fence_cmd c, uint64_t id)
{
    c.flags |= FENCE_CMD_F_REQID;
    c.req_id = id;
    return c;
}

static uint64_t lease(fence_fsm *f, uint64_t now, uint64_t ttl, uint64_t delay)
{
    fence_result r = run(f, now, c_grant(ttl, delay));
    REQUIRE(r.status == FENCE_ST_OK);
    return r.lease;
}

/* The semaphore's state; false when it does not exist. */
static bool info(const fence_fsm *f, const char *name, fence_fsm_sem_state *st,
                 fence_fsm_sem_slot *slots, size_t *n)
{
    return fence_fsm_sem_info(f, (const uint8_t *)name, (uint16_t)strlen(name), st, slots, 16,
                              n);
}

/* Lowest free slot first, tokens from the one counter, NIL when full
 * without WAIT, FIFO hand-off of a released slot with a new token. */
static void test_basic_slots(void)
{
    fence_fsm *f = new_fsm();
    uint64_t l[5];
    for (int i = 0; i < 5; i++)
        l[i] = lease(f, 1, 60000, 0);
    fence_result r0 = run(f, 2, c_sem("jobs", 3, l[0], 0));
    CHECK_EQ_U64(r0.status, FENCE_ST_OK);
    CHECK_EQ_U64(r0.slot, 0);
    CHECK_EQ_U64(r0.token, 1);
    CHECK_EQ_U64(r0.lease, l[0]);
    fence_result r1 = run(f, 3, c_sem("jobs", 3, l[1], 0));
    CHECK_EQ_U64(r1.slot, 1);
    /* A plain lock in between takes a token of the same counter. */
    CHECK_EQ_U64(run(f, 3, c_lock("other", l[4], 0)).token, 3);
    fence_result r2 = run(f, 4, c_sem("jobs", 3, l[2], 0));
    CHECK_EQ_U64(r2.slot, 2);
    CHECK_EQ_U64(r2.token, 4);
    CHECK_EQ_U64(run(f, 5, c_sem("jobs", 3, l[3], 0)).status, FENCE_ST_NIL);
    fence_result q = run(f, 6, c_sem("jobs", 3, l[3], 5000));
    CHECK_EQ_U64(q.status, FENCE_ST_QUEUED);
    CHECK(q.wait_id > 0);
    fence_fsm_sem_state st;
    fence_fsm_sem_slot sl[16];
    size_t n = 0;
    REQUIRE(info(f, "jobs", &st, sl, &n));
    CHECK_EQ_U64(st.permits, 3);
    CHECK_EQ_U64(st.slots_used, 3);
    CHECK_EQ_U64(st.waiters, 1);
    REQUIRE(n == 3);
    CHECK_EQ_U64(sl[1].slot, 1);
    CHECK_EQ_U64(sl[1].token, r1.token);
    CHECK_EQ_U64(sl[1].lease, l[1]);
    /* The slot lock is visible as the lock jobs#1. */
    fence_fsm_lock_state ls;
    REQUIRE(fence_fsm_lock_info(f, (const uint8_t *)"jobs#1", 6, &ls));
    CHECK_EQ_U64(ls.token, r1.token);
    /* A wrong token releases nothing. */
    CHECK_EQ_U64(run(f, 7, c_release("jobs", 1, r0.token)).value, 0);
    CHECK_EQ_U64(run(f, 7, c_release("jobs", 1, r1.token)).value, 1);
    REQUIRE(n_ev == 1);
    CHECK_EQ_U64(last_ev[0].wait_id, q.wait_id);
    CHECK_EQ_U64(last_ev[0].result.status, FENCE_ST_OK);
    CHECK_EQ_U64(last_ev[0].result.slot, 1);
    CHECK_EQ_U64(last_ev[0].result.lease, l[3]);
    CHECK(last_ev[0].result.token > r2.token);
    CHECK_EQ_U64(last_ev[0].result.token, fence_fsm_last_token(f));
    /* Release everything: the semaphore goes away. */
    run(f, 8, c_release("jobs", 0, r0.token));
    run(f, 8, c_release("jobs", 2, r2.token));
    CHECK(info(f, "jobs", &st, sl, &n));
    run(f, 8, c_release("jobs", 1, last_ev[0].result.token));
    CHECK(!info(f, "jobs", &st, sl, &n));
    /* Gone, so another N is fine now; releasing an unknown one is 0. */
    CHECK_EQ_U64(run(f, 9, c_sem("jobs", 8, l[0], 0)).status, FENCE_ST_OK);
    fence_result z = run(f, 9, c_release("nosuch", 0, 1));
    CHECK_EQ_U64(z.status, FENCE_ST_OK);
    CHECK_EQ_U64(z.value, 0);
    done(f);
}

/* N is fixed by the first acquire; bad fields are INVALID. */
static void test_permits_and_invalid(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000, 0);
    uint64_t b = lease(f, 1, 60000, 0);
    CHECK_EQ_U64(run(f, 2, c_sem("s", 4, a, 0)).status, FENCE_ST_OK);
    fence_result w = run(f, 3, c_sem("s", 5, b, 0));
    CHECK_EQ_U64(w.status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(w.value, 4);
    CHECK_EQ_U64(run(f, 3, c_sem("t", 0, b, 0)).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 3, c_sem("t", FENCE_SEM_PERMITS_MAX + 1, b, 0)).status,
                 FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 3, c_sem("t", FENCE_SEM_PERMITS_MAX, b, 0)).status, FENCE_ST_OK);
    fence_cmd big = c_sem("t", 1, b, FENCE_WAIT_MS_MAX + 1);
    CHECK_EQ_U64(run(f, 3, big).status, FENCE_ST_INVALID);
    /* The slot names must fit FENCE_NAME_MAX: name + "#" + digits of N-1. */
    char longname[FENCE_NAME_MAX + 1];
    memset(longname, 'x', sizeof(longname));
    longname[FENCE_NAME_MAX - 2] = '\0';
    CHECK_EQ_U64(run(f, 3, c_sem(longname, 10, b, 0)).status, FENCE_ST_OK);
    longname[FENCE_NAME_MAX - 2] = 'x';
    longname[FENCE_NAME_MAX - 1] = '\0';
    CHECK_EQ_U64(run(f, 3, c_sem(longname, 10, b, 0)).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 3, c_sem(longname, 1, b, 0)).status, FENCE_ST_INVALID);
    /* Lease form with ttl fields, or a dedicated form with a bad ttl. */
    fence_cmd mixed = c_sem("u", 2, b, 0);
    mixed.ttl_ms = 1000;
    CHECK_EQ_U64(run(f, 3, mixed).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 3, c_sem_ttl("u", 2, 0, 0)).status, FENCE_ST_INVALID);
    /* Release: a slot beyond N is INVALID (value: N). */
    fence_result r = run(f, 3, c_release("s", 4, 1));
    CHECK_EQ_U64(r.status, FENCE_ST_INVALID);
    CHECK_EQ_U64(r.value, 4);
    CHECK_EQ_U64(run(f, 3, c_release("s", FENCE_SEM_PERMITS_MAX, 1)).status, FENCE_ST_INVALID);
    /* Unknown lease. */
    CHECK_EQ_U64(run(f, 3, c_sem("v", 2, 999, 0)).status, FENCE_ST_NOLEASE);
    done(f);
}

/* One name space, one holder per fence: while semaphore jobs exists no
 * plain LOCK/ACQUIRE/UNLOCK of jobs or jobs#i (i < N) gets through, held
 * slot or free; names that are not slot fences are ordinary locks; a lock
 * in the way makes the first SEM_ACQUIRE WRONGTYPE. */
static void test_one_name_space(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000, 0);
    uint64_t b = lease(f, 1, 60000, 0);
    fence_result s0 = run(f, 2, c_sem("jobs", 3, a, 0));
    REQUIRE(s0.status == FENCE_ST_OK);
    const char *claimed[] = {"jobs", "jobs#0", "jobs#1", "jobs#2"};
    for (size_t i = 0; i < 4; i++) {
        CHECK_EQ_U64(run(f, 3, c_lock(claimed[i], b, 0)).status, FENCE_ST_WRONGTYPE);
        CHECK_EQ_U64(run(f, 3, c_lock(claimed[i], b, 1000)).status, FENCE_ST_WRONGTYPE);
        CHECK_EQ_U64(run(f, 3, c_acquire(claimed[i], 1000)).status, FENCE_ST_WRONGTYPE);
        CHECK_EQ_U64(run(f, 3, c_unlock(claimed[i], s0.token)).status, FENCE_ST_WRONGTYPE);
    }
    /* The holder's own lease cannot take its slot as a plain lock either. */
    CHECK_EQ_U64(run(f, 3, c_lock("jobs#0", a, 0)).status, FENCE_ST_WRONGTYPE);
    /* Not slot fences of jobs: ordinary locks. */
    const char *plain[] = {"jobs#3", "jobs#01", "jobs#", "jobs#-1", "jobs#1x", "jobs#00000"};
    for (size_t i = 0; i < 6; i++)
        CHECK_EQ_U64(run(f, 4, c_lock(plain[i], b, 0)).status, FENCE_ST_OK);
    /* A lock or a semaphore in the way of a new semaphore. */
    CHECK_EQ_U64(run(f, 5, c_lock("q#1", b, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 5, c_sem("q", 2, a, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 5, c_sem("q", 1, a, 0)).status, FENCE_ST_OK); /* q#0 only */
    CHECK_EQ_U64(run(f, 5, c_lock("r", b, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 5, c_sem("r", 2, a, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 5, c_sem("jobs#1", 2, b, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 5, c_sem("z#0", 2, b, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 5, c_sem("z", 2, a, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 5, c_release("r", 0, 1)).status, FENCE_ST_WRONGTYPE);
    /* The semaphore gone, its names are free for locks again. */
    CHECK_EQ_U64(run(f, 6, c_release("jobs", 0, s0.token)).value, 1);
    fence_result l1 = run(f, 7, c_lock("jobs#1", b, 0));
    CHECK_EQ_U64(l1.status, FENCE_ST_OK);
    CHECK(l1.token > s0.token);
    done(f);
}

/* Lease expiry and revoke release slots; a lock-delay holds the slot back
 * until it ends; the waiter whose lease died is passed over. */
static void test_expiry_revoke_delay(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 0, 1000, 500); /* lock-delay 500 */
    uint64_t b = lease(f, 0, 60000, 0);
    uint64_t c = lease(f, 0, 60000, 0);
    uint64_t d = lease(f, 0, 1500, 0);
    CHECK_EQ_U64(run(f, 1, c_sem("w", 2, a, 0)).slot, 0);
    CHECK_EQ_U64(run(f, 1, c_sem("w", 2, b, 0)).slot, 1);
    fence_result qd = run(f, 2, c_sem("w", 2, d, 10000));
    fence_result qc = run(f, 3, c_sem("w", 2, c, 10000));
    CHECK_EQ_U64(qd.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(qc.status, FENCE_ST_QUEUED);
    /* a expires at 1000: slot 0 in lock-delay until 1500, nobody gets it. */
    run(f, 1000, c_tick());
    CHECK_EQ_U64(n_ev, 0);
    fence_fsm_sem_state st;
    fence_fsm_sem_slot sl[16];
    size_t n = 0;
    REQUIRE(info(f, "w", &st, sl, &n));
    CHECK_EQ_U64(sl[0].lease, 0);
    CHECK_EQ_U64(sl[0].deadline_ms, 1500);
    /* At 1500 d's lease expires too (wait id order: d's wait fails NOLEASE),
     * and the delayed slot goes to c. */
    run(f, 1500, c_tick());
    bool got_c = false, lost_d = false;
    for (size_t i = 0; i < n_ev; i++) {
        if (last_ev[i].wait_id == qc.wait_id && last_ev[i].result.status == FENCE_ST_OK &&
            last_ev[i].result.slot == 0)
            got_c = true;
        if (last_ev[i].wait_id == qd.wait_id && last_ev[i].result.status == FENCE_ST_NOLEASE)
            lost_d = true;
    }
    CHECK(got_c);
    CHECK(lost_d);
    /* Revoke b: slot 1 freed at once; the semaphore lives on slot 0. */
    run(f, 1600, c_revoke(b));
    REQUIRE(info(f, "w", &st, sl, &n));
    CHECK_EQ_U64(st.slots_used, 1);
    CHECK_EQ_U64(st.waiters, 0);
    run(f, 1700, c_revoke(c));
    CHECK(!info(f, "w", &st, sl, &n));
    done(f);
}

/* The dedicated-lease form: one lease per acquire, revoked by release, by
 * a wait timeout or a cancel; the lease is rebased while it waits. */
static void test_dedicated(void)
{
    fence_fsm *f = new_fsm();
    fence_result a = run(f, 1, c_sem_ttl("d", 1, 2000, 0));
    CHECK_EQ_U64(a.status, FENCE_ST_OK);
    CHECK(a.lease > 0);
    fence_fsm_lease_state ls;
    CHECK_EQ_I64(fence_fsm_lease_info(f, a.lease, 1, &ls), 0);
    fence_result q = run(f, 2, c_sem_ttl("d", 1, 1000, 5000));
    CHECK_EQ_U64(q.status, FENCE_ST_QUEUED);
    /* The waiting lease lives at least as long as its wait. */
    CHECK_EQ_I64(fence_fsm_lease_info(f, q.lease, 2, &ls), 0);
    CHECK(ls.deadline_ms >= 5002);
    fence_result q2 = run(f, 3, c_sem_ttl("d", 1, 1000, 100));
    run(f, 200, c_tick()); /* q2 times out: its lease goes */
    CHECK_EQ_I64(fence_fsm_lease_info(f, q2.lease, 200, &ls), FENCE_ST_NOLEASE);
    /* Release: the slot goes to q, a's lease is revoked. */
    CHECK_EQ_U64(run(f, 300, c_release("d", 0, a.token)).value, 1);
    CHECK_EQ_I64(fence_fsm_lease_info(f, a.lease, 300, &ls), FENCE_ST_NOLEASE);
    REQUIRE(n_ev == 1);
    CHECK_EQ_U64(last_ev[0].result.status, FENCE_ST_OK);
    CHECK_EQ_U64(last_ev[0].result.lease, q.lease);
    /* Granted: its lease runs its own ttl from now. */
    CHECK_EQ_I64(fence_fsm_lease_info(f, q.lease, 300, &ls), 0);
    CHECK_EQ_U64(ls.deadline_ms, 1300);
    fence_result q3 = run(f, 400, c_sem_ttl("d", 1, 1000, 5000));
    REQUIRE(q3.status == FENCE_ST_QUEUED);
    fence_cmd cancel = {.type = FENCE_CMD_CANCEL, .wait_id = q3.wait_id};
    run(f, 401, cancel);
    CHECK_EQ_I64(fence_fsm_lease_info(f, q3.lease, 401, &ls), FENCE_ST_NOLEASE);
    /* q's lease expires at 1300: the semaphore is gone. */
    run(f, 1300, c_tick());
    fence_fsm_sem_state st;
    fence_fsm_sem_slot sl[16];
    size_t n = 0;
    CHECK(!info(f, "d", &st, sl, &n));
    fence_fsm_stats s;
    fence_fsm_stats_get(f, &s);
    CHECK_EQ_U64(s.leases, 0);
    done(f);
}

/* A lease holds one slot of a semaphore: acquiring again answers that
 * slot; a waiting lease gets its wait again.  REQID retries answer the
 * remembered result, also once a queued wait resolved. */
static void test_reentrant_and_reqid(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000, 0);
    uint64_t b = lease(f, 1, 60000, 0);
    fence_result r = run(f, 2, c_sem("re", 1, a, 0));
    fence_result again = run(f, 3, c_sem("re", 1, a, 0));
    CHECK_EQ_U64(again.status, FENCE_ST_OK);
    CHECK_EQ_U64(again.token, r.token);
    CHECK_EQ_U64(again.slot, r.slot);
    fence_result q = run(f, 4, with_req(c_sem("re", 1, b, 1000), 77));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    fence_result qj = run(f, 5, c_sem("re", 1, b, 1000));
    CHECK_EQ_U64(qj.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(qj.wait_id, q.wait_id);
    fence_result qr = run(f, 6, with_req(c_sem("re", 1, b, 1000), 77));
    CHECK_EQ_U64(qr.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(qr.wait_id, q.wait_id);
    /* The same id for another request is refused. */
    CHECK_EQ_U64(run(f, 6, with_req(c_sem("re", 2, b, 1000), 77)).status, FENCE_ST_INVALID);
    fence_result rel = run(f, 7, with_req(c_release("re", 0, r.token), 78));
    CHECK_EQ_U64(rel.value, 1);
    REQUIRE(n_ev == 1);
    uint64_t tok = last_ev[0].result.token;
    fence_result done_q = run(f, 8, with_req(c_sem("re", 1, b, 1000), 77));
    CHECK_EQ_U64(done_q.status, FENCE_ST_OK);
    CHECK_EQ_U64(done_q.token, tok);
    CHECK_EQ_U64(done_q.slot, 0);
    /* The release retried answers 1 again and releases nothing. */
    fence_result rel2 = run(f, 9, with_req(c_release("re", 0, r.token), 78));
    CHECK_EQ_U64(rel2.value, 1);
    fence_fsm_sem_state st;
    fence_fsm_sem_slot sl[16];
    size_t n = 0;
    REQUIRE(info(f, "re", &st, sl, &n));
    CHECK_EQ_U64(sl[0].token, tok);
    done(f);
}

/* Limits: locks_max counts slots, waiters_max the semaphore's FIFO,
 * waits_max all waits; quotas count slots and waits; NOPERM for another
 * owner's release; LEADER_START rebases the semaphore's waits. */
static void test_limits_owners_rebase(void)
{
    fence_fsm *f = new_fsm();
    fence_cmd ls = {.type = FENCE_CMD_LEADER_START};
    ls.limits.leases_max = 100;
    ls.limits.locks_max = 2;
    ls.limits.waiters_max = 1;
    ls.limits.waits_max = 100;
    ls.limits.dedup_max = 100;
    REQUIRE(run(f, 1, ls).status == FENCE_ST_OK);
    uint64_t l[4];
    for (int i = 0; i < 4; i++)
        l[i] = lease(f, 1, 60000, 0);
    CHECK_EQ_U64(run(f, 2, c_sem("m", 3, l[0], 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 2, c_sem("m", 3, l[1], 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 2, c_sem("m", 3, l[2], 0)).status, FENCE_ST_LIMIT); /* locks_max */
    ls.limits.locks_max = 10;
    REQUIRE(run(f, 3, ls).status == FENCE_ST_OK);
    fence_result r2 = run(f, 3, c_sem("m", 3, l[2], 0));
    CHECK_EQ_U64(r2.slot, 2);
    fence_result q = run(f, 4, c_sem("m", 3, l[3], 1000));
    CHECK_EQ_U64(q.status, FENCE_ST_QUEUED);
    uint64_t e = lease(f, 4, 60000, 0);
    CHECK_EQ_U64(run(f, 4, c_sem("m", 3, e, 1000)).status, FENCE_ST_LIMIT); /* waiters_max */
    /* Quota: an owner with quota_locks 1 holding a slot cannot wait. */
    fence_cmd g = c_grant(60000, 0);
    g.owner = 9;
    uint64_t o = run(f, 5, g).lease;
    fence_cmd oc = c_sem("n", 2, o, 0);
    oc.owner = 9;
    oc.flags |= FENCE_CMD_F_QUOTA;
    oc.quota_locks = 1;
    CHECK_EQ_U64(run(f, 5, oc).status, FENCE_ST_OK);
    fence_cmd oc2 = c_sem("m2", 2, o, 0);
    oc2.owner = 9;
    oc2.flags |= FENCE_CMD_F_QUOTA;
    oc2.quota_locks = 1;
    CHECK_EQ_U64(run(f, 5, oc2).status, FENCE_ST_LIMIT);
    /* Owner 9's slot: owner 0 may not release it; an admin may. */
    fence_fsm_sem_state st;
    fence_fsm_sem_slot sl[16];
    size_t n = 0;
    REQUIRE(info(f, "n", &st, sl, &n));
    CHECK_EQ_U64(run(f, 6, c_release("n", 0, sl[0].token)).status, FENCE_ST_NOPERM);
    fence_cmd adm = c_release("n", 0, sl[0].token);
    adm.flags |= FENCE_CMD_F_ADMIN;
    CHECK_EQ_U64(run(f, 6, adm).value, 1);
    /* Another owner's lease cannot acquire. */
    fence_cmd other = c_sem("m", 3, l[3], 0);
    other.owner = 5;
    CHECK_EQ_U64(run(f, 6, other).status, FENCE_ST_NOPERM);
    /* A new leader far ahead: the wait (1000 ms from 4) is rebased. */
    REQUIRE(run(f, 100000, ls).status == FENCE_ST_OK);
    CHECK(fence_fsm_wait_exists(f, q.wait_id));
    CHECK_EQ_U64(fence_fsm_next_deadline(f) >= 100000 + 1000 ||
                     fence_fsm_next_deadline(f) == 101000,
                 1);
    run(f, 100999, c_tick());
    CHECK(fence_fsm_wait_exists(f, q.wait_id));
    run(f, 101000, c_tick());
    CHECK(!fence_fsm_wait_exists(f, q.wait_id));
    done(f);
}

/* Snapshot: semaphores with holders, a slot in lock-delay, waiters whose
 * leases also wait for plain locks (interleaved wait ids), QUEUED dedup
 * records; a restored copy then follows the same commands to the same
 * bytes; a version-4 reader's layout is unchanged in front of the
 * section; corrupt sections are refused or restore to valid states. */
static void test_snapshot(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 1000, 300);
    uint64_t b = lease(f, 1, 60000, 0);
    uint64_t c = lease(f, 1, 60000, 0);
    uint64_t d = lease(f, 1, 60000, 0);
    run(f, 2, c_sem("s1", 2, a, 0));
    run(f, 2, c_sem("s1", 2, b, 0));
    run(f, 2, c_lock("plain", b, 0));
    run(f, 3, c_lock("plain", c, 9000));             /* wait 1: lock */
    run(f, 3, with_req(c_sem("s1", 2, c, 9000), 5)); /* wait 2: sem */
    run(f, 3, c_lock("plain", d, 9000));             /* wait 3: lock */
    run(f, 3, c_sem("s1", 2, d, 9000));              /* wait 4: sem */
    run(f, 4, c_sem_ttl("s2", 1, 5000, 0));
    run(f, 4, c_sem_ttl("s2", 1, 5000, 8000));
    run(f, 1000, c_tick()); /* a expires: s1#0 in lock-delay */
    size_t n = 0;
    uint8_t *s = snap(f, &n);
    CHECK_EQ_U64(s[4], 5);
    fence_fsm *g = new_fsm();
    REQUIRE(fence_fsm_restore(g, s, n) == 0);
    /* The same commands on both end in the same bytes. */
    fence_cmd seq[] = {c_tick(), c_revoke(b), c_tick(), c_revoke(c)};
    uint64_t at[] = {1300, 1400, 7000, 7001};
    for (size_t i = 0; i < 4; i++) {
        fence_result r1, r2;
        fence_fsm_apply(f, at[i], &seq[i], &r1);
        fence_fsm_apply(g, at[i], &seq[i], &r2);
        CHECK(memcmp(&r1, &r2, sizeof(r1)) == 0);
        size_t e1 = 0, e2 = 0;
        const fence_event *v1 = fence_fsm_events(f, &e1);
        const fence_event *v2 = fence_fsm_events(g, &e2);
        REQUIRE(e1 == e2);
        CHECK(e1 == 0 || memcmp(v1, v2, e1 * sizeof(*v1)) == 0);
        REQUIRE(fence_fsm_check(g) == NULL);
        size_t m1 = 0, m2 = 0;
        uint8_t *b1 = snap(f, &m1);
        uint8_t *b2 = snap(g, &m2);
        REQUIRE(m1 == m2);
        CHECK(memcmp(b1, b2, m1) == 0);
        free(b1);
        free(b2);
    }
    fence_fsm_destroy(g);
    /* Every single-byte change of the snapshot (CRC fixed up) is refused or
     * gives a state that passes every check. */
    int valid = 0;
    for (size_t i = 8; i + 4 < n; i++) {
        for (int v = 0; v < 3; v++) {
            uint8_t *m = malloc(n);
            REQUIRE(m != NULL);
            memcpy(m, s, n);
            m[i] = (uint8_t)(v == 0 ? m[i] ^ 1 : v == 1 ? m[i] + 1 : 0xff);
            uint32_t crc = fence__crc32c(m, n - 4);
            for (int k = 0; k < 4; k++)
                m[n - 4 + (size_t)k] = (uint8_t)(crc >> (8 * k));
            fence_fsm *h = new_fsm();
            if (fence_fsm_restore(h, m, n) == 0) {
                CHECK(fence_fsm_check(h) == NULL);
                valid++;
            }
            fence_fsm_destroy(h);
            free(m);
        }
    }
    printf("# %d single-byte changes were still valid states\n", valid);
    /* Truncated. */
    fence_fsm *h = new_fsm();
    CHECK(fence_fsm_restore(h, s, n - 5) != 0);
    fence_fsm_destroy(h);
    free(s);
    done(f);
}

/* A REQID retry answered from a restored dedup record names the same
 * slot (the slot travels in the sem section), for a direct grant and for
 * a queued one resolved by hand-off. */
static void test_reqid_slot_after_restore(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000, 0);
    uint64_t b = lease(f, 1, 60000, 0);
    uint64_t c = lease(f, 1, 60000, 0);
    run(f, 2, c_sem("r", 2, a, 0));
    fence_result rb = run(f, 2, with_req(c_sem("r", 2, b, 0), 10));
    REQUIRE(rb.slot == 1);
    fence_result qc = run(f, 3, with_req(c_sem("r", 2, c, 5000), 11));
    REQUIRE(qc.status == FENCE_ST_QUEUED);
    run(f, 4, c_revoke(b)); /* slot 1 goes to c */
    REQUIRE(n_ev == 1 && last_ev[0].result.slot == 1);
    size_t n = 0;
    uint8_t *s = snap(f, &n);
    fence_fsm *g = new_fsm();
    REQUIRE(fence_fsm_restore(g, s, n) == 0);
    fence_cmd retry_b = with_req(c_sem("r", 2, b, 0), 10);
    fence_cmd retry_c = with_req(c_sem("r", 2, c, 5000), 11);
    fence_result x1, x2;
    fence_fsm_apply(g, 5, &retry_b, &x1);
    fence_fsm_apply(g, 5, &retry_c, &x2);
    CHECK_EQ_U64(x1.slot, 1);
    CHECK_EQ_U64(x1.token, rb.token);
    CHECK_EQ_U64(x2.status, FENCE_ST_OK);
    CHECK_EQ_U64(x2.slot, 1);
    CHECK_EQ_U64(x2.token, last_ev[0].result.token);
    fence_fsm_destroy(g);
    free(s);
    done(f);
}

/* The entry codec carries the two commands (version 5) and apply_entry
 * runs them like apply. */
static void test_entry_codec(void)
{
    fence_cmd cmds[3] = {c_grant(60000, 0), c_sem("e", 3, 1, 500), c_release("e", 0, 1)};
    cmds[1] = with_req(cmds[1], 42);
    cmds[1].owner = 7;
    uint8_t buf[512];
    size_t n = fence_entry_encode(10, cmds, 3, buf, sizeof(buf));
    REQUIRE(n > 0);
    CHECK_EQ_U64(buf[0], 5);
    fence_entry_iter it;
    REQUIRE(fence_entry_open(&it, buf, n) == 0);
    fence_cmd d;
    REQUIRE(fence_entry_next(&it, &d) == 1);
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.type, FENCE_CMD_SEM_ACQUIRE);
    CHECK_EQ_U64(d.permits, 3);
    CHECK_EQ_U64(d.lease, 1);
    CHECK_EQ_U64(d.wait_ms, 500);
    CHECK_EQ_U64(d.req_id, 42);
    CHECK_EQ_U64(d.owner, 7);
    CHECK(d.name_len == 1 && d.name[0] == 'e');
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.type, FENCE_CMD_SEM_RELEASE);
    CHECK_EQ_U64(d.slot, 0);
    CHECK_EQ_U64(d.token, 1);
    CHECK_EQ_I64(fence_entry_next(&it, &d), 0);
    /* Every truncation is refused, never misread. */
    for (size_t cut = 1; cut < n; cut++) {
        fence_entry_iter t;
        if (fence_entry_open(&t, buf, cut) != 0)
            continue;
        int rc;
        while ((rc = fence_entry_next(&t, &d)) == 1) {
        }
        CHECK(rc != 0);
    }
    fence_fsm *f = new_fsm();
    cmds[1].owner = 0;
    n = fence_entry_encode(10, cmds, 3, buf, sizeof(buf));
    fence_result res[3];
    CHECK_EQ_I64(fence_fsm_apply_entry(f, buf, n, res, 3), 3);
    CHECK_EQ_U64(res[1].status, FENCE_ST_OK);
    CHECK_EQ_U64(res[1].slot, 0);
    CHECK_EQ_U64(res[1].token, 1);
    CHECK_EQ_U64(res[2].value, 1);
    done(f);
}

/* LOCK_MULTI of these names for lease (0: the ACQUIRE form with ttl). */
static fence_cmd c_multi(const fence_name *names, uint16_t n, uint64_t lease, uint64_t ttl,
                         uint64_t wait_ms)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK_MULTI, .names = names, .names_count = n,
                   .lease = lease, .ttl_ms = ttl, .wait_ms = wait_ms};
    return c;
}

#define FN(s) {(const uint8_t *)(s), (uint16_t)(sizeof(s) - 1)}

/* The one name space with multi-locks (core/multi.c): a LOCK_MULTI naming
 * a semaphore or one of its slots answers WRONGTYPE and takes nothing; a
 * first SEM_ACQUIRE over a lock kept free for a queued multi-lock answers
 * WRONGTYPE; a multi wait and a semaphore wait of one lease live side by
 * side (snapshot round trip in run), and its revoke ends both. */
static void test_with_multi_locks(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000, 0);
    uint64_t b = lease(f, 1, 60000, 0);
    fence_result g = run(f, 2, c_sem("s", 2, a, 0));
    REQUIRE(g.status == FENCE_ST_OK);
    static const fence_name slot1[] = {FN("m1"), FN("s#1")};
    static const fence_name semname[] = {FN("s"), FN("m1")};
    static const fence_name beyond[] = {FN("m1"), FN("s#2")};
    CHECK_EQ_U64(run(f, 3, c_multi(slot1, 2, b, 0, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 3, c_multi(semname, 2, 0, 5000, 1000)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 3, c_multi(slot1, 2, b, 0, 9000)).status, FENCE_ST_WRONGTYPE);
    fence_fsm_lock_state li;
    CHECK(!fence_fsm_lock_info(f, (const uint8_t *)"m1", 2, &li));
    /* s#2 is no slot of a semaphore of 2: a plain name. */
    fence_result m = run(f, 4, c_multi(beyond, 2, b, 0, 0));
    CHECK_EQ_U64(m.status, FENCE_ST_OK);
    CHECK_EQ_U64(m.token, g.token + 1);
    /* c queues a multi-lock over q#0 (free) and y (held by a): q#0 is
     * created, kept free for it with token 0, and is a lock now. */
    uint64_t c = lease(f, 5, 60000, 0);
    run(f, 5, c_lock("y", a, 0));
    static const fence_name q[] = {FN("q#0"), FN("y")};
    fence_result w = run(f, 6, c_multi(q, 2, c, 0, 30000));
    REQUIRE(w.status == FENCE_ST_QUEUED);
    CHECK(!fence_fsm_lock_info(f, (const uint8_t *)"q#0", 3, &li)); /* free */
    CHECK_EQ_U64(run(f, 7, c_sem("q", 1, b, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 7, c_sem("q#0", 1, b, 0)).status, FENCE_ST_WRONGTYPE);
    /* The same lease waits for a slot too. */
    CHECK_EQ_U64(run(f, 8, c_sem("s", 2, b, 0)).status, FENCE_ST_OK);
    fence_result sw = run(f, 8, c_sem("s", 2, c, 30000));
    REQUIRE(sw.status == FENCE_ST_QUEUED);
    fence_fsm_stats st;
    fence_fsm_stats_get(f, &st);
    CHECK_EQ_U64(st.waiters, 2);
    /* a's revoke frees s#0 (to c's semaphore wait) and y (to c's
     * multi-lock, with q#0 at once): two events, two new tokens. */
    uint64_t before = fence_fsm_last_token(f);
    run(f, 9, c_revoke(a));
    REQUIRE(n_ev == 2);
    CHECK_EQ_U64(last_ev[0].result.status, FENCE_ST_OK);
    CHECK_EQ_U64(last_ev[1].result.status, FENCE_ST_OK);
    CHECK_EQ_U64(last_ev[0].result.token + last_ev[1].result.token, 2 * before + 3);
    REQUIRE(fence_fsm_lock_info(f, (const uint8_t *)"q#0", 3, &li));
    CHECK_EQ_U64(li.lease, c);
    fence_result again = run(f, 10, c_sem("s", 2, c, 0));
    CHECK_EQ_U64(again.status, FENCE_ST_OK);
    CHECK_EQ_U64(again.slot, 0);
    /* c's revoke ends both of its grants; UNLOCK of the multi-lock's
     * names is the other way, and it leaves the semaphore alone. */
    CHECK_EQ_U64(run(f, 11, c_unlock("s#2", m.token)).status, FENCE_ST_OK);
    run(f, 11, c_revoke(c));
    run(f, 12, c_revoke(b));
    fence_fsm_sem_state ss;
    fence_fsm_sem_slot sl[16];
    size_t ns = 0;
    CHECK(!info(f, "s", &ss, sl, &ns));
    fence_fsm_stats_get(f, &st);
    CHECK_EQ_U64(st.locks, 0);
    done(f);
}

/* ELECT_* of name with lease / token (value "v" for CAMPAIGN, PROCLAIM). */
static fence_cmd c_elect(uint8_t type, const char *name, uint64_t lease, uint64_t token)
{
    fence_cmd c = {.type = type, NAME(name), .lease = lease, .token = token};
    if (type != FENCE_CMD_ELECT_RESIGN) {
        c.value = (const uint8_t *)"v";
        c.value_len = 1;
    }
    return c;
}

/* The one name space with elections (core/elect.c): CAMPAIGN, PROCLAIM
 * and RESIGN of a semaphore's name or slot answer WRONGTYPE and create no
 * election; SEM_ACQUIRE of an election's name, or of a semaphore whose
 * slot name is an election, answers WRONGTYPE. */
static void test_with_elections(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000, 0);
    uint64_t b = lease(f, 1, 60000, 0);
    fence_result g = run(f, 2, c_sem("s", 2, a, 0));
    REQUIRE(g.status == FENCE_ST_OK);
    const char *names[] = {"s", "s#0", "s#1"};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_U64(run(f, 3, c_elect(FENCE_CMD_ELECT_CAMPAIGN, names[i], b, 0)).status,
                     FENCE_ST_WRONGTYPE);
        CHECK_EQ_U64(run(f, 3, c_elect(FENCE_CMD_ELECT_PROCLAIM, names[i], 0, g.token)).status,
                     FENCE_ST_WRONGTYPE);
        CHECK_EQ_U64(run(f, 3, c_elect(FENCE_CMD_ELECT_RESIGN, names[i], 0, g.token)).status,
                     FENCE_ST_WRONGTYPE);
        fence_fsm_elect_state es;
        CHECK_EQ_I64(fence_fsm_elect_info(f, (const uint8_t *)names[i],
                                          (uint16_t)strlen(names[i]), &es),
                     FENCE_ST_WRONGTYPE);
    }
    /* s#2 is no slot of a semaphore of 2: an election may have it. */
    CHECK_EQ_U64(run(f, 4, c_elect(FENCE_CMD_ELECT_CAMPAIGN, "s#2", b, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 4, c_elect(FENCE_CMD_ELECT_CAMPAIGN, "e", b, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 5, c_sem("e", 1, a, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 5, c_sem("t", 3, a, 0)).status, FENCE_ST_OK);
    run(f, 6, c_revoke(a));
    /* With s gone, a semaphore s of 3 would claim the election s#2. */
    CHECK_EQ_U64(run(f, 7, c_sem("s", 3, b, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 7, c_sem("s", 2, b, 0)).status, FENCE_ST_OK);
    run(f, 8, c_revoke(b));
    done(f);
}

static fence_cmd shared(fence_cmd c)
{
    c.flags |= FENCE_CMD_F_SHARED;
    return c;
}

/* One name space with shared locks (core/shared.c): LOCK / ACQUIRE ...
 * SHARED and UNLOCK_SHARED of a semaphore's name or slot answer
 * WRONGTYPE; SEM_ACQUIRE refuses the SHARED flag; a lock held shared (or
 * its name#i) makes a first SEM_ACQUIRE WRONGTYPE; a snapshot with both
 * kinds restores to the same bytes. */
static void test_with_shared_locks(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000, 0);
    uint64_t b = lease(f, 1, 60000, 0);
    fence_result g = run(f, 2, c_sem("s", 2, a, 0));
    REQUIRE(g.status == FENCE_ST_OK);
    const char *names[] = {"s", "s#0", "s#1"};
    for (int i = 0; i < 3; i++) {
        CHECK_EQ_U64(run(f, 3, shared(c_lock(names[i], b, 0))).status, FENCE_ST_WRONGTYPE);
        CHECK_EQ_U64(run(f, 3, shared(c_lock(names[i], b, 1000))).status, FENCE_ST_WRONGTYPE);
        CHECK_EQ_U64(run(f, 3, shared(c_acquire(names[i], 1000))).status, FENCE_ST_WRONGTYPE);
        fence_cmd u = {.type = FENCE_CMD_UNLOCK_SHARED, NAME(names[i]), .token = g.token,
                       .lease = a};
        CHECK_EQ_U64(run(f, 3, u).status, FENCE_ST_WRONGTYPE);
    }
    CHECK_EQ_U64(run(f, 3, shared(c_sem("s", 2, b, 0))).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 3, shared(c_sem_ttl("t", 2, 1000, 0))).status, FENCE_ST_INVALID);
    /* Shared holds of r and u#0 keep those names from a semaphore. */
    fence_result r = run(f, 4, shared(c_lock("r", b, 0)));
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 4, shared(c_lock("r", a, 0))).token, r.token);
    CHECK_EQ_U64(run(f, 4, shared(c_lock("u#0", b, 0))).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 5, c_sem("r", 1, a, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 5, c_sem("u", 1, a, 0)).status, FENCE_ST_WRONGTYPE);
    /* s#2 is no slot of a semaphore of 2: a shared lock may have it. */
    fence_result x = run(f, 5, shared(c_lock("s#2", b, 0)));
    CHECK_EQ_U64(x.status, FENCE_ST_OK);
    CHECK(x.token > r.token);
    run(f, 6, c_revoke(a));
    /* With s gone (a held its slot), a semaphore s of 3 would claim s#2. */
    CHECK_EQ_U64(run(f, 7, c_sem("s", 3, b, 0)).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 7, c_sem("s", 2, b, 0)).status, FENCE_ST_OK);
    run(f, 8, c_revoke(b));
    done(f);
}

int main(void)
{
    TEST_RUN(test_basic_slots);
    TEST_RUN(test_permits_and_invalid);
    TEST_RUN(test_one_name_space);
    TEST_RUN(test_expiry_revoke_delay);
    TEST_RUN(test_dedicated);
    TEST_RUN(test_reentrant_and_reqid);
    TEST_RUN(test_limits_owners_rebase);
    TEST_RUN(test_snapshot);
    TEST_RUN(test_reqid_slot_after_restore);
    TEST_RUN(test_entry_codec);
    TEST_RUN(test_with_multi_locks);
    TEST_RUN(test_with_elections);
    TEST_RUN(test_with_shared_locks);
    return TEST_DONE();
}
