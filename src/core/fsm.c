/* The lock state machine: tables, the deadline heap, time, the commands,
 * the read-only queries and the invariant check.  See fsm.h for the
 * semantics and fsm_int.h for the data structures. */
#include <string.h>

#include "core/fsm_int.h"

/* ---- Allocation, hashing ------------------------------------ */

/* Allocate size bytes through the injected allocator; NULL on failure. */
void *fence__alloc(fence_fsm *f, size_t size)
{
    FENCE_ASSERT(size > 0);
    return f->alloc.alloc(f->alloc.ctx, size);
}

/* Free memory from fence__alloc; NULL is a no-op. */
void fence__free(fence_fsm *f, void *p)
{
    if (p != NULL) {
        f->alloc.free(f->alloc.ctx, p);
    }
}

/* Mix a 64-bit key into a hash.  Every step is invertible, so two keys
 * have equal hashes only if they are equal. */
uint64_t fence__hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Keyed hash of a lock name: the bytes, eight at a time, are chained
 * through the mixer starting from the seed.  Clients choose names, so
 * without the (per-process) seed they cannot aim names at one bucket. */
uint64_t fence__hash_name(uint64_t seed, const uint8_t *name, uint16_t len)
{
    uint64_t h = fence__hash_u64(seed ^ (0x9e3779b97f4a7c15ULL * (len + 1u)));
    uint16_t i = 0;
    while (i < len) {
        uint64_t block = 0;
        for (int b = 0; b < 8 && i < len; b++, i++) {
            block |= (uint64_t)name[i] << (8 * b);
        }
        h = fence__hash_u64(h ^ block) + seed;
    }
    return fence__hash_u64(h);
}

/* Keyed hash of a 64-bit key (ids, request ids).  Still a bijection, so
 * equal hashes mean equal keys and lookups compare hashes only. */
static uint64_t key_hash(const fence_fsm *f, uint64_t key)
{
    return fence__hash_u64(key ^ f->hash_seed);
}

/* ---- Hash tables -------------------------------------------------------- */

#define HTAB_INIT_BUCKETS 16u
#define HTAB_MAX_BUCKETS (1u << 30)

/* Give a table its first bucket array.  Returns false on lack of memory. */
static bool htab_init(fence_fsm *f, fence__htab *t)
{
    t->b = fence__alloc(f, HTAB_INIT_BUCKETS * sizeof(*t->b));
    if (t->b == NULL) {
        return false;
    }
    memset(t->b, 0, HTAB_INIT_BUCKETS * sizeof(*t->b));
    t->mask = HTAB_INIT_BUCKETS - 1;
    t->count = 0;
    return true;
}

/* Double the bucket array when the table is fuller than one node per
 * bucket.  A failed allocation is harmless: chains just get longer. */
static void htab_maybe_grow(fence_fsm *f, fence__htab *t)
{
    uint32_t n = t->mask + 1;
    if (t->count < n || n >= HTAB_MAX_BUCKETS) {
        return;
    }
    fence__hnode **nb = fence__alloc(f, 2 * (size_t)n * sizeof(*nb));
    if (nb == NULL) {
        return;
    }
    memset(nb, 0, 2 * (size_t)n * sizeof(*nb));
    uint32_t nmask = 2 * n - 1;
    for (uint32_t i = 0; i < n; i++) {
        fence__hnode *h = t->b[i];
        while (h != NULL) {
            fence__hnode *next = h->next;
            h->next = nb[h->hash & nmask];
            nb[h->hash & nmask] = h;
            h = next;
        }
    }
    fence__free(f, t->b);
    t->b = nb;
    t->mask = nmask;
}

/* Insert a node whose hash is set.  Never fails. */
static void htab_insert(fence_fsm *f, fence__htab *t, fence__hnode *h)
{
    htab_maybe_grow(f, t);
    h->next = t->b[h->hash & t->mask];
    t->b[h->hash & t->mask] = h;
    t->count++;
    FENCE_ASSERT(t->count != 0);
}

/* Remove a node that is in the table. */
static void htab_remove(fence__htab *t, fence__hnode *h)
{
    fence__hnode **pp = &t->b[h->hash & t->mask];
    while (*pp != h) {
        FENCE_ASSERT(*pp != NULL);
        pp = &(*pp)->next;
    }
    *pp = h->next;
    h->next = NULL;
    FENCE_ASSERT(t->count > 0);
    t->count--;
}

/* The first node with this hash, or NULL. */
static fence__hnode *htab_first(const fence__htab *t, uint64_t hash)
{
    fence__hnode *h = t->b[hash & t->mask];
    while (h != NULL && h->hash != hash) {
        h = h->next;
    }
    return h;
}

#define CONTAINER(ptr, type, member)                                        \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- The deadline heap -------------------------------------------------- */

/* Order of heap items: (deadline, kind, id). */
static bool hitem_less(const fence__hitem *a, const fence__hitem *b)
{
    if (a->deadline_ms != b->deadline_ms) {
        return a->deadline_ms < b->deadline_ms;
    }
    if (a->kind != b->kind) {
        return a->kind < b->kind;
    }
    return a->id < b->id;
}

/* Put item i at position pos. */
static void heap_set(fence_fsm *f, uint32_t pos, fence__hitem *it)
{
    f->heap[pos] = it;
    it->idx = pos;
}

/* Move the item at pos up until its parent is smaller. */
static void heap_up(fence_fsm *f, uint32_t pos)
{
    fence__hitem *it = f->heap[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!hitem_less(it, f->heap[parent])) {
            break;
        }
        heap_set(f, pos, f->heap[parent]);
        pos = parent;
    }
    heap_set(f, pos, it);
}

/* Move the item at pos down until both children are larger. */
static void heap_down(fence_fsm *f, uint32_t pos)
{
    fence__hitem *it = f->heap[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= f->heap_len) {
            break;
        }
        if (c + 1 < f->heap_len && hitem_less(f->heap[c + 1], f->heap[c])) {
            c++;
        }
        if (!hitem_less(f->heap[c], it)) {
            break;
        }
        heap_set(f, pos, f->heap[c]);
        pos = c;
    }
    heap_set(f, pos, it);
}

/* Make sure the heap can hold every object that may ever need a slot, plus
 * extra new ones.  Returns false on lack of memory (nothing changed). */
