/* Model-based randomized test of the core.
 *
 * A tiny reference model of the lock state machine (core_model.c), written
 * separately and as plainly as possible (arrays indexed by id, linear
 * scans, no heap, no hash tables), is run side by side with the real state machine on random
 * command sequences.  After every step the results, the events, the
 * counters, every lock and every lease are compared, and fence_fsm_check
 * must pass.  A second real state machine is fed the same commands one by
 * one while the first gets some of them as encoded log entries and is
 * snapshotted and restored now and then; both must end with identical
 * snapshot bytes.
 *
 *   FENCE_SEED=<n>    replay one seed (printed on failure)
 *   FENCE_SEEDS=<n>   run n seeds (default below)
 *   FENCE_STEPS=<n>   steps per seed
 */
#include "../lib/test.h"
#include "test_core_fork.h"

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "core_model.h"

#define DEFAULT_SEEDS 2000
#define DEFAULT_STEPS 150

/* ---- A small PRNG (splitmix64) ------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rnd_below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

static uint64_t pick(const uint64_t *v, size_t n)
{
    return v[rnd_below(n)];
}

/* ---- The real state machines ------------------------------------------- */

static void *t_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return malloc(n);
}

static void t_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

typedef struct evlog {
    fence_event ev[MAXEV];
    int n;
} evlog;

/* Append the events of f's last apply/advance call to l. */
static void take_events(fence_fsm *f, evlog *l)
{
    size_t n = 0;
    const fence_event *ev = fence_fsm_events(f, &n);
    for (size_t i = 0; i < n; i++) {
        REQUIRE(l->n < MAXEV);
        l->ev[l->n++] = ev[i];
    }
}

/* A real state machine; hash_seed differs between the machines of a run
 * (it must change nothing observable). */
static fence_fsm *new_fsm(uint64_t hash_seed)
{
    fence_fsm_opts o = {{t_alloc, t_free, NULL}, hash_seed};
    fence_fsm *f = NULL;
    REQUIRE(fence_fsm_create(&o, &f) == 0);
    return f;
}

/* ---- Random commands ------------------------------------------------------ */

