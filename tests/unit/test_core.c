/* Unit tests of the deterministic core (src/core): commands, time, events,
 * dedup, limits, snapshots and the entry codec. */
#include "../lib/test.h"
#include "test_core_fork.h"

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "core/fsm_int.h"

/* ---- Fixture ------------------------------------------------------------- */

/* A test allocator: malloc, with an optional budget of successful
 * allocations after which every allocation fails. */
typedef struct talloc {
    long budget;  /* allocations left before failing; < 0: unlimited */
    long live;    /* allocations not yet freed */
} talloc;

static void *t_alloc(void *ctx, size_t n)
{
    talloc *t = ctx;
    if (t->budget == 0) {
        return NULL;
    }
    if (t->budget > 0) {
        t->budget--;
    }
    void *p = malloc(n);
    if (p != NULL) {
        t->live++;
    }
    return p;
}

static void t_free(void *ctx, void *p)
{
    talloc *t = ctx;
    t->live--;
    free(p);
}

#define MAX_EV 1024
/* Bytes of the coordination kinds' sections of a version-5 snapshot when
 * all are empty (sem: two u32 counts). */
#define SNAP_KINDS_EMPTY 8

/* A state machine plus the events it reported. */
typedef struct fx {
    fence_fsm *f;            /* the state machine */
    talloc ta;               /* its allocator */
    fence_event ev[MAX_EV];  /* events in order */
    int nev;                 /* events recorded */
} fx;

/* Append the events of the last apply/advance call to x->ev. */
static void take_events(fx *x)
{
    size_t n = 0;
    const fence_event *ev = fence_fsm_events(x->f, &n);
    for (size_t i = 0; i < n; i++) {
        REQUIRE(x->nev < MAX_EV);
        x->ev[x->nev++] = ev[i];
    }
}

static void fx_init(fx *x)
{
    memset(x, 0, sizeof(*x));
    x->ta.budget = -1;
    fence_fsm_opts o = {{t_alloc, t_free, &x->ta}};
    REQUIRE(fence_fsm_create(&o, &x->f) == 0);
    REQUIRE(x->f != NULL);
}

static void fx_done(fx *x)
{
    CHECK(fence_fsm_check(x->f) == NULL);
    fence_fsm_destroy(x->f);
    CHECK_EQ_I64(x->ta.live, 0);
}

/* Apply a command and check every invariant afterwards. */
static fence_result run(fx *x, uint64_t now, fence_cmd c)
{
    fence_result r;
    fence_fsm_apply(x->f, now, &c, &r);
    take_events(x);
    const char *e = fence_fsm_check(x->f);
    if (e != NULL) {
        printf("#   check failed: %s\n", e);
    }
    REQUIRE(e == NULL);
    return r;
}

static fence_cmd c_grant(uint64_t ttl, uint64_t delay)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = ttl,
                   .lock_delay_ms = delay};
    return c;
}

static fence_cmd c_keepalive(uint64_t lease)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_KEEPALIVE, .lease = lease};
    return c;
}

static fence_cmd c_revoke(uint64_t lease)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_REVOKE, .lease = lease};
    return c;
}

static fence_cmd c_lock(const char *name, uint64_t lease, uint64_t wait)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .lease = lease,
                   .wait_ms = wait};
    return c;
}

static fence_cmd c_unlock(const char *name, uint64_t token)
{
    fence_cmd c = {.type = FENCE_CMD_UNLOCK, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .token = token};
    return c;
}

static fence_cmd c_acquire(const char *name, uint64_t ttl, uint64_t delay,
                           uint64_t wait)
{
    fence_cmd c = {.type = FENCE_CMD_ACQUIRE, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .ttl_ms = ttl,
                   .lock_delay_ms = delay, .wait_ms = wait};
    return c;
}

static fence_cmd c_cancel(uint64_t wait_id)
{
    fence_cmd c = {.type = FENCE_CMD_CANCEL, .wait_id = wait_id};
    return c;
}

static fence_cmd c_tick(void)
{
    fence_cmd c = {.type = FENCE_CMD_TICK};
    return c;
}

static fence_cmd c_leader(uint32_t leases, uint32_t locks, uint32_t waiters,
                          uint32_t dedup)
{
    fence_cmd c = {.type = FENCE_CMD_LEADER_START};
    c.limits.leases_max = leases;
    c.limits.locks_max = locks;
    c.limits.waiters_max = waiters;
    c.limits.dedup_max = dedup;
    c.limits.waits_max = FENCE_WAITS_DEFAULT;
    return c;
}

static fence_cmd with_req(fence_cmd c, uint64_t req)
{
    c.flags |= FENCE_CMD_F_REQID;
    c.req_id = req;
    return c;
}

/* A new lease, asserting success; returns its id. */
static uint64_t lease(fx *x, uint64_t now, uint64_t ttl, uint64_t delay)
{
    fence_result r = run(x, now, c_grant(ttl, delay));
    REQUIRE(r.status == FENCE_ST_OK);
    REQUIRE(r.lease != 0);
    return r.lease;
}

static bool lock_held(fx *x, const char *name, fence_fsm_lock_state *out)
{
    return fence_fsm_lock_info(x->f, (const uint8_t *)name,
                               (uint16_t)strlen(name), out);
}

/* ---- Tokens, FIFO, reentrancy -------------------------------------------- */

static void test_tokens_increase_across_locks(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 10000, 0);
    uint64_t b = lease(&x, 0, 10000, 0);
    uint64_t last = 0;
    char name[16];
    for (int i = 0; i < 50; i++) {
        snprintf(name, sizeof(name), "lock%d", i % 7);
        fence_result r = run(&x, (uint64_t)i, c_lock(name, i % 2 ? a : b, 0));
        if (r.status == FENCE_ST_OK) {
            if (r.token > last) {
                CHECK(r.token == last + 1);
                last = r.token;
            }
            if (i % 3 == 0) {
                fence_result u = run(&x, (uint64_t)i, c_unlock(name, r.token));
                CHECK_EQ_U64(u.value, 1);
            }
        }
    }
    CHECK(last > 7);
    CHECK_EQ_U64(fence_fsm_last_token(x.f), last);
    fx_done(&x);
}

static void test_fifo_order(void)
{
    fx x;
    fx_init(&x);
    uint64_t l[5];
    for (int i = 0; i < 5; i++) {
        l[i] = lease(&x, 0, 60000, 0);
    }
    fence_result r = run(&x, 1, c_lock("q", l[0], 0));
    REQUIRE(r.status == FENCE_ST_OK);
    uint64_t tok = r.token;
    uint64_t wid[5];
    for (int i = 1; i < 5; i++) {
        fence_result q = run(&x, 2, c_lock("q", l[i], 5000));
        REQUIRE(q.status == FENCE_ST_QUEUED);
        wid[i] = q.wait_id;
    }
    for (int i = 1; i < 5; i++) {
        x.nev = 0;
        fence_result u = run(&x, 10 + (uint64_t)i, c_unlock("q", tok));
        CHECK_EQ_U64(u.value, 1);
        REQUIRE(x.nev == 1);
        CHECK_EQ_U64(x.ev[0].wait_id, wid[i]);
        CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_OK);
        CHECK_EQ_U64(x.ev[0].result.lease, l[i]);
        CHECK(x.ev[0].result.token > tok);
        tok = x.ev[0].result.token;
    }
    fx_done(&x);
}

static void test_reentrant_lock(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 1000, 0);
    fence_result r1 = run(&x, 1, c_lock("r", a, 0));
    fence_result r2 = run(&x, 2, c_lock("r", a, 500));
    CHECK_EQ_U64(r1.status, FENCE_ST_OK);
    CHECK_EQ_U64(r2.status, FENCE_ST_OK);
    CHECK_EQ_U64(r1.token, r2.token);
    CHECK_EQ_U64(fence_fsm_last_token(x.f), r1.token);
    fence_fsm_lock_state li;
    REQUIRE(lock_held(&x, "r", &li));
    CHECK_EQ_U64(li.waiters, 0);
    fx_done(&x);
}

static void test_queued_twice_same_wait(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 1000, 0);
    uint64_t b = lease(&x, 0, 1000, 0);
    run(&x, 1, c_lock("k", a, 0));
    fence_result q1 = run(&x, 2, c_lock("k", b, 300));
    fence_result q2 = run(&x, 3, c_lock("k", b, 300));
    CHECK_EQ_U64(q1.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(q2.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(q1.wait_id, q2.wait_id);
    fence_fsm_lock_state li;
    REQUIRE(lock_held(&x, "k", &li));
    CHECK_EQ_U64(li.waiters, 1);
    fx_done(&x);
}

/* ---- Leases and time ----------------------------------------------------- */

static void test_keepalive_and_revoke(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 100, 0);
    fence_result k = run(&x, 90, c_keepalive(a));
    CHECK_EQ_U64(k.status, FENCE_ST_OK);
    CHECK_EQ_U64(k.value, 100);
    fence_fsm_lease_state li;
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, a, 150, &li), 0);
    CHECK_EQ_U64(li.deadline_ms, 190);
    k = run(&x, 190, c_keepalive(a));
    CHECK_EQ_U64(k.status, FENCE_ST_NOLEASE);
    CHECK_EQ_U64(run(&x, 191, c_keepalive(999)).status, FENCE_ST_NOLEASE);
    uint64_t b = lease(&x, 200, 100, 0);
    CHECK_EQ_U64(run(&x, 201, c_revoke(b)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(&x, 202, c_revoke(b)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(&x, 203, c_revoke(12345)).status, FENCE_ST_OK);
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, b, 203, &li), FENCE_ST_NOLEASE);
    fence_fsm_stats st;
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.leases, 0);
    fx_done(&x);
}

