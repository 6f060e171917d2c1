/* Atomic multi-locks in the state machine (issue 21, section 4; core/multi.c):
 * all names or none with one token, a waiter that holds nothing, strict
 * FIFO per lock with no deadlock between overlapping multi-locks, release
 * of all names by UNLOCK of any one, by expiry and by revocation, the
 * ACQUIRE form, limits, REQID, snapshot and restore (byte-identical, and
 * every corrupted snapshot refused or valid), the entry codec, and a
 * random run checked against a small model of who holds what.
 */
#define FX_PLAIN
#define FX_HASH_SEED 0x5eed
#include "test_core_fx.h"

#include <stdbool.h>

#include "base/crc32c.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"

/* Destroy a copy while the original lives on. */
static void done_copy(fence_fsm *g)
{
    CHECK(fence_fsm_check(g) == NULL);
    fence_fsm_destroy(g);
}

/* The single event of the last call for wait id (status 255: none). */
static fence_result event_of(fence_fsm *f, uint64_t wait_id)
{
    size_t n = 0;
    const fence_event *ev = fence_fsm_events(f, &n);
    fence_result r;
    memset(&r, 0, sizeof(r));
    r.status = 255;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].wait_id == wait_id)
            r = ev[i].result;
    }
    return r;
}

static fence_cmd c_grant(uint64_t ttl, uint64_t delay)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = ttl, .lock_delay_ms = delay};
    return c;
}

static fence_cmd c_lock(const char *name, uint64_t lease, uint64_t wait)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .lease = lease, .wait_ms = wait};
    return c;
}

static fence_cmd c_unlock(const char *name, uint64_t token)
{
    fence_cmd c = {.type = FENCE_CMD_UNLOCK, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .token = token};
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

/* Names from a comma-separated list (borrowed from csv, which must live). */
typedef struct names {
    fence_name v[FENCE_MULTI_NAMES_MAX + 1];
    uint16_t n;
} names;

static void parse(names *out, const char *csv)
{
    out->n = 0;
    const char *p = csv;
    while (*p != '\0' && out->n <= FENCE_MULTI_NAMES_MAX) {
        const char *e = strchr(p, ',');
        size_t len = e != NULL ? (size_t)(e - p) : strlen(p);
        out->v[out->n].name = (const uint8_t *)p;
        out->v[out->n].len = (uint16_t)len;
        out->n++;
        p += len + (e != NULL);
    }
}

static fence_cmd c_multi(const names *ns, uint64_t lease, uint64_t wait)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK_MULTI, .names = ns->v, .names_count = ns->n,
                   .lease = lease, .wait_ms = wait};
    return c;
}

static fence_cmd c_acq_multi(const names *ns, uint64_t ttl, uint64_t wait)
{
    fence_cmd c = c_multi(ns, 0, wait);
    c.ttl_ms = ttl;
    return c;
}

static uint64_t grant(fence_fsm *f, uint64_t now, uint64_t ttl)
{
    fence_result r = run(f, now, c_grant(ttl, 0));
    REQUIRE(r.status == FENCE_ST_OK);
    return r.lease;
}

/* The token of held lock name, 0 when free; *lease its holder. */
static uint64_t held(fence_fsm *f, const char *name, uint64_t *lease)
{
    fence_fsm_lock_state st;
    if (!fence_fsm_lock_info(f, (const uint8_t *)name, (uint16_t)strlen(name), &st)) {
        if (lease != NULL)
            *lease = 0;
        return 0;
    }
    if (lease != NULL)
        *lease = st.lease;
    return st.token;
}

/* A snapshot of f (malloc'd). */
static uint8_t *snap(fence_fsm *f, size_t *n)
{
    *n = fence_fsm_snapshot_size(f);
    uint8_t *s = malloc(*n);
    REQUIRE(s != NULL);
    REQUIRE(fence_fsm_snapshot(f, s, *n) == *n);
    return s;
}

/* Restore f's snapshot into a fresh state machine and check both give the
 * same bytes; returns the copy. */
static fence_fsm *clone(fence_fsm *f)
{
    size_t n = 0;
    uint8_t *s = snap(f, &n);
    fence_fsm *g = new_fsm();
    REQUIRE(fence_fsm_restore(g, s, n) == 0);
    size_t n2 = 0;
    uint8_t *s2 = snap(g, &n2);
    CHECK_EQ_U64(n2, n);
    CHECK(n2 == n && memcmp(s, s2, n) == 0);
    free(s);
    free(s2);
    return g;
}

