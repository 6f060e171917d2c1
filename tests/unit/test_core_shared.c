/* Shared (read/write) locks in the state machine (issue 21 section 2;
 * fsm.h "Shared holds", core/shared.c): the holders of one shared phase
 * carry one token and every grant after the phase a higher one; FIFO with
 * no writer starvation; UNLOCK_SHARED names the lease; leases ending,
 * quotas, REQID, LEADER_START, the snapshot's "rw" section and the entry
 * codec.
 */
#define FX_PLAIN
#include "test_core_fx.h"

#include <stdbool.h>

#include "base/crc32c.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"

/* Bytes of the kinds' sections after rw in a snapshot without them (an
 * empty multi section: its u32 count, 4; an empty elect section, 16; an
 * empty sem section: its two u32 counts, 8). */
#define SNAP_AFTER_RW (4 + 16 + 8)

/* The event of the last call for wait id, or status 0xff. */
static fence_result ev(fence_fsm *f, uint64_t wait_id)
{
    size_t n = 0;
    const fence_event *e = fence_fsm_events(f, &n);
    for (size_t i = 0; i < n; i++)
        if (e[i].wait_id == wait_id)
            return e[i].result;
    fence_result none;
    memset(&none, 0, sizeof(none));
    none.status = 0xff;
    return none;
}

static size_t n_events(fence_fsm *f)
{
    size_t n = 0;
    fence_fsm_events(f, &n);
    return n;
}

static fence_cmd c_grant(uint64_t ttl, uint64_t delay)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = ttl, .lock_delay_ms = delay};
    return c;
}

static uint64_t lease(fence_fsm *f, uint64_t now, uint64_t ttl)
{
    fence_result r = run(f, now, c_grant(ttl, 0));
    REQUIRE(r.status == FENCE_ST_OK);
    return r.lease;
}

static fence_cmd c_lock(const char *name, uint64_t lease_id, uint64_t wait_ms, bool shared)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK, .lease = lease_id, .wait_ms = wait_ms,
                   .name = (const uint8_t *)name, .name_len = (uint16_t)strlen(name)};
    if (shared)
        c.flags = FENCE_CMD_F_SHARED;
    return c;
}

static fence_cmd c_unlock(const char *name, uint64_t token)
{
    fence_cmd c = {.type = FENCE_CMD_UNLOCK, .token = token, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name)};
    return c;
}

static fence_cmd c_unlock_sh(const char *name, uint64_t token, uint64_t lease_id)
{
    fence_cmd c = {.type = FENCE_CMD_UNLOCK_SHARED, .token = token, .lease = lease_id,
                   .name = (const uint8_t *)name, .name_len = (uint16_t)strlen(name)};
    return c;
}

static fence_cmd c_acquire(const char *name, uint64_t wait_ms, bool shared)
{
    fence_cmd c = {.type = FENCE_CMD_ACQUIRE, .ttl_ms = 10000, .wait_ms = wait_ms,
                   .name = (const uint8_t *)name, .name_len = (uint16_t)strlen(name)};
    if (shared)
        c.flags = FENCE_CMD_F_SHARED;
    return c;
}

static fence_cmd c_revoke(uint64_t lease_id)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_REVOKE, .lease = lease_id};
    return c;
}

static fence_cmd c_tick(void)
{
    fence_cmd c = {.type = FENCE_CMD_TICK};
    return c;
}

static fence_fsm_lock_state info(fence_fsm *f, const char *name)
{
    fence_fsm_lock_state st;
    memset(&st, 0, sizeof(st));
    if (!fence_fsm_lock_info(f, (const uint8_t *)name, (uint16_t)strlen(name), &st))
        st.token = 0;
    return st;
}

/* One phase, one token; a queued writer holds back later readers; the
 * writer's token is above the phase's, the next reader's above the
 * writer's. */
