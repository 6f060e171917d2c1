/* Leader election in the state machine (issue 21 §1; core/elect.h): the
 * ELECT_* commands, handing leadership to the next candidate (resign,
 * lease expiry with and without lock-delay, revoke), revisions that never
 * go backwards (also across an election that goes away and comes back),
 * the one name space (WRONGTYPE), limits, REQID retries, CANCEL, owners,
 * LEADER_START, the entry codec and the snapshot section "elect". */
#define FX_PLAIN
#include "test_core_fx.h"

#include <stdbool.h>
#include <string.h>

#include "base/crc32c.h"
#include "core/elect.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"

static uint64_t grant(fence_fsm *f, uint64_t now, uint64_t ttl, uint64_t delay)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = ttl, .lock_delay_ms = delay};
    fence_result r = run(f, now, c);
    REQUIRE(r.status == FENCE_ST_OK);
    return r.lease;
}

static fence_cmd c_campaign(const char *name, uint64_t lease, uint64_t wait_ms,
                            const char *value)
{
    fence_cmd c = {.type = FENCE_CMD_ELECT_CAMPAIGN, .lease = lease, .wait_ms = wait_ms};
    c.name = (const uint8_t *)name;
    c.name_len = (uint16_t)strlen(name);
    c.value = (const uint8_t *)value;
    c.value_len = (uint32_t)strlen(value);
    return c;
}

static fence_cmd c_proclaim(const char *name, uint64_t token, const char *value)
{
    fence_cmd c = {.type = FENCE_CMD_ELECT_PROCLAIM, .token = token};
    c.name = (const uint8_t *)name;
    c.name_len = (uint16_t)strlen(name);
    c.value = (const uint8_t *)value;
    c.value_len = (uint32_t)strlen(value);
    return c;
}

static fence_cmd c_resign(const char *name, uint64_t token)
{
    fence_cmd c = {.type = FENCE_CMD_ELECT_RESIGN, .token = token};
    c.name = (const uint8_t *)name;
    c.name_len = (uint16_t)strlen(name);
    return c;
}

static fence_cmd c_named(uint8_t type, const char *name)
{
    fence_cmd c = {.type = type};
    c.name = (const uint8_t *)name;
    c.name_len = (uint16_t)strlen(name);
    return c;
}

static fence_cmd c_tick(void)
{
    fence_cmd c = {.type = FENCE_CMD_TICK};
    return c;
}

static fence_fsm_elect_state info(fence_fsm *f, const char *name)
{
    fence_fsm_elect_state st;
    CHECK_EQ_I64(fence_fsm_elect_info(f, (const uint8_t *)name, (uint16_t)strlen(name), &st),
                 0);
    return st;
}

/* The leader's value is value. */
static void check_value(fence_fsm *f, const char *name, const char *value)
{
    fence_fsm_elect_state st = info(f, name);
    REQUIRE(st.has_leader);
    CHECK_EQ_U64(st.value_len, strlen(value));
    CHECK(memcmp(st.value, value, st.value_len) == 0);
}

/* The event of wait_id in the last call: its result (status 255 if none). */
static fence_result event_of(fence_fsm *f, uint64_t wait_id)
{
    size_t n = 0;
    const fence_event *ev = fence_fsm_events(f, &n);
    for (size_t i = 0; i < n; i++)
        if (ev[i].wait_id == wait_id)
            return ev[i].result;
    fence_result none = {.status = 255};
    return none;
}