/* All or none, one token at every name. */
static void test_all_at_once(void)
{
    fence_fsm *f = new_fsm();
    uint64_t l = grant(f, 1, 10000);
    uint64_t before = fence_fsm_last_token(f);
    names ns;
    parse(&ns, "a,b,c");
    fence_result r = run(f, 2, c_multi(&ns, l, 0));
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    CHECK_EQ_U64(r.token, before + 1);
    CHECK_EQ_U64(r.lease, l);
    CHECK_EQ_U64(fence_fsm_last_token(f), before + 1);
    uint64_t h = 0;
    CHECK_EQ_U64(held(f, "a", &h), r.token);
    CHECK_EQ_U64(h, l);
    CHECK_EQ_U64(held(f, "b", NULL), r.token);
    CHECK_EQ_U64(held(f, "c", NULL), r.token);
    /* The same request again is reentrant, in any order; part of it or
     * more is refused (it would wait for itself). */
    names again, part, more;
    parse(&again, "c,a,b");
    parse(&part, "a,b");
    parse(&more, "a,b,c,d");
    fence_result r2 = run(f, 3, c_multi(&again, l, 0));
    CHECK_EQ_U64(r2.status, FENCE_ST_OK);
    CHECK_EQ_U64(r2.token, r.token);
    CHECK_EQ_U64(run(f, 3, c_multi(&part, l, 0)).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 3, c_multi(&more, l, 100)).status, FENCE_ST_INVALID);
    /* LOCK of one name is reentrant as before. */
    fence_result r3 = run(f, 3, c_lock("b", l, 0));
    CHECK_EQ_U64(r3.status, FENCE_ST_OK);
    CHECK_EQ_U64(r3.token, r.token);
    /* UNLOCK of any one name with the token releases all. */
    CHECK_EQ_U64(run(f, 4, c_unlock("b", r.token - 1)).value, 0);
    CHECK_EQ_U64(held(f, "a", NULL), r.token);
    fence_result u = run(f, 4, c_unlock("b", r.token));
    CHECK_EQ_U64(u.status, FENCE_ST_OK);
    CHECK_EQ_U64(u.value, 1);
    CHECK_EQ_U64(held(f, "a", NULL), 0);
    CHECK_EQ_U64(held(f, "b", NULL), 0);
    CHECK_EQ_U64(held(f, "c", NULL), 0);
    fence_fsm_stats st;
    fence_fsm_stats_get(f, &st);
    CHECK_EQ_U64(st.locks, 0);
    done(f);
}

/* Bad requests: INVALID, and nothing changes. */
static void test_invalid(void)
{
    fence_fsm *f = new_fsm();
    uint64_t l = grant(f, 1, 10000);
    names dup, empty, long_one, sixty_five;
    parse(&dup, "a,b,a");
    parse(&empty, "a,,b");
    CHECK_EQ_U64(run(f, 2, c_multi(&dup, l, 0)).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 2, c_multi(&empty, l, 0)).status, FENCE_ST_INVALID);
    static char big[FENCE_NAME_MAX + 2];
    memset(big, 'x', FENCE_NAME_MAX + 1);
    parse(&long_one, big);
    CHECK_EQ_U64(run(f, 2, c_multi(&long_one, l, 0)).status, FENCE_ST_INVALID);
    static char many[4 * (FENCE_MULTI_NAMES_MAX + 1)];
    char *p = many;
    for (int i = 0; i <= FENCE_MULTI_NAMES_MAX; i++)
        p += sprintf(p, "%s%02d", i ? "," : "", i);
    parse(&sixty_five, many);
    REQUIRE(sixty_five.n == FENCE_MULTI_NAMES_MAX + 1);
    CHECK_EQ_U64(run(f, 2, c_multi(&sixty_five, l, 0)).status, FENCE_ST_INVALID);
    sixty_five.n = FENCE_MULTI_NAMES_MAX; /* 64 is fine */
    fence_result ok = run(f, 2, c_multi(&sixty_five, l, 0));
    CHECK_EQ_U64(ok.status, FENCE_ST_OK);
    names ns;
    parse(&ns, "q,r");
    fence_cmd zero = c_multi(&ns, l, 0);
    zero.names_count = 0;
    CHECK_EQ_U64(run(f, 3, zero).status, FENCE_ST_INVALID);
    fence_cmd ttl_with_lease = c_multi(&ns, l, 0);
    ttl_with_lease.ttl_ms = 1000;
    CHECK_EQ_U64(run(f, 3, ttl_with_lease).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 3, c_acq_multi(&ns, 1, 0)).status, FENCE_ST_INVALID);
    CHECK_EQ_U64(run(f, 3, c_multi(&ns, l + 7, 0)).status, FENCE_ST_NOLEASE);
    fence_cmd other = c_multi(&ns, l, 0);
    other.owner = 99;
    CHECK_EQ_U64(run(f, 3, other).status, FENCE_ST_NOPERM);
    other.flags |= FENCE_CMD_F_ADMIN;
    CHECK_EQ_U64(run(f, 3, other).status, FENCE_ST_OK);
    done(f);
}

/* A waiter holds nothing; the free names it waits for are reserved for it
 * (strict FIFO), and it gets all of them at once. */
