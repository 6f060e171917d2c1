/* Semaphores against an independent reference model (random operations):
 * two semaphores ("a" of 2 slots, "b" of 3) and plain locks whose names
 * collide with theirs ("a", "a#0", "a#1", "a#2", "b#2", "c"), driven by
 * SEM_ACQUIRE (with and without WAIT, sometimes with the wrong N),
 * SEM_RELEASE (right and wrong tokens), LOCK, UNLOCK, LEASE_REVOKE and
 * CANCEL.  Leases and waits are long, so nothing expires: the model needs
 * no clock.  Every result and every event must be what the model says:
 * lowest free slot first, FIFO hand-off with the next token, one slot per
 * lease, WRONGTYPE for a claimed name or another N, revokes releasing in
 * token order.  fence_fsm_check runs after every step. */
#include "../lib/test.h"

#include <stdbool.h>

#include "core/fsm.h"

static void *m_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return malloc(n);
}

static void m_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

#define MAX_LEASES 6
#define MAX_WAITS 64
#define N_NAMES 6

/* One semaphore of the model. */
typedef struct msem {
    const char *name;
    uint32_t n;
    uint64_t slot_lease[3]; /* 0: free */
    uint64_t slot_token[3];
    uint64_t fifo_wait[MAX_WAITS];
    uint64_t fifo_lease[MAX_WAITS];
    unsigned nfifo;
} msem;

/* A plain lock of the model (no waiters: plain LOCKs never WAIT here). */
typedef struct mlock {
    const char *name;
    uint64_t lease; /* 0: free */
    uint64_t token;
} mlock;

typedef struct model {
    uint64_t last_token;
    uint64_t lease[MAX_LEASES]; /* live lease ids (0: none) */
    msem sem[2];
    mlock lock[N_NAMES];
} model;

static const char *const lock_names[N_NAMES] = {"a", "a#0", "a#1", "a#2", "b#2", "c"};

static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool sem_exists(const msem *s)
{
    if (s->nfifo > 0)
        return true;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->slot_lease[i] != 0)
            return true;
    return false;
}

/* Whether a plain name belongs to an existing semaphore. */
static bool claimed(const model *m, const char *name)
{
    for (int k = 0; k < 2; k++) {
        const msem *s = &m->sem[k];
        if (!sem_exists(s))
            continue;
        if (strcmp(name, s->name) == 0)
            return true;
        for (uint32_t i = 0; i < s->n; i++) {
            char buf[16];
            snprintf(buf, sizeof(buf), "%s#%u", s->name, i);
            if (strcmp(name, buf) == 0)
                return true;
        }
    }
    return false;
}

/* An event the model expects. */
typedef struct mev {
    uint64_t wait_id;
    uint8_t status;
    uint64_t token;
    uint32_t slot;
} mev;

static mev want_ev[64];
static size_t n_want;
static unsigned long n_status[FENCE_ST_LAST + 1]; /* results seen, by status */
static unsigned long n_handoffs;                   /* OK events */

/* Slot i of s became free: the first waiter takes it. */
static void slot_free(model *m, msem *s, uint32_t i)
{
    s->slot_lease[i] = 0;
    if (s->nfifo == 0)
        return;
    s->slot_lease[i] = s->fifo_lease[0];
    s->slot_token[i] = ++m->last_token;
    mev *e = &want_ev[n_want++];
    e->wait_id = s->fifo_wait[0];
    e->status = FENCE_ST_OK;
    e->token = s->slot_token[i];
    e->slot = i;
    memmove(s->fifo_wait, s->fifo_wait + 1, (s->nfifo - 1) * sizeof(uint64_t));
    memmove(s->fifo_lease, s->fifo_lease + 1, (s->nfifo - 1) * sizeof(uint64_t));
    s->nfifo--;
}

/* Remove waits from s matching (lease, or wait id); with events. */
static void drop_waits(msem *s, uint64_t lease, uint64_t wait_id, uint8_t status)
{
    for (unsigned j = 0; j < s->nfifo;) {
        if ((lease != 0 && s->fifo_lease[j] == lease) ||
            (wait_id != 0 && s->fifo_wait[j] == wait_id)) {
            mev *e = &want_ev[n_want++];
            memset(e, 0, sizeof(*e));
            e->wait_id = s->fifo_wait[j];
            e->status = status;
            memmove(s->fifo_wait + j, s->fifo_wait + j + 1, (s->nfifo - j - 1) * sizeof(uint64_t));
            memmove(s->fifo_lease + j, s->fifo_lease + j + 1,
                    (s->nfifo - j - 1) * sizeof(uint64_t));
            s->nfifo--;
        } else {
            j++;
        }
    }
}