static void test_campaign_resign_proclaim(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 10000, 0);
    uint64_t b = grant(f, 0, 10000, 0);
    fence_fsm_elect_state st = info(f, "db");
    CHECK(!st.exists);
    CHECK_EQ_U64(st.revision, 0);
    fence_result ra = run(f, 1, c_campaign("db", a, 0, "host-a"));
    REQUIRE(ra.status == FENCE_ST_OK);
    CHECK_EQ_U64(ra.lease, a);
    CHECK(ra.token > 0);
    CHECK_EQ_U64(ra.revision, 1);
    check_value(f, "db", "host-a");
    st = info(f, "db");
    CHECK_EQ_U64(st.token, ra.token);
    CHECK_EQ_U64(st.lease, a);
    CHECK_EQ_U64(st.revision, 1);
    /* Campaigning again while leading: the same token, nothing changes. */
    fence_result again = run(f, 2, c_campaign("db", a, 0, "other"));
    CHECK_EQ_U64(again.status, FENCE_ST_OK);
    CHECK_EQ_U64(again.token, ra.token);
    check_value(f, "db", "host-a");
    CHECK_EQ_U64(info(f, "db").revision, 1);
    /* b: no wait gives NIL, a wait queues. */
    CHECK_EQ_U64(run(f, 3, c_campaign("db", b, 0, "host-b")).status, FENCE_ST_NIL);
    fence_result rb = run(f, 4, c_campaign("db", b, 5000, "host-b"));
    REQUIRE(rb.status == FENCE_ST_QUEUED);
    CHECK_EQ_U64(info(f, "db").candidates, 1);
    /* PROCLAIM: with the right token a new value and revision; else 0. */
    fence_result p = run(f, 5, c_proclaim("db", ra.token, "host-a:2"));
    CHECK_EQ_U64(p.status, FENCE_ST_OK);
    CHECK_EQ_U64(p.value, 2);
    check_value(f, "db", "host-a:2");
    CHECK_EQ_U64(run(f, 6, c_proclaim("db", ra.token + 9, "x")).value, 0);
    CHECK_EQ_U64(run(f, 6, c_proclaim("nope", 1, "x")).value, 0);
    CHECK_EQ_U64(info(f, "db").revision, 2);
    /* RESIGN with a wrong token: 0; with the leader's: b is elected. */
    CHECK_EQ_U64(run(f, 7, c_resign("db", ra.token + 9)).value, 0);
    fence_result rs = run(f, 8, c_resign("db", ra.token));
    CHECK_EQ_U64(rs.value, 1);
    fence_result ev = event_of(f, rb.wait_id);
    REQUIRE(ev.status == FENCE_ST_OK);
    CHECK(ev.token > ra.token);
    CHECK_EQ_U64(ev.lease, b);
    check_value(f, "db", "host-b");
    st = info(f, "db");
    CHECK_EQ_U64(st.token, ev.token);
    CHECK_EQ_U64(st.revision, 4); /* 3: no leader, 4: b */
    CHECK_EQ_U64(rs.revision, 4);
    /* The old token cannot proclaim or resign any more. */
    CHECK_EQ_U64(run(f, 9, c_proclaim("db", ra.token, "stale")).value, 0);
    CHECK_EQ_U64(run(f, 9, c_resign("db", ra.token)).value, 0);
    /* b resigns, nobody left: the election goes, its revision stays. */
    CHECK_EQ_U64(run(f, 10, c_resign("db", ev.token)).value, 1);
    st = info(f, "db");
    CHECK(!st.exists);
    CHECK_EQ_U64(st.revision, 5);
    /* Back again: the revision goes on from there, the token too. */
    fence_result rc = run(f, 11, c_campaign("db", a, 0, ""));
    REQUIRE(rc.status == FENCE_ST_OK);
    CHECK(rc.token > ev.token);
    CHECK_EQ_U64(info(f, "db").revision, 6);
    check_value(f, "db", "");
    done(f);
}

/* Expiry and revocation end leadership; lock-delay leaves a gap with no
 * leader; a candidate whose lease died is passed over. */