static void test_wait_holds_nothing(void)
{
    fence_fsm *f = new_fsm();
    uint64_t h = grant(f, 1, 100000);
    uint64_t m = grant(f, 1, 100000);
    uint64_t s = grant(f, 1, 100000);
    fence_result ra = run(f, 2, c_lock("a", h, 0));
    REQUIRE(ra.status == FENCE_ST_OK);
    names ns;
    parse(&ns, "a,b");
    CHECK_EQ_U64(run(f, 3, c_multi(&ns, m, 0)).status, FENCE_ST_NIL);
    CHECK_EQ_U64(held(f, "b", NULL), 0);
    fence_result q = run(f, 3, c_multi(&ns, m, 5000));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(held(f, "b", NULL), 0);
    /* b is free but reserved: a LOCK queues behind the multi-lock. */
    CHECK_EQ_U64(run(f, 4, c_lock("b", s, 0)).status, FENCE_ST_NIL);
    fence_result qs = run(f, 4, c_lock("b", s, 5000));
    REQUIRE(qs.status == FENCE_ST_QUEUED);
    /* The same multi-lock again joins its wait; so does LOCK of one of its
     * names by the same lease. */
    CHECK_EQ_U64(run(f, 5, c_multi(&ns, m, 5000)).wait_id, q.wait_id);
    CHECK_EQ_U64(run(f, 5, c_lock("b", m, 5000)).wait_id, q.wait_id);
    /* a is released: the multi-lock gets both, with one new token. */
    run(f, 6, c_unlock("a", ra.token));
    fence_result g = event_of(f, q.wait_id);
    CHECK_EQ_U64(g.status, FENCE_ST_OK);
    CHECK_EQ_U64(g.token, fence_fsm_last_token(f));
    CHECK_EQ_U64(g.lease, m);
    CHECK_EQ_U64(held(f, "a", NULL), g.token);
    CHECK_EQ_U64(held(f, "b", NULL), g.token);
    /* UNLOCK a releases b too, and b goes to the LOCK behind. */
    run(f, 7, c_unlock("a", g.token));
    fence_result gs = event_of(f, qs.wait_id);
    CHECK_EQ_U64(gs.status, FENCE_ST_OK);
    CHECK(gs.token > g.token);
    uint64_t who = 0;
    CHECK_EQ_U64(held(f, "b", &who), gs.token);
    CHECK_EQ_U64(who, s);
    CHECK_EQ_U64(held(f, "a", NULL), 0);
    done(f);
}

/* A single LOCK queued before the multi-lock is served first (FIFO). */
static void test_fifo_per_lock(void)
{
    fence_fsm *f = new_fsm();
    uint64_t h = grant(f, 1, 100000);
    uint64_t s = grant(f, 1, 100000);
    uint64_t m = grant(f, 1, 100000);
    fence_result rb = run(f, 2, c_lock("b", h, 0));
    fence_result qs = run(f, 3, c_lock("b", s, 9000));
    REQUIRE(qs.status == FENCE_ST_QUEUED);
    names ns;
    parse(&ns, "a,b");
    fence_result qm = run(f, 4, c_multi(&ns, m, 9000));
    REQUIRE(qm.status == FENCE_ST_QUEUED);
    run(f, 5, c_unlock("b", rb.token));
    fence_result gs = event_of(f, qs.wait_id);
    CHECK_EQ_U64(gs.status, FENCE_ST_OK);
    CHECK_EQ_U64(event_of(f, qm.wait_id).status, 255);
    CHECK_EQ_U64(held(f, "a", NULL), 0);
    run(f, 6, c_unlock("b", gs.token));
    fence_result gm = event_of(f, qm.wait_id);
    CHECK_EQ_U64(gm.status, FENCE_ST_OK);
    CHECK_EQ_U64(held(f, "a", NULL), gm.token);
    CHECK_EQ_U64(held(f, "b", NULL), gm.token);
    done(f);
}

/* Two multi-locks over the same names in opposite orders: no deadlock,
 * the first queued is served first. */
static void test_no_deadlock(void)
{
    fence_fsm *f = new_fsm();
    uint64_t h = grant(f, 1, 100000);
    uint64_t m1 = grant(f, 1, 100000);
    uint64_t m2 = grant(f, 1, 100000);
    uint64_t m3 = grant(f, 1, 100000);
    REQUIRE(run(f, 2, c_lock("a", h, 0)).status == FENCE_ST_OK);
    REQUIRE(run(f, 2, c_lock("c", h, 0)).status == FENCE_ST_OK);
    names ab, ba, bc;
    parse(&ab, "a,b");
    parse(&ba, "b,a");
    parse(&bc, "b,c");
    fence_result q1 = run(f, 3, c_multi(&ab, m1, 50000));
    fence_result q2 = run(f, 3, c_multi(&ba, m2, 50000));
    fence_result q3 = run(f, 3, c_multi(&bc, m3, 50000));
    REQUIRE(q1.status == FENCE_ST_QUEUED);
    REQUIRE(q2.status == FENCE_ST_QUEUED);
    REQUIRE(q3.status == FENCE_ST_QUEUED);
    /* h goes: a and c are free; m1 is first on a and b, so it goes; m3
     * (b, c) stays behind m1 and m2 on b, although c is free. */
    run(f, 4, c_revoke(h));
    fence_result g1 = event_of(f, q1.wait_id);
    CHECK_EQ_U64(g1.status, FENCE_ST_OK);
    CHECK_EQ_U64(event_of(f, q2.wait_id).status, 255);
    CHECK_EQ_U64(event_of(f, q3.wait_id).status, 255);
    CHECK_EQ_U64(held(f, "c", NULL), 0);
    run(f, 5, c_unlock("a", g1.token));
    fence_result g2 = event_of(f, q2.wait_id);
    CHECK_EQ_U64(g2.status, FENCE_ST_OK);
    CHECK(g2.token > g1.token);
    run(f, 6, c_revoke(m2));
    fence_result g3 = event_of(f, q3.wait_id);
    CHECK_EQ_U64(g3.status, FENCE_ST_OK);
    CHECK(g3.token > g2.token);
    CHECK_EQ_U64(held(f, "b", NULL), g3.token);
    CHECK_EQ_U64(held(f, "c", NULL), g3.token);
    done(f);
}

/* Timeout and CANCEL fail the wait and free what it reserved; a waiter
 * behind it goes. */
