/* Unit tests of the deterministic core (src/core): the lock and lease
 * commands: tokens, FIFO hand-off, reentrancy, leases and time, ACQUIRE
 * and CANCEL, dedup by request id, LEADER_START, limits and bad input.
 * (Snapshots, the entry codec, owners and allocation failures:
 * test_core.c.) */
#include "test_core_fx.h"

#include "core/fsm_int.h"

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

int main(void)
{
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
    TEST_RUN(test_reqid_joined_wait_resolves);
    TEST_RUN(test_stats_counters);
    TEST_RUN(test_list_iterators);
    return TEST_DONE();
}