static void test_lease_end(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 1000, 300); /* lock-delay 300 */
    uint64_t b = grant(f, 0, 1000, 0);
    uint64_t c = grant(f, 0, 100000, 0);
    fence_result ra = run(f, 1, c_campaign("e", a, 0, "a"));
    REQUIRE(ra.status == FENCE_ST_OK);
    fence_result rb = run(f, 2, c_campaign("e", b, 60000, "b"));
    fence_result rc = run(f, 3, c_campaign("e", c, 60000, "c"));
    REQUIRE(rb.status == FENCE_ST_QUEUED);
    REQUIRE(rc.status == FENCE_ST_QUEUED);
    /* a and b expire at 1000; a's lock-delay holds the name until 1300,
     * and b's candidacy fails with its lease. */
    run(f, 1000, c_tick());
    CHECK_EQ_U64(event_of(f, rb.wait_id).status, FENCE_ST_NOLEASE);
    fence_fsm_elect_state st = info(f, "e");
    CHECK(st.exists);
    CHECK(!st.has_leader);
    uint64_t gap_rev = st.revision;
    CHECK(gap_rev > 1);
    run(f, 1300, c_tick());
    fence_result ev = event_of(f, rc.wait_id);
    REQUIRE(ev.status == FENCE_ST_OK);
    CHECK(ev.token > ra.token);
    check_value(f, "e", "c");
    CHECK(info(f, "e").revision > gap_rev);
    /* Revoking c's lease ends its leadership: no one left. */
    fence_cmd rv = {.type = FENCE_CMD_LEASE_REVOKE, .lease = c};
    CHECK_EQ_U64(run(f, 1400, rv).status, FENCE_ST_OK);
    CHECK(!info(f, "e").exists);
    /* A candidate's wait times out: NIL, the leader stays. */
    uint64_t d = grant(f, 1500, 100000, 0);
    uint64_t e = grant(f, 1500, 100000, 0);
    REQUIRE(run(f, 1501, c_campaign("e", d, 0, "d")).status == FENCE_ST_OK);
    fence_result re = run(f, 1502, c_campaign("e", e, 100, "e"));
    REQUIRE(re.status == FENCE_ST_QUEUED);
    uint64_t rev = info(f, "e").revision;
    run(f, 1602, c_tick());
    CHECK_EQ_U64(event_of(f, re.wait_id).status, FENCE_ST_NIL);
    CHECK_EQ_U64(info(f, "e").revision, rev);
    CHECK_EQ_U64(info(f, "e").candidates, 0);
    done(f);
}

/* One name space: an election is not a lock and a lock is no election. */
static void test_wrongtype(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 10000, 0);
    REQUIRE(run(f, 1, c_campaign("el", a, 0, "v")).status == FENCE_ST_OK);
    fence_cmd lk = c_named(FENCE_CMD_LOCK, "el");
    lk.lease = a;
    CHECK_EQ_U64(run(f, 2, lk).status, FENCE_ST_WRONGTYPE);
    fence_cmd ul = c_named(FENCE_CMD_UNLOCK, "el");
    ul.token = info(f, "el").token;
    CHECK_EQ_U64(run(f, 2, ul).status, FENCE_ST_WRONGTYPE);
    fence_cmd ac = c_named(FENCE_CMD_ACQUIRE, "el");
    ac.ttl_ms = 1000;
    CHECK_EQ_U64(run(f, 2, ac).status, FENCE_ST_WRONGTYPE);
    CHECK(fence_fsm_is_election(f, (const uint8_t *)"el", 2));
    /* A multi-lock naming the election (waiting or not, either form) is
     * another kind too: it was queued behind the leader and handed the
     * election's name as a lock when the leader resigned. */
    fence_name mn[2] = {{(const uint8_t *)"free", 4}, {(const uint8_t *)"el", 2}};
    fence_cmd mu = {.type = FENCE_CMD_LOCK_MULTI, .names = mn, .names_count = 2};
    mu.lease = a;
    mu.wait_ms = 5000;
    CHECK_EQ_U64(run(f, 2, mu).status, FENCE_ST_WRONGTYPE);
    mu.lease = 0;
    mu.ttl_ms = 1000;
    CHECK_EQ_U64(run(f, 2, mu).status, FENCE_ST_WRONGTYPE);
    fence_fsm_lock_state fs;
    CHECK(!fence_fsm_lock_info(f, (const uint8_t *)"free", 4, &fs)); /* nothing taken */
    lk = c_named(FENCE_CMD_LOCK, "lk");
    lk.lease = a;
    fence_result rl = run(f, 3, lk);
    REQUIRE(rl.status == FENCE_ST_OK);
    CHECK_EQ_U64(run(f, 4, c_campaign("lk", a, 0, "v")).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 4, c_proclaim("lk", rl.token, "v")).status, FENCE_ST_WRONGTYPE);
    CHECK_EQ_U64(run(f, 4, c_resign("lk", rl.token)).status, FENCE_ST_WRONGTYPE);
    fence_fsm_elect_state st;
    CHECK_EQ_I64(fence_fsm_elect_info(f, (const uint8_t *)"lk", 2, &st), FENCE_ST_WRONGTYPE);
    CHECK(!fence_fsm_is_election(f, (const uint8_t *)"lk", 2));
    done(f);
}

