/* Unit tests of the deterministic core (src/core): allocation failures,
 * snapshots, the entry codec, owners and the apply of encoded entries.
 * (The lock and lease commands: test_core_lock.c.) */
#include "test_core_fx.h"
#include "test_core_fork.h"

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "core/fsm_int.h"

/* Bytes of the coordination kinds' sections of a version-5 snapshot when
 * all are empty (snapshot.c): rw's u32 count (shared.c), multi's (multi.c), elect's 16
 * (elect_snap.c), sem's two u32 counts (sem_snap.c: semaphores and slot
 * records). */
#define SNAP_KINDS_EMPTY (4 + 4 + 16 + 8)

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
    TEST_RUN(test_alloc_failures);
    TEST_RUN(test_snapshot_round_trip);
    TEST_RUN(test_snapshot_stale_queued_record);
    TEST_RUN(test_snapshot_corrupt_rejected);
    TEST_RUN(test_entry_round_trip);
    TEST_RUN(test_apply_entry);
    TEST_RUN(test_old_versions_load);
    TEST_RUN(test_owners);
    return TEST_DONE();
}
