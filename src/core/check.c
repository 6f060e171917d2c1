/* The invariant check: every structure against every other (lists, tables,
 * heap, counters), and the semantic invariants (token order, no lock both
 * held and in lock-delay, nothing due left unprocessed).  Tests run it after
 * every step; snapshot restore runs it as its last gate. */
#include "core/fsm_int.h"

/* Locks ahead whose bucket check_locks prefetches. */
#define CHECK_AHEAD 8

/* True when list l is well linked (every link's prev is the link before
 * it, last is the final link) and holds exactly count links. */
static bool list_ok(const fence__list *l, uint64_t count)
{
    uint64_t n = 0;
    const fence__link *prev = NULL;
    for (const fence__link *p = l->first; p != NULL; p = p->next) {
        if (p->prev != prev || n == count) {
            return false;
        }
        prev = p;
        n++;
    }
    return l->last == prev && n == count;
}

/* Check the heap: positions, order, and that it holds exactly the objects
 * with a pending deadline. */
static const char *check_heap(const fence_fsm *f, uint64_t expect)
{
    FENCE_ASSERT(f->heap.len == 0 || f->heap.items != NULL);
    const fence__heap *h = &f->heap;
    if (h->len > h->cap) {
        return "heap longer than its capacity";
    }
    if ((uint64_t)f->leases.count + f->waits.count + f->locks.count >
        h->cap) {
        return "heap capacity below the object count";
    }
    for (uint32_t i = 0; i < h->len; i++) {
        if (h->items[i]->idx != i) {
            return "heap item index wrong";
        }
        if (i > 0 && fence__hitem_less(h->items[i], h->items[(i - 1) / 2])) {
            return "heap order violated";
        }
        if (h->items[i]->slack != 0 && h->items[i]->kind != FENCE__K_LEASE) {
            return "heap slack on an item other than a lease";
        }
    }
    if (h->len != expect) {
        return "heap size does not match leases + waits + delayed locks";
    }
    if (h->len > 0 && h->items[0]->deadline_ms - h->items[0]->slack <= f->now_ms) {
        return "a due deadline was not processed";
    }
    return NULL;
}

/* Check the leases and their held and wait lists. */
static const char *check_leases(const fence_fsm *f, uint64_t *nwaits_out)
{
    FENCE_ASSERT(nwaits_out != NULL);
    if (!list_ok(&f->lease_list, f->leases.count)) {
        return "lease list broken or not the size of the lease table";
    }
    uint64_t nwaits = 0;
    const fence__lease *prev = NULL;
    /* The lookups by id: the same two-step read-ahead as check_locks. */
    const fence__link *ahead = f->lease_list.first;
    for (int i = 0; i < CHECK_AHEAD && ahead != NULL; i++) {
        ahead = ahead->next;
    }
    const fence__link *half = f->lease_list.first;
    for (int i = 0; i < CHECK_AHEAD / 2 && half != NULL; i++) {
        half = half->next;
    }
    for (const fence__link *p = f->lease_list.first; p != NULL; p = p->next) {
        const fence__lease *l = LEASE_OF(p);
        if (ahead != NULL) {
            fence__htab_prefetch(&f->leases, LEASE_OF(ahead)->hn.hash);
            ahead = ahead->next;
        }
        if (half != NULL) {
            fence__htab_prefetch_node(&f->leases, LEASE_OF(half)->hn.hash);
            half = half->next;
        }
        if (prev != NULL && prev->id >= l->id) {
            return "leases not in id order";
        }
        if (l->id == 0 || l->id >= f->next_lease_id) {
            return "lease id out of range";
        }
        if (fence__lease_find(f, l->id) != l) {
            return "lease not found by id";
        }
        if (l->ttl_ms < FENCE_TTL_MS_MIN || l->ttl_ms > FENCE_TTL_MS_MAX) {
            return "lease ttl out of range";
        }
        if (l->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX) {
            return "lease lock-delay out of range";
        }
        if (!list_ok(&l->held, l->nheld)) {
            return "lease held list broken or its count wrong";
        }
        uint64_t last = 0;
        for (const fence__link *q = l->held.first; q != NULL; q = q->next) {
            const fence__lock *k = HELD_OF(q);
            if (k->holder != l) {
                return "held lock names another holder";
            }
            /* Equal tokens: the locks of one multi-lock grant. */
            if (k->token < last || k->token == 0) {
                return "held locks not in token order";
            }
            last = k->token;
        }
        if (!list_ok(&l->waits, l->nwaits)) {
            return "lease wait list broken or its count wrong";
        }
        uint64_t lastw = 0;
        bool acq_seen = false;
        for (const fence__link *q = l->waits.first; q != NULL; q = q->next) {
            const fence__wait *w = LWAIT_OF(q);
            if (w->lease != l) {
                return "lease wait names another lease";
            }
            if (w->id <= lastw) {
                return "lease waits not in id order";
            }
            lastw = w->id;
            if (w->acquire) {
                if (!l->dedicated || l->acq_wait != w || acq_seen) {
                    return "ACQUIRE wait without its dedicated lease";
                }
                acq_seen = true;
            }
        }
        if ((l->acq_wait != NULL) != acq_seen) {
            return "dedicated lease's ACQUIRE wait missing";
        }
        if (l->acq_wait != NULL &&
            l->hi.deadline_ms < l->acq_wait->hi.deadline_ms) {
            return "dedicated lease would expire before its ACQUIRE wait";
        }
        nwaits += l->nwaits;
        prev = l;
    }
    *nwaits_out = nwaits;
    return NULL;
}