/* Bad input, limits and owners. */
static void test_limits_and_owners(void)
{
    fence_fsm *f = new_fsm();
    fence_cmd ls = {.type = FENCE_CMD_LEADER_START};
    ls.limits.leases_max = 10;
    ls.limits.locks_max = 1;
    ls.limits.waiters_max = 1;
    ls.limits.waits_max = 10;
    ls.limits.dedup_max = 10;
    REQUIRE(run(f, 0, ls).status == FENCE_ST_OK);
    uint64_t a = grant(f, 0, 10000, 0);
    uint64_t b = grant(f, 0, 10000, 0);
    uint64_t c = grant(f, 0, 10000, 0);
    static uint8_t big[FENCE_ELECT_VALUE_MAX + 1];
    fence_cmd cb = c_campaign("x", a, 0, "");
    cb.value = big;
    cb.value_len = FENCE_ELECT_VALUE_MAX + 1;
    CHECK_EQ_U64(run(f, 1, cb).status, FENCE_ST_INVALID);
    cb.value_len = FENCE_ELECT_VALUE_MAX;
    fence_result r = run(f, 1, cb);
    REQUIRE(r.status == FENCE_ST_OK);
    CHECK_EQ_U64(info(f, "x").value_len, FENCE_ELECT_VALUE_MAX);
    CHECK_EQ_U64(run(f, 2, c_campaign("y", a, 0, "")).status, FENCE_ST_LIMIT); /* locks */
    CHECK_EQ_U64(run(f, 2, c_campaign("x", b, 100, "")).status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(run(f, 2, c_campaign("x", c, 100, "")).status, FENCE_ST_LIMIT); /* waiters */
    CHECK_EQ_U64(run(f, 2, c_campaign("x", 99, 100, "")).status, FENCE_ST_NOLEASE);
    fence_cmd bad = c_campaign("x", c, FENCE_WAIT_MS_MAX + 1, "");
    CHECK_EQ_U64(run(f, 2, bad).status, FENCE_ST_INVALID);
    fence_cmd pbig = c_proclaim("x", r.token, "");
    pbig.value = big;
    pbig.value_len = FENCE_ELECT_VALUE_MAX + 1;
    CHECK_EQ_U64(run(f, 3, pbig).status, FENCE_ST_INVALID);
    /* Another owner may not proclaim or resign for a's leadership. */
    fence_cmd po = c_proclaim("x", r.token, "evil");
    po.owner = 7;
    CHECK_EQ_U64(run(f, 3, po).status, FENCE_ST_NOPERM);
    fence_cmd ro = c_resign("x", r.token);
    ro.owner = 7;
    CHECK_EQ_U64(run(f, 3, ro).status, FENCE_ST_NOPERM);
    ro.flags = FENCE_CMD_F_ADMIN;
    CHECK_EQ_U64(run(f, 3, ro).value, 1);
    done(f);
}

/* REQID retries and CANCEL of a candidate. */
static void test_reqid_cancel(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 10000, 0);
    uint64_t b = grant(f, 0, 10000, 0);
    fence_result ra = run(f, 1, c_campaign("r", a, 0, "a"));
    fence_cmd cb = c_campaign("r", b, 5000, "b");
    cb.flags = FENCE_CMD_F_REQID;
    cb.req_id = 42;
    fence_result q = run(f, 2, cb);
    REQUIRE(q.status == FENCE_ST_QUEUED);
    fence_result q2 = run(f, 3, cb);
    CHECK_EQ_U64(q2.status, FENCE_ST_QUEUED);
    CHECK_EQ_U64(q2.wait_id, q.wait_id);
    fence_cmd other = cb;
    other.value = (const uint8_t *)"B";
    CHECK_EQ_U64(run(f, 3, other).status, FENCE_ST_INVALID); /* another value */
    run(f, 4, c_resign("r", ra.token));
    fence_result got = run(f, 5, cb);
    CHECK_EQ_U64(got.status, FENCE_ST_OK);
    CHECK_EQ_U64(got.lease, b);
    check_value(f, "r", "b");
    /* CANCEL a candidate: its value goes with it (done() counts memory). */
    fence_result qa = run(f, 6, c_campaign("r", a, 5000, "a2"));
    REQUIRE(qa.status == FENCE_ST_QUEUED);
    fence_cmd cc = {.type = FENCE_CMD_CANCEL, .wait_id = qa.wait_id};
    run(f, 7, cc);
    CHECK_EQ_U64(event_of(f, qa.wait_id).status, FENCE_ST_NIL);
    CHECK_EQ_U64(info(f, "r").candidates, 0);
    done(f);
}