/* Revoke: release its holds in token order, then fail its waits. */
static void model_revoke(model *m, uint64_t lease)
{
    for (;;) {
        uint64_t best = UINT64_MAX;
        int kind = -1, a = 0;
        uint32_t b = 0;
        for (int k = 0; k < 2; k++)
            for (uint32_t i = 0; i < m->sem[k].n; i++)
                if (m->sem[k].slot_lease[i] == lease && m->sem[k].slot_token[i] < best) {
                    best = m->sem[k].slot_token[i];
                    kind = 0;
                    a = k;
                    b = i;
                }
        for (int k = 0; k < N_NAMES; k++)
            if (m->lock[k].lease == lease && m->lock[k].token < best) {
                best = m->lock[k].token;
                kind = 1;
                a = k;
            }
        if (kind < 0)
            break;
        if (kind == 0)
            slot_free(m, &m->sem[a], b);
        else
            m->lock[a].lease = 0;
    }
    /* Its waits fail in wait-id order, across the semaphores. */
    for (;;) {
        uint64_t best = UINT64_MAX;
        int at = -1;
        for (int k = 0; k < 2; k++)
            for (unsigned j = 0; j < m->sem[k].nfifo; j++)
                if (m->sem[k].fifo_lease[j] == lease && m->sem[k].fifo_wait[j] < best) {
                    best = m->sem[k].fifo_wait[j];
                    at = k;
                }
        if (at < 0)
            break;
        drop_waits(&m->sem[at], 0, best, FENCE_ST_NOLEASE);
    }
}