static fence_cmd gen_cmd(const model *m)
{
    static const uint64_t ttls[] = {10, 100, 250, 1000, 3000};
    static const uint64_t delays[] = {0, 0, 0, 20, 150};
    static const uint64_t waits[] = {0, 0, 10, 50, 200, 1000};
    fence_cmd c;
    memset(&c, 0, sizeof(c));
    if (m->ndedup > 0 && rnd_below(8) == 0) {
        /* A client's retry: the same request with the same request id. */
        return m->dedup[rnd_below(m->ndedup)].cmd;
    }
    const char *nm = names[rnd_below(NNAMES)];
    uint64_t lease = rnd_below(m->next_lease + 1);
    if (rnd_below(5) != 0) {
        /* Mostly a lease that exists (live or not yet reaped). */
        uint64_t live[64];
        size_t nlive = 0;
        for (uint64_t i = m->next_lease; i-- > 1 && nlive < 64;) {
            if (m->leases[i].used) {
                live[nlive++] = i;
            }
        }
        if (nlive > 0) {
            lease = live[rnd_below(nlive)];
        }
    }
    switch (rnd_below(20)) {
    case 0:
        c.type = FENCE_CMD_LEADER_START;
        c.limits.leases_max = (uint32_t)(rnd_below(3) ? 1 + rnd_below(8) : 100);
        c.limits.locks_max = (uint32_t)(rnd_below(3) ? 1 + rnd_below(4) : 100);
        c.limits.waiters_max = (uint32_t)(rnd_below(3) ? 1 + rnd_below(3) : 100);
        c.limits.dedup_max = (uint32_t)rnd_below(7);
        c.limits.waits_max = (uint32_t)(rnd_below(3) ? 1 + rnd_below(6) : 100);
        if (rnd_below(10) == 0) {
            c.limits.locks_max = 0;
        }
        if (rnd_below(20) == 0) {
            c.limits.waits_max = 0;
        }
        break;
    case 1:
        c.type = FENCE_CMD_TICK;
        break;
    case 2:
    case 3:
    case 4:
        c.type = FENCE_CMD_LEASE_GRANT;
        c.ttl_ms = pick(ttls, 5);
        c.lock_delay_ms = pick(delays, 5);
        break;
    case 5:
    case 6:
        c.type = FENCE_CMD_LEASE_KEEPALIVE;
        c.lease = lease;
        break;
    case 7:
        c.type = FENCE_CMD_LEASE_REVOKE;
        c.lease = lease;
        break;
    case 8:
    case 9:
    case 10:
    case 11:
        c.type = FENCE_CMD_LOCK;
        c.lease = lease;
        c.wait_ms = pick(waits, 6);
        break;
    case 12:
    case 13:
    case 14: {
        c.type = FENCE_CMD_UNLOCK;
        int k = (int)rnd_below(NNAMES);
        nm = names[k];
        c.token = rnd_below(3) ? m->locks[k].token
                               : m->last_token - rnd_below(3);
        break;
    }
    case 15:
    case 16:
    case 17:
        c.type = FENCE_CMD_ACQUIRE;
        c.ttl_ms = pick(ttls, 5);
        c.lock_delay_ms = pick(delays, 5);
        c.wait_ms = pick(waits, 6);
        break;
    case 18:
        c.type = FENCE_CMD_CANCEL;
        c.wait_id = m->next_wait - rnd_below(4);
        break;
    default:
        /* Something invalid. */
        switch (rnd_below(4)) {
        case 0:
            c.type = FENCE_CMD_LEASE_GRANT;
            c.ttl_ms = rnd_below(FENCE_TTL_MS_MIN);
            break;
        case 1:
            c.type = FENCE_CMD_LOCK;
            c.lease = lease;
            c.wait_ms = FENCE_WAIT_MS_MAX + 1;
            break;
        case 2:
            c.type = (uint8_t)(10 + rnd_below(200));
            break;
        default:
            c.type = FENCE_CMD_TICK;
            c.flags = 0x4;
            break;
        }
        break;
    }
    if (c.type == FENCE_CMD_LOCK || c.type == FENCE_CMD_UNLOCK ||
        c.type == FENCE_CMD_ACQUIRE) {
        c.name = (const uint8_t *)nm;
        c.name_len = (uint16_t)strlen(nm);
        if (rnd_below(50) == 0) {
            c.name_len = 0;
        }
    }
    if (rnd_below(4) == 0 && (c.flags & ~FENCE_CMD_F_REQID) == 0) {
        c.flags |= FENCE_CMD_F_REQID;
        c.req_id = 1 + rnd_below(12);
    }
    /* Owners: mostly the default (0), sometimes one of two others, and
     * now and then an administrator. */
    c.owner = rnd_below(4) ? 0 : 1 + rnd_below(2);
    if (rnd_below(10) == 0 && (c.flags & ~FENCE_CMD_F_ALL) == 0) {
        c.flags |= FENCE_CMD_F_ADMIN;
    }
    return c;
}

static uint64_t gen_time(uint64_t now)
{
    switch (rnd_below(8)) {
    case 0:
    case 1:
        return now;
    case 2:
    case 3:
        return now + rnd_below(10);
    case 4:
    case 5:
        return now + rnd_below(120);
    case 6:
        return now + rnd_below(1500);
    default:
        return now > 50 && rnd_below(4) == 0 ? now - rnd_below(50)
                                             : now + 1;
    }
}

/* ---- Comparison ------------------------------------------------------------ */

static char fail_msg[512];

#define EXPECT(cond, ...)                                                   \
    do {                                                                    \
        if (!(cond)) {                                                      \
            snprintf(fail_msg, sizeof(fail_msg), __VA_ARGS__);              \
            return false;                                                   \
        }                                                                   \
    } while (0)

static bool same_result(const fence_result *a, const fence_result *b)
{
    return a->status == b->status && a->lease == b->lease &&
           a->token == b->token && a->wait_id == b->wait_id &&
           a->value == b->value;
}