/* LEADER_START rebases a candidate's wait like any wait. */
static void test_leader_start_rebase(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 100000, 0);
    uint64_t b = grant(f, 0, 100000, 0);
    run(f, 1, c_campaign("s", a, 0, "a"));
    fence_result q = run(f, 2, c_campaign("s", b, 1000, "b"));
    REQUIRE(q.status == FENCE_ST_QUEUED);
    fence_cmd ls = {.type = FENCE_CMD_LEADER_START};
    fence_limits_default(&ls.limits);
    run(f, 900, ls);
    run(f, 1500, c_tick()); /* old deadline 1002 is now 1900 */
    CHECK(fence_fsm_wait_exists(f, q.wait_id));
    run(f, 1900, c_tick());
    CHECK(!fence_fsm_wait_exists(f, q.wait_id));
    done(f);
}

static uint8_t *snap(fence_fsm *f, size_t *n)
{
    *n = fence_fsm_snapshot_size(f);
    uint8_t *b = malloc(*n);
    REQUIRE(b != NULL);
    CHECK_EQ_U64(fence_fsm_snapshot(f, b, *n), *n);
    return b;
}

static void reseal(uint8_t *b, size_t n)
{
    uint32_t crc = fence__crc32c(b, n - 4);
    for (int i = 0; i < 4; i++)
        b[n - 4 + (size_t)i] = (uint8_t)(crc >> (8 * i));
}

/* The section "elect": a leader, candidates, a gone election's revision;
 * restored byte for byte, and the restored state goes on alike. */