static void test_timeout_and_cancel(void)
{
    fence_fsm *f = new_fsm();
    uint64_t h = grant(f, 1, 100000);
    uint64_t m = grant(f, 1, 100000);
    uint64_t s = grant(f, 1, 100000);
    REQUIRE(run(f, 2, c_lock("a", h, 0)).status == FENCE_ST_OK);
    names ns;
    parse(&ns, "a,b");
    fence_result q = run(f, 3, c_multi(&ns, m, 100));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    fence_result qs = run(f, 4, c_lock("b", s, 1000));
    REQUIRE(qs.status == FENCE_ST_QUEUED);
    run(f, 103, c_tick());
    CHECK_EQ_U64(event_of(f, q.wait_id).status, FENCE_ST_NIL);
    fence_result gs = event_of(f, qs.wait_id);
    CHECK_EQ_U64(gs.status, FENCE_ST_OK);
    CHECK(!fence_fsm_wait_exists(f, q.wait_id));
    /* CANCEL in the same way. */
    parse(&ns, "a,z");
    fence_result q2 = run(f, 200, c_multi(&ns, m, 5000));
    REQUIRE(q2.status == FENCE_ST_QUEUED);
    fence_cmd cc = {.type = FENCE_CMD_CANCEL, .wait_id = q2.wait_id};
    run(f, 201, cc);
    CHECK_EQ_U64(event_of(f, q2.wait_id).status, FENCE_ST_NIL);
    fence_fsm_stats st;
    fence_fsm_stats_get(f, &st);
    CHECK_EQ_U64(st.waiters, 0);
    CHECK_EQ_U64(st.locks, 2);
    done(f);
}

/* Expiry releases every name, with the lease's lock-delay on each; the
 * delays end in a deterministic order. */
static void test_expiry_and_delay(void)
{
    fence_fsm *f = new_fsm();
    fence_result lr = run(f, 1, c_grant(1000, 500));
    uint64_t l = lr.lease;
    uint64_t w1 = grant(f, 1, 100000);
    uint64_t w2 = grant(f, 1, 100000);
    names ns, one, other;
    parse(&ns, "p,q,r");
    parse(&one, "r,p");
    parse(&other, "q");
    fence_result g = run(f, 2, c_multi(&ns, l, 0));
    REQUIRE(g.status == FENCE_ST_OK);
    fence_result q1 = run(f, 3, c_multi(&one, w1, 90000));
    fence_result q2 = run(f, 3, c_multi(&other, w2, 90000));
    REQUIRE(q1.status == FENCE_ST_QUEUED);
    REQUIRE(q2.status == FENCE_ST_QUEUED);
    run(f, 1001, c_tick());
    CHECK_EQ_U64(held(f, "p", NULL), 0);
    CHECK_EQ_U64(event_of(f, q1.wait_id).status, 255);
    fence_fsm *g2 = clone(f);
    run(f, 1501, c_tick());
    fence_result a = event_of(f, q1.wait_id);
    fence_result b = event_of(f, q2.wait_id);
    CHECK_EQ_U64(a.status, FENCE_ST_OK);
    CHECK_EQ_U64(b.status, FENCE_ST_OK);
    CHECK(a.token != b.token);
    /* The restored copy hands off alike. */
    run(g2, 1501, c_tick());
    CHECK_EQ_U64(event_of(g2, q1.wait_id).token, a.token);
    CHECK_EQ_U64(event_of(g2, q2.wait_id).token, b.token);
    done_copy(g2);
    done(f);
}

/* The ACQUIRE form: a dedicated lease, revoked with the release or the
 * failure. */
static void test_acquire_form(void)
{
    fence_fsm *f = new_fsm();
    names ns;
    parse(&ns, "x,y");
    fence_result r = run(f, 1, c_acq_multi(&ns, 5000, 0));
    CHECK_EQ_U64(r.status, FENCE_ST_OK);
    fence_fsm_lease_state st;
    CHECK_EQ_I64(fence_fsm_lease_info(f, r.lease, 1, &st), 0);
    CHECK_EQ_U64(st.locks_held, 2);
    fence_result n = run(f, 2, c_acq_multi(&ns, 5000, 0));
    CHECK_EQ_U64(n.status, FENCE_ST_NIL);
    fence_result q = run(f, 2, c_acq_multi(&ns, 5000, 100));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    CHECK_EQ_I64(fence_fsm_lease_info(f, q.lease, 2, &st), 0);
    run(f, 3, c_unlock("y", r.token));
    CHECK_EQ_I64(fence_fsm_lease_info(f, r.lease, 3, &st), FENCE_ST_NOLEASE);
    fence_result g = event_of(f, q.wait_id);
    CHECK_EQ_U64(g.status, FENCE_ST_OK);
    CHECK_EQ_U64(g.lease, q.lease);
    /* Queued and timed out: its lease goes with it. */
    fence_result q2 = run(f, 4, c_acq_multi(&ns, 5000, 100));
    REQUIRE(q2.status == FENCE_ST_QUEUED);
    run(f, 105, c_tick());
    CHECK_EQ_U64(event_of(f, q2.wait_id).status, FENCE_ST_NIL);
    CHECK_EQ_I64(fence_fsm_lease_info(f, q2.lease, 105, &st), FENCE_ST_NOLEASE);
    done(f);
}

/* Limits: per name against waiters_max, one wait against waits_max, new
 * names against locks_max, all names against quota_locks. */