static void test_phase_one_token(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000), b = lease(f, 1, 60000);
    uint64_t w = lease(f, 1, 60000), d = lease(f, 1, 60000);
    fence_result ra = run(f, 2, c_lock("db", a, 0, true));
    REQUIRE(ra.status == FENCE_ST_OK);
    fence_result rb = run(f, 3, c_lock("db", b, 0, true));
    CHECK_EQ_U64(rb.status, FENCE_ST_OK);
    CHECK_EQ_U64(rb.token, ra.token);
    /* Reentrant: the same token again. */
    CHECK_EQ_U64(run(f, 3, c_lock("db", b, 0, true)).token, ra.token);
    fence_fsm_lock_state st = info(f, "db");
    CHECK(st.shared);
    CHECK_EQ_U64(st.holders, 2);
    CHECK_EQ_U64(st.token, ra.token);
    fence_fsm_holder h[4];
    CHECK_EQ_U64(fence_fsm_lock_holders(f, (const uint8_t *)"db", 2, h, 4), 2);
    CHECK_EQ_U64(h[0].lease, a);
    CHECK_EQ_U64(h[1].lease, b);
    /* A writer tries, then waits. */
    CHECK_EQ_U64(run(f, 4, c_lock("db", w, 0, false)).status, FENCE_ST_NIL);
    fence_result qw = run(f, 4, c_lock("db", w, 5000, false));
    REQUIRE(qw.status == FENCE_ST_QUEUED);
    /* A later reader is held back: NIL without WAIT, QUEUED with. */
    CHECK_EQ_U64(run(f, 5, c_lock("db", d, 0, true)).status, FENCE_ST_NIL);
    fence_result qd = run(f, 5, c_lock("db", d, 5000, true));
    REQUIRE(qd.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(info(f, "db").holders, 2);
    /* A plain UNLOCK of the shared token says which form to use. */
    fence_result u = run(f, 6, c_unlock("db", ra.token));
    CHECK_EQ_U64(u.status, FENCE_ST_INVALID);
    CHECK_EQ_U64(u.value, FENCE_INVALID_SHARED);
    CHECK_EQ_U64(run(f, 6, c_unlock("db", ra.token + 100)).value, 0);
    /* Wrong lease or token: 0. */
    CHECK_EQ_U64(run(f, 6, c_unlock_sh("db", ra.token, w)).value, 0);
    CHECK_EQ_U64(run(f, 6, c_unlock_sh("db", ra.token + 1, a)).value, 0);
    CHECK_EQ_U64(run(f, 6, c_unlock_sh("nope", ra.token, a)).value, 0);
    CHECK_EQ_U64(run(f, 7, c_unlock_sh("db", ra.token, a)).value, 1);
    CHECK_EQ_U64(n_events(f), 0);
    CHECK_EQ_U64(info(f, "db").holders, 1);
    CHECK_EQ_U64(run(f, 8, c_unlock_sh("db", ra.token, b)).value, 1);
    fence_result gw = ev(f, qw.wait_id);
    REQUIRE(gw.status == FENCE_ST_OK);
    CHECK(gw.token > ra.token);
    CHECK_EQ_U64(n_events(f), 1);
    CHECK(!info(f, "db").shared);
    /* The writer's plain UNLOCK hands the lock to the reader. */
    CHECK_EQ_U64(run(f, 9, c_unlock("db", gw.token)).value, 1);
    fence_result gd = ev(f, qd.wait_id);
    REQUIRE(gd.status == FENCE_ST_OK);
    CHECK(gd.token > gw.token);
    CHECK(info(f, "db").shared);
    done(f);
}

/* Hand-off of a free lock to a shared waiter admits the run of shared
 * waiters behind it, up to the first exclusive one. */
static void test_handoff_run(void)
{
    fence_fsm *f = new_fsm();
    uint64_t x = lease(f, 1, 60000), r1 = lease(f, 1, 60000), r2 = lease(f, 1, 60000);
    uint64_t w = lease(f, 1, 60000), r3 = lease(f, 1, 60000);
    fence_result gx = run(f, 2, c_lock("t", x, 0, false));
    REQUIRE(gx.status == FENCE_ST_OK);
    fence_result q1 = run(f, 3, c_lock("t", r1, 5000, true));
    fence_result q2 = run(f, 3, c_lock("t", r2, 5000, true));
    fence_result qw = run(f, 3, c_lock("t", w, 5000, false));
    fence_result q3 = run(f, 3, c_lock("t", r3, 5000, true));
    REQUIRE(q3.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(f, 4, c_unlock("t", gx.token)).value, 1);
    fence_result e1 = ev(f, q1.wait_id), e2 = ev(f, q2.wait_id);
    CHECK_EQ_U64(e1.status, FENCE_ST_OK);
    CHECK_EQ_U64(e2.status, FENCE_ST_OK);
    CHECK(e1.token > gx.token);
    CHECK_EQ_U64(e1.token, e2.token);
    CHECK_EQ_U64(ev(f, qw.wait_id).status, 0xff);
    CHECK_EQ_U64(ev(f, q3.wait_id).status, 0xff);
    CHECK_EQ_U64(info(f, "t").waiters, 2);
    /* The phase ends by revoking one and unlocking the other. */
    run(f, 5, c_revoke(r1));
    CHECK_EQ_U64(n_events(f), 0);
    CHECK_EQ_U64(run(f, 6, c_unlock_sh("t", e2.token, r2)).value, 1);
    fence_result ew = ev(f, qw.wait_id);
    REQUIRE(ew.status == FENCE_ST_OK);
    CHECK(ew.token > e2.token);
    CHECK_EQ_U64(run(f, 7, c_unlock("t", ew.token)).value, 1);
    fence_result e3 = ev(f, q3.wait_id);
    REQUIRE(e3.status == FENCE_ST_OK);
    CHECK(e3.token > ew.token);
    CHECK_EQ_U64(fence_fsm_last_token(f), e3.token);
    done(f);
}