static void test_snapshot(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 10000, 0);
    uint64_t b = grant(f, 0, 10000, 0);
    uint64_t c = grant(f, 0, 10000, 0);
    fence_cmd lk = c_named(FENCE_CMD_LOCK, "plain");
    lk.lease = c;
    REQUIRE(run(f, 1, lk).status == FENCE_ST_OK);
    fence_result ra = run(f, 1, c_campaign("one", a, 0, "leader-a"));
    run(f, 2, c_campaign("one", b, 5000, "cand-b"));
    run(f, 2, c_campaign("one", c, 5000, ""));
    fence_result rg = run(f, 3, c_campaign("gone", a, 0, "x"));
    run(f, 4, c_resign("gone", rg.token));
    uint64_t gone_rev = info(f, "gone").revision;
    CHECK(gone_rev > 0);
    size_t n = 0;
    uint8_t *s = snap(f, &n);
    fence_fsm *g = new_fsm();
    REQUIRE(fence_fsm_restore(g, s, n) == 0);
    size_t n2 = 0;
    uint8_t *s2 = snap(g, &n2);
    REQUIRE(n2 == n);
    CHECK(memcmp(s, s2, n) == 0);
    CHECK_EQ_U64(info(g, "gone").revision, gone_rev);
    CHECK_EQ_U64(fence_fsm_elect_revision(g), fence_fsm_elect_revision(f));
    check_value(g, "one", "leader-a");
    /* Both go on alike: a resigns, b is elected with its value. */
    fence_result x1 = run(f, 5, c_resign("one", ra.token));
    fence_result x2 = run(g, 5, c_resign("one", ra.token));
    CHECK_EQ_U64(x1.revision, x2.revision);
    check_value(f, "one", "cand-b");
    check_value(g, "one", "cand-b");
    free(s2);
    s2 = snap(g, &n2);
    free(s);
    s = snap(f, &n);
    REQUIRE(n == n2);
    CHECK(memcmp(s, s2, n) == 0);
    /* Every single-byte change of the section is refused or restores a
     * state that passes the check. */
    uint8_t *m = malloc(n);
    REQUIRE(m != NULL);
    unsigned accepted = 0;
    size_t from = n > 120 ? n - 120 : 0; /* the tail: dedup and elect */
    for (size_t i = from; i < n - 4; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(m, s, n);
            m[i] ^= (uint8_t)(1u << bit);
            reseal(m, n);
            fence_fsm *h = new_fsm();
            int rc = fence_fsm_restore(h, m, n);
            CHECK(rc == 0 || rc == FENCE_ST_INVALID);
            if (rc == 0) {
                accepted++;
                CHECK(fence_fsm_check(h) == NULL);
            }
            fence_fsm_destroy(h);
        }
    }
    printf("# %u resealed bit flips of the tail were valid states\n", accepted);
    /* Truncated by one byte of the section: refused. */
    memcpy(m, s, n);
    memmove(m + n - 5, m + n - 4, 4);
    reseal(m, n - 1);
    fence_fsm *h = new_fsm();
    CHECK_EQ_I64(fence_fsm_restore(h, m, n - 1), FENCE_ST_INVALID);
    fence_fsm_destroy(h);
    free(m);
    free(s);
    free(s2);
    fence_fsm_destroy(g);
    done(f);
}

/* Bytes of the empty "sem" section (sem_snap.c: the semaphore count and
 * the slot-record count), the last before the CRC. */
#define SEM_EMPTY 8

/* A version-4 snapshot (no kinds' sections) restores with no elections
 * and re-encodes as version 5; a version-4 one that carries a section is
 * refused; an elections section whose candidates do not match the lock's
 * waiters is refused. */
