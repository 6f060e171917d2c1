/* Apply: grants, hand-off and releases, time (the deadlines due at each
 * entry), the commands, and the dedup of retried requests.  See fsm.h for
 * the semantics; everything here runs inside apply, where a failed
 * allocation stops the process (fence__alloc) instead of changing an
 * answer. */
#include <string.h>

#include "core/fsm_int.h"

/* ---- Events ------------------------------------------------------------------ */

/* Append an event to the array of the current call, growing it through the
 * injected allocator.  The outcome of apply may not depend on the
 * allocator, so running out of memory here stops the process (in
 * fence__alloc). */
static void event_push(fence_fsm *f, uint64_t wait_id, const fence_result *r)
{
    if (f->n_events == f->cap_events) {
        size_t cap = f->cap_events ? f->cap_events * 2 : 16;
        FENCE_ASSERT(cap > f->cap_events);
        FENCE_ASSERT(f->oom == FENCE__OOM_APPLY);
        fence_event *v = fence__alloc(f, cap * sizeof(*v));
        FENCE_ASSERT(v != NULL);
        if (f->n_events > 0) {
            memcpy(v, f->events, f->n_events * sizeof(*v));
        }
        fence__free(f, f->events);
        f->events = v;
        f->cap_events = cap;
    }
    fence_event *ev = &f->events[f->n_events++];
    memset(ev, 0, sizeof(*ev));
    ev->wait_id = wait_id;
    ev->result = *r;
}

/* Forget the events of the previous call. */
void fence__events_reset(fence_fsm *f)
{
    f->n_events = 0;
}

/* The events of the last call (borrowed). */
const fence_event *fence_fsm_events(const fence_fsm *f, size_t *n)
{
    FENCE_ASSERT(f != NULL);
    FENCE_ASSERT(n != NULL);
    FENCE_ASSERT(f->n_events <= f->cap_events);
    *n = f->n_events;
    return f->events;
}

/* ---- Grants, releases, failures ------------------------------------------ */

/* Report the resolution of wait w and update every remembered result
 * attached to it (the request that queued it and those that joined it),
 * so that a retry of any of them sees the outcome. */
static void emit(fence_fsm *f, fence__wait *w, const fence_result *r)
{
    FENCE_ASSERT(r->wait_id == w->id);
    FENCE_ASSERT(r->status != FENCE_ST_QUEUED);
    while (!fence__list_empty(&w->reqs)) {
        fence__dedup *d = WDEDUP_OF(w->reqs.first);
        FENCE_ASSERT(d->wait == w);
        FENCE_ASSERT(d->result.status == FENCE_ST_QUEUED);
        FENCE_ASSERT(d->result.wait_id == w->id);
        fence__dedup_detach(d);
        d->result = *r;
    }
    FENCE_ASSERT(w->nreqs == 0);
    event_push(f, w->id, r);
}

/* Forget every remembered result attached to wait w (CANCEL). */
static void forget_reqs(fence_fsm *f, fence__wait *w)
{
    while (!fence__list_empty(&w->reqs)) {
        fence__dedup_forget(f, WDEDUP_OF(w->reqs.first));
    }
    FENCE_ASSERT(w->nreqs == 0);
}

/* Grant free lock k to lease l: the next token. */
static uint64_t grant(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    FENCE_ASSERT(fence__lock_is_free(k));
    FENCE_ASSERT(fence__lease_live(f, l));
    FENCE_ASSERT(f->last_token < UINT64_MAX);
    uint64_t token = ++f->last_token;
    FENCE_ASSERT(token > k->token);
    FENCE_ASSERT(f->lock_list.last == NULL ||
                 LOCK_OF(f->lock_list.last)->token < token ||
                 f->lock_list.last == &k->tlink);
    fence__lock_retoken(f, k, token);
    fence__held_append(f, l, k);
    FENCE_ASSERT(k->holder == l);
    f->n_grants++;
    return token;
}

/* Lease l joins lock k's current shared phase: it carries the phase's
 * token (no new token: see shared.c). */