static void test_limits(void)
{
    fence_fsm *f = new_fsm();
    fence_cmd ls = {.type = FENCE_CMD_LEADER_START};
    fence_limits_default(&ls.limits);
    ls.limits.waiters_max = 1;
    ls.limits.waits_max = 2;
    ls.limits.locks_max = 4;
    REQUIRE(run(f, 1, ls).status == FENCE_ST_OK);
    uint64_t h = grant(f, 1, 100000);
    uint64_t a = grant(f, 1, 100000);
    uint64_t b = grant(f, 1, 100000);
    REQUIRE(run(f, 2, c_lock("k1", h, 0)).status == FENCE_ST_OK);
    names three, other, five;
    parse(&three, "k1,k2,k3");
    parse(&other, "k3,k4");
    parse(&five, "n1,n2,n3,n4,n5");
    CHECK_EQ_U64(run(f, 2, c_multi(&five, a, 0)).status, FENCE_ST_LIMIT);
    fence_result q = run(f, 3, c_multi(&three, a, 9000));
    CHECK_EQ_U64(q.status, FENCE_ST_QUEUED);
    /* k3 has its one waiter. */
    CHECK_EQ_U64(run(f, 3, c_multi(&other, b, 9000)).status, FENCE_ST_LIMIT);
    /* One wait for three names counts one: a second wait fits. */
    CHECK_EQ_U64(run(f, 3, c_lock("k9", b, 9000)).status, FENCE_ST_OK);
    REQUIRE(run(f, 3, c_lock("k9", h, 9000)).status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(f, 3, c_lock("k2", h, 9000)).status, FENCE_ST_LIMIT);
    done(f);
    /* Quota: three names count three. */
    f = new_fsm();
    fence_cmd gq = c_grant(100000, 0);
    gq.owner = 5;
    uint64_t o = run(f, 1, gq).lease;
    fence_cmd m = c_multi(&three, o, 0);
    m.owner = 5;
    m.flags |= FENCE_CMD_F_QUOTA;
    m.quota_locks = 2;
    CHECK_EQ_U64(run(f, 2, m).status, FENCE_ST_LIMIT);
    m.quota_locks = 3;
    CHECK_EQ_U64(run(f, 2, m).status, FENCE_ST_OK);
    done(f);
}

/* REQID: a retry gets QUEUED with the same wait, then the grant; another
 * set of names under the same id is INVALID. */