/* A queued writer that leaves (timeout, cancel) lets the readers behind
 * it join the current phase, with its token: no grant came between. */
static void test_waiter_leaves(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000), w = lease(f, 1, 60000), r = lease(f, 1, 60000);
    uint64_t w2 = lease(f, 1, 60000), r2 = lease(f, 1, 60000);
    fence_result ga = run(f, 2, c_lock("p", a, 0, true));
    fence_result qw = run(f, 3, c_lock("p", w, 100, false));
    fence_result qr = run(f, 4, c_lock("p", r, 10000, true));
    REQUIRE(qr.status == FENCE_ST_QUEUED);
    run(f, 200, c_tick());
    CHECK_EQ_U64(ev(f, qw.wait_id).status, FENCE_ST_NIL);
    fence_result er = ev(f, qr.wait_id);
    REQUIRE(er.status == FENCE_ST_OK);
    CHECK_EQ_U64(er.token, ga.token);
    CHECK_EQ_U64(info(f, "p").holders, 2);
    /* CANCEL of the writer, and a writer's lease revoked, do the same. */
    fence_result qw2 = run(f, 201, c_lock("p", w2, 10000, false));
    fence_result qr2 = run(f, 202, c_lock("p", r2, 10000, true));
    REQUIRE(qr2.status == FENCE_ST_QUEUED);
    fence_cmd cancel = {.type = FENCE_CMD_CANCEL, .wait_id = qw2.wait_id};
    run(f, 203, cancel);
    CHECK_EQ_U64(ev(f, qr2.wait_id).token, ga.token);
    CHECK_EQ_U64(info(f, "p").holders, 3);
    CHECK_EQ_U64(fence_fsm_last_token(f), ga.token);
    done(f);
}

/* Modes do not mix within one lease; UNLOCK_SHARED of an exclusive hold
 * of that lease works; owners and admins as for UNLOCK. */
static void test_modes_and_owners(void)
{
    fence_fsm *f = new_fsm();
    fence_cmd g = c_grant(60000, 0);
    g.owner = 7;
    uint64_t a = run(f, 1, g).lease;
    uint64_t b = lease(f, 1, 60000);
    fence_cmd la = c_lock("m", a, 0, true);
    la.owner = 7;
    fence_result ga = run(f, 2, la);
    REQUIRE(ga.status == FENCE_ST_OK);
    la.flags = 0;
    fence_result up = run(f, 3, la);
    CHECK_EQ_U64(up.status, FENCE_ST_INVALID);
    CHECK_EQ_U64(up.value, FENCE_INVALID_MODE);
    /* Another owner may not release a's hold; an admin may. */
    fence_cmd u = c_unlock_sh("m", ga.token, a);
    CHECK_EQ_U64(run(f, 4, u).status, FENCE_ST_NOPERM);
    u.flags = FENCE_CMD_F_ADMIN;
    CHECK_EQ_U64(run(f, 4, u).value, 1);
    CHECK_EQ_U64(info(f, "m").token, 0);
    /* Exclusive hold, then a shared ask of the same lease: INVALID. */
    fence_result gb = run(f, 5, c_lock("m", b, 0, false));
    CHECK_EQ_U64(run(f, 5, c_lock("m", b, 0, true)).value, FENCE_INVALID_MODE);
    CHECK_EQ_U64(run(f, 6, c_unlock_sh("m", gb.token, b)).value, 1);
    /* A waiter asking again in the other mode: INVALID too. */
    run(f, 7, c_lock("m", b, 0, false));
    la.wait_ms = 1000;
    fence_result qa = run(f, 7, la);
    REQUIRE(qa.status == FENCE_ST_QUEUED);
    la.flags = FENCE_CMD_F_SHARED;
    CHECK_EQ_U64(run(f, 7, la).value, FENCE_INVALID_MODE);
    /* SHARED on another command type is refused. */
    fence_cmd bad = c_unlock("m", 1);
    bad.flags = FENCE_CMD_F_SHARED;
    CHECK_EQ_U64(run(f, 8, bad).status, FENCE_ST_INVALID);
    done(f);
}