static bool compare(const model *m, fence_fsm *f)
{
    const char *e = fence_fsm_check(f);
    EXPECT(e == NULL, "fence_fsm_check: %s", e);
    fence_fsm_stats st;
    fence_fsm_stats_get(f, &st);
    uint64_t held = 0, waiters = 0;
    for (int k = 0; k < NNAMES; k++) {
        held += m->locks[k].used && m->locks[k].holder != 0;
        waiters += m_waiters(m, k);
    }
    EXPECT(st.leases == m_count_leases(m), "leases %llu != model %u",
           (unsigned long long)st.leases, m_count_leases(m));
    EXPECT(st.locks == held, "held locks differ");
    EXPECT(st.waiters == waiters, "waiters differ");
    EXPECT(st.last_token == m->last_token, "last_token %llu != model %llu",
           (unsigned long long)st.last_token,
           (unsigned long long)m->last_token);
    EXPECT(st.now_ms == m->now, "now differs");
    for (int k = 0; k < NNAMES; k++) {
        fence_fsm_lock_state li;
        bool h = fence_fsm_lock_info(f, (const uint8_t *)names[k],
                                     (uint16_t)strlen(names[k]), &li);
        const mlock *ml = &m->locks[k];
        bool mh = ml->used && ml->holder != 0;
        EXPECT(h == mh, "lock %s held %d != model %d", names[k], h, mh);
        if (h) {
            EXPECT(li.token == ml->token && li.lease == ml->holder &&
                       li.waiters == m_waiters(m, k) &&
                       li.deadline_ms == m->leases[ml->holder].deadline,
                   "lock %s info differs", names[k]);
        }
    }
    for (uint64_t id = 1; id <= m->next_lease; id++) {
        fence_fsm_lease_state li;
        int rc = fence_fsm_lease_info(f, id, m->now, &li);
        bool live = m_live(m, id);
        EXPECT((rc == 0) == live, "lease %llu live %d != model %d",
               (unsigned long long)id, rc == 0, live);
        if (live) {
            EXPECT(li.deadline_ms == m->leases[id].deadline &&
                       li.ttl_ms == m->leases[id].ttl,
                   "lease %llu info differs", (unsigned long long)id);
        }
    }
    uint64_t dl = 0, id = 0;
    int kind = 0;
    uint64_t md = m_next(m, &dl, &kind, &id) ? dl : UINT64_MAX;
    EXPECT(fence_fsm_next_deadline(f) == md, "next deadline %llu != %llu",
           (unsigned long long)fence_fsm_next_deadline(f),
           (unsigned long long)md);
    return true;
}

static bool same_events(const model *m, const evlog *l, int from_m,
                        int from_l)
{
    EXPECT(m->nev - from_m == l->n - from_l, "event count %d != model %d",
           l->n - from_l, m->nev - from_m);
    for (int i = 0; i < m->nev - from_m; i++) {
        const fence_event *a = &m->ev[from_m + i];
        const fence_event *b = &l->ev[from_l + i];
        EXPECT(a->wait_id == b->wait_id && same_result(&a->result, &b->result),
               "event %d differs: wait %llu st %u tok %llu vs model wait "
               "%llu st %u tok %llu", i, (unsigned long long)b->wait_id,
               b->result.status, (unsigned long long)b->result.token,
               (unsigned long long)a->wait_id, a->result.status,
               (unsigned long long)a->result.token);
    }
    return true;
}

static uint8_t *snap(fence_fsm *f, size_t *n)
{
    *n = fence_fsm_snapshot_size(f);
    uint8_t *b = malloc(*n);
    REQUIRE(b != NULL);
    REQUIRE(fence_fsm_snapshot(f, b, *n) == *n);
    return b;
}

static bool same_snapshots(fence_fsm *a, fence_fsm *b)
{
    size_t na, nb;
    uint8_t *sa = snap(a, &na);
    uint8_t *sb = snap(b, &nb);
    bool same = na == nb && memcmp(sa, sb, na) == 0;
    free(sa);
    free(sb);
    EXPECT(same, "snapshots differ");
    return true;
}

/* ---- One seed ------------------------------------------------------------------ */

static model *M;
static evlog *LA, *LB;

/* Coverage counters: results and events by status, restores, batches. */
static uint64_t n_result[8], n_event[8], n_restores, n_batches, n_dedup_hits;