static void test_expiry_releases_and_hands_off(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 100, 0);
    uint64_t b = lease(&x, 0, 1000, 0);
    fence_result r = run(&x, 1, c_lock("e", a, 0));
    fence_result q = run(&x, 2, c_lock("e", b, 5000));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(fence_fsm_next_deadline(x.f), 100);
    x.nev = 0;
    run(&x, 99, c_tick());
    CHECK_EQ_I64(x.nev, 0);
    run(&x, 100, c_tick());
    REQUIRE(x.nev == 1);
    CHECK_EQ_U64(x.ev[0].wait_id, q.wait_id);
    CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_OK);
    CHECK_EQ_U64(x.ev[0].result.token, r.token + 1);
    fence_fsm_lock_state li;
    REQUIRE(lock_held(&x, "e", &li));
    CHECK_EQ_U64(li.lease, b);
    fence_fsm_lease_state le;
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, a, 100, &le), FENCE_ST_NOLEASE);
    fx_done(&x);
}

/* The event counters of fence_fsm_stats (metrics): grants, hand-offs,
 * expiries with and without locks, revocations; a restore keeps them. */
static void test_stats_counters(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 100, 0);
    uint64_t b = lease(&x, 0, 1000, 0);
    uint64_t c = lease(&x, 0, 50, 0);
    run(&x, 1, c_lock("s", a, 0));
    REQUIRE(run(&x, 2, c_lock("s", b, 5000)).status == FENCE_ST_QUEUED);
    run(&x, 60, c_tick());  /* c expires holding nothing */
    run(&x, 100, c_tick()); /* a expires holding "s": hand-off to b */
    run(&x, 101, c_revoke(b));
    run(&x, 102, c_revoke(b)); /* already gone: not counted */
    fence_fsm_stats st;
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.grants, 2);
    CHECK_EQ_U64(st.handoffs, 1);
    CHECK_EQ_U64(st.expirations, 2);
    CHECK_EQ_U64(st.expirations_with_locks, 1);
    CHECK_EQ_U64(st.revocations, 1);
    (void)c;
    size_t len = fence_fsm_snapshot_size(x.f);
    uint8_t *buf = malloc(len);
    REQUIRE(buf != NULL);
    REQUIRE(fence_fsm_snapshot(x.f, buf, len) == len);
    REQUIRE(fence_fsm_restore(x.f, buf, len) == 0);
    free(buf);
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.grants, 2);
    CHECK_EQ_U64(st.expirations_with_locks, 1);
    fx_done(&x);
}

/* Read-only iteration: locks in token order with a filter and pages,
 * leases in id order. */
static bool starts_with_a(void *ctx, const uint8_t *name, uint16_t len)
{
    (void)ctx;
    return len > 0 && name[0] == 'a';
}

static void test_list_iterators(void)
{
    fx x;
    fx_init(&x);
    uint64_t l1 = lease(&x, 0, 10000, 0);
    uint64_t l2 = lease(&x, 0, 10000, 0);
    const char *names[] = {"a1", "b1", "a2", "a3", "b2"};
    for (int i = 0; i < 5; i++)
        run(&x, 1, c_lock(names[i], i % 2 ? l2 : l1, 0));
    REQUIRE(run(&x, 2, c_lock("a1", l2, 5000)).status == FENCE_ST_QUEUED);
    fence_fsm_lock_entry e[8];
    uint64_t next = 99;
    size_t n = fence_fsm_locks_list(x.f, 0, 100, NULL, NULL, e, 8, &next);
    CHECK_EQ_U64(n, 5);
    CHECK_EQ_U64(next, 0);
    CHECK(e[0].name_len == 2 && memcmp(e[0].name, "a1", 2) == 0);
    CHECK_EQ_U64(e[0].waiters, 1);
    CHECK_EQ_U64(e[0].lease, l1);
    CHECK(e[0].token < e[1].token);
    /* Pages of two with the filter: a1 a2 | a3 (visiting b's on the way). */
    n = fence_fsm_locks_list(x.f, 0, 100, starts_with_a, NULL, e, 2, &next);
    CHECK_EQ_U64(n, 2);
    CHECK(next != 0);
    CHECK(memcmp(e[1].name, "a2", 2) == 0);
    n = fence_fsm_locks_list(x.f, next, 100, starts_with_a, NULL, e, 2, &next);
    CHECK_EQ_U64(n, 1);
    CHECK(memcmp(e[0].name, "a3", 2) == 0);
    CHECK_EQ_U64(next, 0);
    /* A visit bound stops early with a cursor. */
    n = fence_fsm_locks_list(x.f, 0, 2, NULL, NULL, e, 8, &next);
    CHECK_EQ_U64(n, 2);
    CHECK(next != 0);
    fence_fsm_lease_entry le[4];
    n = fence_fsm_leases_list(x.f, 0, le, 1, &next);
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(le[0].id, l1);
    CHECK_EQ_U64(le[0].locks_held, 3);
    n = fence_fsm_leases_list(x.f, next, le, 4, &next);
    CHECK_EQ_U64(n, 1);
    CHECK_EQ_U64(le[0].id, l2);
    CHECK_EQ_U64(le[0].waits, 1);
    CHECK_EQ_U64(next, 0);
    fx_done(&x);
}

static void test_no_grant_to_expired_lease(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 100, 0);
    uint64_t b = lease(&x, 0, 100, 0);  /* expires together with a */
    uint64_t c = lease(&x, 0, 1000, 0);
    run(&x, 1, c_lock("n", a, 0));
    fence_result qb = run(&x, 2, c_lock("n", b, 5000));
    fence_result qc = run(&x, 3, c_lock("n", c, 5000));
    REQUIRE(qb.status == FENCE_ST_QUEUED);
    REQUIRE(qc.status == FENCE_ST_QUEUED);
    /* One late entry: a and b are both expired by then; c gets the lock. */
    x.nev = 0;
    run(&x, 150, c_tick());
    REQUIRE(x.nev == 2);
    bool saw_b = false, saw_c = false;
    for (int i = 0; i < x.nev; i++) {
        if (x.ev[i].wait_id == qb.wait_id) {
            CHECK_EQ_U64(x.ev[i].result.status, FENCE_ST_NOLEASE);
            saw_b = true;
        }
        if (x.ev[i].wait_id == qc.wait_id) {
            CHECK_EQ_U64(x.ev[i].result.status, FENCE_ST_OK);
            CHECK_EQ_U64(x.ev[i].result.lease, c);
            saw_c = true;
        }
    }
    CHECK(saw_b && saw_c);
    /* A lease that expired cannot lock, even before any TICK. */
    uint64_t d = lease(&x, 200, 10, 0);
    CHECK_EQ_U64(run(&x, 210, c_lock("m", d, 0)).status, FENCE_ST_NOLEASE);
    /* And a lone waiter whose lease ran out gets NOLEASE, never the lock. */
    uint64_t e = lease(&x, 300, 50, 0);
    fence_fsm_lock_state li;
    REQUIRE(lock_held(&x, "n", &li));
    fence_result qe = run(&x, 301, c_lock("n", e, 10000));
    REQUIRE(qe.status == FENCE_ST_QUEUED);
    x.nev = 0;
    run(&x, 400, c_unlock("n", li.token));
    REQUIRE(x.nev == 1);
    CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_NOLEASE);
    CHECK(!lock_held(&x, "n", &li));
    fx_done(&x);
}

static void test_wait_timeout(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 10000, 0);
    uint64_t b = lease(&x, 0, 10000, 0);
    run(&x, 0, c_lock("t", a, 0));
    fence_result q = run(&x, 10, c_lock("t", b, 100));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(&x, 20, c_lock("t", b, 0)).status, FENCE_ST_QUEUED);
    x.nev = 0;
    run(&x, 110, c_tick());
    REQUIRE(x.nev == 1);
    CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_NIL);
    CHECK_EQ_U64(x.ev[0].wait_id, q.wait_id);
    CHECK_EQ_U64(run(&x, 120, c_lock("t", b, 0)).status, FENCE_ST_NIL);
    fx_done(&x);
}