static uint64_t join_shared(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    FENCE_ASSERT(k->nsholders > 0);
    FENCE_ASSERT(fence__lease_live(f, l));
    fence__shold *s = fence__shold_add(f, k, l);
    FENCE_ASSERT(s != NULL); /* fence__alloc stops on failure */
    f->n_grants++;
    return k->token;
}

/* Begin a shared phase on free lock k with lease l: the next token. */
static uint64_t grant_shared(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    FENCE_ASSERT(fence__lock_is_free(k));
    FENCE_ASSERT(fence__lease_live(f, l));
    FENCE_ASSERT(f->last_token < UINT64_MAX);
    uint64_t token = ++f->last_token;
    fence__lock_retoken(f, k, token);
    fence__shold *s = fence__shold_add(f, k, l);
    FENCE_ASSERT(s != NULL); /* fence__alloc stops on failure */
    f->n_grants++;
    return token;
}

/* True when waiter w (a FIFO place: a multi-lock's counts as its wait)
 * may be granted now. */
static bool waiter_eligible(const fence_fsm *f, const fence__wait *w)
{
    if (w->head != NULL) {
        w = w->head;
    }
    if (w->hi.deadline_ms <= f->now_ms) {
        return false;
    }
    return fence__lease_live(f, w->lease);
}

static void grant_wait(fence_fsm *f, fence__wait *w);

/* Shared-held lock k: admit into its phase the shared waiters at the head
 * of its FIFO, up to the first exclusive one that may be granted.
 * Ineligible waiters are passed over as in handoff. */
static void admit_shared(fence_fsm *f, fence__lock *k)
{
    FENCE_ASSERT(k->nsholders > 0);
    fence__link *p = k->queue.first;
    while (p != NULL) {
        fence__wait *w = QWAIT_OF(p);
        p = p->next;
        if (!waiter_eligible(f, w)) {
            continue;
        }
        if (!w->shared) {
            break;
        }
        grant_wait(f, w);
    }
}

/* Lock k just became available: grant it to the first eligible waiter in
 * FIFO order.  Ineligible waiters (lease expired, wait timed out) are
 * passed over but stay queued: their own deadlines are due, so the advance
 * loop fails them moments later, in (deadline, kind, id) order.  Hand-off
 * therefore never cascades.  A lock nobody takes is freed. */
static void handoff(fence_fsm *f, fence__lock *k)
{
    FENCE_ASSERT(k->holder == NULL);
    FENCE_ASSERT(!k->in_delay);
    if (k->sem != NULL) {
        /* A semaphore's slot: its waiters queue on the semaphore. */
        FENCE_ASSERT(k->nwaiters == 0);
        fence__sem_slot_free(f, k);
        return;
    }
    fence__wait *w = QWAIT_OF(k->queue.first);
    while (w != NULL && !waiter_eligible(f, w)) {
        w = QWAIT_OF(w->qlink.next);
    }
    if (w == NULL) {
        fence__lock_maybe_destroy(f, k);
        return;
    }
    if (w->head != NULL) {
        /* A multi-lock: granted with all its names, or k stays free and
         * reserved for it (strict FIFO; multi.c). */
        fence__multi_try(f, w->head);
        return;
    }
    bool shared = w->shared;
    grant_wait(f, w);
    if (shared) {
        admit_shared(f, k);
    }
}

/* Grant queued wait w (on one lock) its lock (exclusive, joining the
 * lock's shared phase, or beginning one), report it and free w. */
static void grant_wait(fence_fsm *f, fence__wait *w)
{
    fence__lease *l = w->lease;
    fence__lock *k = w->lock;
    bool acq = w->acquire;
    bool shared = w->shared;
    fence__wait_unlink(f, w);
    uint64_t token = !shared ? grant(f, k, l)
                     : k->nsholders > 0 ? join_shared(f, k, l)
                                        : grant_shared(f, k, l);
    f->n_handoffs++;
    fence__elect_won(f, k, w);
    if (acq) {
        FENCE_ASSERT(l->dedicated);
        fence__heap_move(&f->heap, &l->hi, f->now_ms + l->ttl_ms);
    }
    fence_result r;
    memset(&r, 0, sizeof(r));
    r.status = FENCE_ST_OK;
    r.lease = l->id;
    r.token = token;
    r.wait_id = w->id;
    emit(f, w, &r);
    FENCE_ASSERT(fence__list_empty(&w->reqs));
    fence__free(f, w);
}