static bool heap_reserve(fence_fsm *f, uint32_t extra)
{
    uint64_t need = (uint64_t)f->leases.count + f->waits.count +
                    f->locks.count + extra;
    if (need <= f->heap_cap) {
        return true;
    }
    if (need > UINT32_MAX / 2) {
        return false;
    }
    uint64_t cap = f->heap_cap ? (uint64_t)f->heap_cap * 2 : 64;
    if (cap < need) {
        cap = need;
    }
    fence__hitem **h = fence__alloc(f, (size_t)cap * sizeof(*h));
    if (h == NULL) {
        return false;
    }
    if (f->heap_len > 0) {
        memcpy(h, f->heap, f->heap_len * sizeof(*h));
    }
    fence__free(f, f->heap);
    f->heap = h;
    f->heap_cap = (uint32_t)cap;
    return true;
}

/* Add an item (capacity was reserved when its owner was created). */
static void heap_push(fence_fsm *f, fence__hitem *it)
{
    FENCE_ASSERT(it->idx == FENCE__NOT_IN_HEAP);
    FENCE_ASSERT(f->heap_len < f->heap_cap);
    f->heap[f->heap_len] = it;
    it->idx = f->heap_len;
    f->heap_len++;
    heap_up(f, it->idx);
}

/* Remove an item if it is in the heap. */
static void heap_remove(fence_fsm *f, fence__hitem *it)
{
    if (it->idx == FENCE__NOT_IN_HEAP) {
        return;
    }
    uint32_t pos = it->idx;
    FENCE_ASSERT(pos < f->heap_len);
    FENCE_ASSERT(f->heap[pos] == it);
    f->heap_len--;
    it->idx = FENCE__NOT_IN_HEAP;
    if (pos == f->heap_len) {
        return;
    }
    fence__hitem *moved = f->heap[f->heap_len];
    heap_set(f, pos, moved);
    heap_down(f, pos);
    heap_up(f, moved->idx);
}

/* Change an item's deadline, keeping its heap position right. */
static void heap_move(fence_fsm *f, fence__hitem *it, uint64_t deadline_ms)
{
    it->deadline_ms = deadline_ms;
    if (it->idx == FENCE__NOT_IN_HEAP) {
        return;
    }
    heap_down(f, it->idx);
    heap_up(f, it->idx);
}

/* Restore the heap property over the whole array (after LEADER_START has
 * changed every deadline). */
static void heap_rebuild(fence_fsm *f)
{
    for (uint32_t i = f->heap_len / 2; i-- > 0;) {
        heap_down(f, i);
    }
}

/* ---- Objects ------------------------------------------------------------ */

/* Create a lease and link it everywhere.  NULL on lack of memory. */
fence__lease *fence__lease_add(fence_fsm *f, uint64_t id, uint64_t ttl_ms,
                               uint64_t lock_delay_ms, uint64_t deadline_ms,
                               bool dedicated)
{
    FENCE_ASSERT(id > 0);
    FENCE_ASSERT(fence__lease_find(f, id) == NULL);
    if (!heap_reserve(f, 1)) {
        return NULL;
    }
    fence__lease *l = fence__alloc(f, sizeof(*l));
    if (l == NULL) {
        return NULL;
    }
    memset(l, 0, sizeof(*l));
    l->id = id;
    l->ttl_ms = ttl_ms;
    l->lock_delay_ms = lock_delay_ms;
    l->dedicated = dedicated;
    l->hn.hash = key_hash(f, id);
    l->hi.kind = FENCE__K_LEASE;
    l->hi.id = id;
    l->hi.deadline_ms = deadline_ms;
    l->hi.idx = FENCE__NOT_IN_HEAP;
    FENCE_ASSERT(f->lease_tail == NULL || f->lease_tail->id < id);
    l->prev = f->lease_tail;
    if (f->lease_tail != NULL) {
        f->lease_tail->next = l;
    } else {
        f->lease_head = l;
    }
    f->lease_tail = l;
    htab_insert(f, &f->leases, &l->hn);
    heap_push(f, &l->hi);
    return l;
}

/* The lease with this id, or NULL. */
fence__lease *fence__lease_find(const fence_fsm *f, uint64_t id)
{
    fence__hnode *h = htab_first(&f->leases, key_hash(f, id));
    return h ? CONTAINER(h, fence__lease, hn) : NULL;
}

/* Unlink and free a lease that holds nothing and waits for nothing. */
static void lease_destroy(fence_fsm *f, fence__lease *l)
{
    FENCE_ASSERT(l->nheld == 0);
    FENCE_ASSERT(l->nwaits == 0);
    FENCE_ASSERT(l->acq_wait == NULL);
    heap_remove(f, &l->hi);
    htab_remove(&f->leases, &l->hn);
    if (l->prev != NULL) {
        l->prev->next = l->next;
    } else {
        f->lease_head = l->next;
    }
    if (l->next != NULL) {
        l->next->prev = l->prev;
    } else {
        f->lease_tail = l->prev;
    }
    fence__free(f, l);
}

/* True when the lease is live at fsm time now. */
static bool lease_live(const fence_fsm *f, const fence__lease *l)
{
    return l->hi.deadline_ms > f->now_ms;
}

/* The deadline a (re)started lease gets now: now + ttl, but a dedicated
 * lease whose ACQUIRE is queued lives at least as long as the wait. */
static uint64_t lease_deadline(const fence_fsm *f, const fence__lease *l)
{
    uint64_t d = f->now_ms + l->ttl_ms;
    if (l->acq_wait != NULL && l->acq_wait->hi.deadline_ms > d) {
        d = l->acq_wait->hi.deadline_ms;
    }
    return d;
}

/* The lock with this name, or NULL. */
fence__lock *fence__lock_find(const fence_fsm *f, const uint8_t *name,
                              uint16_t len)
{
    uint64_t hash = fence__hash_name(f->hash_seed, name, len);
    for (fence__hnode *h = f->locks.b[hash & f->locks.mask]; h != NULL;
         h = h->next) {
        if (h->hash != hash) {
            continue;
        }
        fence__lock *k = CONTAINER(h, fence__lock, hn);
        if (k->name_len == len && memcmp(k->name, name, len) == 0) {
            return k;
        }
    }
    return NULL;
}

/* Append lock k to lease l's held list. */
static void held_append(fence_fsm *f, fence__lease *l, fence__lock *k)
{
    FENCE_ASSERT(k->holder == NULL);
    k->holder = l;
    k->hnext = NULL;
    k->hprev = l->held_tail;
    if (l->held_tail != NULL) {
        l->held_tail->hnext = k;
    } else {
        l->held_head = k;
    }
    l->held_tail = k;
    l->nheld++;
    f->nheld++;
}