/* Check the locks, their FIFOs and the token order. */
static const char *check_locks(const fence_fsm *f, uint64_t *ndelay_out)
{
    FENCE_ASSERT(ndelay_out != NULL);
    if (!list_ok(&f->lock_list, f->locks.count)) {
        return "lock list broken or not the size of the lock table";
    }
    uint64_t nheld = 0;
    uint64_t ndelay = 0;
    uint64_t nwaiters = 0;
    const fence__lock *prev = NULL;
    /* The lookup by name below misses the cache for each lock of a big
     * table: prefetch the bucket of the lock CHECK_AHEAD places ahead. */
    const fence__link *ahead = f->lock_list.first;
    for (int i = 0; i < CHECK_AHEAD && ahead != NULL; i++) {
        ahead = ahead->next;
    }
    /* Half as far ahead, the bucket is cached: fetch its first node. */
    const fence__link *half = f->lock_list.first;
    for (int i = 0; i < CHECK_AHEAD / 2 && half != NULL; i++) {
        half = half->next;
    }
    for (const fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        const fence__lock *k = LOCK_OF(p);
        if (ahead != NULL) {
            fence__htab_prefetch(&f->locks, LOCK_OF(ahead)->hn.hash);
            ahead = ahead->next;
        }
        if (half != NULL) {
            fence__htab_prefetch_node(&f->locks, LOCK_OF(half)->hn.hash);
            half = half->next;
        }
        /* Token 0: a lock never granted, reserved for a multi-lock
         * (fence__multi_check); equal tokens: one multi-lock's locks. */
        if (k->token > f->last_token) {
            return "lock token out of range";
        }
        if (prev != NULL && prev->token > k->token) {
            return "lock tokens not in order";
        }
        if (prev != NULL && prev->token == k->token && k->token != 0 &&
            (k->holder != prev->holder && k->holder != NULL && prev->holder != NULL)) {
            return "two holders share a token";
        }
        if (k->name_len == 0 || k->name_len > FENCE_NAME_MAX) {
            return "lock name length out of range";
        }
        if (fence__lock_find(f, k->name, k->name_len) != k) {
            return "lock not found by name";
        }
        if (prev != NULL && prev->token == k->token && k->token != 0 &&
            (k->nsholders > 0 || prev->nsholders > 0)) {
            return "a shared phase's token is another lock's too";
        }
        if (k->holder != NULL && k->in_delay) {
            return "a held lock is in lock-delay";
        }
        if (k->holder != NULL) {
            nheld++;
            if (fence__lease_find(f, k->holder->id) != k->holder) {
                return "lock holder is not a known lease";
            }
        }
        if (k->in_delay) {
            ndelay++;
            if (k->hi.idx == FENCE__NOT_IN_HEAP || k->hi.id != k->token ||
                k->delay_ms == 0 || k->delay_ms > FENCE_LOCK_DELAY_MS_MAX) {
                return "lock-delay state wrong";
            }
        } else if (k->hi.idx != FENCE__NOT_IN_HEAP) {
            return "lock in the heap without lock-delay";
        }
        if (!list_ok(&k->queue, k->nwaiters)) {
            return "lock FIFO broken or its count wrong";
        }
        uint64_t lastw = 0;
        for (const fence__link *x = k->queue.first; x != NULL; x = x->next) {
            const fence__wait *w = QWAIT_OF(x);
            if (w->lock != k || (w->head != NULL && w->head->lease != w->lease)) {
                return "waiter names another lock";
            }
            if (w->id <= lastw) {
                return "lock FIFO not in wait id order";
            }
            if (w->lease == k->holder) {
                return "the holder waits for its own lock";
            }
            if (fence__lease_find(f, w->lease->id) != w->lease) {
                return "waiter's lease does not exist";
            }
            lastw = w->id;
        }
        nwaiters += k->nwaiters;
        prev = k;
    }
    if (nheld != f->nheld) {
        return "held lock count wrong";
    }
    /* Every wait has one place per name in the locks' FIFOs, except a
     * semaphore's, which is in the semaphore's FIFO (sem.c). */
    uint64_t places = 0;
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        places += fence__wait_names(WAIT_OF(p));
    }
    if (nwaiters + f->n_sem_waits != places) {
        return "waiters in FIFOs do not match the wait table";
    }
    *ndelay_out = ndelay;
    return NULL;
}