static bool run_seed(uint64_t seed, int steps)
{
    rng_state = seed;
    memset(M, 0, sizeof(*M));
    M->next_lease = 1;
    M->next_wait = 1;
    fence_limits_default(&M->lim);
    LA->n = LB->n = 0;
    fence_fsm *a = new_fsm(seed * 0x9e3779b97f4a7c15ULL);
    fence_fsm *b = new_fsm(0);
    bool ok = true;
    uint64_t now = 0;
    int ev_seen = 0;
    for (int step = 0; step < steps && ok; step++) {
        now = gen_time(now);
        if (rnd_below(12) == 0 && M->next_lease < MAXID - 16 &&
            M->next_wait < MAXID - 16) {
            /* A batch through the log-entry path for a; one by one for b. */
            fence_cmd cmds[5];
            uint32_t n = 1 + (uint32_t)rnd_below(5);
            for (uint32_t i = 0; i < n; i++) {
                do {
                    cmds[i] = gen_cmd(M);
                } while (cmds[i].type < FENCE_CMD_LEADER_START ||
                         cmds[i].type > FENCE_CMD_CANCEL ||
                         (cmds[i].flags & ~FENCE_CMD_F_REQID) != 0);
            }
            uint8_t buf[4096];
            size_t len = fence_entry_encode(now, cmds, n, buf, sizeof(buf));
            REQUIRE(len > 0);
            fence_result ra[5];
            int ma = M->nev, la = LA->n, lb = LB->n;
            int rc = fence_fsm_apply_entry(a, buf, len, ra, 5);
            take_events(a, LA);
            if (rc != (int)n) {
                snprintf(fail_msg, sizeof(fail_msg), "apply_entry = %d", rc);
                ok = false;
                break;
            }
            for (uint32_t i = 0; i < n && ok; i++) {
                fence_result rm = m_apply(M, now, &cmds[i]);
                fence_result rb;
                fence_fsm_apply(b, now, &cmds[i], &rb);
                take_events(b, LB);
                if (!same_result(&rm, &ra[i]) || !same_result(&rm, &rb)) {
                    snprintf(fail_msg, sizeof(fail_msg),
                             "batch cmd %u type %u: status %u/%u vs model %u, "
                             "token %llu vs %llu", i, cmds[i].type,
                             ra[i].status, rb.status, rm.status,
                             (unsigned long long)ra[i].token,
                             (unsigned long long)rm.token);
                    ok = false;
                }
            }
            ok = ok && same_events(M, LA, ma, la) && same_events(M, LB, ma, lb);
            n_batches++;
        } else {
            if (M->next_lease >= MAXID - 16 || M->next_wait >= MAXID - 16) {
                break;
            }
            fence_cmd c = gen_cmd(M);
            int ma = M->nev, la = LA->n, lb = LB->n;
            uint32_t hits_before = 0;
            for (uint32_t i = 0; i < M->ndedup; i++) {
                hits_before += (c.flags & FENCE_CMD_F_REQID) &&
                               M->dedup[i].req == c.req_id &&
                               M->dedup[i].cmd.owner == c.owner;
            }
            n_dedup_hits += hits_before;
            fence_result rm = m_apply(M, now, &c);
            n_result[rm.status & 7]++;
            fence_result ra, rb;
            fence_fsm_apply(a, now, &c, &ra);
            take_events(a, LA);
            fence_fsm_apply(b, now, &c, &rb);
            take_events(b, LB);
            if (!same_result(&rm, &ra) || !same_result(&rm, &rb)) {
                snprintf(fail_msg, sizeof(fail_msg),
                         "cmd type %u at %llu: status %u lease %llu token "
                         "%llu wait %llu value %llu; model status %u lease "
                         "%llu token %llu wait %llu value %llu", c.type,
                         (unsigned long long)now, ra.status,
                         (unsigned long long)ra.lease,
                         (unsigned long long)ra.token,
                         (unsigned long long)ra.wait_id,
                         (unsigned long long)ra.value, rm.status,
                         (unsigned long long)rm.lease,
                         (unsigned long long)rm.token,
                         (unsigned long long)rm.wait_id,
                         (unsigned long long)rm.value);
                ok = false;
            }
            ok = ok && same_events(M, LA, ma, la) && same_events(M, LB, ma, lb);
        }
        ok = ok && compare(M, a) && compare(M, b);
        for (int i = ev_seen; i < M->nev; i++) {
            n_event[M->ev[i].result.status & 7]++;
        }
        ev_seen = M->nev;
        if (ok && rnd_below(25) == 0) {
            /* Snapshot a, restore into a fresh state machine, go on. */
            size_t n;
            uint8_t *s = snap(a, &n);
            fence_fsm *c = new_fsm(seed + (uint64_t)step);
            int rc = fence_fsm_restore(c, s, n);
            free(s);
            if (rc != 0) {
                snprintf(fail_msg, sizeof(fail_msg), "restore = %d", rc);
                ok = false;
                fence_fsm_destroy(c);
            } else {
                fence_fsm_destroy(a);
                a = c;
                n_restores++;
                ok = same_snapshots(a, b) && compare(M, a);
            }
        }
        if (!ok) {
            printf("#   seed %llu failed at step %d: %s\n",
                   (unsigned long long)seed, step, fail_msg);
        }
    }
    if (ok && !same_snapshots(a, b)) {
        printf("#   seed %llu: final %s\n", (unsigned long long)seed,
               fail_msg);
        ok = false;
    }
    fence_fsm_destroy(a);
    fence_fsm_destroy(b);
    return ok;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

static void test_model_random(void)
{
    M = calloc(1, sizeof(*M));
    LA = calloc(1, sizeof(*LA));
    LB = calloc(1, sizeof(*LB));
    REQUIRE(M && LA && LB);
    int steps = (int)env_u64("FENCE_STEPS", DEFAULT_STEPS);
    const char *one = getenv("FENCE_SEED");
    int failed = 0;
    if (one != NULL && *one) {
        uint64_t seed = strtoull(one, NULL, 10);
        failed = !run_seed(seed, steps);
    } else {
        uint64_t n = env_u64("FENCE_SEEDS", DEFAULT_SEEDS);
        for (uint64_t s = 1; s <= n && failed < 3; s++) {
            if (!run_seed(s, steps)) {
                printf("#   replay: FENCE_SEED=%llu %s\n",
                       (unsigned long long)s, "build/tests/test_core_model");
                failed++;
            }
        }
        printf("# %llu seeds x %d steps\n", (unsigned long long)n, steps);
        printf("# results: ok %llu nil %llu queued %llu nolease %llu limit "
               "%llu invalid %llu noperm %llu; dedup hits %llu\n",
               (unsigned long long)n_result[FENCE_ST_OK],
               (unsigned long long)n_result[FENCE_ST_NIL],
               (unsigned long long)n_result[FENCE_ST_QUEUED],
               (unsigned long long)n_result[FENCE_ST_NOLEASE],
               (unsigned long long)n_result[FENCE_ST_LIMIT],
               (unsigned long long)n_result[FENCE_ST_INVALID],
               (unsigned long long)n_result[FENCE_ST_NOPERM],
               (unsigned long long)n_dedup_hits);
        printf("# events: granted %llu nil %llu nolease %llu; restores %llu, "
               "entry batches %llu\n",
               (unsigned long long)n_event[FENCE_ST_OK],
               (unsigned long long)n_event[FENCE_ST_NIL],
               (unsigned long long)n_event[FENCE_ST_NOLEASE],
               (unsigned long long)n_restores, (unsigned long long)n_batches);
        /* The run must have exercised every outcome of the mutex commands
         * (WRONGTYPE needs a second kind of name). */
        if (n >= 100) {
            for (int st = FENCE_ST_OK; st <= FENCE_ST_NOPERM; st++) {
                CHECK(n_result[st] > 0);
            }
            CHECK(n_event[FENCE_ST_OK] > 0);
            CHECK(n_event[FENCE_ST_NIL] > 0);
            CHECK(n_event[FENCE_ST_NOLEASE] > 0);
            CHECK(n_restores > 0);
            CHECK(n_dedup_hits > 0);
        }
    }
    free(M);
    free(LA);
    free(LB);
    CHECK(failed == 0);
}

/* An allocator that fails at random (from the test's PRNG) and counts
 * what is live, for the failure-injection run. */
typedef struct flaky {
    uint64_t fail_one_in; /* fail about one allocation in this many */
    long live;            /* allocations not yet freed */
    uint64_t failures;    /* allocations refused */
} flaky;

static void *flaky_alloc(void *ctx, size_t n)
{
    flaky *fl = ctx;
    if (fl->fail_one_in && rnd_below(fl->fail_one_in) == 0) {
        fl->failures++;
        return NULL;
    }
    void *p = malloc(n);
    if (p != NULL) {
        fl->live++;
    }
    return p;
}

static void flaky_free(void *ctx, void *p)
{
    flaky *fl = ctx;
    fl->live--;
    free(p);
}

/* One seed of the failure-injection run, in a child: a state machine whose
 * allocations fail at random (f) and one whose never do (g) get the same
 * random commands, snapshots and restores.  Exits 3 if they ever answer
 * differently or their states differ, 0 if they agreed to the end; a
 * failed allocation inside apply aborts the child (the caller checks the
 * message). */
static void flaky_seed(uint64_t seed)
{
    rng_state = seed * 7919;
    memset(M, 0, sizeof(*M));
    M->next_lease = 1;
    M->next_wait = 1;
    fence_limits_default(&M->lim);
    flaky fl = {30 + rnd_below(300), 0, 0};
    fence_fsm_opts o = {{flaky_alloc, flaky_free, &fl}, seed};
    fence_fsm *f = NULL;
    while (fence_fsm_create(&o, &f) != 0) {
        REQUIRE(f == NULL);
    }
    fence_fsm *g = new_fsm(seed + 1);
    uint64_t now = 0;
    for (int step = 0; step < DEFAULT_STEPS; step++) {
        now = gen_time(now);
        fence_cmd c = gen_cmd(M);
        fence_result r, rg;
        fence_fsm_apply(f, now, &c, &r);
        fence_fsm_apply(g, now, &c, &rg);
        size_t nf, ng;
        const fence_event *ef = fence_fsm_events(f, &nf);
        const fence_event *eg = fence_fsm_events(g, &ng);
        if (memcmp(&r, &rg, sizeof(r)) != 0 || nf != ng ||
            (nf > 0 && memcmp(ef, eg, nf * sizeof(*ef)) != 0)) {
            printf("#   seed %llu step %d: answered differently\n",
                   (unsigned long long)seed, step);
            fflush(stdout);
            _exit(3);
        }
        /* keep the model's id counters roughly in step for gen_cmd */
        if (r.lease >= M->next_lease && r.lease < MAXID - 1) {
            M->next_lease = r.lease + 1;
            M->leases[r.lease].used = true;
        }
        REQUIRE(fence_fsm_check(f) == NULL);
        if (rnd_below(20) == 0) {
            size_t n1;
            uint8_t *s1 = snap(g, &n1);
            REQUIRE(fence_fsm_restore(f, s1, n1) == 0);
            REQUIRE(fence_fsm_restore(g, s1, n1) == 0);
            free(s1);
        }
        if (!same_snapshots(f, g)) {
            printf("#   seed %llu step %d: states differ\n",
                   (unsigned long long)seed, step);
            fflush(stdout);
            _exit(3);
        }
    }
    fence_fsm_destroy(f);
    fence_fsm_destroy(g);
    REQUIRE(fl.live == 0);
}

/* The child's side of one seed. */
static void flaky_child(void *arg)
{
    flaky_seed(*(const uint64_t *)arg);
}

/* Random commands, snapshots and restores with allocations failing at
 * random on one of two replicas: every seed ends either with the two
 * answering alike all along (no failure hit, or a harmless one) or with
 * the failing one stopped by "fatal: out of memory while ...", never with
 * a different answer (a LIMIT where the other granted). */
static void test_alloc_failure_random(void)
{
    M = calloc(1, sizeof(*M));
    REQUIRE(M != NULL);
    uint64_t seeds = env_u64("FENCE_SEEDS", DEFAULT_SEEDS) / 10 + 1;
    uint64_t stopped = 0, agreed = 0;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        char err[512];
        int status = fork_case(flaky_child, &seed, err, sizeof(err));
        if (stopped_for_oom(status, err)) {
            stopped++;
        } else if (exited_with(status, 0)) {
            agreed++;
        } else {
            printf("#   seed %llu: status 0x%x %s\n", (unsigned long long)seed,
                   (unsigned)status, err);
            CHECK(0);
        }
    }
    printf("# %llu seeds: %llu stopped on a failed allocation, %llu agreed "
           "to the end\n", (unsigned long long)seeds,
           (unsigned long long)stopped, (unsigned long long)agreed);
    CHECK(stopped > 0);
    free(M);
}

int main(void)
{
    TEST_RUN(test_model_random);
    TEST_RUN(test_alloc_failure_random);
    return TEST_DONE();
}