/* Leases ending: revoke releases a shared hold; expiry of one holder keeps
 * the phase; expiry of the last one applies its lock-delay. */
static void test_lease_end(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = run(f, 1, c_grant(1000, 0)).lease;
    uint64_t b = run(f, 1, c_grant(2000, 500)).lease;
    uint64_t w = lease(f, 1, 60000);
    fence_result ga = run(f, 2, c_lock("e", a, 0, true));
    run(f, 2, c_lock("e", b, 0, true));
    fence_result qw = run(f, 3, c_lock("e", w, 50000, false));
    run(f, 1001, c_tick());
    CHECK_EQ_U64(info(f, "e").holders, 1);
    CHECK_EQ_U64(info(f, "e").token, ga.token);
    run(f, 2001, c_tick());
    CHECK_EQ_U64(n_events(f), 0); /* lock-delay first */
    CHECK_EQ_U64(info(f, "e").token, 0);
    run(f, 2501, c_tick());
    fence_result ew = ev(f, qw.wait_id);
    REQUIRE(ew.status == FENCE_ST_OK);
    CHECK(ew.token > ga.token);
    /* Revoking a dedicated shared lease. */
    fence_result s1 = run(f, 2600, c_acquire("d", 0, true));
    fence_result s2 = run(f, 2600, c_acquire("d", 0, true));
    REQUIRE(s1.status == FENCE_ST_OK && s2.status == FENCE_ST_OK);
    CHECK_EQ_U64(s1.token, s2.token);
    CHECK(s1.lease != s2.lease);
    run(f, 2601, c_revoke(s1.lease));
    CHECK_EQ_U64(info(f, "d").holders, 1);
    done(f);
}

/* ACQUIRE SHARED: a dedicated lease per holder; UNLOCK_SHARED ends it;
 * ACQUIRE SHARED queues behind a writer. */
static void test_acquire_shared(void)
{
    fence_fsm *f = new_fsm();
    fence_result s1 = run(f, 1, c_acquire("q", 0, true));
    fence_result s2 = run(f, 1, c_acquire("q", 0, true));
    CHECK_EQ_U64(s1.token, s2.token);
    fence_result x = run(f, 2, c_acquire("q", 5000, false));
    REQUIRE(x.status == FENCE_ST_QUEUED);
    fence_result s3 = run(f, 2, c_acquire("q", 5000, true));
    REQUIRE(s3.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(f, 2, c_acquire("q", 0, true)).status, FENCE_ST_NIL);
    CHECK_EQ_U64(run(f, 3, c_unlock_sh("q", s1.token, s1.lease)).value, 1);
    fence_fsm_lease_state ls;
    CHECK_EQ_I64(fence_fsm_lease_info(f, s1.lease, 3, &ls), FENCE_ST_NOLEASE);
    CHECK_EQ_U64(run(f, 4, c_unlock_sh("q", s2.token, s2.lease)).value, 1);
    fence_result ex = ev(f, x.wait_id);
    REQUIRE(ex.status == FENCE_ST_OK);
    CHECK(ex.token > s1.token);
    CHECK_EQ_U64(run(f, 5, c_unlock("q", ex.token)).value, 1);
    fence_result e3 = ev(f, s3.wait_id);
    REQUIRE(e3.status == FENCE_ST_OK);
    CHECK(e3.token > ex.token);
    CHECK_EQ_U64(e3.lease, s3.lease);
    done(f);
}

/* A shared hold counts against the owner's quota of locks; REQID retries
 * answer alike, and a REQID reused for the exclusive form is refused. */