static void test_reqid(void)
{
    fence_fsm *f = new_fsm();
    uint64_t h = grant(f, 1, 100000);
    uint64_t m = grant(f, 1, 100000);
    fence_result rh = run(f, 2, c_lock("b", h, 0));
    names ns, other;
    parse(&ns, "a,b");
    parse(&other, "a,c");
    fence_cmd c = c_multi(&ns, m, 9000);
    c.flags |= FENCE_CMD_F_REQID;
    c.req_id = 77;
    fence_result q = run(f, 3, c);
    REQUIRE(q.status == FENCE_ST_QUEUED);
    fence_result q2 = run(f, 4, c);
    CHECK_EQ_U64(q2.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(q2.wait_id, q.wait_id);
    fence_cmd d = c_multi(&other, m, 9000);
    d.flags |= FENCE_CMD_F_REQID;
    d.req_id = 77;
    CHECK_EQ_U64(run(f, 4, d).status, FENCE_ST_INVALID);
    /* Snapshot while queued: the restored copy resolves the record too. */
    fence_fsm *g = clone(f);
    run(f, 5, c_unlock("b", rh.token));
    run(g, 5, c_unlock("b", rh.token));
    fence_result ok = run(f, 6, c);
    fence_result ok2 = run(g, 6, c);
    CHECK_EQ_U64(ok.status, FENCE_ST_OK);
    CHECK_EQ_U64(ok.token, held(f, "a", NULL));
    CHECK_EQ_U64(ok2.status, FENCE_ST_OK);
    CHECK_EQ_U64(ok2.token, ok.token);
    done_copy(g);
    done(f);
}

/* LEADER_START rebases a multi wait's deadline like any wait's. */
static void test_leader_start_rebase(void)
{
    fence_fsm *f = new_fsm();
    uint64_t h = grant(f, 1, 1000000);
    uint64_t m = grant(f, 1, 1000000);
    REQUIRE(run(f, 2, c_lock("a", h, 0)).status == FENCE_ST_OK);
    names ns;
    parse(&ns, "a,b");
    fence_result q = run(f, 3, c_multi(&ns, m, 1000));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    fence_cmd ls = {.type = FENCE_CMD_LEADER_START};
    fence_limits_default(&ls.limits);
    run(f, 900, ls);
    run(f, 1500, c_tick());
    CHECK(fence_fsm_wait_exists(f, q.wait_id));
    run(f, 1900, c_tick());
    CHECK(!fence_fsm_wait_exists(f, q.wait_id));
    done(f);
}

/* LOCK.LIST's pages never end inside one multi-lock's group of names. */
static void test_list_pages(void)
{
    fence_fsm *f = new_fsm();
    uint64_t l = grant(f, 1, 100000);
    REQUIRE(run(f, 2, c_lock("s1", l, 0)).status == FENCE_ST_OK);
    names ns;
    parse(&ns, "g1,g2,g3");
    REQUIRE(run(f, 2, c_multi(&ns, l, 0)).status == FENCE_ST_OK);
    REQUIRE(run(f, 2, c_lock("s2", l, 0)).status == FENCE_ST_OK);
    fence_fsm_lock_entry e[8];
    uint64_t next = 0, after = 0;
    size_t total = 0;
    int pages = 0;
    do {
        size_t n = fence_fsm_locks_list(f, after, 100, NULL, NULL, e, 3, &next);
        total += n;
        after = next;
        pages++;
    } while (next != 0 && pages < 10);
    /* s1 (the page s1 g1 g2 ends inside the group: back to s1) | g1 g2 g3
     * | s2. */
    CHECK_EQ_U64(total, 5);
    CHECK_EQ_U64(pages, 3);
    done(f);
}

/* Entry codec: LOCK_MULTI round-trips; malformed ones are refused. */
static void test_entry_codec(void)
{
    names ns;
    parse(&ns, "alpha,beta,gamma");
    fence_cmd c = c_multi(&ns, 7, 300);
    c.flags = FENCE_CMD_F_REQID;
    c.req_id = 9;
    fence_cmd d = c_acq_multi(&ns, 4000, 0);
    d.lock_delay_ms = 20;
    fence_cmd both[2] = {c, d};
    size_t n = fence_entry_size(both, 2);
    uint8_t *buf = malloc(n);
    REQUIRE(buf != NULL);
    REQUIRE(fence_entry_encode(55, both, 2, buf, n) == n);
    CHECK_EQ_U64(buf[0], FENCE_ENTRY_VERSION_KINDS);
    fence_entry_iter it;
    REQUIRE(fence_entry_open(&it, buf, n) == 0);
    fence_cmd o;
    REQUIRE(fence_entry_next(&it, &o) == 1);
    CHECK_EQ_U64(o.type, FENCE_CMD_LOCK_MULTI);
    CHECK_EQ_U64(o.names_count, 3);
    CHECK_EQ_U64(o.lease, 7);
    CHECK_EQ_U64(o.wait_ms, 300);
    CHECK_EQ_U64(o.req_id, 9);
    CHECK(o.names[1].len == 4 && memcmp(o.names[1].name, "beta", 4) == 0);
    REQUIRE(fence_entry_next(&it, &o) == 1);
    CHECK_EQ_U64(o.ttl_ms, 4000);
    CHECK_EQ_U64(o.lock_delay_ms, 20);
    CHECK(o.names[2].len == 5 && memcmp(o.names[2].name, "gamma", 5) == 0);
    CHECK_EQ_I64(fence_entry_next(&it, &o), 0);
    /* Every truncation is refused. */
    for (size_t cut = 0; cut < n; cut++) {
        int rc = fence_entry_open(&it, buf, cut);
        while (rc == 0 && (rc = fence_entry_next(&it, &o)) == 1) {
        }
        CHECK(rc != 0); /* open: FENCE_ST_INVALID; next: -FENCE_ST_INVALID */
    }
    /* A count of 0 or above the maximum is refused: the count is the u16
     * after the command's fixed head (type, flags, req_id, owner). */
    size_t at = 1 + 8 + 4 + 1 + 1 + 8 + 8;
    CHECK_EQ_U64(buf[at], 3);
    uint8_t keep = buf[at];
    uint16_t bad[2] = {0, FENCE_MULTI_NAMES_MAX + 1};
    for (int i = 0; i < 2; i++) {
        buf[at] = (uint8_t)bad[i];
        buf[at + 1] = (uint8_t)(bad[i] >> 8);
        REQUIRE(fence_entry_open(&it, buf, n) == 0);
        CHECK(fence_entry_next(&it, &o) < 0);
    }
    buf[at] = keep;
    buf[at + 1] = 0;
    /* Applied through the entry, as the log does. */
    fence_fsm *f = new_fsm();
    fence_cmd g = c_grant(10000, 0);
    uint8_t gb[64];
    size_t gn = fence_entry_encode(1, &g, 1, gb, sizeof(gb));
    REQUIRE(gn > 0);
    fence_result rr[2];
    REQUIRE(fence_fsm_apply_entry(f, gb, gn, rr, 1) == 1);
    both[0].lease = rr[0].lease;
    REQUIRE(fence_entry_encode(55, both, 2, buf, n) == n);
    REQUIRE(fence_fsm_apply_entry(f, buf, n, rr, 2) == 2);
    CHECK_EQ_U64(rr[0].status, FENCE_ST_OK);
    CHECK_EQ_U64(rr[1].status, FENCE_ST_NIL);
    free(buf);
    done(f);
}

/* A state with every multi structure: held groups, reserved never-granted
 * locks, queued multi-locks and single waits interleaved, REQIDs. */
static fence_fsm *busy_state(void)
{
    fence_fsm *f = new_fsm();
    uint64_t l[5];
    for (int i = 0; i < 5; i++)
        l[i] = grant(f, 1, 100000 + (uint64_t)i);
    static names g, w1, w2, w3;
    parse(&g, "a,b,c");
    parse(&w1, "c,d");
    parse(&w2, "d,e,a");
    parse(&w3, "f,g");
    REQUIRE(run(f, 2, c_multi(&g, l[0], 0)).status == FENCE_ST_OK);
    REQUIRE(run(f, 2, c_lock("f", l[4], 0)).status == FENCE_ST_OK);
    fence_cmd c = c_multi(&w1, l[1], 9000);
    c.flags |= FENCE_CMD_F_REQID;
    c.req_id = 1;
    REQUIRE(run(f, 3, c).status == FENCE_ST_QUEUED);
    REQUIRE(run(f, 3, c_lock("d", l[3], 9000)).status == FENCE_ST_QUEUED);
    REQUIRE(run(f, 4, c_multi(&w2, l[2], 9000)).status == FENCE_ST_QUEUED);
    fence_cmd a = c_acq_multi(&w3, 3000, 8000);
    a.flags |= FENCE_CMD_F_REQID;
    a.req_id = 2;
    REQUIRE(run(f, 5, a).status == FENCE_ST_QUEUED);
    REQUIRE(run(f, 5, c_lock("b", l[4], 9000)).status == FENCE_ST_QUEUED);
    return f;
}

/* Snapshot and restore: byte-identical, and the copy goes on alike. */
static void test_snapshot_roundtrip(void)
{
    fence_fsm *f = busy_state();
    fence_fsm *g = clone(f);
    fence_cmd steps[] = {c_revoke(1), c_tick(), c_revoke(5), c_tick(), c_revoke(2)};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        fence_result a = run(f, 10 + i, steps[i]);
        fence_result b = run(g, 10 + i, steps[i]);
        CHECK(memcmp(&a, &b, sizeof(a)) == 0);
        size_t na = 0, nb = 0;
        const fence_event *ea = fence_fsm_events(f, &na);
        const fence_event *eb = fence_fsm_events(g, &nb);
        CHECK_EQ_U64(na, nb);
        CHECK(na == nb && (na == 0 || memcmp(ea, eb, na * sizeof(*ea)) == 0));
        fence_fsm *h = clone(f);
        done_copy(h);
    }
    done_copy(g);
    done(f);
}

