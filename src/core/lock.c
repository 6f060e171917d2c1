/* Locks and waits: lock objects (by name and by token), lock-delay, the
 * FIFO of waits on each lock, and the wait table.  Granting, hand-off and
 * failing waits are in apply.c. */
#include <stddef.h>
#include <string.h>

#include "core/fsm_int.h"

/* The lock with this name, or NULL. */
fence__lock *fence__lock_find(const fence_fsm *f, const uint8_t *name,
                              uint16_t len)
{
    return fence__lock_find_hashed(f, name, len, fence__lock_hash(f, name, len));
}

/* The lock with this name, whose hash is known, or NULL. */
fence__lock *fence__lock_find_hashed(const fence_fsm *f, const uint8_t *name,
                                     uint16_t len, uint64_t hash)
{
    for (fence__hnode *h = fence__htab_bucket(&f->locks, hash); h != NULL;
         h = h->next) {
        if (h->hash != hash) {
            continue;
        }
        fence__lock *k = FENCE__CONTAINER(h, fence__lock, hn);
        if (k->name_len == len && memcmp(k->name, name, len) == 0) {
            return k;
        }
    }
    return NULL;
}

/* Append lock k to the by-token list (its token is the largest, shared
 * only by the other locks of one multi-lock grant, or 0 for a lock about
 * to be granted, put in lock-delay, or moved to the head by multi.c). */
static void tok_append(fence_fsm *f, fence__lock *k)
{
    FENCE_ASSERT(f->lock_list.last == NULL ||
                 LOCK_OF(f->lock_list.last)->token <= k->token ||
                 k->token == 0);
    fence__list_append(&f->lock_list, &k->tlink);
}

/* Create a lock object with the given token and holder. */
fence__lock *fence__lock_add(fence_fsm *f, const uint8_t *name, uint16_t len,
                             uint64_t token, fence__lease *holder)
{
    return fence__lock_add_hashed(f, name, len, fence__lock_hash(f, name, len), token,
                                  holder);
}

/* The same, with the name's hash known (a caller that looked the name up
 * first hashes it once). */
fence__lock *fence__lock_add_hashed(fence_fsm *f, const uint8_t *name, uint16_t len,
                                    uint64_t hash, uint64_t token, fence__lease *holder)
{
    FENCE_ASSERT(len >= 1 && len <= FENCE_NAME_MAX);
    FENCE_ASSERT(fence__lock_find_hashed(f, name, len, hash) == NULL);
    if (!fence__heap_room(f, 1)) {
        return NULL;
    }
    /* The name starts inside the struct's tail padding (fsm_int.h). */
    size_t size = offsetof(fence__lock, name) + len;
    fence__lock *k = fence__alloc(f, size < sizeof(*k) ? sizeof(*k) : size);
    if (k == NULL) {
        return NULL;
    }
    memset(k, 0, offsetof(fence__lock, name));
    memcpy(k->name, name, len);
    k->name_len = len;
    k->token = token;
    k->hn.hash = hash;
    k->hi.kind = FENCE__K_DELAY;
    k->hi.idx = FENCE__NOT_IN_HEAP;
    tok_append(f, k);
    fence__htab_insert(f, &f->locks, &k->hn);
    if (holder != NULL) {
        fence__held_append(f, holder, k);
    }
    return k;
}

/* Put a free lock into lock-delay until end_ms. */
void fence__lock_set_delay(fence_fsm *f, fence__lock *k, uint64_t delay_ms,
                           uint64_t end_ms)
{
    FENCE_ASSERT(fence__lock_is_free(k));
    FENCE_ASSERT(delay_ms > 0);
    k->in_delay = true;
    k->delay_ms = delay_ms;
    k->hi.id = k->token;
    k->hi.deadline_ms = end_ms;
    fence__heap_push(&f->heap, &k->hi);
}

/* Give lock k a new token, the largest: it moves to the end of the
 * by-token list. */
void fence__lock_retoken(fence_fsm *f, fence__lock *k, uint64_t token)
{
    FENCE_ASSERT(token > k->token);
    fence__list_remove(&f->lock_list, &k->tlink);
    k->token = token;
    tok_append(f, k);
}

/* Free a lock object that has no holder, no delay and no waiters. */
static void lock_destroy(fence_fsm *f, fence__lock *k)
{
    FENCE_ASSERT(k->holder == NULL);
    FENCE_ASSERT(k->nsholders == 0);
    FENCE_ASSERT(!k->in_delay);
    FENCE_ASSERT(k->nwaiters == 0);
    FENCE_ASSERT(fence__list_empty(&k->queue));
    f->kinds.elect_lock_gone(f, k);
    fence__heap_remove(&f->heap, &k->hi);
    fence__htab_remove(&f->locks, &k->hn);
    fence__list_remove(&f->lock_list, &k->tlink);
    fence__free(f, k);
}