static void run_seed(uint64_t seed, int steps)
{
    rng = seed * 2654435761u + 1;
    fence_fsm_opts o = {{m_alloc, m_free, NULL}, seed};
    fence_fsm *f = NULL;
    REQUIRE(fence_fsm_create(&o, &f) == 0);
    model m;
    memset(&m, 0, sizeof(m));
    m.sem[0].name = "a";
    m.sem[0].n = 2;
    m.sem[1].name = "b";
    m.sem[1].n = 3;
    for (int k = 0; k < N_NAMES; k++)
        m.lock[k].name = lock_names[k];
    uint64_t now = 1;
    for (int step = 0; step < steps; step++) {
        now++;
        n_want = 0;
        fence_cmd c;
        memset(&c, 0, sizeof(c));
        unsigned roll = (unsigned)(next_rand() % 100);
        uint64_t lease = m.lease[next_rand() % MAX_LEASES];
        int which = (int)(next_rand() % 2);
        msem *s = &m.sem[which];
        fence_result want;
        memset(&want, 0, sizeof(want));
        bool check_wait_id = false;
        if (roll < 10 || lease == 0) {
            c.type = FENCE_CMD_LEASE_GRANT;
            c.ttl_ms = 100000000;
        } else if (roll < 45) {
            c.type = FENCE_CMD_SEM_ACQUIRE;
            c.name = (const uint8_t *)s->name;
            c.name_len = (uint16_t)strlen(s->name);
            c.permits = next_rand() % 10 == 0 ? s->n + 1 : s->n;
            c.lease = lease;
            c.wait_ms = next_rand() % 2 ? 10000000 : 0;
            bool exists = sem_exists(s);
            int held = -1;
            for (uint32_t i = 0; i < s->n; i++)
                if (s->slot_lease[i] == lease)
                    held = (int)i;
            int waiting = -1;
            for (unsigned j = 0; j < s->nfifo; j++)
                if (s->fifo_lease[j] == lease)
                    waiting = (int)j;
            bool blocked = false;
            if (!exists)
                for (int k = 0; k < N_NAMES; k++) {
                    if (m.lock[k].lease == 0)
                        continue;
                    if (strcmp(m.lock[k].name, s->name) == 0)
                        blocked = true;
                    for (uint32_t i = 0; i < c.permits; i++) {
                        char buf[16];
                        snprintf(buf, sizeof(buf), "%s#%u", s->name, i);
                        if (strcmp(m.lock[k].name, buf) == 0)
                            blocked = true;
                    }
                }
            uint32_t free_slot = s->n;
            for (uint32_t i = s->n; i-- > 0;)
                if (s->slot_lease[i] == 0)
                    free_slot = i;
            if (exists && c.permits != s->n) {
                want.status = FENCE_ST_WRONGTYPE;
                want.value = s->n;
            } else if (!exists && blocked) {
                want.status = FENCE_ST_WRONGTYPE;
            } else if (!exists && c.permits != s->n) {
                /* Another N for a semaphore that does not exist: it would
                 * be made with that N, which this model does not follow. */
                c.permits = s->n;
                step--;
                continue;
            } else if (held >= 0) {
                want.status = FENCE_ST_OK;
                want.token = s->slot_token[held];
                want.slot = (uint32_t)held;
                want.lease = lease;
            } else if (waiting >= 0) {
                want.status = FENCE_ST_QUEUED;
                want.wait_id = s->fifo_wait[waiting];
                want.lease = lease;
            } else if (free_slot < s->n) {
                want.status = FENCE_ST_OK;
                want.slot = free_slot;
                want.token = ++m.last_token;
                want.lease = lease;
                s->slot_lease[free_slot] = lease;
                s->slot_token[free_slot] = want.token;
            } else if (c.wait_ms == 0) {
                want.status = FENCE_ST_NIL;
            } else {
                want.status = FENCE_ST_QUEUED;
                want.lease = lease;
                check_wait_id = true; /* new: taken from the result */
            }
        } else if (roll < 65) {
            c.type = FENCE_CMD_SEM_RELEASE;
            c.name = (const uint8_t *)s->name;
            c.name_len = (uint16_t)strlen(s->name);
            c.slot = (uint32_t)(next_rand() % s->n);
            c.token = next_rand() % 4 == 0 ? next_rand() % (m.last_token + 2)
                                           : s->slot_token[c.slot];
            want.status = FENCE_ST_OK;
            bool is_lock = false;
            for (int k = 0; k < N_NAMES; k++)
                if (m.lock[k].lease != 0 && strcmp(m.lock[k].name, s->name) == 0)
                    is_lock = true;
            if (!sem_exists(s) && is_lock)
                want.status = FENCE_ST_WRONGTYPE; /* the name is a lock's */
            else if (s->slot_lease[c.slot] != 0 && s->slot_token[c.slot] == c.token) {
                want.value = 1;
                slot_free(&m, s, c.slot);
            }
        } else if (roll < 80) {
            int k = (int)(next_rand() % N_NAMES);
            mlock *l = &m.lock[k];
            c.type = FENCE_CMD_LOCK;
            c.name = (const uint8_t *)l->name;
            c.name_len = (uint16_t)strlen(l->name);
            c.lease = lease;
            if (claimed(&m, l->name)) {
                want.status = FENCE_ST_WRONGTYPE;
            } else if (l->lease == lease) {
                want.status = FENCE_ST_OK;
                want.token = l->token;
                want.lease = lease;
            } else if (l->lease != 0) {
                want.status = FENCE_ST_NIL;
            } else {
                want.status = FENCE_ST_OK;
                want.token = ++m.last_token;
                want.lease = lease;
                l->lease = lease;
                l->token = want.token;
            }
        } else if (roll < 87) {
            int k = (int)(next_rand() % N_NAMES);
            mlock *l = &m.lock[k];
            c.type = FENCE_CMD_UNLOCK;
            c.name = (const uint8_t *)l->name;
            c.name_len = (uint16_t)strlen(l->name);
            c.token = l->token;
            if (claimed(&m, l->name)) {
                want.status = FENCE_ST_WRONGTYPE;
            } else {
                want.status = FENCE_ST_OK;
                if (l->lease != 0) {
                    want.value = 1;
                    l->lease = 0;
                }
            }
        } else if (roll < 95) {
            c.type = FENCE_CMD_LEASE_REVOKE;
            c.lease = lease;
            want.status = FENCE_ST_OK;
            model_revoke(&m, lease);
            for (int i = 0; i < MAX_LEASES; i++)
                if (m.lease[i] == lease)
                    m.lease[i] = 0;
        } else {
            c.type = FENCE_CMD_CANCEL;
            c.wait_id = s->nfifo > 0 ? s->fifo_wait[next_rand() % s->nfifo] : 0;
            want.status = FENCE_ST_OK;
            if (c.wait_id != 0)
                drop_waits(s, 0, c.wait_id, FENCE_ST_NIL);
        }
        fence_result r;
        fence_fsm_apply(f, now, &c, &r);
        const char *e = fence_fsm_check(f);
        if (e != NULL)
            printf("#   seed %llu step %d: check: %s\n", (unsigned long long)seed, step, e);
        REQUIRE(e == NULL);
        if (c.type == FENCE_CMD_LEASE_GRANT) {
            REQUIRE(r.status == FENCE_ST_OK);
            m.lease[next_rand() % MAX_LEASES] = r.lease;
            /* (a lease that drops out of the table stays live in the fsm:
             * the model only forgets to use it) */
            continue;
        }
        if (check_wait_id) {
            want.wait_id = r.wait_id;
            REQUIRE(r.wait_id > 0);
            s->fifo_wait[s->nfifo] = r.wait_id;
            s->fifo_lease[s->nfifo] = lease;
            s->nfifo++;
        }
        bool same = r.status == want.status && r.token == want.token && r.slot == want.slot &&
                    r.value == want.value && r.wait_id == want.wait_id &&
                    (want.lease == 0 || r.lease == want.lease);
        if (!same)
            printf("#   seed %llu step %d type %u: got st %u token %llu slot %u value %llu "
                   "wait %llu; model st %u token %llu slot %u value %llu wait %llu\n",
                   (unsigned long long)seed, step, c.type, r.status,
                   (unsigned long long)r.token, r.slot, (unsigned long long)r.value,
                   (unsigned long long)r.wait_id, want.status, (unsigned long long)want.token,
                   want.slot, (unsigned long long)want.value, (unsigned long long)want.wait_id);
        REQUIRE(same);
        n_status[r.status]++;
        size_t n = 0;
        const fence_event *ev = fence_fsm_events(f, &n);
        if (n != n_want)
            printf("#   seed %llu step %d: %zu events, model %zu\n", (unsigned long long)seed,
                   step, n, n_want);
        REQUIRE(n == n_want);
        for (size_t i = 0; i < n; i++) {
            bool ok = ev[i].wait_id == want_ev[i].wait_id &&
                      ev[i].result.status == want_ev[i].status &&
                      ev[i].result.token == want_ev[i].token &&
                      ev[i].result.slot == want_ev[i].slot;
            if (!ok)
                printf("#   seed %llu step %d event %zu: wait %llu st %u token %llu slot %u; "
                       "model wait %llu st %u token %llu slot %u\n",
                       (unsigned long long)seed, step, i, (unsigned long long)ev[i].wait_id,
                       ev[i].result.status, (unsigned long long)ev[i].result.token,
                       ev[i].result.slot, (unsigned long long)want_ev[i].wait_id,
                       want_ev[i].status, (unsigned long long)want_ev[i].token,
                       want_ev[i].slot);
            REQUIRE(ok);
            n_handoffs += ev[i].result.status == FENCE_ST_OK;
        }
        REQUIRE(fence_fsm_last_token(f) == m.last_token);
    }
    fence_fsm_destroy(f);
}

static void test_random_against_model(void)
{
    for (uint64_t seed = 1; seed <= 300; seed++)
        run_seed(seed, 400);
    printf("# 300 seeds x 400 steps agree with the model: ok %lu nil %lu queued %lu "
           "wrongtype %lu, %lu hand-offs\n",
           n_status[FENCE_ST_OK], n_status[FENCE_ST_NIL], n_status[FENCE_ST_QUEUED],
           n_status[FENCE_ST_WRONGTYPE], n_handoffs);
    CHECK(n_status[FENCE_ST_QUEUED] > 100);
    CHECK(n_status[FENCE_ST_WRONGTYPE] > 100);
    CHECK(n_handoffs > 100);
}

int main(void)
{
    TEST_RUN(test_random_against_model);
    return TEST_DONE();
}