/* Every single-bit change of a snapshot (resealed) is refused or restores
 * a state that passes every check. */
static void test_snapshot_mutations(void)
{
    fence_fsm *f = busy_state();
    size_t n = 0;
    uint8_t *s = snap(f, &n);
    int valid = 0;
    for (size_t i = 4; i + 4 < n; i++) {
        for (int b = 0; b < 8; b++) {
            s[i] ^= (uint8_t)(1u << b);
            uint32_t crc = fence__crc32c(s, n - 4);
            uint8_t keep[4];
            memcpy(keep, s + n - 4, 4);
            for (int k = 0; k < 4; k++)
                s[n - 4 + (size_t)k] = (uint8_t)(crc >> (8 * k));
            fence_fsm *g = new_fsm();
            int rc = fence_fsm_restore(g, s, n);
            if (rc == 0) {
                valid++;
                CHECK(fence_fsm_check(g) == NULL);
            }
            fence_fsm_destroy(g);
            memcpy(s + n - 4, keep, 4);
            s[i] ^= (uint8_t)(1u << b);
        }
    }
    printf("# %d resealed single-bit mutations were still valid states\n", valid);
    free(s);
    done(f);
}

/* ---- A random run against a model ------------------------------------------ */

#define R_NAMES 6
#define R_LEASES 5

static const char *r_name[R_NAMES] = {"n0", "n1", "n2", "n3", "n4", "n5"};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* After every step: each granted result or event names a token above all
 * before it, and a multi-lock's grant holds every one of its names with
 * that token (all or none).  From a third of the way on, a copy restored
 * from a snapshot gets every command too and must answer alike. */
