/* The lock machinery under every kind of lock: the events of a call,
 * grants (exclusive and shared), hand-off, releases and failures, time
 * (the deadlines due at each entry), and the checks the commands share
 * (quotas, who may use a lease, queueing).  Below apply.c and the kinds'
 * files (multi.c, elect.c, shared.c's callers); what a kind adds to
 * hand-off and release it adds through f->kinds (kinds.c), never by a
 * call up.  Everything here runs inside apply, where a failed allocation
 * stops the process (fence__alloc) instead of changing an answer. */
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
        f->kinds.sem_slot_free(f, k);
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
        f->kinds.multi_try(f, w->head);
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
    f->kinds.elect_won(f, k, w);
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
        f->kinds.multi_fail(f, w, status, revoke_dedicated);
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
    f->kinds.elect_cand_free(f, w);
    fence__free(f, w);
    if (s != NULL) {
        f->kinds.sem_maybe_destroy(f, s);
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
        f->kinds.elect_lost(f, k);
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
 * order (a key left early by a renewal is re-keyed first: heap.h). */
static void process_due(fence_fsm *f)
{
    fence__hitem *it;
    while ((fence__heap_settle(&f->heap, f->now_ms), it = fence__heap_top(&f->heap)) != NULL &&
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

/* The earliest pending deadline, or UINT64_MAX (settling the heap's top
 * first changes places in the heap only: heap.h). */
uint64_t fence_fsm_next_deadline(fence_fsm *f)
{
    return fence_fsm_next_deadline_by(f, UINT64_MAX);
}

/* The earliest pending deadline if it is at most now_ms; otherwise a
 * lower bound of it later than now_ms, or UINT64_MAX. */
uint64_t fence_fsm_next_deadline_by(fence_fsm *f, uint64_t now_ms)
{
    fence__heap_settle(&f->heap, now_ms);
    const fence__hitem *it = fence__heap_top(&f->heap);
    return it != NULL ? it->deadline_ms - it->slack : UINT64_MAX;
}

/* ---- The checks the commands share ----------------------------------------- */

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

bool fence__quota_leases_full(const fence_fsm *f, const fence_cmd *c)
{
    return quota_leases_full(f, c);
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

/* ---- The machinery under its fsm_int.h names (apply.c, the kinds) -------- */

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

void fence__wait_fail(fence_fsm *f, fence__wait *w, uint8_t status,
                      bool revoke_dedicated)
{
    wait_fail(f, w, status, revoke_dedicated);
}

void fence__forget_reqs(fence_fsm *f, fence__wait *w)
{
    forget_reqs(f, w);
}

void fence__process_due(fence_fsm *f)
{
    process_due(f);
}

bool fence__waiter_eligible(const fence_fsm *f, const fence__wait *w)
{
    return waiter_eligible(f, w);
}

uint64_t fence__grant(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    return grant(f, k, l);
}

uint64_t fence__join_shared(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    return join_shared(f, k, l);
}

uint64_t fence__grant_shared(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    return grant_shared(f, k, l);
}

fence__wait *fence__enqueue(fence_fsm *f, fence__lease *l, fence__lock *k,
                            const fence_cmd *c, fence_result *r)
{
    return enqueue(f, l, k, c, false, r);
}

fence__wait *fence__enqueue_as(fence_fsm *f, fence__lease *l, fence__lock *k,
                               const fence_cmd *c, bool acquire, fence_result *r)
{
    return enqueue(f, l, k, c, acquire, r);
}