static void test_lock_delay(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 100, 500);
    uint64_t b = lease(&x, 0, 100000, 0);
    fence_result r = run(&x, 1, c_lock("d", a, 0));
    REQUIRE(r.status == FENCE_ST_OK);
    run(&x, 100, c_tick()); /* a expires: d unavailable until 600 */
    fence_fsm_lock_state li;
    CHECK(!lock_held(&x, "d", &li));
    CHECK_EQ_U64(run(&x, 300, c_lock("d", b, 0)).status, FENCE_ST_NIL);
    fence_result q = run(&x, 301, c_lock("d", b, 10000));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(fence_fsm_next_deadline(x.f), 600);
    x.nev = 0;
    run(&x, 599, c_tick());
    CHECK_EQ_I64(x.nev, 0);
    run(&x, 600, c_tick());
    REQUIRE(x.nev == 1);
    CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_OK);
    CHECK_EQ_U64(x.ev[0].result.token, r.token + 1);
    /* Revoke and unlock release at once, without lock-delay. */
    uint64_t c = lease(&x, 700, 100, 500);
    fence_result r2 = run(&x, 701, c_lock("d2", c, 0));
    REQUIRE(r2.status == FENCE_ST_OK);
    run(&x, 702, c_revoke(c));
    CHECK_EQ_U64(run(&x, 703, c_lock("d2", b, 0)).status, FENCE_ST_OK);
    /* A lock in lock-delay with nobody waiting disappears when it ends. */
    uint64_t e = lease(&x, 800, 100, 50);
    run(&x, 801, c_lock("d3", e, 0));
    run(&x, 900, c_tick());
    run(&x, 950, c_tick());
    fence_fsm_stats st;
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.locks, 2);
    CHECK_EQ_U64(run(&x, 951, c_lock("d3", b, 0)).status, FENCE_ST_OK);
    fx_done(&x);
}

/* ---- ACQUIRE, CANCEL -------------------------------------------------------- */

static void test_acquire(void)
{
    fx x;
    fx_init(&x);
    fence_result a = run(&x, 0, c_acquire("x", 1000, 0, 0));
    REQUIRE(a.status == FENCE_ST_OK);
    CHECK(a.lease != 0);
    CHECK_EQ_U64(a.token, 1);
    fence_fsm_stats st;
    /* Busy, no wait: NIL and nothing left behind. */
    fence_result n = run(&x, 1, c_acquire("x", 1000, 0, 0));
    CHECK_EQ_U64(n.status, FENCE_ST_NIL);
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.leases, 1);
    /* Queued, then granted when the holder unlocks; the holder's dedicated
     * lease is revoked by the UNLOCK. */
    fence_result q = run(&x, 2, c_acquire("x", 50, 0, 5000));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    CHECK(q.lease != 0);
    fence_fsm_lease_state li;
    /* Queued: its lease outlives its ttl while it waits. */
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, q.lease, 500, &li), 0);
    x.nev = 0;
    fence_result u = run(&x, 500, c_unlock("x", a.token));
    CHECK_EQ_U64(u.value, 1);
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, a.lease, 500, &li),
                 FENCE_ST_NOLEASE);
    REQUIRE(x.nev == 1);
    CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_OK);
    CHECK_EQ_U64(x.ev[0].result.lease, q.lease);
    CHECK_EQ_U64(x.ev[0].result.token, 2);
    /* Granted: deadline = grant time + ttl. */
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, q.lease, 500, &li), 0);
    CHECK_EQ_U64(li.deadline_ms, 550);
    CHECK_EQ_U64(run(&x, 540, c_keepalive(q.lease)).status, FENCE_ST_OK);
    /* A queued ACQUIRE that times out revokes its lease. */
    fence_result t = run(&x, 541, c_acquire("x", 20, 0, 30));
    REQUIRE(t.status == FENCE_ST_QUEUED);
    /* keepalive does not shorten the queued lease below its wait */
    CHECK_EQ_U64(run(&x, 542, c_keepalive(t.lease)).status, FENCE_ST_OK);
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, t.lease, 565, &li), 0);
    x.nev = 0;
    CHECK_EQ_U64(run(&x, 572, c_keepalive(q.lease)).status, FENCE_ST_OK);
    REQUIRE(x.nev == 1);
    CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_NIL);
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, t.lease, 572, &li),
                 FENCE_ST_NOLEASE);
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.leases, 1);
    CHECK_EQ_U64(st.waiters, 0);
    fx_done(&x);
}

static void test_cancel(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 10000, 0);
    uint64_t b = lease(&x, 0, 10000, 0);
    fence_result r = run(&x, 0, c_lock("c", a, 0));
    fence_result q = run(&x, 1, c_lock("c", b, 1000));
    fence_result qa = run(&x, 2, c_acquire("c", 1000, 0, 1000));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    REQUIRE(qa.status == FENCE_ST_QUEUED);
    x.nev = 0;
    CHECK_EQ_U64(run(&x, 3, c_cancel(q.wait_id)).status, FENCE_ST_OK);
    REQUIRE(x.nev == 1);
    CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_NIL);
    CHECK_EQ_U64(run(&x, 4, c_cancel(q.wait_id)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(&x, 4, c_cancel(9999)).status, FENCE_ST_OK);
    CHECK_EQ_I64(x.nev, 1);
    run(&x, 5, c_cancel(qa.wait_id));
    CHECK_EQ_I64(x.nev, 2);
    fence_fsm_lease_state li;
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, qa.lease, 5, &li),
                 FENCE_ST_NOLEASE);
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, b, 5, &li), 0);
    fence_fsm_lock_state ki;
    REQUIRE(lock_held(&x, "c", &ki));
    CHECK_EQ_U64(ki.token, r.token);
    CHECK_EQ_U64(ki.waiters, 0);
    /* A cancelled request with a REQID is forgotten: the client's retry
     * (same REQID, same request) queues afresh rather than getting nil. */
    fence_result w1 = run(&x, 6, with_req(c_lock("c", b, 1000), 55));
    REQUIRE(w1.status == FENCE_ST_QUEUED);
    run(&x, 7, c_cancel(w1.wait_id));
    fence_result w2 = run(&x, 8, with_req(c_lock("c", b, 1000), 55));
    CHECK_EQ_U64(w2.status, FENCE_ST_QUEUED);
    CHECK(w2.wait_id != w1.wait_id);
    fx_done(&x);
}

static void test_revoke_fails_waits_and_hands_off(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 10000, 100);
    uint64_t b = lease(&x, 0, 10000, 0);
    run(&x, 0, c_lock("p", a, 0));
    run(&x, 0, c_lock("q", b, 0));
    fence_result qa = run(&x, 1, c_lock("q", a, 1000));
    fence_result qb = run(&x, 1, c_lock("p", b, 1000));
    x.nev = 0;
    run(&x, 2, c_revoke(a));
    REQUIRE(x.nev == 2);
    CHECK_EQ_U64(x.ev[0].wait_id, qb.wait_id);
    CHECK_EQ_U64(x.ev[0].result.status, FENCE_ST_OK);
    CHECK_EQ_U64(x.ev[1].wait_id, qa.wait_id);
    CHECK_EQ_U64(x.ev[1].result.status, FENCE_ST_NOLEASE);
    fx_done(&x);
}

/* ---- Dedup -------------------------------------------------------------------- */

static void test_reqid_idempotent(void)
{
    fx x;
    fx_init(&x);
    fence_result g1 = run(&x, 0, with_req(c_grant(1000, 0), 77));
    fence_result g2 = run(&x, 5, with_req(c_grant(1000, 0), 77));
    CHECK_EQ_U64(g1.lease, g2.lease);
    fence_fsm_stats st;
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.leases, 1);
    uint64_t other = lease(&x, 5, 1000, 0);
    fence_result l1 = run(&x, 6, with_req(c_lock("z", other, 0), 78));
    REQUIRE(l1.status == FENCE_ST_OK);
    /* Queued, then granted: a retry sees the grant. */
    fence_result q1 = run(&x, 7, with_req(c_lock("z", g1.lease, 500), 79));
    REQUIRE(q1.status == FENCE_ST_QUEUED);
    fence_result q2 = run(&x, 8, with_req(c_lock("z", g1.lease, 500), 79));
    CHECK_EQ_U64(q2.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(q2.wait_id, q1.wait_id);
    run(&x, 9, c_unlock("z", l1.token));
    fence_result q3 = run(&x, 10, with_req(c_lock("z", g1.lease, 500), 79));
    CHECK_EQ_U64(q3.status, FENCE_ST_OK);
    CHECK_EQ_U64(q3.token, l1.token + 1);
    CHECK_EQ_U64(q3.wait_id, q1.wait_id);
    /* The unlock by token is idempotent by meaning. */
    CHECK_EQ_U64(run(&x, 11, c_unlock("z", l1.token)).value, 0);
    /* ACQUIRE retried after its grant: the same token and lease. */
    fence_result a1 = run(&x, 12, with_req(c_acquire("w", 100, 0, 0), 80));
    fence_result a2 = run(&x, 13, with_req(c_acquire("w", 100, 0, 0), 80));
    CHECK_EQ_U64(a1.token, a2.token);
    CHECK_EQ_U64(a1.lease, a2.lease);
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.leases, 3);
    fx_done(&x);
}

/* A request id reused for a different request is refused: it must never
 * hand one client another request's token or lease. */