static void lease_remove(fence_fsm *f, fence__lease *l, bool expired);

/* Fail a queued wait with NIL or NOLEASE.  A failed ACQUIRE's dedicated
 * lease is revoked too when revoke_dedicated is set (timeout, cancel). */
static void wait_fail(fence_fsm *f, fence__wait *w, uint8_t status,
                      bool revoke_dedicated)
{
    FENCE_ASSERT(status == FENCE_ST_NIL || status == FENCE_ST_NOLEASE);
    if (w->parts != NULL) {
        fence__multi_fail(f, w, status, revoke_dedicated);
        return;
    }
    fence__lease *l = w->lease;
    fence__lock *k = w->lock;
    fence__sem *s = w->sem;
    bool acq = w->acquire;
    fence__wait_unlink(f, w);
    fence_result r;
    memset(&r, 0, sizeof(r));
    r.status = status;
    r.wait_id = w->id;
    emit(f, w, &r);
    FENCE_ASSERT(fence__list_empty(&w->reqs));
    fence__elect_cand_free(f, w);
    fence__free(f, w);
    if (s != NULL) {
        fence__sem_maybe_destroy(f, s);
    } else if (k->nsholders > 0) {
        /* The shared waiters it held back may join the phase now. */
        admit_shared(f, k);
    } else {
        fence__lock_maybe_destroy(f, k);
    }
    if (acq && revoke_dedicated) {
        FENCE_ASSERT(l->dedicated);
        lease_remove(f, l, false);
    }
}

/* Remove a lease: release its locks in token order (expired: with its
 * lock-delay, if any; revoked: handed off at once), fail its waits with
 * NOLEASE in id order, then free it. */
static void lease_remove(fence_fsm *f, fence__lease *l, bool expired)
{
    while (!fence__list_empty(&l->held)) {
        fence__lock *k = HELD_OF(l->held.first);
        fence__held_unlink(f, k);
        fence__elect_lost(f, k);
        if (expired && l->lock_delay_ms > 0) {
            fence__lock_set_delay(f, k, l->lock_delay_ms,
                                  f->now_ms + l->lock_delay_ms);
        } else {
            handoff(f, k);
        }
    }
    /* Then its shared holds, in token order: the last holder of a phase
     * frees the lock as an exclusive holder would. */
    while (!fence__list_empty(&l->sheld)) {
        fence__shold *s = LSHOLD_OF(l->sheld.first);
        fence__lock *k = s->lock;
        fence__shold_remove(f, s);
        if (k->nsholders > 0) {
            continue;
        }
        if (expired && l->lock_delay_ms > 0) {
            fence__lock_set_delay(f, k, l->lock_delay_ms,
                                  f->now_ms + l->lock_delay_ms);
        } else {
            handoff(f, k);
        }
    }
    while (!fence__list_empty(&l->waits)) {
        wait_fail(f, LWAIT_OF(l->waits.first), FENCE_ST_NOLEASE, false);
    }
    fence__lease_destroy(f, l);
}

/* ---- Time ----------------------------------------------------------------- */

/* Process every heap item due at fsm time now, in (deadline, kind, id)
 * order. */
static void process_due(fence_fsm *f)
{
    fence__hitem *it;
    while ((it = fence__heap_top(&f->heap)) != NULL &&
           it->deadline_ms <= f->now_ms) {
        switch (it->kind) {
        case FENCE__K_WAIT:
            wait_fail(f, FENCE__CONTAINER(it, fence__wait, hi), FENCE_ST_NIL, true);
            break;
        case FENCE__K_LEASE: {
            fence__lease *l = FENCE__CONTAINER(it, fence__lease, hi);
            f->n_expired++;
            if (!fence__list_empty(&l->held)) {
                f->n_expired_held++;
            }
            lease_remove(f, l, true);
            break;
        }
        case FENCE__K_DELAY: {
            fence__lock *k = FENCE__CONTAINER(it, fence__lock, hi);
            FENCE_ASSERT(k->in_delay);
            fence__heap_remove(&f->heap, it);
            k->in_delay = false;
            k->delay_ms = 0;
            handoff(f, k);
            break;
        }
        default:
            FENCE_ASSERT(0);
        }
    }
}

