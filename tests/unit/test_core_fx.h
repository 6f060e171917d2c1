/* The fixture the core's unit tests share: a counting test allocator with
 * a failure budget, and one of two fixtures over it.
 *
 *  - fx (the default; test_core.c, test_core_lock.c): a state machine with
 *    the events it reported, and builders for every command.
 *  - The plain one (#define FX_PLAIN before the include; the kinds' tests,
 *    which keep their own command builders): new_fsm(), done(f) and
 *    run(f, now, c) over a bare fence_fsm, every state machine of the
 *    program counting into one allocator.  FX_HASH_SEED (default 0) is
 *    new_fsm's hash seed; a file that defines FX_OWN_RUN writes its own
 *    run() over check_apply(). */
#ifndef FENCE_TEST_CORE_FX_H
#define FENCE_TEST_CORE_FX_H

#include "../lib/test.h"

#include "core/fsm.h"
#include "core/snapshot.h"

/* ---- Allocator ----------------------------------------------------------- */

/* A test allocator: malloc, with an optional budget of successful
 * allocations after which every allocation fails. */
typedef struct talloc {
    long budget;  /* allocations left before failing; < 0: unlimited */
    long live;    /* allocations not yet freed */
} talloc;

static inline void *t_alloc(void *ctx, size_t n)
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

static inline void t_free(void *ctx, void *p)
{
    talloc *t = ctx;
    if (p != NULL) {
        t->live--;
    }
    free(p);
}

/* Apply a command and check every invariant afterwards. */
static inline fence_result check_apply(fence_fsm *f, uint64_t now, fence_cmd c)
{
    fence_result r;
    fence_fsm_apply(f, now, &c, &r);
    const char *e = fence_fsm_check(f);
    if (e != NULL) {
        printf("#   check failed: %s\n", e);
    }
    REQUIRE(e == NULL);
    return r;
}

#ifdef FX_PLAIN

/* ---- The plain fixture --------------------------------------------------- */

#ifndef FX_HASH_SEED
#define FX_HASH_SEED 0
#endif

/* The allocator of every state machine new_fsm() makes. */
static talloc fx_plain_alloc = {-1, 0};

static inline fence_fsm *new_fsm(void)
{
    fence_fsm_opts o = {{t_alloc, t_free, &fx_plain_alloc}, FX_HASH_SEED};
    fence_fsm *f = NULL;
    REQUIRE(fence_fsm_create(&o, &f) == 0);
    return f;
}

/* Check and destroy f; nothing any state machine allocated is left. */
static inline void done(fence_fsm *f)
{
    CHECK(fence_fsm_check(f) == NULL);
    fence_fsm_destroy(f);
    CHECK_EQ_I64(fx_plain_alloc.live, 0);
}

#ifndef FX_OWN_RUN
/* Apply c at now and check every invariant. */
static inline fence_result run(fence_fsm *f, uint64_t now, fence_cmd c)
{
    return check_apply(f, now, c);
}
#endif

#else /* FX_PLAIN */

/* ---- The fx fixture ------------------------------------------------------ */

#define MAX_EV 1024

/* A state machine plus the events it reported. */
typedef struct fx {
    fence_fsm *f;            /* the state machine */
    talloc ta;               /* its allocator */
    fence_event ev[MAX_EV];  /* events in order */
    int nev;                 /* events recorded */
} fx;

/* Append the events of the last apply/advance call to x->ev. */
static inline void take_events(fx *x)
{
    size_t n = 0;
    const fence_event *ev = fence_fsm_events(x->f, &n);
    for (size_t i = 0; i < n; i++) {
        REQUIRE(x->nev < MAX_EV);
        x->ev[x->nev++] = ev[i];
    }
}

static inline void fx_init(fx *x)
{
    memset(x, 0, sizeof(*x));
    x->ta.budget = -1;
    fence_fsm_opts o = {{t_alloc, t_free, &x->ta}};
    REQUIRE(fence_fsm_create(&o, &x->f) == 0);
    REQUIRE(x->f != NULL);
}

static inline void fx_done(fx *x)
{
    CHECK(fence_fsm_check(x->f) == NULL);
    fence_fsm_destroy(x->f);
    CHECK_EQ_I64(x->ta.live, 0);
}

/* Apply a command and check every invariant afterwards. */
static inline fence_result run(fx *x, uint64_t now, fence_cmd c)
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

static inline fence_cmd c_grant(uint64_t ttl, uint64_t delay)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = ttl,
                   .lock_delay_ms = delay};
    return c;
}

static inline fence_cmd c_keepalive(uint64_t lease)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_KEEPALIVE, .lease = lease};
    return c;
}

static inline fence_cmd c_revoke(uint64_t lease)
{
    fence_cmd c = {.type = FENCE_CMD_LEASE_REVOKE, .lease = lease};
    return c;
}

static inline fence_cmd c_lock(const char *name, uint64_t lease, uint64_t wait)
{
    fence_cmd c = {.type = FENCE_CMD_LOCK, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .lease = lease,
                   .wait_ms = wait};
    return c;
}

static inline fence_cmd c_unlock(const char *name, uint64_t token)
{
    fence_cmd c = {.type = FENCE_CMD_UNLOCK, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .token = token};
    return c;
}

static inline fence_cmd c_acquire(const char *name, uint64_t ttl, uint64_t delay,
                           uint64_t wait)
{
    fence_cmd c = {.type = FENCE_CMD_ACQUIRE, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .ttl_ms = ttl,
                   .lock_delay_ms = delay, .wait_ms = wait};
    return c;
}

static inline fence_cmd c_cancel(uint64_t wait_id)
{
    fence_cmd c = {.type = FENCE_CMD_CANCEL, .wait_id = wait_id};
    return c;
}

static inline fence_cmd c_tick(void)
{
    fence_cmd c = {.type = FENCE_CMD_TICK};
    return c;
}

static inline fence_cmd c_leader(uint32_t leases, uint32_t locks, uint32_t waiters,
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

static inline fence_cmd with_req(fence_cmd c, uint64_t req)
{
    c.flags |= FENCE_CMD_F_REQID;
    c.req_id = req;
    return c;
}

/* A new lease, asserting success; returns its id. */
static inline uint64_t lease(fx *x, uint64_t now, uint64_t ttl, uint64_t delay)
{
    fence_result r = run(x, now, c_grant(ttl, delay));
    REQUIRE(r.status == FENCE_ST_OK);
    REQUIRE(r.lease != 0);
    return r.lease;
}

static inline bool lock_held(fx *x, const char *name, fence_fsm_lock_state *out)
{
    return fence_fsm_lock_info(x->f, (const uint8_t *)name,
                               (uint16_t)strlen(name), out);
}

/* x's snapshot in a new buffer (the caller frees it); *len gets its size. */
static inline uint8_t *snap(fx *x, size_t *len)
{
    *len = fence_fsm_snapshot_size(x->f);
    uint8_t *b = malloc(*len);
    REQUIRE(b != NULL);
    CHECK_EQ_U64(fence_fsm_snapshot(x->f, b, *len), *len);
    return b;
}

#endif /* FX_PLAIN */

#endif /* FENCE_TEST_CORE_FX_H */