static void test_reqid_reuse_refused(void)
{
    fx x;
    fx_init(&x);
    fence_result a1 = run(&x, 0, with_req(c_acquire("w", 100, 0, 0), 90));
    REQUIRE(a1.status == FENCE_ST_OK);
    /* Same id, another lock: refused, nothing granted. */
    fence_result a2 = run(&x, 1, with_req(c_acquire("v", 100, 0, 0), 90));
    CHECK_EQ_U64(a2.status, FENCE_ST_INVALID);
    CHECK_EQ_U64(a2.token, 0);
    CHECK_EQ_U64(a2.lease, 0);
    CHECK(!lock_held(&x, "v", NULL));
    /* Same id, another command type: refused. */
    fence_result g = run(&x, 2, with_req(c_grant(1000, 0), 90));
    CHECK_EQ_U64(g.status, FENCE_ST_INVALID);
    CHECK_EQ_U64(g.lease, 0);
    /* The original request retried still gets its result. */
    fence_result a3 = run(&x, 3, with_req(c_acquire("w", 100, 0, 0), 90));
    CHECK_EQ_U64(a3.status, FENCE_ST_OK);
    CHECK_EQ_U64(a3.token, a1.token);
    CHECK_EQ_U64(a3.lease, a1.lease);
    CHECK_EQ_U64(fence_fsm_last_token(x.f), a1.token);
    fx_done(&x);
}

static void test_dedup_eviction(void)
{
    fx x;
    fx_init(&x);
    run(&x, 0, c_leader(100, 100, 100, 3));
    for (uint64_t i = 1; i <= 5; i++) {
        run(&x, i, with_req(c_grant(1000, 0), i));
    }
    /* 1 and 2 were evicted: retrying 1 makes a new lease; 5 is remembered. */
    CHECK_EQ_U64(run(&x, 6, with_req(c_grant(1000, 0), 5)).lease, 5);
    CHECK_EQ_U64(run(&x, 7, with_req(c_grant(1000, 0), 1)).lease, 6);
    /* Lowering the limit evicts at once. */
    run(&x, 8, c_leader(100, 100, 100, 1));
    CHECK_EQ_U64(run(&x, 9, with_req(c_grant(1000, 0), 5)).lease, 7);
    fx_done(&x);
}

/* ---- LEADER_START ------------------------------------------------------------ */

static void test_leader_start_rebase(void)
{
    fx x;
    fx_init(&x);
    fence_limits lim;
    fence_limits_default(&lim);
    uint64_t a = lease(&x, 0, 1000, 200);
    uint64_t b = lease(&x, 0, 5000, 0);
    run(&x, 0, c_lock("L", a, 0));
    fence_result q = run(&x, 0, c_lock("L", b, 3000));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    /* New leader far ahead in time: nothing fires, everything restarts. */
    fence_cmd ls = c_leader(lim.leases_max, lim.locks_max, lim.waiters_max,
                            lim.dedup_max);
    x.nev = 0;
    CHECK_EQ_U64(run(&x, 1000000, ls).status, FENCE_ST_OK);
    CHECK_EQ_I64(x.nev, 0);
    fence_fsm_lease_state li;
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, a, 1000000, &li), 0);
    CHECK_EQ_U64(li.deadline_ms, 1001000);
    CHECK_EQ_U64(fence_fsm_next_deadline(x.f), 1001000);
    run(&x, 1001000, c_tick());
    /* a expired with lock-delay 200: granted to b at 1001200. */
    CHECK_EQ_I64(x.nev, 0);
    run(&x, 1001200, c_tick());
    REQUIRE(x.nev == 1);
    CHECK_EQ_U64(x.ev[0].result.lease, b);
    /* Rebase of a lock-delay and a queued ACQUIRE. */
    uint64_t c = lease(&x, 1001300, 100, 400);
    run(&x, 1001300, c_lock("M", c, 0));
    run(&x, 1001400, c_tick()); /* delay until 1001800 */
    fence_result aq = run(&x, 1001401, c_acquire("M", 50, 0, 1000));
    REQUIRE(aq.status == FENCE_ST_QUEUED);
    run(&x, 1001500, ls); /* delay end -> 1001900, wait -> 1002500 */
    CHECK_EQ_U64(fence_fsm_next_deadline(x.f), 1001900);
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, aq.lease, 1001500, &li), 0);
    CHECK_EQ_U64(li.deadline_ms, 1002500);
    /* INVALID limits change nothing. */
    CHECK_EQ_U64(run(&x, 1001501, c_leader(0, 1, 1, 1)).status,
                 FENCE_ST_INVALID);
    fence_cmd no_waits = c_leader(1, 1, 1, 1);
    no_waits.limits.waits_max = 0;
    CHECK_EQ_U64(run(&x, 1001501, no_waits).status, FENCE_ST_INVALID);
    /* A leader whose clock is behind does not move time backwards. */
    run(&x, 5, ls);
    CHECK_EQ_U64(fence_fsm_now(x.f), 1001501);
    fx_done(&x);
}

/* ---- Limits and bad input ----------------------------------------------------- */