static void test_quota_and_reqid(void)
{
    fence_fsm *f = new_fsm();
    fence_cmd g = c_grant(60000, 0);
    g.owner = 5;
    uint64_t a = run(f, 1, g).lease;
    uint64_t b = lease(f, 1, 60000);
    run(f, 2, c_lock("k1", b, 0, true));
    fence_cmd c = c_lock("k1", a, 0, true);
    c.owner = 5;
    c.flags |= FENCE_CMD_F_QUOTA;
    c.quota_locks = 1;
    fence_result r = run(f, 2, c);
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    fence_cmd c2 = c_lock("k2", a, 0, true);
    c2.owner = 5;
    c2.flags |= FENCE_CMD_F_QUOTA;
    c2.quota_locks = 1;
    CHECK_EQ_U64(run(f, 3, c2).status, FENCE_ST_LIMIT);
    /* Rejoining what it holds is no new lock. */
    CHECK_EQ_U64(run(f, 3, c).status, FENCE_ST_OK);
    fence_fsm_lease_state ls;
    REQUIRE(fence_fsm_lease_info(f, a, 3, &ls) == 0);
    CHECK_EQ_U64(ls.locks_held, 1);
    fence_cmd q = c_lock("k3", a, 0, true);
    q.owner = 5;
    q.flags |= FENCE_CMD_F_REQID;
    q.req_id = 77;
    fence_result q1 = run(f, 4, q);
    REQUIRE(q1.status == FENCE_ST_OK);
    fence_cmd u = c_unlock_sh("k3", q1.token, a);
    u.owner = 5;
    CHECK_EQ_U64(run(f, 4, u).value, 1);
    fence_result q2 = run(f, 5, q);
    CHECK_EQ_U64(q2.status, FENCE_ST_OK);
    CHECK_EQ_U64(q2.token, q1.token);
    q.flags = FENCE_CMD_F_REQID;
    CHECK_EQ_U64(run(f, 5, q).status, FENCE_ST_INVALID);
    done(f);
}

/* Snapshot a state with shared holds and shared waits; restore it into a
 * fresh state machine; the bytes match, and both go on alike. */
static uint8_t *snap(fence_fsm *f, size_t *n)
{
    *n = fence_fsm_snapshot_size(f);
    uint8_t *b = malloc(*n);
    REQUIRE(b != NULL);
    REQUIRE(fence_fsm_snapshot(f, b, *n) == *n);
    return b;
}