/* Check the global wait list. */
static const char *check_waits(const fence_fsm *f)
{
    if (!list_ok(&f->wait_list, f->waits.count)) {
        return "wait list broken or not the size of the wait table";
    }
    const fence__wait *prev = NULL;
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *w = WAIT_OF(p);
        if (prev != NULL && prev->id >= w->id) {
            return "waits not in id order";
        }
        if (w->id == 0 || w->id >= f->next_wait_id) {
            return "wait id out of range";
        }
        if (fence__wait_find(f, w->id) != w) {
            return "wait not found by id";
        }
        if (w->hi.idx == FENCE__NOT_IN_HEAP) {
            return "wait without a deadline in the heap";
        }
        if (w->wait_ms == 0 || w->wait_ms > FENCE_WAIT_MS_MAX) {
            return "wait_ms out of range";
        }
        prev = w;
    }
    return NULL;
}

/* Check the dedup table. */
static const char *check_dedup(const fence_fsm *f)
{
    if (!list_ok(&f->dedup_list, f->dedup.count)) {
        return "dedup list broken or not the size of the dedup table";
    }
    uint64_t nqueued = 0;
    for (const fence__link *p = f->dedup_list.first; p != NULL; p = p->next) {
        const fence__dedup *d = DEDUP_OF(p);
        if (fence__dedup_find(f, d->req_id, d->owner) != d) {
            return "dedup record not found by req_id";
        }
        if (d->result.status > FENCE_ST_LAST) {
            return "dedup result status out of range";
        }
        const fence__wait *w = d->result.status == FENCE_ST_QUEUED
                                   ? fence__wait_find(f, d->result.wait_id)
                                   : NULL;
        if (d->wait != w) {
            return "QUEUED dedup record not attached to its wait";
        }
        if (w != NULL && d->result.lease != w->lease->id) {
            return "QUEUED dedup record names another lease than its wait";
        }
        nqueued += w != NULL;
    }
    /* Every wait's attached records, the other way round. */
    uint64_t nattached = 0;
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *w = WAIT_OF(p);
        if (!list_ok(&w->reqs, w->nreqs)) {
            return "wait's dedup list broken or not its length";
        }
        for (const fence__link *q = w->reqs.first; q != NULL; q = q->next) {
            const fence__dedup *d = WDEDUP_OF(q);
            if (d->wait != w || fence__dedup_find(f, d->req_id, d->owner) != d) {
                return "wait lists a dedup record that is not attached";
            }
        }
        nattached += w->nreqs;
    }
    if (nattached != nqueued) {
        return "attached dedup records do not match the waits' lists";
    }
    if (f->dedup.count > f->limits.dedup_max) {
        return "dedup table above its limit";
    }
    return NULL;
}