/* Advance fsm time (never backwards) and process what is due, keeping the
 * events collected so far. */
void fence__advance(fence_fsm *f, uint64_t now_ms)
{
    FENCE_ASSERT(f != NULL);
    FENCE_ASSERT(f->oom == FENCE__OOM_APPLY);
    FENCE_ASSERT(now_ms <= FENCE_TIME_MS_MAX);
    if (now_ms > f->now_ms) {
        f->now_ms = now_ms;
    }
    process_due(f);
}

/* Advance fsm time; the events are this call's alone. */
void fence_fsm_advance(fence_fsm *f, uint64_t now_ms)
{
    FENCE_ASSERT(f != NULL);
    f->oom = FENCE__OOM_APPLY;
    fence__events_reset(f);
    fence__advance(f, now_ms);
}

/* The earliest pending deadline, or UINT64_MAX. */
uint64_t fence_fsm_next_deadline(const fence_fsm *f)
{
    const fence__hitem *it = fence__heap_top(&f->heap);
    return it != NULL ? it->deadline_ms : UINT64_MAX;
}

/* ---- Commands ------------------------------------------------------------- */

/* True when a name length is acceptable. */
static bool name_ok(const fence_cmd *c)
{
    return c->name != NULL && c->name_len >= 1 && c->name_len <= FENCE_NAME_MAX;
}

/* LEADER_START: new limits; rebase every deadline onto now. */
static void cmd_leader_start(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    const fence_limits *lim = &c->limits;
    if (lim->leases_max == 0 || lim->locks_max == 0 || lim->waiters_max == 0 ||
        lim->waits_max == 0) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    f->limits = *lim;
    fence__dedup_trim(f, lim->dedup_max);
    for (fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        fence__wait *w = WAIT_OF(p);
        w->hi.deadline_ms = f->now_ms + w->wait_ms;
    }
    for (fence__link *p = f->lease_list.first; p != NULL; p = p->next) {
        fence__lease *l = LEASE_OF(p);
        l->hi.deadline_ms = fence__lease_deadline(f, l);
    }
    for (fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        fence__lock *k = LOCK_OF(p);
        if (k->in_delay) {
            k->hi.deadline_ms = f->now_ms + k->delay_ms;
        }
    }
    fence__heap_rebuild(&f->heap);
    r->status = FENCE_ST_OK;
}

/* Whether the owner of c has its quota_leases live leases already. */
static bool quota_leases_full(const fence_fsm *f, const fence_cmd *c)
{
    if ((c->flags & FENCE_CMD_F_QUOTA) == 0 || c->quota_leases == 0) {
        return false;
    }
    const fence__owner *o = fence__owner_counts(f, c->owner);
    return o != NULL && o->leases >= c->quota_leases;
}

/* Whether the owner of c would pass its quota_locks with n more locks
 * held or waited for (a multi-lock's names count one each). */
bool fence__quota_locks_full(const fence_fsm *f, const fence_cmd *c, uint32_t n)
{
    if ((c->flags & FENCE_CMD_F_QUOTA) == 0 || c->quota_locks == 0) {
        return false;
    }
    const fence__owner *o = fence__owner_counts(f, c->owner);
    uint64_t have = o != NULL ? (uint64_t)o->locks + o->waits : 0;
    return have + n > c->quota_locks;
}

/* Whether the owner of c holds or waits for its quota_locks locks already. */
static bool quota_locks_full(const fence_fsm *f, const fence_cmd *c)
{
    return fence__quota_locks_full(f, c, 1);
}

bool fence__quota_leases_full(const fence_fsm *f, const fence_cmd *c)
{
    return quota_leases_full(f, c);
}