static void test_limits(void)
{
    fx x;
    fx_init(&x);
    run(&x, 0, c_leader(2, 2, 1, 10));
    uint64_t a = lease(&x, 0, 1000, 0);
    uint64_t b = lease(&x, 0, 1000, 0);
    CHECK_EQ_U64(run(&x, 0, c_grant(1000, 0)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(&x, 0, c_acquire("zz", 1000, 0, 0)).status,
                 FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(&x, 0, c_lock("l1", a, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(&x, 0, c_lock("l2", a, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(&x, 0, c_lock("l3", a, 0)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(&x, 0, c_lock("l1", b, 100)).status, FENCE_ST_QUEUED);
    run(&x, 0, c_revoke(b));
    uint64_t c = lease(&x, 0, 1000, 0);
    CHECK_EQ_U64(run(&x, 0, c_lock("l1", c, 100)).status, FENCE_ST_QUEUED);
    uint64_t d = 0;
    run(&x, 0, c_revoke(a));
    (void)d;
    fx_done(&x);
}

static void test_waiters_limit(void)
{
    fx x;
    fx_init(&x);
    run(&x, 0, c_leader(10, 10, 2, 10));
    uint64_t l[4];
    for (int i = 0; i < 4; i++) {
        l[i] = lease(&x, 0, 1000, 0);
    }
    run(&x, 0, c_lock("w", l[0], 0));
    CHECK_EQ_U64(run(&x, 0, c_lock("w", l[1], 10)).status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(&x, 0, c_lock("w", l[2], 10)).status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(&x, 0, c_lock("w", l[3], 10)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(&x, 0, c_acquire("w", 100, 0, 10)).status,
                 FENCE_ST_LIMIT);
    fence_fsm_stats st;
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.leases, 4);
    fx_done(&x);
}

/* waits_max bounds the waits across all locks: a LOCK or ACQUIRE that
 * would queue one more answers LIMIT (an ACQUIRE consumes no lease). */
static void test_waits_limit(void)
{
    fx x;
    fx_init(&x);
    fence_cmd ls = c_leader(10, 10, 10, 10);
    ls.limits.waits_max = 2;
    CHECK_EQ_U64(run(&x, 0, ls).status, FENCE_ST_OK);
    uint64_t h = lease(&x, 0, 1000, 0);
    uint64_t w = lease(&x, 0, 1000, 0);
    run(&x, 0, c_lock("a", h, 0));
    run(&x, 0, c_lock("b", h, 0));
    run(&x, 0, c_lock("c", h, 0));
    CHECK_EQ_U64(run(&x, 0, c_lock("a", w, 10)).status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(&x, 0, c_lock("b", w, 10)).status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(&x, 0, c_lock("c", w, 10)).status, FENCE_ST_LIMIT);
    CHECK_EQ_U64(run(&x, 0, c_acquire("c", 100, 0, 10)).status,
                 FENCE_ST_LIMIT);
    fence_fsm_stats st;
    fence_fsm_stats_get(x.f, &st);
    CHECK_EQ_U64(st.leases, 2);
    CHECK_EQ_U64(st.waiters, 2);
    /* Once a wait ends, there is room again. */
    run(&x, 10, c_tick());
    CHECK_EQ_U64(run(&x, 10, c_lock("c", w, 10)).status, FENCE_ST_QUEUED);
    fx_done(&x);
}

static void test_invalid_inputs(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = lease(&x, 0, 1000, 0);
    char big[FENCE_NAME_MAX + 2];
    memset(big, 'n', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    CHECK_EQ_U64(run(&x, 0, c_grant(FENCE_TTL_MS_MIN - 1, 0)).status,
                 FENCE_ST_INVALID);
    CHECK_EQ_U64(run(&x, 0, c_grant(FENCE_TTL_MS_MAX + 1, 0)).status,
                 FENCE_ST_INVALID);
    CHECK_EQ_U64(run(&x, 0, c_grant(100, FENCE_LOCK_DELAY_MS_MAX + 1)).status,
                 FENCE_ST_INVALID);
    CHECK_EQ_U64(run(&x, 0, c_lock("", a, 0)).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(&x, 0, c_lock(big, a, 0)).status, FENCE_ST_INVALID);
    big[FENCE_NAME_MAX] = 0;
    CHECK_EQ_U64(run(&x, 0, c_lock(big, a, 0)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(&x, 0, c_lock("x", a, FENCE_WAIT_MS_MAX + 1)).status,
                 FENCE_ST_INVALID);
    CHECK_EQ_U64(run(&x, 0, c_unlock("", 1)).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(&x, 0, c_acquire("x", 5, 0, 0)).status,
                 FENCE_ST_INVALID);
    CHECK_EQ_U64(run(&x, 0, c_acquire("x", 100, 0, FENCE_WAIT_MS_MAX + 1))
                     .status, FENCE_ST_INVALID);
    fence_cmd bad = {.type = 42};
    CHECK_EQ_U64(run(&x, 0, bad).status, FENCE_ST_INVALID);
    fence_cmd badf = c_tick();
    badf.flags = 0x80;
    CHECK_EQ_U64(run(&x, 0, badf).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(&x, 0, c_lock("x", 0, 0)).status, FENCE_ST_NOLEASE);
    CHECK_EQ_U64(fence_fsm_last_token(x.f), 1);
    fx_done(&x);
}

/* Run the allocation-failure scenario with budget allocations allowed
 * (counted from the start, fence_fsm_create included), in this process.
 * Returns only when the state machine survived: then its snapshot is
 * compared with the reference (budget < 0) run's. */
static void alloc_scenario(long budget, uint8_t **snap_out, size_t *len_out)
{
    fx x;
    memset(&x, 0, sizeof(x));
    x.ta.budget = budget;
    fence_fsm_opts o = {{t_alloc, t_free, &x.ta}};
    if (fence_fsm_create(&o, &x.f) != 0) {
        /* Create may fail; it leaves nothing behind. */
        CHECK(x.f == NULL);
        CHECK_EQ_I64(x.ta.live, 0);
        *snap_out = NULL;
        *len_out = 0;
        return;
    }
    /* A snapshot restored into the fresh state machine may fail too. */
    fx y;
    fx_init(&y);
    run(&y, 0, c_grant(5000, 0));
    run(&y, 0, c_lock("s", 1, 0));
    size_t n0 = fence_fsm_snapshot_size(y.f);
    uint8_t *s0 = malloc(n0);
    REQUIRE(s0 != NULL);
    fence_fsm_snapshot(y.f, s0, n0);
    fx_done(&y);
    int rc = fence_fsm_restore(x.f, s0, n0);
    free(s0);
    CHECK(rc == 0 || rc == FENCE_ST_LIMIT);
    CHECK(fence_fsm_check(x.f) == NULL);
    if (rc != 0) {
        fence_fsm_destroy(x.f);
        CHECK_EQ_I64(x.ta.live, 0);
        *snap_out = NULL;
        *len_out = 0;
        return;
    }
    fence_result r;
    fence_cmd cmds[] = {
        c_grant(1000, 0), c_grant(1000, 10), c_lock("a", 2, 0),
        c_lock("a", 3, 100), c_acquire("b", 100, 0, 0),
        c_acquire("a", 100, 0, 100), with_req(c_grant(100, 0), 9),
        c_lock("c", 3, 0), c_unlock("a", 2), c_revoke(3),
    };
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        fence_fsm_apply(x.f, i, &cmds[i], &r);
        take_events(&x);
        CHECK(r.status != FENCE_ST_INVALID);
        CHECK(r.status != FENCE_ST_LIMIT);
        CHECK(fence_fsm_check(x.f) == NULL);
    }
    size_t n = fence_fsm_snapshot_size(x.f);
    uint8_t *buf = malloc(n);
    REQUIRE(buf != NULL);
    fence_fsm_snapshot(x.f, buf, n);
    /* A restore into the live state machine. */
    REQUIRE(fence_fsm_restore(x.f, buf, n) == 0);
    CHECK(fence_fsm_check(x.f) == NULL);
    fence_fsm_destroy(x.f);
    CHECK_EQ_I64(x.ta.live, 0);
    *snap_out = buf;
    *len_out = n;
}

/* The reference run's final snapshot, for alloc_child. */
static const uint8_t *alloc_ref;
static size_t alloc_ref_len;

/* The child's side of one budget: exits 10 when the failure was reported
 * (nothing to compare), 1 on a failed check, 0 when it ran to the end
 * with the reference's state. */
static void alloc_child(void *arg)
{
    test__failures_in_case = 0;
    uint8_t *s = NULL;
    size_t n = 0;
    alloc_scenario(*(const long *)arg, &s, &n);
    if (s != NULL) {
        CHECK(n == alloc_ref_len && memcmp(s, alloc_ref, n) == 0);
    }
    bool reported = s == NULL;
    free(s);
    fflush(stdout);
    _exit(test__failures_in_case ? 1 : reported ? 10 : 0);
}

/* Every allocation failure, wherever it happens, either is reported
 * (fence_fsm_create, a restore into a fresh state machine: nothing
 * changed, nothing leaked) or stops the process with "fatal: out of memory
 * while ..." (inside apply, and a restore into a live state machine); an
 * allocation failure never becomes a reply.  Each budget runs in a child
 * with its stderr in a pipe. */
static void test_alloc_failures(void)
{
    uint8_t *ref = NULL;
    size_t ref_len = 0;
    alloc_scenario(-1, &ref, &ref_len);
    REQUIRE(ref != NULL);
    alloc_ref = ref;
    alloc_ref_len = ref_len;
    long stopped = 0, reported = 0, survived = 0;
    for (long budget = 0; budget < 80; budget++) {
        char err[512];
        int status = fork_case(alloc_child, &budget, err, sizeof(err));
        if (stopped_for_oom(status, err)) {
            stopped++;
        } else if (exited_with(status, 10)) {
            reported++;
        } else if (exited_with(status, 0)) {
            survived++;
        } else {
            printf("#   budget %ld: status 0x%x: %s\n", budget,
                   (unsigned)status, err);
            CHECK(0);
        }
    }
    printf("# 80 budgets: %ld reported, %ld stopped, %ld ran to the end\n",
           reported, stopped, survived);
    CHECK(reported > 0);
    CHECK(stopped > 0);
    CHECK(survived > 0);
    free(ref);
}

/* ---- Snapshots ------------------------------------------------------------------ */

/* Build a state with every kind of object. */
static void build_state(fx *x)
{
    run(x, 0, c_leader(1000, 1000, 100, 100));
    uint64_t a = lease(x, 1, 1000, 300);
    uint64_t b = lease(x, 2, 5000, 0);
    uint64_t c = lease(x, 3, 5000, 0);
    run(x, 4, c_lock("alpha", a, 0));
    run(x, 5, c_lock("beta", a, 0));
    run(x, 6, with_req(c_lock("alpha", b, 4000), 1001));
    run(x, 7, c_lock("beta", c, 4000));
    run(x, 8, c_lock("gamma", c, 0));
    run(x, 9, with_req(c_acquire("gamma", 100, 0, 2000), 1002));
    run(x, 10, with_req(c_grant(100, 0), 1003));
    uint64_t d = lease(x, 11, 50, 2000);
    run(x, 12, c_lock("delta", d, 0));
    run(x, 70, c_tick()); /* d expired: delta in lock-delay */
}

static uint8_t *snap(fx *x, size_t *len)
{
    *len = fence_fsm_snapshot_size(x->f);
    uint8_t *b = malloc(*len);
    REQUIRE(b != NULL);
    CHECK_EQ_U64(fence_fsm_snapshot(x->f, b, *len), *len);
    return b;
}

static void test_snapshot_round_trip(void)
{
    fx x, y;
    fx_init(&x);
    fx_init(&y);
    build_state(&x);
    size_t n1, n2;
    uint8_t *s1 = snap(&x, &n1);
    REQUIRE(fence_fsm_restore(y.f, s1, n1) == 0);
    REQUIRE(fence_fsm_check(y.f) == NULL);
    uint8_t *s2 = snap(&y, &n2);
    REQUIRE(n1 == n2);
    CHECK(memcmp(s1, s2, n1) == 0);
    /* Both go on identically. */
    x.nev = y.nev = 0;
    fence_cmd more[] = {c_tick(), c_unlock("gamma", 5), c_revoke(2),
                        c_lock("omega", 3, 0), c_keepalive(1)};
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
        fence_result rx = run(&x, 200 + i * 700, more[i]);
        fence_result ry = run(&y, 200 + i * 700, more[i]);
        CHECK(memcmp(&rx, &ry, sizeof(rx)) == 0);
    }
    CHECK_EQ_I64(x.nev, y.nev);
    CHECK(memcmp(x.ev, y.ev, sizeof(fence_event) * (size_t)x.nev) == 0);
    free(s1);
    free(s2);
    s1 = snap(&x, &n1);
    s2 = snap(&y, &n2);
    REQUIRE(n1 == n2);
    CHECK(memcmp(s1, s2, n1) == 0);
    free(s1);
    free(s2);
    fx_done(&x);
    fx_done(&y);
}

/* Recompute the trailing CRC so that structural checks are reached. */
static void reseal(uint8_t *b, size_t n)
{
    uint32_t crc = fence__crc32c(b, n - 4);
    for (int i = 0; i < 4; i++) {
        b[n - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
    }
}

static void test_snapshot_corrupt_rejected(void)
{
    fx x, y;
    fx_init(&x);
    fx_init(&y);
    build_state(&x);
    run(&y, 0, c_grant(100, 0)); /* y has a state of its own */
    size_t n, ny;
    uint8_t *s = snap(&x, &n);
    uint8_t *before = snap(&y, &ny);
    uint8_t *m = malloc(n);
    int accepted = 0;
    for (size_t len = 0; len < n; len++) {
        CHECK_EQ_I64(fence_fsm_restore(y.f, s, len), FENCE_ST_INVALID);
    }
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            memcpy(m, s, n);
            m[i] ^= (uint8_t)(1u << bit);
            CHECK_EQ_I64(fence_fsm_restore(y.f, m, n), FENCE_ST_INVALID);
            reseal(m, n);
            int rc = fence_fsm_restore(y.f, m, n);
            CHECK(rc == 0 || rc == FENCE_ST_INVALID);
            if (rc == 0) {
                accepted++;
                CHECK(fence_fsm_check(y.f) == NULL);
                /* put y back */
                REQUIRE(fence_fsm_restore(y.f, before, ny) == 0);
            }
        }
    }
    size_t na;
    uint8_t *after = snap(&y, &na);
    CHECK(na == ny && memcmp(before, after, ny) == 0);
    printf("# %d resealed single-bit mutations were still valid states\n",
           accepted);
    free(s);
    free(m);
    free(before);
    free(after);
    fx_done(&x);
    fx_done(&y);
}

/* ---- Entries --------------------------------------------------------------------- */

static void test_entry_round_trip(void)
{
    fence_cmd cmds[] = {
        c_leader(1, 2, 3, 4),
        c_tick(),
        with_req(c_grant(1000, 20), 0xdeadbeefULL),
        c_keepalive(7),
        c_revoke(8),
        c_lock("name-1", 9, 100),
        c_unlock("name-2", 10),
        with_req(c_acquire("n3", 11, 12, 13), 1),
        c_cancel(14),
    };
    uint32_t n = sizeof(cmds) / sizeof(cmds[0]);
    size_t sz = fence_entry_size(cmds, n);
    uint8_t *buf = malloc(sz);
    CHECK_EQ_U64(fence_entry_encode(123456, cmds, n, buf, sz - 1), 0);
    CHECK_EQ_U64(fence_entry_encode(123456, cmds, n, buf, sz), sz);
    fence_entry_iter it;
    REQUIRE(fence_entry_open(&it, buf, sz) == 0);
    CHECK_EQ_U64(it.timestamp_ms, 123456);
    CHECK_EQ_U64(it.count, n);
    fence_cmd c;
    for (uint32_t i = 0; i < n; i++) {
        REQUIRE(fence_entry_next(&it, &c) == 1);
        CHECK_EQ_U64(c.type, cmds[i].type);
        CHECK_EQ_U64(c.flags, cmds[i].flags);
        CHECK_EQ_U64(c.req_id, cmds[i].req_id);
        CHECK_EQ_U64(c.lease, cmds[i].lease);
        CHECK_EQ_U64(c.token, cmds[i].token);
        CHECK_EQ_U64(c.wait_id, cmds[i].wait_id);
        CHECK_EQ_U64(c.ttl_ms, cmds[i].ttl_ms);
        CHECK_EQ_U64(c.wait_ms, cmds[i].wait_ms);
        CHECK_EQ_U64(c.lock_delay_ms, cmds[i].lock_delay_ms);
        CHECK_EQ_U64(c.name_len, cmds[i].name_len);
        CHECK(c.name_len == 0 || memcmp(c.name, cmds[i].name, c.name_len) == 0);
        CHECK(memcmp(&c.limits, &cmds[i].limits, sizeof(c.limits)) == 0);
        /* re-encode one command: identical bytes */
        uint8_t one[600], two[600];
        size_t l1 = fence_entry_encode(1, &c, 1, one, sizeof(one));
        size_t l2 = fence_entry_encode(1, &cmds[i], 1, two, sizeof(two));
        CHECK(l1 == l2 && l1 > 0 && memcmp(one, two, l1) == 0);
    }
    CHECK_EQ_I64(fence_entry_next(&it, &c), 0);
    /* Every truncation is rejected, by open or by a later next. */
    for (size_t len = 0; len < sz; len++) {
        int ok = fence_entry_open(&it, buf, len) == 0;
        int rc = 1;
        while (ok && (rc = fence_entry_next(&it, &c)) == 1) {
        }
        CHECK(!ok || rc == -FENCE_ST_INVALID);
    }
    /* Trailing garbage is rejected. */
    uint8_t *longer = malloc(sz + 1);
    memcpy(longer, buf, sz);
    longer[sz] = 0;
    REQUIRE(fence_entry_open(&it, longer, sz + 1) == 0);
    int rc;
    while ((rc = fence_entry_next(&it, &c)) == 1) {
    }
    CHECK_EQ_I64(rc, -FENCE_ST_INVALID);
    free(longer);
    free(buf);
}

/* Logs and snapshots written before the global bound on waits still
 * load: a version-1 entry's LEADER_START decodes with waits_max =
 * UINT32_MAX (no bound, what it meant), and a version-2 snapshot restores
 * with the same. */
static void test_old_versions_load(void)
{
    /* Version 1: u8 1 | u64 ts | u32 1 | LEADER_START (type 1, flags 0,
     * req_id 0) | 4 x u32 limits. */
    uint8_t v1[13 + 10 + 16];
    memset(v1, 0, sizeof(v1));
    v1[0] = 1;
    v1[1] = 7; /* timestamp 7 */
    v1[9] = 1; /* one command */
    v1[13] = FENCE_CMD_LEADER_START;
    const uint32_t lim[4] = {5, 6, 7, 8};
    for (int i = 0; i < 4; i++) {
        v1[23 + 4 * i] = (uint8_t)lim[i];
    }
    fence_entry_iter it;
    REQUIRE(fence_entry_open(&it, v1, sizeof(v1)) == 0);
    CHECK_EQ_U64(it.version, 1);
    CHECK_EQ_U64(it.timestamp_ms, 7);
    fence_cmd c;
    REQUIRE(fence_entry_next(&it, &c) == 1);
    CHECK_EQ_U64(c.limits.leases_max, 5);
    CHECK_EQ_U64(c.limits.locks_max, 6);
    CHECK_EQ_U64(c.limits.waiters_max, 7);
    CHECK_EQ_U64(c.limits.dedup_max, 8);
    CHECK_EQ_U64(c.limits.waits_max, UINT32_MAX);
    CHECK_EQ_I64(fence_entry_next(&it, &c), 0);
    fx x;
    fx_init(&x);
    fence_result r;
    CHECK_EQ_I64(fence_fsm_apply_entry(x.f, v1, sizeof(v1), &r, 1), 1);
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    /* A version-3 snapshot: the version-4 one without the owners (one
     * lease of owner 0, no waits, no dedup records); a version-2 one: the
     * version-3 one without waits_max.  Both restore to the same state. */
    uint64_t l = lease(&x, 10, 1000, 0);
    run(&x, 10, c_lock("old", l, 0));
    size_t n5 = fence_fsm_snapshot_size(x.f);
    uint8_t *v5 = malloc(n5);
    REQUIRE(v5 != NULL);
    REQUIRE(fence_fsm_snapshot(x.f, v5, n5) == n5);
    CHECK_EQ_U64(v5[4], 5);
    /* A version-4 snapshot: the version-5 one without the kinds' (empty)
     * sections before the CRC. */
    size_t n4 = n5 - SNAP_KINDS_EMPTY;
    uint8_t *v4 = malloc(n4);
    REQUIRE(v4 != NULL);
    memcpy(v4, v5, n4 - 4);
    v4[4] = 4;
    reseal(v4, n4);
    fx w;
    fx_init(&w);
    REQUIRE(fence_fsm_restore(w.f, v4, n4) == 0);
    uint8_t *again5 = malloc(n5);
    REQUIRE(again5 != NULL);
    REQUIRE(fence_fsm_snapshot_size(w.f) == n5);
    fence_fsm_snapshot(w.f, again5, n5);
    CHECK(memcmp(again5, v5, n5) == 0);
    free(again5);
    fx_done(&w);
    /* Header 4 + 4 + 32 + 20, lease count 4, then the lease: 33 bytes and
     * its owner. */
    size_t owner_at = 4 + 4 + 32 + 20 + 4 + 33;
    size_t n = n4 - 8;
    uint8_t *v3 = malloc(n);
    REQUIRE(v3 != NULL);
    memcpy(v3, v4, owner_at);
    memcpy(v3 + owner_at, v4 + owner_at + 8, n4 - owner_at - 8);
    v3[4] = 3;
    uint32_t crc3 = fence__crc32c(v3, n - 4);
    for (int i = 0; i < 4; i++) {
        v3[n - 4 + (size_t)i] = (uint8_t)(crc3 >> (8 * i));
    }
    fx z;
    fx_init(&z);
    REQUIRE(fence_fsm_restore(z.f, v3, n) == 0);
    REQUIRE(fence_fsm_snapshot_size(z.f) == n5);
    uint8_t *again4 = malloc(n5);
    REQUIRE(again4 != NULL);
    fence_fsm_snapshot(z.f, again4, n5);
    CHECK(memcmp(again4, v5, n5) == 0);
    free(again4);
    fx_done(&z);
    /* The limits start at byte 4 + 4 + 32; waits_max is the fifth u32. */
    size_t at = 4 + 4 + 32 + 16;
    CHECK_EQ_U64(v3[at] & v3[at + 1] & v3[at + 2] & v3[at + 3], 0xff);
    uint8_t *v2 = malloc(n - 4);
    REQUIRE(v2 != NULL);
    memcpy(v2, v3, at);
    memcpy(v2 + at, v3 + at + 4, n - at - 4);
    v2[4] = 2;
    uint32_t crc = fence__crc32c(v2, n - 8);
    for (int i = 0; i < 4; i++) {
        v2[n - 8 + (size_t)i] = (uint8_t)(crc >> (8 * i));
    }
    fx y;
    fx_init(&y);
    REQUIRE(fence_fsm_restore(y.f, v2, n - 4) == 0);
    uint8_t *again = malloc(n5);
    REQUIRE(again != NULL);
    REQUIRE(fence_fsm_snapshot_size(y.f) == n5);
    fence_fsm_snapshot(y.f, again, n5);
    CHECK(memcmp(again, v5, n5) == 0);
    free(again);
    free(v2);
    free(v3);
    free(v4);
    free(v5);
    fx_done(&y);
    fx_done(&x);
}

/* Command c as owner o (admin: with FENCE_CMD_F_ADMIN). */
static fence_cmd as(fence_cmd c, uint64_t o, bool admin)
{
    c.owner = o;
    if (admin)
        c.flags |= FENCE_CMD_F_ADMIN;
    return c;
}

/* Owners: another owner's KEEPALIVE, REVOKE, LOCK and UNLOCK get NOPERM
 * and change nothing; an admin may; request ids are scoped to the owner;
 * owners survive the entry codec and a snapshot. */
static void test_owners(void)
{
    fx x;
    fx_init(&x);
    fence_result g = run(&x, 10, as(c_grant(1000, 0), 7, false));
    REQUIRE(g.status == FENCE_ST_OK);
    uint64_t l = g.lease;
    fence_fsm_lease_state ls;
    REQUIRE(fence_fsm_lease_info(x.f, l, 10, &ls) == 0);
    CHECK_EQ_U64(ls.owner, 7);
    fence_result t = run(&x, 11, as(c_lock("orders", l, 0), 7, false));
    REQUIRE(t.status == FENCE_ST_OK);
    CHECK_EQ_U64(run(&x, 12, as(c_keepalive(l), 8, false)).status, FENCE_ST_NOPERM);
    CHECK_EQ_U64(run(&x, 12, as(c_revoke(l), 8, false)).status, FENCE_ST_NOPERM);
    CHECK_EQ_U64(run(&x, 12, as(c_lock("other", l, 0), 8, false)).status, FENCE_ST_NOPERM);
    CHECK_EQ_U64(run(&x, 12, as(c_unlock("orders", t.token), 8, false)).status,
                 FENCE_ST_NOPERM);
    /* A wrong token still answers 0 (no hint that the lock is someone's). */
    fence_result u0 = run(&x, 12, as(c_unlock("orders", t.token + 1), 8, false));
    CHECK_EQ_U64(u0.status, FENCE_ST_OK);
    CHECK_EQ_U64(u0.value, 0);
    /* Nothing changed: the lock is still the owner's. */
    fence_fsm_lock_state ks;
    REQUIRE(fence_fsm_lock_info(x.f, (const uint8_t *)"orders", 6, &ks));
    CHECK_EQ_U64(ks.token, t.token);
    CHECK_EQ_U64(ks.owner, 7);
    CHECK(!fence_fsm_lock_info(x.f, (const uint8_t *)"other", 5, &ks));
    /* The owner and an admin may. */
    CHECK_EQ_U64(run(&x, 13, as(c_keepalive(l), 7, false)).status, FENCE_ST_OK);
    CHECK_EQ_U64(run(&x, 13, as(c_keepalive(l), 9, true)).status, FENCE_ST_OK);
    /* Request ids: the same id for two owners are two requests. */
    fence_cmd a = as(c_grant(1000, 0), 7, false);
    a.flags |= FENCE_CMD_F_REQID;
    a.req_id = 42;
    fence_cmd b = a;
    b.owner = 8;
    fence_result ra = run(&x, 14, a);
    fence_result rb = run(&x, 14, b);
    CHECK(ra.status == FENCE_ST_OK && rb.status == FENCE_ST_OK);
    CHECK(ra.lease != rb.lease);
    CHECK_EQ_U64(run(&x, 14, a).lease, ra.lease); /* a retry of each */
    CHECK_EQ_U64(run(&x, 14, b).lease, rb.lease);
    /* The codec carries owner and the admin flag. */
    fence_cmd cmds[] = {as(c_revoke(l), 9, true), as(c_keepalive(l), 7, false)};
    uint8_t buf[256];
    size_t n = fence_entry_encode(20, cmds, 2, buf, sizeof(buf));
    REQUIRE(n > 0);
    fence_entry_iter it;
    REQUIRE(fence_entry_open(&it, buf, n) == 0);
    CHECK_EQ_U64(it.version, 3); /* no quotas: version 3 (entry.h) */
    fence_cmd d;
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.owner, 9);
    CHECK_EQ_U64(d.flags, FENCE_CMD_F_ADMIN);
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.owner, 7);
    CHECK_EQ_U64(d.flags, 0);
    /* A version-2 entry may not carry the admin flag. */
    uint8_t v2[1 + 8 + 4 + 1 + 1 + 8 + 8] = {2};
    v2[9] = 1;
    v2[13] = FENCE_CMD_LEASE_REVOKE;
    v2[14] = FENCE_CMD_F_ADMIN;
    REQUIRE(fence_entry_open(&it, v2, sizeof(v2)) == 0);
    CHECK_EQ_I64(fence_entry_next(&it, &d), -FENCE_ST_INVALID);
    v2[14] = 0;
    REQUIRE(fence_entry_open(&it, v2, sizeof(v2)) == 0);
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.owner, 0);
    /* A snapshot keeps owners and scoped request ids. */
    fx y;
    fx_init(&y);
    size_t n1, n2;
    uint8_t *s1 = snap(&x, &n1);
    REQUIRE(fence_fsm_restore(y.f, s1, n1) == 0);
    uint8_t *s2 = snap(&y, &n2);
    CHECK(n1 == n2 && memcmp(s1, s2, n1) == 0);
    CHECK_EQ_U64(run(&y, 15, as(c_revoke(l), 8, false)).status, FENCE_ST_NOPERM);
    CHECK_EQ_U64(run(&y, 15, b).lease, rb.lease);
    free(s1);
    free(s2);
    fx_done(&y);
    fx_done(&x);
}

static void test_apply_entry(void)
{
    fx x;
    fx_init(&x);
    fence_cmd cmds[] = {c_grant(1000, 0), c_lock("e", 1, 0),
                        c_lock("e", 1, 0)};
    uint8_t buf[256];
    size_t n = fence_entry_encode(50, cmds, 3, buf, sizeof(buf));
    REQUIRE(n > 0);
    fence_result res[2];
    CHECK_EQ_I64(fence_fsm_apply_entry(x.f, buf, n, res, 2), 3);
    CHECK_EQ_U64(res[0].lease, 1);
    CHECK_EQ_U64(res[1].token, 1);
    CHECK_EQ_U64(fence_fsm_now(x.f), 50);
    /* A malformed entry applies nothing, not even its timestamp. */
    uint8_t bad[256];
    size_t nb = fence_entry_encode(5000, cmds, 3, bad, sizeof(bad));
    bad[nb - 19] = 99; /* the last command's name length byte */
    size_t before_len;
    uint8_t *before = snap(&x, &before_len);
    CHECK_EQ_I64(fence_fsm_apply_entry(x.f, bad, nb, res, 2),
                 -FENCE_ST_INVALID);
    size_t after_len;
    uint8_t *after = snap(&x, &after_len);
    CHECK(before_len == after_len && memcmp(before, after, after_len) == 0);
    /* An empty batch advances time. */
    n = fence_entry_encode(2000, NULL, 0, buf, sizeof(buf));
    CHECK_EQ_I64(fence_fsm_apply_entry(x.f, buf, n, NULL, 0), 0);
    fence_fsm_lease_state li;
    CHECK_EQ_I64(fence_fsm_lease_info(x.f, 1, 2000, &li), FENCE_ST_NOLEASE);
    free(before);
    free(after);
    fx_done(&x);
}

/* The snapshot checksum is CRC32C: check its standard test vector. */
static void test_crc32c_known_answer(void)
{
    CHECK_EQ_U64(fence__crc32c((const uint8_t *)"123456789", 9), 0xe3069283u);
    CHECK_EQ_U64(fence__crc32c(NULL, 0), 0);
}

/* fence_fsm_wait_exists follows a wait from QUEUED to its outcome (the
 * server's check after a snapshot restore relies on it). */
static void test_wait_exists(void)
{
    fx x;
    fx_init(&x);
    uint64_t a = run(&x, 0, c_grant(1000, 0)).lease;
    uint64_t b = run(&x, 0, c_grant(1000, 0)).lease;
    fence_result r = run(&x, 0, c_lock("x", a, 0));
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    r = run(&x, 1, c_lock("x", b, 500));
    CHECK_EQ_U64(r.status, FENCE_ST_QUEUED);
    CHECK(fence_fsm_wait_exists(x.f, r.wait_id));
    CHECK(!fence_fsm_wait_exists(x.f, r.wait_id + 1));
    CHECK(!fence_fsm_wait_exists(x.f, 0));
    run(&x, 2, c_unlock("x", 1));
    CHECK_EQ_I64(x.nev, 1);
    CHECK(!fence_fsm_wait_exists(x.f, r.wait_id));
    fx_done(&x);
}

/* A LOCK by a lease that already waits for the lock joins that wait (the
 * answer is QUEUED with its id).  Every dedup record attached to the wait
 * this way must see the wait's outcome: a retry of any of their request
 * ids gets the grant, the timeout, or (after CANCEL) queues afresh, never
 * QUEUED for a wait that is gone.  Also across a snapshot. */
static void test_reqid_joined_wait_resolves(void)
{
    fx x, y;
    fx_init(&x);
    fx_init(&y);
    uint64_t a = lease(&x, 0, 100000, 0);
    uint64_t b = lease(&x, 0, 100000, 0);
    fence_result h = run(&x, 1, c_lock("j", a, 0));
    REQUIRE(h.status == FENCE_ST_OK);
    /* Granted: the first LOCK had no REQID, the joiners have. */
    fence_result q0 = run(&x, 2, c_lock("j", b, 5000));
    fence_result q1 = run(&x, 3, with_req(c_lock("j", b, 5000), 201));
    fence_result q2 = run(&x, 4, with_req(c_lock("j", b, 3000), 202));
    REQUIRE(q0.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(q1.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(q1.wait_id, q0.wait_id);
    CHECK_EQ_U64(q2.wait_id, q0.wait_id);
    /* A snapshot taken while they are attached restores them attached. */
    size_t n = 0;
    uint8_t *s = snap(&x, &n);
    REQUIRE(fence_fsm_restore(y.f, s, n) == 0);
    free(s);
    fx *both[2] = {&x, &y};
    for (int i = 0; i < 2; i++) {
        fx *z = both[i];
        run(z, 5, c_unlock("j", h.token));
        CHECK(!fence_fsm_wait_exists(z->f, q0.wait_id));
        fence_result r1 = run(z, 6, with_req(c_lock("j", b, 5000), 201));
        fence_result r2 = run(z, 6, with_req(c_lock("j", b, 3000), 202));
        CHECK_EQ_U64(r1.status, FENCE_ST_OK);
        CHECK_EQ_U64(r1.token, h.token + 1);
        CHECK_EQ_U64(r1.lease, b);
        CHECK_EQ_U64(r1.wait_id, q0.wait_id);
        CHECK(memcmp(&r1, &r2, sizeof(r1)) == 0);
    }
    /* Timed out: both the owner's and the joiner's retries see NIL. */
    uint64_t c = lease(&x, 10, 100000, 0);
    fence_result t0 = run(&x, 11, with_req(c_lock("j", c, 100), 301));
    fence_result t1 = run(&x, 12, with_req(c_lock("j", c, 200), 302));
    REQUIRE(t0.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(t1.wait_id, t0.wait_id);
    run(&x, 111, c_tick());
    CHECK(!fence_fsm_wait_exists(x.f, t0.wait_id));
    CHECK_EQ_U64(run(&x, 112, with_req(c_lock("j", c, 100), 301)).status,
                 FENCE_ST_NIL);
    fence_result t2 = run(&x, 112, with_req(c_lock("j", c, 200), 302));
    CHECK_EQ_U64(t2.status, FENCE_ST_NIL);
    CHECK_EQ_U64(t2.wait_id, t0.wait_id);
    /* Cancelled: every attached request id is forgotten, so each retry
     * queues afresh (the first one creates a new wait, the second joins
     * it). */
    fence_result k0 = run(&x, 120, with_req(c_lock("j", c, 1000), 401));
    fence_result k1 = run(&x, 121, with_req(c_lock("j", c, 900), 402));
    REQUIRE(k0.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(k1.wait_id, k0.wait_id);
    run(&x, 122, c_cancel(k0.wait_id));
    fence_result k2 = run(&x, 123, with_req(c_lock("j", c, 900), 402));
    CHECK_EQ_U64(k2.status, FENCE_ST_QUEUED);
    CHECK(k2.wait_id != k0.wait_id);
    CHECK(fence_fsm_wait_exists(x.f, k2.wait_id));
    fence_result k3 = run(&x, 124, with_req(c_lock("j", c, 1000), 401));
    CHECK_EQ_U64(k3.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(k3.wait_id, k2.wait_id);
    /* Evicting an attached record (dedup_max lowered) detaches it. */
    run(&x, 125, c_leader(1000, 1000, 100, 1));
    run(&x, 126, c_revoke(c));
    CHECK(!fence_fsm_wait_exists(x.f, k2.wait_id));
    fence_result k4 = run(&x, 127, with_req(c_lock("j", c, 1000), 401));
    CHECK_EQ_U64(k4.status, FENCE_ST_NOLEASE);
    CHECK_EQ_U64(k4.wait_id, k2.wait_id);
    fx_done(&x);
    fx_done(&y);
}

/* A snapshot from a core that kept a joiner's record QUEUED after its wait
 * ended still restores: the record stays as it is (unattached), and the
 * retry is answered from it (the leader turns that into TRYAGAIN). */
static void test_snapshot_stale_queued_record(void)
{
    fx x, y;
    fx_init(&x);
    fx_init(&y);
    uint64_t a = lease(&x, 0, 100000, 0);
    uint64_t b = lease(&x, 0, 100000, 0);
    REQUIRE(run(&x, 1, c_lock("s", a, 0)).status == FENCE_ST_OK);
    fence_result q1 = run(&x, 2, c_lock("s", b, 100));
    REQUIRE(q1.status == FENCE_ST_QUEUED);
    run(&x, 200, c_tick());
    REQUIRE(!fence_fsm_wait_exists(x.f, q1.wait_id));
    fence_result q2 = run(&x, 201, with_req(c_lock("s", b, 1000), 500));
    REQUIRE(q2.status == FENCE_ST_QUEUED);
    REQUIRE(q2.wait_id > q1.wait_id);
    size_t n = 0;
    uint8_t *s = snap(&x, &n);
    /* The newest dedup record ends the version-4 part: its wait_id is the
     * u64 before the value, the kinds' empty sections and the CRC.  Point
     * it at the wait that ended. */
    size_t at = n - 20 - SNAP_KINDS_EMPTY;
    REQUIRE(n > at);
    CHECK_EQ_U64(s[at], q2.wait_id);
    s[at] = (uint8_t)q1.wait_id;
    reseal(s, n);
    REQUIRE(fence_fsm_restore(y.f, s, n) == 0);
    CHECK(fence_fsm_check(y.f) == NULL);
    size_t n2 = 0;
    uint8_t *s2 = snap(&y, &n2);
    REQUIRE(n2 == n);
    CHECK(memcmp(s, s2, n) == 0);
    fence_result r = run(&y, 202, with_req(c_lock("s", b, 1000), 500));
    CHECK_EQ_U64(r.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(r.wait_id, q1.wait_id);
    CHECK(!fence_fsm_wait_exists(y.f, q1.wait_id));
    /* The live wait is unaffected and still resolves normally. */
    CHECK(fence_fsm_wait_exists(y.f, q2.wait_id));
    free(s);
    free(s2);
    fx_done(&x);
    fx_done(&y);
}

int main(void)
{
    TEST_RUN(test_crc32c_known_answer);
    TEST_RUN(test_tokens_increase_across_locks);
    TEST_RUN(test_fifo_order);
    TEST_RUN(test_reentrant_lock);
    TEST_RUN(test_queued_twice_same_wait);
    TEST_RUN(test_keepalive_and_revoke);
    TEST_RUN(test_expiry_releases_and_hands_off);
    TEST_RUN(test_no_grant_to_expired_lease);
    TEST_RUN(test_wait_timeout);
    TEST_RUN(test_lock_delay);
    TEST_RUN(test_acquire);
    TEST_RUN(test_cancel);
    TEST_RUN(test_revoke_fails_waits_and_hands_off);
    TEST_RUN(test_reqid_idempotent);
    TEST_RUN(test_reqid_reuse_refused);
    TEST_RUN(test_dedup_eviction);
    TEST_RUN(test_leader_start_rebase);
    TEST_RUN(test_limits);
    TEST_RUN(test_waiters_limit);
    TEST_RUN(test_waits_limit);
    TEST_RUN(test_invalid_inputs);
    TEST_RUN(test_wait_exists);
    TEST_RUN(test_alloc_failures);
    TEST_RUN(test_snapshot_round_trip);
    TEST_RUN(test_reqid_joined_wait_resolves);
    TEST_RUN(test_snapshot_stale_queued_record);
    TEST_RUN(test_snapshot_corrupt_rejected);
    TEST_RUN(test_stats_counters);
    TEST_RUN(test_list_iterators);
    TEST_RUN(test_entry_round_trip);
    TEST_RUN(test_apply_entry);
    TEST_RUN(test_old_versions_load);
    TEST_RUN(test_owners);
    return TEST_DONE();
}
