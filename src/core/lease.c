/* Leases: creation, lookup, liveness, and the list of locks each holds.
 * What happens when a lease ends (its locks released, its waits failed)
 * is in apply.c. */
#include <string.h>

#include "core/fsm_int.h"

/* The counts of owner, or NULL. */
fence__owner *fence__owner_counts(const fence_fsm *f, uint64_t owner)
{
    fence__hnode *h = fence__htab_first(&f->owners, fence__key_hash(f, owner));
    return h ? FENCE__CONTAINER(h, fence__owner, hn) : NULL;
}

/* Unlink and free the counts of an owner that has nothing left. */
static void owner_free(fence_fsm *f, fence__owner *o)
{
    FENCE_ASSERT(o->leases == 0);
    FENCE_ASSERT(o->locks == 0);
    FENCE_ASSERT(o->waits == 0);
    fence__htab_remove(&f->owners, &o->hn);
    fence__list_remove(&f->owner_list, &o->link);
    fence__free(f, o);
}

/* Create a lease and link it everywhere. */
fence__lease *fence__lease_add(fence_fsm *f, uint64_t id, uint64_t ttl_ms,
                               uint64_t lock_delay_ms, uint64_t deadline_ms,
                               bool dedicated, uint64_t owner)
{
    FENCE_ASSERT(id > 0);
    /* That id is not in use follows from the assert below (ids only grow
     * along lease_list) and fence_fsm_check's rule that the table and the
     * list hold the same leases; a table lookup here was a cache miss per
     * LEASE_GRANT, a quarter of the time to replay a million of them. */
    if (!fence__heap_room(f, 1)) {
        return NULL;
    }
    fence__owner *o = fence__owner_counts(f, owner);
    if (o == NULL) {
        o = fence__alloc(f, sizeof(*o));
        if (o == NULL) {
            return NULL;
        }
        memset(o, 0, sizeof(*o));
        o->owner = owner;
        o->hn.hash = fence__key_hash(f, owner);
        fence__list_append(&f->owner_list, &o->link);
        fence__htab_insert(f, &f->owners, &o->hn);
    }
    fence__lease *l = fence__alloc(f, sizeof(*l));
    if (l == NULL) {
        if (o->leases == 0) {
            owner_free(f, o);
        }
        return NULL;
    }
    memset(l, 0, sizeof(*l));
    l->owner = owner;
    l->own = o;
    o->leases++;
    FENCE_ASSERT(o->leases <= f->leases.count + 1);
    l->id = id;
    l->ttl_ms = ttl_ms;
    l->lock_delay_ms = lock_delay_ms;
    l->dedicated = dedicated;
    l->hn.hash = fence__key_hash(f, id);
    l->hi.kind = FENCE__K_LEASE;
    l->hi.id = id;
    l->hi.deadline_ms = deadline_ms;
    l->hi.idx = FENCE__NOT_IN_HEAP;
    FENCE_ASSERT(f->lease_list.last == NULL ||
                 LEASE_OF(f->lease_list.last)->id < id);
    fence__list_append(&f->lease_list, &l->link);
    fence__htab_insert(f, &f->leases, &l->hn);
    fence__heap_push(&f->heap, &l->hi);
    return l;
}

/* The lease with this id, or NULL. */
fence__lease *fence__lease_find(const fence_fsm *f, uint64_t id)
{
    fence__hnode *h = fence__htab_first(&f->leases, fence__key_hash(f, id));
    return h ? FENCE__CONTAINER(h, fence__lease, hn) : NULL;
}

/* Unlink and free a lease that holds nothing and waits for nothing. */
void fence__lease_destroy(fence_fsm *f, fence__lease *l)
{
    FENCE_ASSERT(l->nheld == 0);
    FENCE_ASSERT(l->nsheld == 0);
    FENCE_ASSERT(l->nwaits == 0);
    FENCE_ASSERT(l->acq_wait == NULL);
    FENCE_ASSERT(fence__list_empty(&l->held));
    fence__heap_remove(&f->heap, &l->hi);
    fence__htab_remove(&f->leases, &l->hn);
    fence__list_remove(&f->lease_list, &l->link);
    fence__owner *o = l->own;
    FENCE_ASSERT(o != NULL && o->owner == l->owner);
    FENCE_ASSERT(o->leases > 0);
    if (--o->leases == 0) {
        owner_free(f, o);
    }
    fence__free(f, l);
}

/* True when the lease is live at fsm time now. */
bool fence__lease_live(const fence_fsm *f, const fence__lease *l)
{
    return l->hi.deadline_ms > f->now_ms;
}

/* The deadline a (re)started lease gets now: now + ttl, but a dedicated
 * lease whose ACQUIRE is queued lives at least as long as the wait. */
uint64_t fence__lease_deadline(const fence_fsm *f, const fence__lease *l)
{
    uint64_t d = f->now_ms + l->ttl_ms;
    if (l->acq_wait != NULL && l->acq_wait->hi.deadline_ms > d) {
        d = l->acq_wait->hi.deadline_ms;
    }
    FENCE_ASSERT(d > f->now_ms);
    return d;
}

/* Append lock k to lease l's held list. */
void fence__held_append(fence_fsm *f, fence__lease *l, fence__lock *k)
{
    FENCE_ASSERT(k->holder == NULL);
    /* Token order; equal only for the locks of one multi-lock grant. */
    FENCE_ASSERT(l->held.last == NULL || HELD_OF(l->held.last)->token <= k->token);
    k->holder = l;
    fence__list_append(&l->held, &k->hlink);
    l->nheld++;
    l->own->locks++;
    f->nheld++;
}

/* Remove lock k from its holder's held list; the lock becomes free. */
void fence__held_unlink(fence_fsm *f, fence__lock *k)
{
    fence__lease *l = k->holder;
    FENCE_ASSERT(l != NULL);
    FENCE_ASSERT(l->nheld > 0);
    fence__list_remove(&l->held, &k->hlink);
    k->holder = NULL;
    l->nheld--;
    FENCE_ASSERT(l->own->locks > 0);
    l->own->locks--;
    FENCE_ASSERT(f->nheld > 0);
    f->nheld--;
}