/* Remove lock k from its holder's held list; the lock becomes free. */
static void held_unlink(fence_fsm *f, fence__lock *k)
{
    fence__lease *l = k->holder;
    FENCE_ASSERT(l != NULL);
    FENCE_ASSERT(l->nheld > 0);
    if (k->hprev != NULL) {
        k->hprev->hnext = k->hnext;
    } else {
        l->held_head = k->hnext;
    }
    if (k->hnext != NULL) {
        k->hnext->hprev = k->hprev;
    } else {
        l->held_tail = k->hprev;
    }
    k->hprev = k->hnext = NULL;
    k->holder = NULL;
    l->nheld--;
    FENCE_ASSERT(f->nheld > 0);
    f->nheld--;
}

/* Unlink lock k from the by-token list. */
static void tok_unlink(fence_fsm *f, fence__lock *k)
{
    if (k->tprev != NULL) {
        k->tprev->tnext = k->tnext;
    } else {
        f->lock_head = k->tnext;
    }
    if (k->tnext != NULL) {
        k->tnext->tprev = k->tprev;
    } else {
        f->lock_tail = k->tprev;
    }
    k->tprev = k->tnext = NULL;
}

/* Append lock k to the by-token list (its token is the largest). */
static void tok_append(fence_fsm *f, fence__lock *k)
{
    FENCE_ASSERT(f->lock_tail == NULL || f->lock_tail->token < k->token ||
                 k->token == 0);
    k->tnext = NULL;
    k->tprev = f->lock_tail;
    if (f->lock_tail != NULL) {
        f->lock_tail->tnext = k;
    } else {
        f->lock_head = k;
    }
    f->lock_tail = k;
}

/* Create a lock object with the given token and holder (holder may be
 * NULL: the caller then grants it or puts it in lock-delay at once).  NULL
 * on lack of memory. */
fence__lock *fence__lock_add(fence_fsm *f, const uint8_t *name, uint16_t len,
                             uint64_t token, fence__lease *holder)
{
    FENCE_ASSERT(len >= 1 && len <= FENCE_NAME_MAX);
    FENCE_ASSERT(fence__lock_find(f, name, len) == NULL);
    if (!heap_reserve(f, 1)) {
        return NULL;
    }
    fence__lock *k = fence__alloc(f, sizeof(*k) + len);
    if (k == NULL) {
        return NULL;
    }
    memset(k, 0, sizeof(*k));
    memcpy(k->name, name, len);
    k->name_len = len;
    k->token = token;
    k->hn.hash = fence__hash_name(f->hash_seed, name, len);
    k->hi.kind = FENCE__K_DELAY;
    k->hi.idx = FENCE__NOT_IN_HEAP;
    tok_append(f, k);
    htab_insert(f, &f->locks, &k->hn);
    if (holder != NULL) {
        held_append(f, holder, k);
    }
    return k;
}

/* Put a free lock into lock-delay until end_ms. */
void fence__lock_set_delay(fence_fsm *f, fence__lock *k, uint64_t delay_ms,
                           uint64_t end_ms)
{
    FENCE_ASSERT(k->holder == NULL);
    FENCE_ASSERT(!k->in_delay);
    FENCE_ASSERT(delay_ms > 0);
    k->in_delay = true;
    k->delay_ms = delay_ms;
    k->hi.id = k->token;
    k->hi.deadline_ms = end_ms;
    heap_push(f, &k->hi);
}

/* Free a lock object that has no holder, no delay and no waiters. */
static void lock_destroy(fence_fsm *f, fence__lock *k)
{
    FENCE_ASSERT(k->holder == NULL);
    FENCE_ASSERT(!k->in_delay);
    FENCE_ASSERT(k->nwaiters == 0);
    FENCE_ASSERT(k->q_head == NULL);
    heap_remove(f, &k->hi);
    htab_remove(&f->locks, &k->hn);
    tok_unlink(f, k);
    fence__free(f, k);
}

/* Destroy a lock object if nothing keeps it alive any more. */
static void lock_maybe_destroy(fence_fsm *f, fence__lock *k)
{
    if (k->holder == NULL && !k->in_delay && k->nwaiters == 0) {
        lock_destroy(f, k);
    }
}

/* The wait with this id, or NULL. */
fence__wait *fence__wait_find(const fence_fsm *f, uint64_t id)
{
    fence__hnode *h = htab_first(&f->waits, key_hash(f, id));
    return h ? CONTAINER(h, fence__wait, hn) : NULL;
}