/* Destroy a lock object if nothing keeps it alive any more. */
void fence__lock_maybe_destroy(fence_fsm *f, fence__lock *k)
{
    if (fence__lock_is_free(k) && k->nwaiters == 0) {
        lock_destroy(f, k);
    }
}

/* The wait with this id, or NULL. */
fence__wait *fence__wait_find(const fence_fsm *f, uint64_t id)
{
    fence__hnode *h = fence__htab_first(&f->waits, fence__key_hash(f, id));
    return h ? FENCE__CONTAINER(h, fence__wait, hn) : NULL;
}

/* Create a wait at the tail of lock k's FIFO. */
fence__wait *fence__wait_add(fence_fsm *f, uint64_t id, fence__lease *l,
                             fence__lock *k, uint64_t wait_ms,
                             uint64_t deadline_ms, bool acquire, bool has_req,
                             uint64_t req_id)
{
    FENCE_ASSERT(id > 0);
    FENCE_ASSERT(k->holder != l);
    FENCE_ASSERT(k->nsholders == 0 || fence__shold_of(l, k) == NULL);
    FENCE_ASSERT(f->wait_list.last == NULL ||
                 WAIT_OF(f->wait_list.last)->id < id);
    FENCE_ASSERT(!acquire || (l->dedicated && l->acq_wait == NULL));
    if (!fence__heap_room(f, 1)) {
        return NULL;
    }
    fence__wait *w = fence__alloc(f, sizeof(*w));
    if (w == NULL) {
        return NULL;
    }
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->wait_ms = wait_ms;
    w->lease = l;
    w->lock = k;
    w->acquire = acquire;
    w->has_req = has_req;
    w->req_id = has_req ? req_id : 0;
    w->hn.hash = fence__key_hash(f, id);
    w->hi.kind = FENCE__K_WAIT;
    w->hi.id = id;
    w->hi.deadline_ms = deadline_ms;
    w->hi.idx = FENCE__NOT_IN_HEAP;
    fence__list_append(&k->queue, &w->qlink);
    k->nwaiters++;
    fence__list_append(&l->waits, &w->llink);
    l->nwaits++;
    l->own->waits++;
    fence__list_append(&f->wait_list, &w->wlink);
    if (acquire) {
        l->acq_wait = w;
    }
    fence__htab_insert(f, &f->waits, &w->hn);
    fence__heap_push(&f->heap, &w->hi);
    return w;
}

/* Unlink a wait from every structure (the caller frees it). */
void fence__wait_unlink(fence_fsm *f, fence__wait *w)
{
    fence__lock *k = w->lock;
    fence__lease *l = w->lease;
    FENCE_ASSERT(l->nwaits > 0);
    if (w->sem != NULL) {
        FENCE_ASSERT(k == NULL);
        f->kinds.sem_unqueue(w);
        FENCE_ASSERT(f->n_sem_waits > 0);
        f->n_sem_waits--;
    } else {
        FENCE_ASSERT(k->nwaiters > 0);
        fence__list_remove(&k->queue, &w->qlink);
        k->nwaiters--;
    }
    fence__list_remove(&l->waits, &w->llink);
    l->nwaits--;
    FENCE_ASSERT(l->own->waits > 0);
    l->own->waits--;
    fence__list_remove(&f->wait_list, &w->wlink);
    if (l->acq_wait == w) {
        l->acq_wait = NULL;
    }
    fence__htab_remove(&f->waits, &w->hn);
    fence__heap_remove(&f->heap, &w->hi);
}

/* The wait of lease l on lock k, or NULL (scans the shorter list).  For
 * a multi-lock's place in k's FIFO it is the multi wait. */
fence__wait *fence__wait_of(const fence__lease *l, const fence__lock *k)
{
    if (l->nwaits <= k->nwaiters) {
        for (fence__link *p = l->waits.first; p != NULL; p = p->next) {
            fence__wait *w = LWAIT_OF(p);
            if (w->lock == k) {
                return w;
            }
            for (uint16_t i = 0; i < w->nparts; i++) {
                if (w->parts[i].lock == k) {
                    return w;
                }
            }
        }
        return NULL;
    }
    for (fence__link *p = k->queue.first; p != NULL; p = p->next) {
        fence__wait *w = QWAIT_OF(p);
        if (w->lease == l) {
            return fence__wait_owner(w);
        }
    }
    return NULL;
}

/* True when lease l already waits for lock k. */
bool fence__is_waiting(const fence__lease *l, const fence__lock *k)
{
    return fence__wait_of(l, k) != NULL;
}