static void test_random_model(void)
{
    uint64_t seed = 88172645463325252ULL;
    unsigned long n_now = 0, n_waited = 0, n_queued = 0;
    for (int round = 0; round < 1000; round++) {
        fence_fsm *f = new_fsm();
        fence_fsm *shadow = NULL;
        uint64_t leases[R_LEASES] = {0};
        uint64_t now = 1;
        /* The names of each pending multi wait, by wait id (small ids). */
        static names pend[4096];
        static char pend_csv[4096][32];
        for (int step = 0; step < 160; step++) {
            now += rnd(&seed) % 50;
            int li = (int)(rnd(&seed) % R_LEASES);
            if (leases[li] == 0 || rnd(&seed) % 10 == 0) {
                fence_cmd gc = c_grant(200 + rnd(&seed) % 800, rnd(&seed) % 2 ? 0 : 30);
                fence_result g = run(f, now, gc);
                if (shadow != NULL) {
                    fence_result g2 = run(shadow, now, gc);
                    CHECK(memcmp(&g, &g2, sizeof(g)) == 0);
                }
                if (g.status == FENCE_ST_OK)
                    leases[li] = g.lease;
                continue;
            }
            fence_cmd c;
            names ns;
            char csv[32];
            int op = (int)(rnd(&seed) % 10);
            if (op < 5) {
                int k = 1 + (int)(rnd(&seed) % 3);
                char *p = csv;
                int used = 0;
                for (int i = 0; i < k; i++) {
                    int x = (int)(rnd(&seed) % R_NAMES);
                    if (used & (1 << x))
                        continue;
                    used |= 1 << x;
                    p += sprintf(p, "%s%s", p == csv ? "" : ",", r_name[x]);
                }
                parse(&ns, csv);
                c = rnd(&seed) % 4 == 0 ? c_acq_multi(&ns, 300, rnd(&seed) % 400)
                                        : c_multi(&ns, leases[li], rnd(&seed) % 400);
            } else if (op < 7) {
                c = c_lock(r_name[rnd(&seed) % R_NAMES], leases[li], rnd(&seed) % 300);
            } else if (op < 9) {
                const char *nm = r_name[rnd(&seed) % R_NAMES];
                c = c_unlock(nm, held(f, nm, NULL));
            } else if (rnd(&seed) % 3 != 0) {
                c = c_revoke(leases[li]);
            } else if (rnd(&seed) % 2 == 0) {
                fence_cmd cc = {.type = FENCE_CMD_CANCEL, .wait_id = 1 + rnd(&seed) % (1 + (uint64_t)step)};
                c = cc;
            } else {
                fence_cmd ls = {.type = FENCE_CMD_LEADER_START};
                fence_limits_default(&ls.limits);
                c = ls;
            }
            uint64_t before = fence_fsm_last_token(f);
            fence_result r = run(f, now, c);
            size_t ne = 0;
            const fence_event *ev = fence_fsm_events(f, &ne);
            if (shadow != NULL) {
                fence_result r2 = run(shadow, now, c);
                size_t ne2 = 0;
                const fence_event *ev2 = fence_fsm_events(shadow, &ne2);
                CHECK(memcmp(&r, &r2, sizeof(r)) == 0);
                CHECK_EQ_U64(ne2, ne);
                CHECK(ne2 != ne || ne == 0 || memcmp(ev, ev2, ne * sizeof(*ev)) == 0);
            }
            uint64_t ev_top = before;
            for (size_t i = 0; i < ne; i++) {
                if (ev[i].result.status == FENCE_ST_OK) {
                    CHECK(ev[i].result.token > ev_top);
                    ev_top = ev[i].result.token;
                }
            }
            if (r.status == FENCE_ST_OK && r.token > ev_top && c.type != FENCE_CMD_UNLOCK) {
                /* A new grant (a reentrant answer repeats an older token). */
                CHECK_EQ_U64(r.token, fence_fsm_last_token(f));
                for (uint16_t i = 0; i < c.names_count; i++) {
                    char nm[8];
                    memcpy(nm, c.names[i].name, c.names[i].len);
                    nm[c.names[i].len] = '\0';
                    uint64_t who = 0;
                    CHECK_EQ_U64(held(f, nm, &who), r.token);
                    CHECK_EQ_U64(who, r.lease);
                }
            }
            if (c.type == FENCE_CMD_LOCK_MULTI && r.status == FENCE_ST_OK && r.token > ev_top)
                n_now++;
            if (c.type == FENCE_CMD_LOCK_MULTI && r.status == FENCE_ST_QUEUED)
                n_queued++;
            if (r.status == FENCE_ST_QUEUED && c.type == FENCE_CMD_LOCK_MULTI &&
                r.wait_id < 4096 && pend[r.wait_id].n == 0) {
                memcpy(pend_csv[r.wait_id], csv, sizeof(csv));
                parse(&pend[r.wait_id], pend_csv[r.wait_id]);
            }
            /* A multi-lock granted by an event holds all its names at the
             * end of the call, unless the command itself released some. */
            bool releases = c.type == FENCE_CMD_UNLOCK || c.type == FENCE_CMD_LEASE_REVOKE;
            for (size_t i = 0; i < ne && !releases; i++) {
                if (ev[i].result.status != FENCE_ST_OK)
                    continue;
                names *pn = ev[i].wait_id < 4096 ? &pend[ev[i].wait_id] : NULL;
                n_waited += pn != NULL && pn->n > 0;
                for (uint16_t j = 0; pn != NULL && j < pn->n; j++) {
                    char nm[8];
                    memcpy(nm, pn->v[j].name, pn->v[j].len);
                    nm[pn->v[j].len] = '\0';
                    uint64_t who = 0;
                    CHECK_EQ_U64(held(f, nm, &who), ev[i].result.token);
                    CHECK_EQ_U64(who, ev[i].result.lease);
                }
            }
            if (step % 40 == 39) {
                fence_fsm *g = clone(f);
                if (shadow == NULL)
                    shadow = g;
                else
                    done_copy(g);
            }
        }
        memset(pend, 0, sizeof(pend));
        if (shadow != NULL) {
            size_t n1 = 0, n2 = 0;
            uint8_t *s1 = snap(f, &n1);
            uint8_t *s2 = snap(shadow, &n2);
            CHECK(n1 == n2 && memcmp(s1, s2, n1) == 0);
            free(s1);
            free(s2);
            done_copy(shadow);
        }
        done(f);
    }
    printf("# multi-locks: %lu granted at once, %lu queued, %lu granted from the queue\n", n_now,
           n_queued, n_waited);
    CHECK(n_waited > 100);
}

int main(void)
{
    TEST_RUN(test_all_at_once);
    TEST_RUN(test_invalid);
    TEST_RUN(test_wait_holds_nothing);
    TEST_RUN(test_fifo_per_lock);
    TEST_RUN(test_no_deadlock);
    TEST_RUN(test_timeout_and_cancel);
    TEST_RUN(test_expiry_and_delay);
    TEST_RUN(test_acquire_form);
    TEST_RUN(test_limits);
    TEST_RUN(test_reqid);
    TEST_RUN(test_leader_start_rebase);
    TEST_RUN(test_list_pages);
    TEST_RUN(test_entry_codec);
    TEST_RUN(test_snapshot_roundtrip);
    TEST_RUN(test_snapshot_mutations);
    TEST_RUN(test_random_model);
    return TEST_DONE();
}