/* LEASE_GRANT: a new lease. */
static void cmd_lease_grant(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (c->ttl_ms < FENCE_TTL_MS_MIN || c->ttl_ms > FENCE_TTL_MS_MAX ||
        c->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (f->leases.count >= f->limits.leases_max || quota_leases_full(f, c)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    fence__lease *l = fence__lease_add(f, f->next_lease_id, c->ttl_ms,
                                       c->lock_delay_ms,
                                       f->now_ms + c->ttl_ms, false, c->owner);
    if (l == NULL) {
        /* The heap's index range (counts only; memory never gets here). */
        r->status = FENCE_ST_LIMIT;
        return;
    }
    f->next_lease_id++;
    r->status = FENCE_ST_OK;
    r->lease = l->id;
    r->value = l->ttl_ms;
}

/* Whether command c may act on lease l: its owner, or an administrator. */
static bool may_use(const fence_cmd *c, const fence__lease *l)
{
    return l->owner == c->owner || (c->flags & FENCE_CMD_F_ADMIN) != 0;
}

bool fence__may_use(const fence_cmd *c, const fence__lease *l)
{
    return may_use(c, l);
}

/* LEASE_KEEPALIVE: restart a live lease's full TTL. */
static void cmd_keepalive(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l == NULL || !fence__lease_live(f, l)) {
        r->status = FENCE_ST_NOLEASE;
        return;
    }
    if (!may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    fence__heap_move(&f->heap, &l->hi, fence__lease_deadline(f, l));
    FENCE_ASSERT(fence__lease_live(f, l));
    r->status = FENCE_ST_OK;
    r->lease = l->id;
    r->value = l->ttl_ms;
}

/* LEASE_REVOKE: remove a live lease; unknown or expired is fine too. */
static void cmd_revoke(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l != NULL && fence__lease_live(f, l)) {
        if (!may_use(c, l)) {
            r->status = FENCE_ST_NOPERM;
            return;
        }
        f->n_revoked++;
        lease_remove(f, l, false);
    }
    r->status = FENCE_ST_OK;
}

/* Queue lease l on busy lock k for wait_ms.  Fills r (QUEUED or LIMIT). */
static fence__wait *enqueue(fence_fsm *f, fence__lease *l, fence__lock *k,
                            const fence_cmd *c, bool acquire, fence_result *r)
{
    FENCE_ASSERT(c->wait_ms > 0);
    if (k->nwaiters >= f->limits.waiters_max ||
        f->waits.count >= f->limits.waits_max) {
        r->status = FENCE_ST_LIMIT;
        return NULL;
    }
    bool has_req = (c->flags & FENCE_CMD_F_REQID) != 0;
    fence__wait *w = fence__wait_add(f, f->next_wait_id, l, k, c->wait_ms,
                                     f->now_ms + c->wait_ms, acquire, has_req,
                                     c->req_id);
    if (w == NULL) {
        /* The heap's index range (counts only; memory never gets here). */
        r->status = FENCE_ST_LIMIT;
        return NULL;
    }
    f->next_wait_id++;
    r->status = FENCE_ST_QUEUED;
    r->wait_id = w->id;
    r->lease = l->id;
    return w;
}

/* LOCK: grant, reentrant answer, queue, or NIL. */
static void cmd_lock(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c) || c->wait_ms > FENCE_WAIT_MS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE;
        return;
    }
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l == NULL || !fence__lease_live(f, l)) {
        r->status = FENCE_ST_NOLEASE;
        return;
    }
    if (!may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    bool shared = (c->flags & FENCE_CMD_F_SHARED) != 0;
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if (k != NULL && k->elect != NULL) {
        r->status = FENCE_ST_WRONGTYPE; /* the name is an election */
        return;
    }
    /* The owner's quota: a lock this lease holds or waits for already
     * counts, so only a new hold or wait is refused. */
    if ((k == NULL || (k->holder != l && fence__wait_of(l, k) == NULL &&
                       fence__shold_of(l, k) == NULL)) &&
        quota_locks_full(f, c)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (k == NULL) {
        if (f->locks.count >= f->limits.locks_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
        k = fence__lock_add(f, c->name, c->name_len, 0, NULL);
        if (k == NULL) {
            /* The heap's index range (counts only). */
            r->status = FENCE_ST_LIMIT;
            return;
        }
    }
    bool holds_shared = k->nsholders > 0 && fence__shold_of(l, k) != NULL;
    if (k->holder == l || holds_shared) {
        if (holds_shared != shared) {
            /* Neither an upgrade nor a downgrade: say so. */
            r->status = FENCE_ST_INVALID;
            r->value = FENCE_INVALID_MODE;
            return;
        }
        r->status = FENCE_ST_OK;
        r->token = k->token;
        r->lease = l->id;
        return;
    }
    if (fence__lock_is_free(k) && k->nwaiters == 0) {
        r->status = FENCE_ST_OK;
        r->token = shared ? grant_shared(f, k, l) : grant(f, k, l);
        r->lease = l->id;
        return;
    }
    if (shared && k->nsholders > 0 && k->nwaiters == 0) {
        /* Nothing queued ahead: join the current phase. */
        r->status = FENCE_ST_OK;
        r->token = join_shared(f, k, l);
        r->lease = l->id;
        return;
    }
    fence__wait *w = fence__wait_of(l, k);
    if (w != NULL) {
        if (w->shared != shared) {
            r->status = FENCE_ST_INVALID;
            r->value = FENCE_INVALID_MODE;
            return;
        }
        r->status = FENCE_ST_QUEUED;
        r->wait_id = w->id;
        r->lease = l->id;
        return;
    }
    if (c->wait_ms == 0) {
        r->status = FENCE_ST_NIL;
        return;
    }
    w = enqueue(f, l, k, c, false, r);
    if (w != NULL) {
        w->shared = shared;
    }
}

/* Release every lock l holds exclusively with token: one lock, or all the
 * names of one multi-lock (multi.c), in held-list order. */
void fence__release_group(fence_fsm *f, fence__lease *l, uint64_t token)
{
    fence__link *p = l->held.first;
    while (p != NULL) {
        fence__lock *g = HELD_OF(p);
        p = p->next;
        if (g->token == token) {
            fence__held_unlink(f, g);
            handoff(f, g);
        }
    }
}

/* UNLOCK: release if the token is the holder's; a dedicated lease goes too. */
static void cmd_unlock(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c)) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE;
        return;
    }
    r->status = FENCE_ST_OK;
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if (k != NULL && k->elect != NULL) {
        r->status = FENCE_ST_WRONGTYPE; /* the name is an election */
        return;
    }
    if (k != NULL && k->nsholders > 0 && k->token == c->token) {
        /* The holders of a phase share this token: which one? */
        r->status = FENCE_ST_INVALID;
        r->value = FENCE_INVALID_SHARED;
        return;
    }
    if (k == NULL || k->holder == NULL || k->token != c->token) {
        r->value = 0;
        return;
    }
    fence__lease *l = k->holder;
    if (!may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    fence__release_group(f, l, k->token);
    if (l->dedicated) {
        lease_remove(f, l, false);
    }
    r->value = 1;
}