/* The owner counts (derived state): every lease points at its owner's
 * record, the records sum to the totals, and (when the product is small,
 * as in the tests) each record's counts are its leases' exactly. */
static const char *check_owners(const fence_fsm *f)
{
    uint64_t n = 0, leases = 0, locks = 0, waits = 0;
    for (const fence__link *p = f->owner_list.first; p != NULL; p = p->next) {
        const fence__owner *o = OWNER_OF(p);
        if (o->leases == 0) {
            return "an owner record without a lease";
        }
        if (fence__owner_counts(f, o->owner) != o) {
            return "an owner record is not in the owner table";
        }
        n++;
        leases += o->leases;
        locks += o->locks;
        waits += o->waits;
    }
    if (n != f->owners.count) {
        return "owner list and owner table differ";
    }
    uint64_t names = 0;
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        names += fence__wait_names(WAIT_OF(p));
    }
    if (leases != f->leases.count || locks != f->nheld + f->nsheld || waits != names) {
        return "owner counts do not add up to the leases, held locks and waits";
    }
    for (const fence__link *p = f->lease_list.first; p != NULL; p = p->next) {
        const fence__lease *l = LEASE_OF(p);
        if (l->own == NULL || l->own->owner != l->owner) {
            return "a lease does not point at its owner's record";
        }
    }
    if (n * f->leases.count > 1000000) {
        return NULL;
    }
    for (const fence__link *p = f->owner_list.first; p != NULL; p = p->next) {
        const fence__owner *o = OWNER_OF(p);
        uint64_t ol = 0, ok = 0, ow = 0;
        for (const fence__link *q = f->lease_list.first; q != NULL; q = q->next) {
            const fence__lease *l = LEASE_OF(q);
            if (l->own == o) {
                ol++;
                ok += l->nheld + l->nsheld;
                for (const fence__link *w = l->waits.first; w != NULL; w = w->next) {
                    ow += fence__wait_names(LWAIT_OF(w));
                }
            }
        }
        if (ol != o->leases || ok != o->locks || ow != o->waits) {
            return "an owner's counts differ from its leases'";
        }
    }
    return NULL;
}

/* Check every invariant; NULL when all hold. */
const char *fence_fsm_check(const fence_fsm *f)
{
    FENCE_ASSERT(f != NULL);
    const char *e;
    uint64_t nwaits = 0;
    uint64_t ndelay = 0;
    if (f->next_lease_id == 0 || f->next_wait_id == 0) {
        return "id counters must start at 1";
    }
    if ((e = check_leases(f, &nwaits)) != NULL) {
        return e;
    }
    if (nwaits != f->waits.count) {
        return "waits in lease lists do not match the wait table";
    }
    if ((e = check_locks(f, &ndelay)) != NULL) {
        return e;
    }
    if ((e = check_waits(f)) != NULL) {
        return e;
    }
    if ((e = check_dedup(f)) != NULL) {
        return e;
    }
    if ((e = check_owners(f)) != NULL) {
        return e;
    }
    if ((e = fence__check_shared(f)) != NULL) {
        return e;
    }
    if ((e = fence__multi_check(f)) != NULL) {
        return e;
    }
    if ((e = fence__elect_check(f)) != NULL) {
        return e;
    }
    if ((e = fence__sem_check(f)) != NULL) {
        return e;
    }
    return check_heap(f, f->leases.count + f->waits.count + ndelay);
}