static void reseal(uint8_t *b, size_t n)
{
    uint32_t crc = fence__crc32c(b, n - 4);
    for (int i = 0; i < 4; i++)
        b[n - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
}

static void test_snapshot(void)
{
    fence_fsm *f = new_fsm();
    uint64_t l[6];
    for (int i = 0; i < 6; i++)
        l[i] = lease(f, 1, 60000);
    /* l[4] joins an older phase ("b") after a newer one ("a"): its list
     * of holds stays in token order. */
    fence_result gb = run(f, 2, c_lock("b", l[0], 0, true));
    run(f, 3, c_lock("a", l[1], 0, true));
    run(f, 4, c_lock("a", l[4], 0, true));
    run(f, 5, c_lock("b", l[4], 0, true));
    run(f, 6, c_lock("b", l[2], 10000, false));
    run(f, 6, c_lock("b", l[3], 10000, true));
    run(f, 6, c_lock("c", l[5], 0, false));
    run(f, 6, c_lock("c", l[3], 10000, true));
    size_t n = 0;
    uint8_t *s = snap(f, &n);
    CHECK_EQ_U64(s[4], 5);
    fence_fsm *g = new_fsm();
    REQUIRE(fence_fsm_restore(g, s, n) == 0);
    size_t n2 = 0;
    uint8_t *s2 = snap(g, &n2);
    REQUIRE(n2 == n);
    CHECK(memcmp(s, s2, n) == 0);
    free(s2);
    /* Both go on alike. */
    fence_fsm *both[2] = {f, g};
    uint64_t tok[2];
    for (int i = 0; i < 2; i++) {
        run(both[i], 10, c_revoke(l[4]));
        run(both[i], 10, c_unlock_sh("b", gb.token, l[0]));
        fence_fsm_lock_state st = info(both[i], "b");
        CHECK(!st.shared);
        CHECK_EQ_U64(st.lease, l[2]);
        tok[i] = st.token;
        run(both[i], 11, c_revoke(l[5]));
        CHECK(info(both[i], "c").shared);
    }
    CHECK_EQ_U64(tok[0], tok[1]);
    size_t m1 = 0, m2 = 0;
    uint8_t *a1 = snap(f, &m1);
    uint8_t *a2 = snap(g, &m2);
    REQUIRE(m1 == m2);
    CHECK(memcmp(a1, a2, m1) == 0);
    free(a1);
    free(a2);
    /* Corruptions of the rw section are refused (every truncation, and a
     * hold naming a lock place that does not exist). */
    for (size_t cut = 1; cut < 40 && cut < n; cut++) {
        uint8_t *t = malloc(n - cut);
        REQUIRE(t != NULL);
        memcpy(t, s, n - cut - 4);
        reseal(t, n - cut);
        fence_fsm *h = new_fsm();
        CHECK(fence_fsm_restore(h, t, n - cut) != 0);
        fence_fsm_destroy(h);
        free(t);
    }
    /* The section: count, then 17-byte records; the first record's lock
     * place is at count + 1.  The later kinds' sections (empty) follow it. */
    size_t sec = n - 4;
    uint32_t count = 0;
    /* Find the section by its size: holds + shared waits. */
    for (int recs = 1; recs < 16; recs++) {
        size_t at = n - 4 - SNAP_AFTER_RW - 4 - (size_t)recs * 17;
        uint32_t c = (uint32_t)s[at] | (uint32_t)s[at + 1] << 8 | (uint32_t)s[at + 2] << 16 |
                     (uint32_t)s[at + 3] << 24;
        if (c == (uint32_t)recs && s[at + 4] == 1) {
            sec = at;
            count = c;
            break;
        }
    }
    REQUIRE(count > 0);
    uint8_t *bad = malloc(n);
    REQUIRE(bad != NULL);
    memcpy(bad, s, n);
    bad[sec + 5] = 0xee; /* the first hold's lock place */
    reseal(bad, n);
    fence_fsm *h = new_fsm();
    CHECK(fence_fsm_restore(h, bad, n) != 0);
    memcpy(bad, s, n);
    bad[sec + 4] = 3; /* an unknown record kind */
    reseal(bad, n);
    CHECK(fence_fsm_restore(h, bad, n) != 0);
    memcpy(bad, s, n);
    bad[sec] = 0; /* no holds: a lock neither held nor in lock-delay */
    memmove(bad + sec + 4, bad + sec + 4 + (size_t)count * 17, SNAP_AFTER_RW + 4);
    reseal(bad, n - (size_t)count * 17);
    CHECK(fence_fsm_restore(h, bad, n - (size_t)count * 17) != 0);
    CHECK(fence_fsm_check(h) == NULL);
    fence_fsm_destroy(h);
    free(bad);
    free(s);
    fence_fsm_destroy(g);
    done(f);
}

/* LEADER_START rebases the shared holders' leases and the waits; the
 * phase goes on with its token. */
static void test_leader_start(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 1000), b = lease(f, 1, 60000);
    fence_result ga = run(f, 2, c_lock("r", a, 0, true));
    fence_result qb = run(f, 2, c_lock("r", b, 800, false));
    fence_cmd ls = {.type = FENCE_CMD_LEADER_START};
    fence_limits_default(&ls.limits);
    run(f, 100000, ls);
    CHECK_EQ_U64(info(f, "r").token, ga.token);
    run(f, 100500, c_lock("r", lease(f, 100500, 60000), 0, true));
    CHECK_EQ_U64(info(f, "r").holders, 1); /* held back by b's wait */
    run(f, 100801, c_tick());
    CHECK_EQ_U64(ev(f, qb.wait_id).status, FENCE_ST_NIL);
    run(f, 101001, c_tick());
    CHECK_EQ_U64(info(f, "r").token, 0);
    done(f);
}

/* The entry codec: LOCK/ACQUIRE with SHARED and UNLOCK_SHARED round-trip
 * in version 5; SHARED on another type, or in an older version, is
 * refused. */