static void test_snapshot_v4(void)
{
    fence_fsm *f = new_fsm();
    uint64_t a = grant(f, 0, 10000, 0);
    fence_cmd lk = c_named(FENCE_CMD_LOCK, "plain");
    lk.lease = a;
    REQUIRE(run(f, 1, lk).status == FENCE_ST_OK);
    size_t n = 0;
    uint8_t *s5 = snap(f, &n);
    CHECK_EQ_U64(s5[4], 5);
    /* The empty kinds' sections: "rw" and "multi" (a count each, 4 bytes),
     * "elect" (count, counter, tombs: 16) and "sem" (after elect: SEM_EMPTY). */
    size_t n4 = n - 4 - 4 - 16 - SEM_EMPTY;
    uint8_t *s4 = malloc(n4);
    REQUIRE(s4 != NULL);
    memcpy(s4, s5, n4 - 4);
    s4[4] = 4;
    reseal(s4, n4);
    fence_fsm *g = new_fsm();
    REQUIRE(fence_fsm_restore(g, s4, n4) == 0);
    size_t m = 0;
    uint8_t *again = snap(g, &m);
    REQUIRE(m == n);
    CHECK(memcmp(again, s5, n) == 0);
    free(again);
    /* Version 4 with the section still there: trailing bytes. */
    s5[4] = 4;
    reseal(s5, n);
    CHECK_EQ_I64(fence_fsm_restore(g, s5, n), FENCE_ST_INVALID);
    free(s4);
    free(s5);
    /* A candidate count that is not the lock's waiter count. */
    uint64_t b = grant(f, 2, 10000, 0);
    REQUIRE(run(f, 3, c_campaign("e", a, 0, "a")).status == FENCE_ST_OK);
    REQUIRE(run(f, 3, c_campaign("e", b, 5000, "b")).status == FENCE_ST_QUEUED);
    uint8_t *s = snap(f, &n);
    /* The section ends with: u32 candidates (1) | u32 len (1) | "b"; the
     * empty "sem" section and the CRC follow. */
    size_t end = n - 4 - SEM_EMPTY;
    REQUIRE(n > 13 + SEM_EMPTY);
    CHECK_EQ_U64(s[end - 1], 'b');
    CHECK_EQ_U64(s[end - 1 - 4 - 4], 1);
    s[end - 1 - 4 - 4] = 2;
    reseal(s, n);
    CHECK_EQ_I64(fence_fsm_restore(g, s, n), FENCE_ST_INVALID);
    free(s);
    fence_fsm_destroy(g);
    done(f);
}

/* The entry codec carries the commands and their values; a value over
 * the limit is refused. */
static void test_entry_codec(void)
{
    fence_cmd cmds[3] = {c_campaign("n", 5, 100, "val"), c_proclaim("n", 7, "v2"),
                         c_resign("n", 7)};
    size_t size = fence_entry_size(cmds, 3);
    uint8_t *buf = malloc(size);
    REQUIRE(buf != NULL);
    REQUIRE(fence_entry_encode(9, cmds, 3, buf, size) == size);
    CHECK_EQ_U64(buf[0], FENCE_ENTRY_VERSION_KINDS);
    fence_entry_iter it;
    REQUIRE(fence_entry_open(&it, buf, size) == 0);
    fence_cmd c;
    REQUIRE(fence_entry_next(&it, &c) == 1);
    CHECK_EQ_U64(c.type, FENCE_CMD_ELECT_CAMPAIGN);
    CHECK_EQ_U64(c.lease, 5);
    CHECK_EQ_U64(c.wait_ms, 100);
    CHECK_EQ_U64(c.value_len, 3);
    CHECK(memcmp(c.value, "val", 3) == 0);
    REQUIRE(fence_entry_next(&it, &c) == 1);
    CHECK_EQ_U64(c.type, FENCE_CMD_ELECT_PROCLAIM);
    CHECK_EQ_U64(c.token, 7);
    CHECK_EQ_U64(c.value_len, 2);
    REQUIRE(fence_entry_next(&it, &c) == 1);
    CHECK_EQ_U64(c.type, FENCE_CMD_ELECT_RESIGN);
    CHECK_EQ_I64(fence_entry_next(&it, &c), 0);
    /* Every truncation is refused. */
    for (size_t cut = 0; cut < size; cut++) {
        fence_entry_iter t;
        int ok = fence_entry_open(&t, buf, cut) == 0;
        while (ok && fence_entry_next(&t, &c) == 1) {
        }
        fence_fsm *f = new_fsm();
        fence_result res[3];
        CHECK(fence_fsm_apply_entry(f, buf, cut, res, 3) < 0);
        done(f);
    }
    free(buf);
    done(new_fsm());
}

int main(void)
{
    TEST_RUN(test_campaign_resign_proclaim);
    TEST_RUN(test_lease_end);
    TEST_RUN(test_wrongtype);
    TEST_RUN(test_limits_and_owners);
    TEST_RUN(test_reqid_cancel);
    TEST_RUN(test_leader_start_rebase);
    TEST_RUN(test_snapshot);
    TEST_RUN(test_snapshot_v4);
    TEST_RUN(test_entry_codec);
    return TEST_DONE();
}