/* ACQUIRE: a dedicated lease plus LOCK, as one command. */
static void cmd_acquire(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c) || c->ttl_ms < FENCE_TTL_MS_MIN ||
        c->ttl_ms > FENCE_TTL_MS_MAX ||
        c->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX ||
        c->wait_ms > FENCE_WAIT_MS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE;
        return;
    }
    if (f->leases.count >= f->limits.leases_max || quota_leases_full(f, c) ||
        quota_locks_full(f, c)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    bool shared = (c->flags & FENCE_CMD_F_SHARED) != 0;
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if (k != NULL && k->elect != NULL) {
        r->status = FENCE_ST_WRONGTYPE; /* the name is an election */
        return;
    }
    bool join = shared && k != NULL && k->nsholders > 0 && k->nwaiters == 0;
    bool free_now = k == NULL || (fence__lock_is_free(k) && k->nwaiters == 0) || join;
    if (!free_now) {
        if (c->wait_ms == 0) {
            r->status = FENCE_ST_NIL;
            return;
        }
        if (k->nwaiters >= f->limits.waiters_max ||
            f->waits.count >= f->limits.waits_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
    } else if (k == NULL && f->locks.count >= f->limits.locks_max) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    fence__lease *l = fence__lease_add(f, f->next_lease_id, c->ttl_ms,
                                       c->lock_delay_ms,
                                       f->now_ms + c->ttl_ms, true, c->owner);
    if (l == NULL) {
        /* The heap's index range (counts only). */
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (free_now) {
        if (k == NULL) {
            k = fence__lock_add(f, c->name, c->name_len, 0, NULL);
            if (k == NULL) {
                /* The heap's index range (counts only). */
                fence__lease_destroy(f, l);
                r->status = FENCE_ST_LIMIT;
                return;
            }
        }
        f->next_lease_id++;
        r->status = FENCE_ST_OK;
        r->token = join ? join_shared(f, k, l)
                   : shared ? grant_shared(f, k, l) : grant(f, k, l);
        r->lease = l->id;
        return;
    }
    fence__wait *w = enqueue(f, l, k, c, true, r);
    if (w == NULL) {
        fence__lease_destroy(f, l);
        return;
    }
    w->shared = shared;
    f->next_lease_id++;
    fence__heap_move(&f->heap, &l->hi, fence__lease_deadline(f, l));
}

/* CANCEL: the waiting client went away. */
static void cmd_cancel(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__wait *w = fence__wait_find(f, c->wait_id);
    if (w != NULL) {
        /* The request had no lasting effect (an ACQUIRE's lease is revoked
         * with it), so forget the request ids attached to the wait (its
         * own and those of LOCKs that joined it): a client that lost its
         * connection and retries with the same REQID (after a failover,
         * say) queues afresh instead of being told "timed out" early. */
        forget_reqs(f, w);
        wait_fail(f, w, FENCE_ST_NIL, true);
    }
    r->status = FENCE_ST_OK;
}

/* Run one command (no dedup, no time). */
static void dispatch(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    switch (c->type) {
    case FENCE_CMD_LEADER_START:
        cmd_leader_start(f, c, r);
        break;
    case FENCE_CMD_TICK:
        r->status = FENCE_ST_OK;
        break;
    case FENCE_CMD_LEASE_GRANT:
        cmd_lease_grant(f, c, r);
        break;
    case FENCE_CMD_LEASE_KEEPALIVE:
        cmd_keepalive(f, c, r);
        break;
    case FENCE_CMD_LEASE_REVOKE:
        cmd_revoke(f, c, r);
        break;
    case FENCE_CMD_LOCK:
        cmd_lock(f, c, r);
        break;
    case FENCE_CMD_UNLOCK:
        cmd_unlock(f, c, r);
        break;
    case FENCE_CMD_ACQUIRE:
        cmd_acquire(f, c, r);
        break;
    case FENCE_CMD_CANCEL:
        cmd_cancel(f, c, r);
        break;
    case FENCE_CMD_SEM_ACQUIRE:
        fence__cmd_sem_acquire(f, c, r);
        break;
    case FENCE_CMD_SEM_RELEASE:
        fence__cmd_sem_release(f, c, r);
        break;
    case FENCE_CMD_UNLOCK_SHARED:
        fence__cmd_unlock_shared(f, c, r);
        break;
    case FENCE_CMD_LOCK_MULTI:
        fence__multi_cmd(f, c, r);
        break;
    case FENCE_CMD_LEASE_CHECKPOINT:
        fence__cmd_checkpoint(f, c, r); /* checkpoint.c */
        break;
    case FENCE_CMD_ELECT_CAMPAIGN:
        fence__elect_campaign(f, c, r);
        break;
    case FENCE_CMD_ELECT_PROCLAIM:
        fence__elect_proclaim(f, c, r);
        break;
    case FENCE_CMD_ELECT_RESIGN:
        fence__elect_resign(f, c, r);
        break;
    default:
        r->status = FENCE_ST_INVALID;
        break;
    }
}

static void apply_cmd(fence_fsm *f, const fence_cmd *cmd, fence_result *out);

/* The hooks the kinds' files share (fsm_int.h): multi.c, sem.c (and
 * fence__grant below). */
void fence__handoff(fence_fsm *f, fence__lock *k)
{
    handoff(f, k);
}

void fence__admit_shared(fence_fsm *f, fence__lock *k)
{
    admit_shared(f, k);
}

void fence__emit(fence_fsm *f, fence__wait *w, const fence_result *r)
{
    emit(f, w, r);
}

void fence__lease_remove(fence_fsm *f, fence__lease *l, bool expired)
{
    lease_remove(f, l, expired);
}

bool fence__waiter_eligible(const fence_fsm *f, const fence__wait *w)
{
    return waiter_eligible(f, w);
}

/* Apply one command at now_ms: advance time (LEADER_START only moves the
 * clock: it rebases the old deadlines instead of firing them), run the
 * command, then process anything still due (see apply_cmd). */
void fence__apply_one(fence_fsm *f, uint64_t now_ms, const fence_cmd *cmd,
                      fence_result *out)
{
    FENCE_ASSERT(f != NULL);
    FENCE_ASSERT(f->oom == FENCE__OOM_APPLY);
    FENCE_ASSERT(cmd != NULL);
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(now_ms <= FENCE_TIME_MS_MAX);
    memset(out, 0, sizeof(*out));
    if (cmd->type == FENCE_CMD_LEADER_START) {
        if (now_ms > f->now_ms) {
            f->now_ms = now_ms;
        }
    } else {
        fence__advance(f, now_ms);
    }
    apply_cmd(f, cmd, out);
    /* A LEADER_START that did not rebase (invalid, or answered from the
     * dedup table) leaves old deadlines due: process them now. */
    process_due(f);
}

/* Apply one command; the events are this call's alone. */
void fence_fsm_apply(fence_fsm *f, uint64_t now_ms, const fence_cmd *cmd,
                     fence_result *out)
{
    FENCE_ASSERT(f != NULL);
    f->oom = FENCE__OOM_APPLY;
    fence__events_reset(f);
    fence__apply_one(f, now_ms, cmd, out);
}

/* Dedup lookup, the command itself, dedup record. */
static void apply_cmd(fence_fsm *f, const fence_cmd *cmd, fence_result *out)
{
    if ((cmd->flags & ~FENCE_CMD_F_ALL) != 0 ||
        ((cmd->flags & FENCE_CMD_F_SHARED) != 0 && cmd->type != FENCE_CMD_LOCK &&
         cmd->type != FENCE_CMD_ACQUIRE)) {
        out->status = FENCE_ST_INVALID;
        return;
    }
    fence__dedup *d = NULL;
    uint64_t fp = 0;
    if (cmd->flags & FENCE_CMD_F_REQID) {
        fp = fence__cmd_fp(cmd);
        fence__dedup *old = fence__dedup_find(f, cmd->req_id, cmd->owner);
        if (old != NULL) {
            if (old->fp != fp) {
                /* The same request id for a different request. */
                memset(out, 0, sizeof(*out));
                out->status = FENCE_ST_INVALID;
                return;
            }
            *out = old->result;
            return;
        }
        if (f->limits.dedup_max > 0) {
            if (f->dedup.count >= f->limits.dedup_max) {
                d = fence__dedup_pop_oldest(f);
            } else {
                d = fence__alloc(f, sizeof(*d));
                FENCE_ASSERT(d != NULL); /* fence__alloc stops on failure */
            }
            memset(d, 0, sizeof(*d));
            d->req_id = cmd->req_id;
            d->owner = cmd->owner;
            d->fp = fp;
        }
    }
    uint64_t token_before = f->last_token;
    dispatch(f, cmd, out);
    FENCE_ASSERT(f->last_token >= token_before);
    FENCE_ASSERT(out->status <= FENCE_ST_LAST);
    FENCE_ASSERT(out->status != FENCE_ST_OK || out->token == 0 ||
                 out->token <= f->last_token);
    if (d != NULL) {
        d->result = *out;
        fence__dedup_link(f, d);
        if (out->status == FENCE_ST_QUEUED) {
            /* A new wait, or one this LOCK joined: either way its end
             * must resolve this record too. */
            fence__wait *w = fence__wait_find(f, out->wait_id);
            FENCE_ASSERT(w != NULL);
            fence__dedup_attach(d, w);
        }
        fence__dedup_trim(f, f->limits.dedup_max);
    }
}

/* ---- The primitives the kinds' files use (fsm_int.h) ---------------------- */

uint64_t fence__grant(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    return grant(f, k, l);
}

fence__wait *fence__enqueue(fence_fsm *f, fence__lease *l, fence__lock *k,
                            const fence_cmd *c, fence_result *r)
{
    return enqueue(f, l, k, c, false, r);
}