static void test_entry_codec(void)
{
    fence_cmd cmds[3] = {c_lock("n", 3, 10, true), c_unlock_sh("n", 9, 3),
                         c_acquire("n", 0, true)};
    uint8_t buf[256];
    size_t n = fence_entry_encode(20, cmds, 3, buf, sizeof(buf));
    REQUIRE(n > 0);
    CHECK_EQ_U64(buf[0], 5);
    fence_entry_iter it;
    REQUIRE(fence_entry_open(&it, buf, n) == 0);
    fence_cmd d;
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.type, FENCE_CMD_LOCK);
    CHECK_EQ_U64(d.flags, FENCE_CMD_F_SHARED);
    CHECK_EQ_U64(d.lease, 3);
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.type, FENCE_CMD_UNLOCK_SHARED);
    CHECK_EQ_U64(d.token, 9);
    CHECK_EQ_U64(d.lease, 3);
    CHECK_EQ_U64(d.name_len, 1);
    REQUIRE(fence_entry_next(&it, &d) == 1);
    CHECK_EQ_U64(d.type, FENCE_CMD_ACQUIRE);
    CHECK_EQ_U64(d.flags, FENCE_CMD_F_SHARED);
    CHECK_EQ_I64(fence_entry_next(&it, &d), 0);
    for (size_t cut = 0; cut < n; cut++) {
        int rc = -1;
        if (fence_entry_open(&it, buf, cut) == 0) {
            while ((rc = fence_entry_next(&it, &d)) == 1) {
            }
        }
        CHECK(rc != 0);
    }
    /* Version 4 with SHARED: refused. */
    buf[0] = 4;
    if (fence_entry_open(&it, buf, n) == 0)
        CHECK(fence_entry_next(&it, &d) < 0);
    /* Applied through the entry path. */
    fence_fsm *f = new_fsm();
    uint64_t l = lease(f, 1, 60000);
    fence_cmd two[2] = {c_lock("z", l, 0, true), c_acquire("z", 0, true)};
    n = fence_entry_encode(30, two, 2, buf, sizeof(buf));
    REQUIRE(n > 0);
    fence_result res[2];
    CHECK_EQ_I64(fence_fsm_apply_entry(f, buf, n, res, 2), 2);
    CHECK_EQ_U64(res[0].status, FENCE_ST_OK);
    CHECK_EQ_U64(res[1].token, res[0].token);
    CHECK(fence_fsm_check(f) == NULL);
    done(f);
}

/* ---- With multi-locks (core/multi.c) ------------------------------------------ */

static fence_cmd c_multi2(fence_name *v, const char *a, const char *b, uint64_t lease_id,
                          uint64_t wait_ms)
{
    v[0].name = (const uint8_t *)a;
    v[0].len = (uint16_t)strlen(a);
    v[1].name = (const uint8_t *)b;
    v[1].len = (uint16_t)strlen(b);
    fence_cmd c = {.type = FENCE_CMD_LOCK_MULTI, .names = v, .names_count = 2,
                   .lease = lease_id, .wait_ms = wait_ms};
    return c;
}

/* A shared-held lock is held for a multi-lock: LOCK.MULTI waits for the
 * phase to end, readers arriving after it queue behind it (FIFO), the
 * multi-lock's token is above the phase's and the next phase's above it;
 * a multi wait that leaves lets the readers behind it join the phase; a
 * lease holding a name shared cannot name it in LOCK.MULTI; a free name
 * kept for a queued multi-lock is not free for a reader; UNLOCK_SHARED of
 * a multi-lock's name releases the whole multi-lock. */