/* Create a wait at the tail of lock k's FIFO.  NULL on lack of memory. */
fence__wait *fence__wait_add(fence_fsm *f, uint64_t id, fence__lease *l,
                             fence__lock *k, uint64_t wait_ms,
                             uint64_t deadline_ms, bool acquire, bool has_req,
                             uint64_t req_id)
{
    FENCE_ASSERT(id > 0);
    FENCE_ASSERT(k->holder != l);
    FENCE_ASSERT(f->wait_tail == NULL || f->wait_tail->id < id);
    FENCE_ASSERT(!acquire || (l->dedicated && l->acq_wait == NULL));
    if (!heap_reserve(f, 1)) {
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
    w->hn.hash = key_hash(f, id);
    w->hi.kind = FENCE__K_WAIT;
    w->hi.id = id;
    w->hi.deadline_ms = deadline_ms;
    w->hi.idx = FENCE__NOT_IN_HEAP;
    /* Lock FIFO. */
    w->qprev = k->q_tail;
    if (k->q_tail != NULL) {
        k->q_tail->qnext = w;
    } else {
        k->q_head = w;
    }
    k->q_tail = w;
    k->nwaiters++;
    /* Lease's waits. */
    w->lprev = l->waits_tail;
    if (l->waits_tail != NULL) {
        l->waits_tail->lnext = w;
    } else {
        l->waits_head = w;
    }
    l->waits_tail = w;
    l->nwaits++;
    /* All waits. */
    w->wprev = f->wait_tail;
    if (f->wait_tail != NULL) {
        f->wait_tail->wnext = w;
    } else {
        f->wait_head = w;
    }
    f->wait_tail = w;
    if (acquire) {
        l->acq_wait = w;
    }
    htab_insert(f, &f->waits, &w->hn);
    heap_push(f, &w->hi);
    return w;
}

/* Unlink a wait from every structure (the caller frees it).  Under the
 * planted bug, a lease that was left unreaped because it was queued goes
 * back into the heap once it waits for nothing. */
static void wait_unlink(fence_fsm *f, fence__wait *w)
{
    fence__lock *k = w->lock;
    fence__lease *l = w->lease;
    FENCE_ASSERT(k->nwaiters > 0);
    FENCE_ASSERT(l->nwaits > 0);
    if (w->qprev != NULL) {
        w->qprev->qnext = w->qnext;
    } else {
        k->q_head = w->qnext;
    }
    if (w->qnext != NULL) {
        w->qnext->qprev = w->qprev;
    } else {
        k->q_tail = w->qprev;
    }
    k->nwaiters--;
    if (w->lprev != NULL) {
        w->lprev->lnext = w->lnext;
    } else {
        l->waits_head = w->lnext;
    }
    if (w->lnext != NULL) {
        w->lnext->lprev = w->lprev;
    } else {
        l->waits_tail = w->lprev;
    }
    l->nwaits--;
    if (w->wprev != NULL) {
        w->wprev->wnext = w->wnext;
    } else {
        f->wait_head = w->wnext;
    }
    if (w->wnext != NULL) {
        w->wnext->wprev = w->wprev;
    } else {
        f->wait_tail = w->wprev;
    }
    if (l->acq_wait == w) {
        l->acq_wait = NULL;
    }
    htab_remove(&f->waits, &w->hn);
    heap_remove(f, &w->hi);
#ifdef FENCE_BUG_GRANT_EXPIRED
    /* PLANTED BUG (etcd#11456), part 2: re-arm the skipped expiry. */
    if (l->nwaits == 0 && l->hi.idx == FENCE__NOT_IN_HEAP) {
        heap_push(f, &l->hi);
    }
#endif
}

/* True when lease l already waits for lock k (scans the shorter list). */
bool fence__is_waiting(const fence__lease *l, const fence__lock *k)
{
    if (l->nwaits <= k->nwaiters) {
        for (const fence__wait *w = l->waits_head; w != NULL; w = w->lnext) {
            if (w->lock == k) {
                return true;
            }
        }
        return false;
    }
    for (const fence__wait *w = k->q_head; w != NULL; w = w->qnext) {
        if (w->lease == l) {
            return true;
        }
    }
    return false;
}

/* The wait of lease l on lock k, or NULL. */
static fence__wait *find_wait(const fence__lease *l, const fence__lock *k)
{
    if (l->nwaits <= k->nwaiters) {
        for (fence__wait *w = l->waits_head; w != NULL; w = w->lnext) {
            if (w->lock == k) {
                return w;
            }
        }
        return NULL;
    }
    for (fence__wait *w = k->q_head; w != NULL; w = w->qnext) {
        if (w->lease == l) {
            return w;
        }
    }
    return NULL;
}

/* ---- Dedup table -------------------------------------------------------- */

/* The dedup record for req_id, or NULL. */
fence__dedup *fence__dedup_find(const fence_fsm *f, uint64_t req_id)
{
    fence__hnode *h = htab_first(&f->dedup, key_hash(f, req_id));
    return h ? CONTAINER(h, fence__dedup, hn) : NULL;
}

/* Link a filled-in record as the newest. */
static void dedup_link(fence_fsm *f, fence__dedup *d)
{
    FENCE_ASSERT(fence__dedup_find(f, d->req_id) == NULL);
    d->hn.hash = key_hash(f, d->req_id);
    d->next = NULL;
    d->prev = f->dd_tail;
    if (f->dd_tail != NULL) {
        f->dd_tail->next = d;
    } else {
        f->dd_head = d;
    }
    f->dd_tail = d;
    htab_insert(f, &f->dedup, &d->hn);
}

/* Unlink the oldest record and hand it back (not freed). */
static fence__dedup *dedup_pop_oldest(fence_fsm *f)
{
    fence__dedup *d = f->dd_head;
    FENCE_ASSERT(d != NULL);
    f->dd_head = d->next;
    if (f->dd_head != NULL) {
        f->dd_head->prev = NULL;
    } else {
        f->dd_tail = NULL;
    }
    d->next = d->prev = NULL;
    htab_remove(&f->dedup, &d->hn);
    return d;
}

/* Unlink record d from wherever it is in the age list and free it. */
static void dedup_forget(fence_fsm *f, fence__dedup *d)
{
    if (d->prev != NULL) {
        d->prev->next = d->next;
    } else {
        FENCE_ASSERT(f->dd_head == d);
        f->dd_head = d->next;
    }
    if (d->next != NULL) {
        d->next->prev = d->prev;
    } else {
        FENCE_ASSERT(f->dd_tail == d);
        f->dd_tail = d->prev;
    }
    htab_remove(&f->dedup, &d->hn);
    fence__free(f, d);
}

/* Evict the oldest records until at most max remain. */
static void dedup_trim(fence_fsm *f, uint32_t max)
{
    while (f->dedup.count > max) {
        fence__free(f, dedup_pop_oldest(f));
    }
}

/* A fingerprint of everything a command asks for (type and fields), so a
 * request id reused for a different request is refused instead of being
 * answered with another request's result (which could hand one client the
 * token and lease of another).  FNV-1a over the fields in a fixed order:
 * deterministic on every replica (unlike the hash tables' seed). */
uint64_t fence__cmd_fp(const fence_cmd *cmd)
{
    uint64_t h = 14695981039346656037ULL;
    const uint64_t fields[] = {cmd->type,    cmd->lease,   cmd->token,
                               cmd->wait_id, cmd->ttl_ms,  cmd->wait_ms,
                               cmd->lock_delay_ms, cmd->name_len};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        for (int b = 0; b < 64; b += 8) {
            h ^= (fields[i] >> b) & 0xff;
            h *= 1099511628211ULL;
        }
    }
    for (uint16_t i = 0; i < cmd->name_len; i++) {
        h ^= cmd->name[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* Add a record as the newest (restore uses it).  NULL on lack of memory. */
fence__dedup *fence__dedup_add(fence_fsm *f, uint64_t req_id, uint64_t fp,
                               const fence_result *r)
{
    fence__dedup *d = fence__alloc(f, sizeof(*d));
    if (d == NULL) {
        return NULL;
    }
    memset(d, 0, sizeof(*d));
    d->req_id = req_id;
    d->fp = fp;
    d->result = *r;
    dedup_link(f, d);
    return d;
}

/* ---- Grants, releases, failures ------------------------------------------ */

/* Events the array holds from the start. */
#define EVENTS_INIT 64

/* Append an event to the array of the current call, growing it through the
 * injected allocator.  The outcome of apply may not depend on the
 * allocator, so running out of memory here stops the process. */
static void event_push(fence_fsm *f, uint64_t wait_id, const fence_result *r)
{
    if (f->n_events == f->cap_events) {
        size_t cap = f->cap_events ? f->cap_events * 2 : 16;
        FENCE_ASSERT(cap > f->cap_events);
        fence_event *v = fence__alloc(f, cap * sizeof(*v));
        if (v == NULL) {
            fence__fatal("out of memory while applying a log entry "
                         "(event array)");
        }
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

/* Report the resolution of wait w and, if it came with a request id,
 * update the remembered result so that a retry sees the outcome. */
static void emit(fence_fsm *f, const fence__wait *w, const fence_result *r)
{
    FENCE_ASSERT(r->wait_id == w->id);
    FENCE_ASSERT(r->status != FENCE_ST_QUEUED);
    if (w->has_req) {
        fence__dedup *d = fence__dedup_find(f, w->req_id);
        if (d != NULL && d->result.status == FENCE_ST_QUEUED &&
            d->result.wait_id == w->id) {
            d->result = *r;
        }
    }
    event_push(f, w->id, r);
}

/* Grant free lock k to lease l: the next token. */
static uint64_t grant(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    FENCE_ASSERT(k->holder == NULL);
    FENCE_ASSERT(!k->in_delay);
#ifndef FENCE_BUG_GRANT_EXPIRED
    FENCE_ASSERT(lease_live(f, l));
#endif
    FENCE_ASSERT(f->last_token < UINT64_MAX);
    uint64_t token = ++f->last_token;
    FENCE_ASSERT(token > k->token);
    FENCE_ASSERT(f->lock_tail == NULL || f->lock_tail->token < token ||
                 f->lock_tail == k);
    tok_unlink(f, k);
    k->token = token;
    tok_append(f, k);
    held_append(f, l, k);
    FENCE_ASSERT(k->holder == l);
    return token;
}

/* True when waiter w may be granted now. */
static bool waiter_eligible(const fence_fsm *f, const fence__wait *w)
{
    if (w->hi.deadline_ms <= f->now_ms) {
        return false;
    }
#ifdef FENCE_BUG_GRANT_EXPIRED
    /* PLANTED BUG (etcd#11456), part 3: no liveness check at hand-off. */
    return true;
#else
    return lease_live(f, w->lease);
#endif
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
    fence__wait *w = k->q_head;
    while (w != NULL && !waiter_eligible(f, w)) {
        w = w->qnext;
    }
    if (w == NULL) {
        lock_maybe_destroy(f, k);
        return;
    }
    fence__lease *l = w->lease;
    bool acq = w->acquire;
    wait_unlink(f, w);
    uint64_t token = grant(f, k, l);
    if (acq) {
        FENCE_ASSERT(l->dedicated);
        heap_move(f, &l->hi, f->now_ms + l->ttl_ms);
    }
    fence_result r;
    memset(&r, 0, sizeof(r));
    r.status = FENCE_ST_OK;
    r.lease = l->id;
    r.token = token;
    r.wait_id = w->id;
    emit(f, w, &r);
    fence__free(f, w);
}

static void lease_remove(fence_fsm *f, fence__lease *l, bool expired);

/* Fail a queued wait with NIL or NOLEASE.  A failed ACQUIRE's dedicated
 * lease is revoked too when revoke_dedicated is set (timeout, cancel). */
static void wait_fail(fence_fsm *f, fence__wait *w, uint8_t status,
                      bool revoke_dedicated)
{
    FENCE_ASSERT(status == FENCE_ST_NIL || status == FENCE_ST_NOLEASE);
    fence__lease *l = w->lease;
    fence__lock *k = w->lock;
    bool acq = w->acquire;
    wait_unlink(f, w);
    fence_result r;
    memset(&r, 0, sizeof(r));
    r.status = status;
    r.wait_id = w->id;
    emit(f, w, &r);
    fence__free(f, w);
    lock_maybe_destroy(f, k);
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
    while (l->held_head != NULL) {
        fence__lock *k = l->held_head;
        held_unlink(f, k);
        if (expired && l->lock_delay_ms > 0) {
            fence__lock_set_delay(f, k, l->lock_delay_ms,
                                  f->now_ms + l->lock_delay_ms);
        } else {
            handoff(f, k);
        }
    }
    while (l->waits_head != NULL) {
        wait_fail(f, l->waits_head, FENCE_ST_NOLEASE, false);
    }
    lease_destroy(f, l);
}

/* ---- Time ----------------------------------------------------------------- */

/* Process every heap item due at fsm time now, in (deadline, kind, id)
 * order. */
static void process_due(fence_fsm *f)
{
    while (f->heap_len > 0 && f->heap[0]->deadline_ms <= f->now_ms) {
        fence__hitem *it = f->heap[0];
        switch (it->kind) {
        case FENCE__K_WAIT:
            wait_fail(f, CONTAINER(it, fence__wait, hi), FENCE_ST_NIL, true);
            break;
        case FENCE__K_LEASE: {
            fence__lease *l = CONTAINER(it, fence__lease, hi);
#ifdef FENCE_BUG_GRANT_EXPIRED
            /* PLANTED BUG (etcd#11456), part 1: an expired lease that is
             * queued somewhere is not reaped while queued. */
            if (l->nwaits > 0) {
                heap_remove(f, it);
                break;
            }
#endif
            lease_remove(f, l, true);
            break;
        }
        case FENCE__K_DELAY: {
            fence__lock *k = CONTAINER(it, fence__lock, hi);
            FENCE_ASSERT(k->in_delay);
            heap_remove(f, it);
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
    fence__events_reset(f);
    fence__advance(f, now_ms);
}

/* The earliest pending deadline, or UINT64_MAX. */
uint64_t fence_fsm_next_deadline(const fence_fsm *f)
{
    return f->heap_len > 0 ? f->heap[0]->deadline_ms : UINT64_MAX;
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
    if (lim->leases_max == 0 || lim->locks_max == 0 || lim->waiters_max == 0) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    f->limits = *lim;
    dedup_trim(f, lim->dedup_max);
    for (fence__wait *w = f->wait_head; w != NULL; w = w->wnext) {
        w->hi.deadline_ms = f->now_ms + w->wait_ms;
    }
    for (fence__lease *l = f->lease_head; l != NULL; l = l->next) {
        l->hi.deadline_ms = lease_deadline(f, l);
    }
    for (fence__lock *k = f->lock_head; k != NULL; k = k->tnext) {
        if (k->in_delay) {
            k->hi.deadline_ms = f->now_ms + k->delay_ms;
        }
    }
    heap_rebuild(f);
    r->status = FENCE_ST_OK;
}

/* LEASE_GRANT: a new lease. */
static void cmd_lease_grant(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (c->ttl_ms < FENCE_TTL_MS_MIN || c->ttl_ms > FENCE_TTL_MS_MAX ||
        c->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    if (f->leases.count >= f->limits.leases_max) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    fence__lease *l = fence__lease_add(f, f->next_lease_id, c->ttl_ms,
                                       c->lock_delay_ms,
                                       f->now_ms + c->ttl_ms, false);
    if (l == NULL) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    f->next_lease_id++;
    r->status = FENCE_ST_OK;
    r->lease = l->id;
    r->value = l->ttl_ms;
}

/* LEASE_KEEPALIVE: restart a live lease's full TTL. */
static void cmd_keepalive(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l == NULL || !lease_live(f, l)) {
        r->status = FENCE_ST_NOLEASE;
        return;
    }
    heap_move(f, &l->hi, lease_deadline(f, l));
    FENCE_ASSERT(lease_live(f, l));
    r->status = FENCE_ST_OK;
    r->lease = l->id;
    r->value = l->ttl_ms;
}

/* LEASE_REVOKE: remove a live lease; unknown or expired is fine too. */
static void cmd_revoke(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l != NULL && lease_live(f, l)) {
        lease_remove(f, l, false);
    }
    r->status = FENCE_ST_OK;
}

/* Queue lease l on busy lock k for wait_ms.  Fills r (QUEUED or LIMIT). */
static fence__wait *enqueue(fence_fsm *f, fence__lease *l, fence__lock *k,
                            const fence_cmd *c, bool acquire, fence_result *r)
{
    FENCE_ASSERT(c->wait_ms > 0);
    if (k->nwaiters >= f->limits.waiters_max) {
        r->status = FENCE_ST_LIMIT;
        return NULL;
    }
    bool has_req = (c->flags & FENCE_CMD_F_REQID) != 0;
    fence__wait *w = fence__wait_add(f, f->next_wait_id, l, k, c->wait_ms,
                                     f->now_ms + c->wait_ms, acquire, has_req,
                                     c->req_id);
    if (w == NULL) {
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
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l == NULL || !lease_live(f, l)) {
        r->status = FENCE_ST_NOLEASE;
        return;
    }
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if (k == NULL) {
        if (f->locks.count >= f->limits.locks_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
        k = fence__lock_add(f, c->name, c->name_len, 0, NULL);
        if (k == NULL) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
    }
    if (k->holder == l) {
        r->status = FENCE_ST_OK;
        r->token = k->token;
        r->lease = l->id;
        return;
    }
    if (k->holder == NULL && !k->in_delay) {
        FENCE_ASSERT(k->nwaiters == 0);
        r->status = FENCE_ST_OK;
        r->token = grant(f, k, l);
        r->lease = l->id;
        return;
    }
    fence__wait *w = find_wait(l, k);
    if (w != NULL) {
        r->status = FENCE_ST_QUEUED;
        r->wait_id = w->id;
        r->lease = l->id;
        return;
    }
    if (c->wait_ms == 0) {
        r->status = FENCE_ST_NIL;
        return;
    }
    enqueue(f, l, k, c, false, r);
}

/* UNLOCK: release if the token is the holder's; a dedicated lease goes too. */
static void cmd_unlock(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c)) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    r->status = FENCE_ST_OK;
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if (k == NULL || k->holder == NULL || k->token != c->token) {
        r->value = 0;
        return;
    }
    fence__lease *l = k->holder;
    held_unlink(f, k);
    handoff(f, k);
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
    if (f->leases.count >= f->limits.leases_max) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    bool free_now = k == NULL || (k->holder == NULL && !k->in_delay);
    if (!free_now) {
        if (c->wait_ms == 0) {
            r->status = FENCE_ST_NIL;
            return;
        }
        if (k->nwaiters >= f->limits.waiters_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
    } else if (k == NULL && f->locks.count >= f->limits.locks_max) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    fence__lease *l = fence__lease_add(f, f->next_lease_id, c->ttl_ms,
                                       c->lock_delay_ms,
                                       f->now_ms + c->ttl_ms, true);
    if (l == NULL) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (free_now) {
        if (k == NULL) {
            k = fence__lock_add(f, c->name, c->name_len, 0, NULL);
            if (k == NULL) {
                lease_destroy(f, l);
                r->status = FENCE_ST_LIMIT;
                return;
            }
        }
        f->next_lease_id++;
        r->status = FENCE_ST_OK;
        r->token = grant(f, k, l);
        r->lease = l->id;
        return;
    }
    if (enqueue(f, l, k, c, true, r) == NULL) {
        lease_destroy(f, l);
        return;
    }
    f->next_lease_id++;
    heap_move(f, &l->hi, lease_deadline(f, l));
}

/* CANCEL: the waiting client went away. */
static void cmd_cancel(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    fence__wait *w = fence__wait_find(f, c->wait_id);
    if (w != NULL) {
        bool has_req = w->has_req;
        uint64_t req_id = w->req_id;
        uint64_t id = w->id;
        wait_fail(f, w, FENCE_ST_NIL, true);
        /* The request had no lasting effect (an ACQUIRE's lease is revoked
         * with it), so forget its request id: a client that lost its
         * connection and retries with the same REQID (after a failover,
         * say) queues afresh instead of being told "timed out" early. */
        if (has_req) {
            fence__dedup *d = fence__dedup_find(f, req_id);
            if (d != NULL && d->result.wait_id == id &&
                d->result.status == FENCE_ST_NIL) {
                dedup_forget(f, d);
            }
        }
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
    default:
        r->status = FENCE_ST_INVALID;
        break;
    }
}

static void apply_cmd(fence_fsm *f, const fence_cmd *cmd, fence_result *out);

/* Apply one command at now_ms: advance time (LEADER_START only moves the
 * clock: it rebases the old deadlines instead of firing them), run the
 * command, then process anything still due (see apply_cmd). */
void fence__apply_one(fence_fsm *f, uint64_t now_ms, const fence_cmd *cmd,
                      fence_result *out)
{
    FENCE_ASSERT(f != NULL);
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
    fence__events_reset(f);
    fence__apply_one(f, now_ms, cmd, out);
}

/* Dedup lookup, the command itself, dedup record. */
static void apply_cmd(fence_fsm *f, const fence_cmd *cmd, fence_result *out)
{
    if ((cmd->flags & ~FENCE_CMD_F_REQID) != 0) {
        out->status = FENCE_ST_INVALID;
        return;
    }
    fence__dedup *d = NULL;
    uint64_t fp = 0;
    if (cmd->flags & FENCE_CMD_F_REQID) {
        fp = fence__cmd_fp(cmd);
        fence__dedup *old = fence__dedup_find(f, cmd->req_id);
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
                d = dedup_pop_oldest(f);
            } else {
                d = fence__alloc(f, sizeof(*d));
                if (d == NULL) {
                    out->status = FENCE_ST_LIMIT;
                    return;
                }
            }
            memset(d, 0, sizeof(*d));
            d->req_id = cmd->req_id;
            d->fp = fp;
        }
    }
    uint64_t token_before = f->last_token;
    dispatch(f, cmd, out);
    FENCE_ASSERT(f->last_token >= token_before);
    FENCE_ASSERT(out->status <= FENCE_ST_INVALID);
    FENCE_ASSERT(out->status != FENCE_ST_OK || out->token == 0 ||
                 out->token <= f->last_token);
    if (d != NULL) {
        d->result = *out;
        dedup_link(f, d);
        dedup_trim(f, f->limits.dedup_max);
    }
}

/* ---- Lifecycle ------------------------------------------------------------ */

/* Set the default limits from limits.h. */
void fence_limits_default(fence_limits *l)
{
    l->leases_max = FENCE_LEASES_DEFAULT;
    l->locks_max = FENCE_LOCKS_DEFAULT;
    l->waiters_max = FENCE_WAITERS_DEFAULT;
    l->dedup_max = FENCE_DEDUP_DEFAULT;
}

/* Create an empty state; NULL on lack of memory. */
fence_fsm *fence__fsm_new(const fence_alloc *a, uint64_t hash_seed)
{
    FENCE_ASSERT(a->alloc != NULL);
    FENCE_ASSERT(a->free != NULL);
    fence_fsm *f = a->alloc(a->ctx, sizeof(*f));
    if (f == NULL) {
        return NULL;
    }
    memset(f, 0, sizeof(*f));
    f->alloc = *a;
    f->hash_seed = hash_seed;
    fence_limits_default(&f->limits);
    f->next_lease_id = 1;
    f->next_wait_id = 1;
    if (!htab_init(f, &f->leases) || !htab_init(f, &f->locks) ||
        !htab_init(f, &f->waits) || !htab_init(f, &f->dedup) ||
        !heap_reserve(f, 0)) {
        fence__fsm_free(f);
        return NULL;
    }
    /* Room for the events of a typical call, so that most calls never
     * grow the array (growth inside apply may only fail fatally). */
    f->events = fence__alloc(f, EVENTS_INIT * sizeof(*f->events));
    if (f->events == NULL) {
        fence__fsm_free(f);
        return NULL;
    }
    f->cap_events = EVENTS_INIT;
    return f;
}

/* Free every object and the state itself. */
void fence__fsm_free(fence_fsm *f)
{
    if (f == NULL) {
        return;
    }
    fence__wait *w = f->wait_head;
    while (w != NULL) {
        fence__wait *next = w->wnext;
        fence__free(f, w);
        w = next;
    }
    fence__lock *k = f->lock_head;
    while (k != NULL) {
        fence__lock *next = k->tnext;
        fence__free(f, k);
        k = next;
    }
    fence__lease *l = f->lease_head;
    while (l != NULL) {
        fence__lease *next = l->next;
        fence__free(f, l);
        l = next;
    }
    fence__dedup *d = f->dd_head;
    while (d != NULL) {
        fence__dedup *next = d->next;
        fence__free(f, d);
        d = next;
    }
    fence__free(f, f->leases.b);
    fence__free(f, f->locks.b);
    fence__free(f, f->waits.b);
    fence__free(f, f->dedup.b);
    fence__free(f, f->heap);
    fence__free(f, f->events);
    fence_alloc a = f->alloc;
    a.free(a.ctx, f);
}

/* Create an empty state machine. */
int fence_fsm_create(const fence_fsm_opts *opts, fence_fsm **out)
{
    FENCE_ASSERT(opts != NULL);
    FENCE_ASSERT(out != NULL);
    *out = NULL;
    fence_fsm *f = fence__fsm_new(&opts->alloc, opts->hash_seed);
    if (f == NULL) {
        return FENCE_ST_LIMIT;
    }
    *out = f;
    return 0;
}

/* Destroy a state machine; NULL is a no-op. */
void fence_fsm_destroy(fence_fsm *f)
{
    fence__fsm_free(f);
}

/* ---- Queries -------------------------------------------------------------- */

/* fsm time. */
uint64_t fence_fsm_now(const fence_fsm *f)
{
    return f->now_ms;
}

/* The last token issued, 0 before any grant. */
uint64_t fence_fsm_last_token(const fence_fsm *f)
{
    return f->last_token;
}

/* Whether wait wait_id is still queued. */
bool fence_fsm_wait_exists(const fence_fsm *f, uint64_t wait_id)
{
    return fence__wait_find(f, wait_id) != NULL;
}

/* Describe a lease that is live at now_ms. */
int fence_fsm_lease_info(const fence_fsm *f, uint64_t lease, uint64_t now_ms,
                         fence_lease_info *out)
{
    const fence__lease *l = fence__lease_find(f, lease);
    if (l == NULL || l->hi.deadline_ms <= now_ms) {
        return FENCE_ST_NOLEASE;
    }
    memset(out, 0, sizeof(*out));
    out->ttl_ms = l->ttl_ms;
    out->deadline_ms = l->hi.deadline_ms;
    out->locks_held = l->nheld;
    out->lock_delay_ms = l->lock_delay_ms;
    return 0;
}

/* Describe a held lock; false when it is free (or in lock-delay). */
bool fence_fsm_lock_info(const fence_fsm *f, const uint8_t *name,
                         uint16_t name_len, fence_lock_info *out)
{
    if (name == NULL || name_len == 0 || name_len > FENCE_NAME_MAX) {
        return false;
    }
    const fence__lock *k = fence__lock_find(f, name, name_len);
    if (k == NULL || k->holder == NULL) {
        return false;
    }
    memset(out, 0, sizeof(*out));
    out->token = k->token;
    out->lease = k->holder->id;
    out->deadline_ms = k->holder->hi.deadline_ms;
    out->waiters = k->nwaiters;
    return true;
}

/* Counters for INFO. */
void fence_fsm_stats_get(const fence_fsm *f, fence_fsm_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->leases = f->leases.count;
    out->locks = f->nheld;
    out->waiters = f->waits.count;
    out->last_token = f->last_token;
    out->now_ms = f->now_ms;
}

/* ---- The invariant check -------------------------------------------------- */

/* Check the heap: positions, order, and that it holds exactly the objects
 * with a pending deadline. */
static const char *check_heap(const fence_fsm *f, uint64_t expect)
{
    if (f->heap_len > f->heap_cap) {
        return "heap longer than its capacity";
    }
    if ((uint64_t)f->leases.count + f->waits.count + f->locks.count >
        f->heap_cap) {
        return "heap capacity below the object count";
    }
    for (uint32_t i = 0; i < f->heap_len; i++) {
        if (f->heap[i]->idx != i) {
            return "heap item index wrong";
        }
        if (i > 0 && hitem_less(f->heap[i], f->heap[(i - 1) / 2])) {
            return "heap order violated";
        }
    }
#ifdef FENCE_BUG_GRANT_EXPIRED
    (void)expect;
#else
    if (f->heap_len != expect) {
        return "heap size does not match leases + waits + delayed locks";
    }
    if (f->heap_len > 0 && f->heap[0]->deadline_ms <= f->now_ms) {
        return "a due deadline was not processed";
    }
#endif
    return NULL;
}

/* Check the leases and their held and wait lists. */
static const char *check_leases(const fence_fsm *f, uint64_t *nwaits_out)
{
    uint64_t n = 0;
    uint64_t nwaits = 0;
    const fence__lease *prev = NULL;
    for (const fence__lease *l = f->lease_head; l != NULL; l = l->next) {
        n++;
        if (l->prev != prev) {
            return "lease list broken";
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
        uint32_t held = 0;
        uint64_t last = 0;
        for (const fence__lock *k = l->held_head; k != NULL; k = k->hnext) {
            held++;
            if (k->holder != l) {
                return "held lock names another holder";
            }
            if (k->token <= last) {
                return "held locks not in token order";
            }
            last = k->token;
        }
        if (held != l->nheld) {
            return "lease held count wrong";
        }
        uint32_t waits = 0;
        uint64_t lastw = 0;
        bool acq_seen = false;
        for (const fence__wait *w = l->waits_head; w != NULL; w = w->lnext) {
            waits++;
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
        if (waits != l->nwaits) {
            return "lease wait count wrong";
        }
        if ((l->acq_wait != NULL) != acq_seen) {
            return "dedicated lease's ACQUIRE wait missing";
        }
        if (l->acq_wait != NULL &&
            l->hi.deadline_ms < l->acq_wait->hi.deadline_ms) {
            return "dedicated lease would expire before its ACQUIRE wait";
        }
        nwaits += waits;
        prev = l;
    }
    if (f->lease_tail != prev) {
        return "lease list tail wrong";
    }
    if (n != f->leases.count) {
        return "lease count does not match the table";
    }
    *nwaits_out = nwaits;
    return NULL;
}

/* Check the locks, their FIFOs and the token order. */
static const char *check_locks(const fence_fsm *f, uint64_t *ndelay_out)
{
    uint64_t n = 0;
    uint64_t nheld = 0;
    uint64_t ndelay = 0;
    uint64_t nwaiters = 0;
    const fence__lock *prev = NULL;
    for (const fence__lock *k = f->lock_head; k != NULL; k = k->tnext) {
        n++;
        if (k->tprev != prev) {
            return "lock list broken";
        }
        if (k->token == 0 || k->token > f->last_token) {
            return "lock token out of range";
        }
        if (prev != NULL && prev->token >= k->token) {
            return "lock tokens not strictly increasing (a token reused?)";
        }
        if (k->name_len == 0 || k->name_len > FENCE_NAME_MAX) {
            return "lock name length out of range";
        }
        if (fence__lock_find(f, k->name, k->name_len) != k) {
            return "lock not found by name";
        }
        if (k->holder == NULL && !k->in_delay) {
            return "a lock exists that is neither held nor in lock-delay";
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
        uint32_t q = 0;
        uint64_t lastw = 0;
        const fence__wait *wp = NULL;
        for (const fence__wait *w = k->q_head; w != NULL; w = w->qnext) {
            q++;
            if (w->qprev != wp) {
                return "lock FIFO broken";
            }
            if (w->lock != k) {
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
            wp = w;
        }
        if (k->q_tail != wp) {
            return "lock FIFO tail wrong";
        }
        if (q != k->nwaiters) {
            return "lock waiter count wrong";
        }
        nwaiters += q;
        prev = k;
    }
    if (f->lock_tail != prev) {
        return "lock list tail wrong";
    }
    if (n != f->locks.count) {
        return "lock count does not match the table";
    }
    if (nheld != f->nheld) {
        return "held lock count wrong";
    }
    if (nwaiters != f->waits.count) {
        return "waiters in FIFOs do not match the wait table";
    }
    *ndelay_out = ndelay;
    return NULL;
}

/* Check the global wait list. */
static const char *check_waits(const fence_fsm *f)
{
    uint64_t n = 0;
    const fence__wait *prev = NULL;
    for (const fence__wait *w = f->wait_head; w != NULL; w = w->wnext) {
        n++;
        if (w->wprev != prev) {
            return "wait list broken";
        }
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
    if (f->wait_tail != prev) {
        return "wait list tail wrong";
    }
    if (n != f->waits.count) {
        return "wait count does not match the table";
    }
    return NULL;
}

/* Check the dedup table. */
static const char *check_dedup(const fence_fsm *f)
{
    uint64_t n = 0;
    const fence__dedup *prev = NULL;
    for (const fence__dedup *d = f->dd_head; d != NULL; d = d->next) {
        n++;
        if (d->prev != prev) {
            return "dedup list broken";
        }
        if (fence__dedup_find(f, d->req_id) != d) {
            return "dedup record not found by req_id";
        }
        if (d->result.status > FENCE_ST_INVALID) {
            return "dedup result status out of range";
        }
        prev = d;
    }
    if (f->dd_tail != prev) {
        return "dedup list tail wrong";
    }
    if (n != f->dedup.count) {
        return "dedup count does not match the table";
    }
    if (n > f->limits.dedup_max) {
        return "dedup table above its limit";
    }
    return NULL;
}

/* Check every invariant; NULL when all hold. */
const char *fence_fsm_check(const fence_fsm *f)
{
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
    return check_heap(f, f->leases.count + f->waits.count + ndelay);
}