static void test_with_multi(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = lease(f, 1, 60000), b = lease(f, 1, 60000), m = lease(f, 1, 60000);
    fence_name v[2];
    fence_result r = run(f, 2, c_lock("x", a, 0, true));
    REQUIRE(r.status == FENCE_ST_OK);
    uint64_t t1 = r.token;
    fence_result q = run(f, 3, c_multi2(v, "x", "y", m, 5000));
    CHECK_EQ_U64(q.status, FENCE_ST_QUEUED);
    /* y is kept for the multi-lock; a reader of x now waits behind it. */
    CHECK_EQ_U64(run(f, 3, c_lock("y", b, 0, true)).status, FENCE_ST_NIL);
    fence_result qb = run(f, 4, c_lock("x", b, 5000, true));
    CHECK_EQ_U64(qb.status, FENCE_ST_QUEUED);
    /* A holds x shared: naming x in its own multi-lock would wait for itself. */
    CHECK_EQ_U64(run(f, 4, c_multi2(v, "y", "x", a, 5000)).status, FENCE_ST_INVALID);
    /* The phase ends: the multi-lock gets x and y with one token above it. */
    CHECK_EQ_U64(run(f, 5, c_unlock_sh("x", t1, a)).value, 1);
    fence_result g = ev(f, q.wait_id);
    CHECK_EQ_U64(g.status, FENCE_ST_OK);
    CHECK(g.token > t1);
    CHECK_EQ_U64(info(f, "x").token, g.token);
    CHECK_EQ_U64(info(f, "y").token, g.token);
    CHECK(!info(f, "x").shared);
    CHECK_EQ_U64(ev(f, qb.wait_id).status, 0xff);
    /* Its release (UNLOCK of one name) begins B's phase with a higher token. */
    CHECK_EQ_U64(run(f, 6, c_unlock("y", g.token)).value, 1);
    fence_result gb = ev(f, qb.wait_id);
    CHECK_EQ_U64(gb.status, FENCE_ST_OK);
    CHECK(gb.token > g.token);
    CHECK(info(f, "x").shared);
    CHECK_EQ_U64(info(f, "y").token, 0);
    /* A multi wait behind B's phase times out: the reader queued behind it
     * joins the phase, with its token. */
    uint64_t c = lease(f, 7, 60000);
    fence_result q2 = run(f, 7, c_multi2(v, "x", "z", m, 100));
    CHECK_EQ_U64(q2.status, FENCE_ST_QUEUED);
    fence_result qc = run(f, 8, c_lock("x", c, 5000, true));
    CHECK_EQ_U64(qc.status, FENCE_ST_QUEUED);
    run(f, 200, c_tick());
    CHECK_EQ_U64(ev(f, q2.wait_id).status, FENCE_ST_NIL);
    fence_result gc = ev(f, qc.wait_id);
    CHECK_EQ_U64(gc.status, FENCE_ST_OK);
    CHECK_EQ_U64(gc.token, gb.token);
    CHECK_EQ_U64(info(f, "x").holders, 2);
    /* UNLOCK ... LEASE of a multi-lock's name releases all its names, as
     * UNLOCK does. */
    uint64_t e2 = lease(f, 250, 60000);
    fence_result gm = run(f, 250, c_multi2(v, "u", "w", e2, 0));
    CHECK_EQ_U64(gm.status, FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 251, c_unlock_sh("w", gm.token, e2)).value, 1);
    CHECK_EQ_U64(info(f, "u").token, 0);
    CHECK_EQ_U64(info(f, "w").token, 0);
    /* A snapshot with a held multi-lock (two locks, one token), a shared
     * phase and a multi wait on the shared-held lock restores to the same
     * bytes. */
    uint64_t d = lease(f, 300, 60000);
    CHECK_EQ_U64(run(f, 300, c_multi2(v, "p", "q", d, 0)).status, FENCE_ST_OK);
    fence_result q3 = run(f, 301, c_multi2(v, "x", "p", m, 5000));
    CHECK_EQ_U64(q3.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(f, 302, c_lock("x", a, 5000, true)).status, FENCE_ST_QUEUED);
    size_t n = 0, n2 = 0;
    uint8_t *s = snap(f, &n);
    fence_fsm *h = new_fsm();
    REQUIRE(fence_fsm_restore(h, s, n) == 0);
    CHECK(fence_fsm_check(h) == NULL);
    uint8_t *s2 = snap(h, &n2);
    REQUIRE(n2 == n);
    CHECK(memcmp(s, s2, n) == 0);
    /* And the restored copy goes on as the original. */
    fence_fsm *both[2] = {f, h};
    for (int i = 0; i < 2; i++) {
        run(both[i], 303, c_revoke(b));
        run(both[i], 303, c_revoke(c));
        CHECK_EQ_U64(info(both[i], "x").token, 0); /* kept for the multi wait */
        run(both[i], 304, c_revoke(d));
        CHECK_EQ_U64(ev(both[i], q3.wait_id).status, FENCE_ST_OK);
    }
    free(s);
    free(s2);
    CHECK(fence_fsm_check(h) == NULL);
    fence_fsm_destroy(h);
    done(f);
}

int main(void)
{
    TEST_RUN(test_phase_one_token);
    TEST_RUN(test_handoff_run);
    TEST_RUN(test_waiter_leaves);
    TEST_RUN(test_modes_and_owners);
    TEST_RUN(test_lease_end);
    TEST_RUN(test_acquire_shared);
    TEST_RUN(test_quota_and_reqid);
    TEST_RUN(test_snapshot);
    TEST_RUN(test_leader_start);
    TEST_RUN(test_entry_codec);
    TEST_RUN(test_with_multi);
    return TEST_DONE();
}
