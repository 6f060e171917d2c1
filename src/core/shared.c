/* Shared (read) holds of a lock: the holders of one shared phase, their
 * admission, release and the invariants that tie them to the lock.
 *
 * A lock is free, held by one exclusive holder (fence__lock.holder), held
 * by the shared holders of one phase (fence__lock.sholders), or in
 * lock-delay.  A phase begins when a shared request is granted a free
 * lock: it takes the next token, and every shared holder of the phase
 * carries that same token (the lock's token).  A shared request joins the
 * current phase, with that token, only when no request is queued on the
 * lock: a queued request (it is exclusive, see below) holds back every
 * later shared one, so writers do not starve.  Hand-off of a free lock to
 * a shared waiter begins a new phase (a new token) and admits with it the
 * run of shared waiters behind it up to the first exclusive one; a waiter
 * that leaves the queue of a shared-held lock (timeout, cancel, its lease
 * ending) lets the shared waiters now at its head join the phase.  So
 * outside an advance the first waiter of a shared-held lock is exclusive.
 *
 * Why one token per phase is safe: no grant of the lock happens between
 * the phase's first admission and its last release (an exclusive request
 * waits for every holder), so the resource has seen no higher token for
 * this lock while any holder of the phase is admitted; and the next grant
 * after the phase takes a higher token, which fences out every holder of
 * the phase at once.  docs/recipes.md has the pause scenario.
 *
 * The UNLOCK_SHARED command (release one lease's hold) is here too; the
 * grants and the hand-off are apply.c's. */
#include <string.h>

#include "base/bytes.h"
#include "core/fsm_int.h"

/* Insert s into its lease's sheld list, keeping it in token order (a
 * lease may join an older phase after a newer one: walk from the tail). */
static void sheld_insert(fence__lease *l, fence__shold *s)
{
    fence__link *at = l->sheld.last;
    while (at != NULL && LSHOLD_OF(at)->lock->token > s->lock->token) {
        at = at->prev;
    }
    FENCE_ASSERT(at == NULL || LSHOLD_OF(at)->lock->token < s->lock->token);
    fence__link *n = &s->llink;
    n->prev = at;
    n->next = at != NULL ? at->next : l->sheld.first;
    if (n->next != NULL) {
        n->next->prev = n;
    } else {
        l->sheld.last = n;
    }
    if (at != NULL) {
        at->next = n;
    } else {
        l->sheld.first = n;
    }
}

/* Lease l joins lock k's shared phase. */
fence__shold *fence__shold_add(fence_fsm *f, fence__lock *k, fence__lease *l)
{
    FENCE_ASSERT(k->holder == NULL);
    FENCE_ASSERT(!k->in_delay);
    FENCE_ASSERT(k->token > 0);
    FENCE_ASSERT(fence__shold_of(l, k) == NULL);
    fence__shold *s = fence__alloc(f, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    s->lock = k;
    s->lease = l;
    fence__list_append(&k->sholders, &s->klink);
    if (k->nsholders++ == 0) {
        f->nslocks++;
    }
    sheld_insert(l, s);
    l->nsheld++;
    l->own->locks++;
    f->nsheld++;
    return s;
}

/* End one shared hold. */
void fence__shold_remove(fence_fsm *f, fence__shold *s)
{
    fence__lock *k = s->lock;
    fence__lease *l = s->lease;
    FENCE_ASSERT(k->nsholders > 0 && l->nsheld > 0 && f->nsheld > 0);
    FENCE_ASSERT(l->own->locks > 0);
    fence__list_remove(&k->sholders, &s->klink);
    if (--k->nsholders == 0) {
        FENCE_ASSERT(f->nslocks > 0);
        f->nslocks--;
    }
    fence__list_remove(&l->sheld, &s->llink);
    l->nsheld--;
    l->own->locks--;
    f->nsheld--;
    fence__free(f, s);
}

/* ---- The invariant check ------------------------------------------------------ */

/* Every list of holds against the other, the counters, and the queue rule. */
const char *fence__check_shared(const fence_fsm *f)
{
    uint64_t holds = 0, slocks = 0, lholds = 0;
    for (const fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        const fence__lock *k = LOCK_OF(p);
        uint32_t n = 0;
        const fence__link *prev = NULL;
        for (const fence__link *q = k->sholders.first; q != NULL; q = q->next) {
            const fence__shold *s = KSHOLD_OF(q);
            if (q->prev != prev || s->lock != k || n == UINT32_MAX) {
                return "shared holder list broken";
            }
            prev = q;
            if (fence__lease_find(f, s->lease->id) != s->lease) {
                return "a shared holder is not a known lease";
            }
            if (fence__wait_of(s->lease, k) != NULL) {
                return "a shared holder waits for its own lock";
            }
            n++;
        }
        if (n != k->nsholders || k->sholders.last != prev) {
            return "shared holder count wrong";
        }
        if (n > 0 && k->elect != NULL) {
            return "an election is held shared";
        }
        if (n > 0) {
            slocks++;
            if (k->holder != NULL || k->in_delay) {
                return "a shared-held lock has an exclusive holder or is in lock-delay";
            }
            const fence__wait *w = QWAIT_OF(k->queue.first);
            if (w != NULL && w->shared) {
                return "a shared request waits at the head of a shared-held lock";
            }
        }
        holds += n;
    }
    for (const fence__link *p = f->lease_list.first; p != NULL; p = p->next) {
        const fence__lease *l = LEASE_OF(p);
        uint32_t n = 0;
        uint64_t last = 0;
        const fence__link *prev = NULL;
        for (const fence__link *q = l->sheld.first; q != NULL; q = q->next) {
            const fence__shold *s = LSHOLD_OF(q);
            if (s->lease != l || q->prev != prev || n == UINT32_MAX) {
                return "lease's shared hold list broken";
            }
            prev = q;
            if (s->lock->token <= last) {
                return "lease's shared holds not in token order";
            }
            last = s->lock->token;
            if (s->lock->holder == l) {
                return "a lease holds one lock in both modes";
            }
            n++;
        }
        if (n != l->nsheld || l->sheld.last != prev) {
            return "lease's shared hold count wrong";
        }
        lholds += n;
    }
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *w = WAIT_OF(p);
        if (w->shared && (w->parts != NULL || w->lock == NULL || w->lock->elect != NULL)) {
            return "a shared wait that is not on one plain lock";
        }
    }
    if (holds != f->nsheld || lholds != f->nsheld || slocks != f->nslocks) {
        return "shared hold counters do not add up";
    }
    return NULL;
}

/* ---- The snapshot's "rw" section ------------------------------------------------
 *
 *   u32 count | count x record, record = u8 kind | u64 a | u64 b:
 *     kind 1, a shared hold: a = the lock's 1-based place in the lock
 *       section (tokens need not be unique there: one multi-lock's locks
 *       share one), b = the holder lease; by place, each lock's holders in
 *       admission order;
 *     kind 2, a shared wait: a = the wait id, b = 0; by wait id, after
 *       every hold.
 * The locks (holder 0, not in lock-delay) and the waits themselves are in
 * the version-4 layout before it. */

#define RW_REC (1 + 8 + 8)
#define RW_HOLD 1
#define RW_WAIT 2

/* Shared waits in the state. */
static uint64_t count_swaits(const fence_fsm *f)
{
    uint64_t n = 0;
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        n += WAIT_OF(p)->shared;
    }
    return n;
}

size_t fence__rw_snap_size(const fence_fsm *f)
{
    return 4 + (size_t)(f->nsheld + count_swaits(f)) * RW_REC;
}

/* Write one record at p. */
static uint8_t *put_rec(uint8_t *p, uint8_t kind, uint64_t a, uint64_t b)
{
    p[0] = kind;
    fence__put_u64(p + 1, a);
    fence__put_u64(p + 9, b);
    return p + RW_REC;
}

size_t fence__rw_snap_write(const fence_fsm *f, uint8_t *p, size_t cap)
{
    size_t size = fence__rw_snap_size(f);
    FENCE_ASSERT(cap >= size);
    uint8_t *at = p + 4;
    uint64_t n = 0;
    for (const fence__link *q = f->lock_list.first; q != NULL; q = q->next) {
        const fence__lock *k = LOCK_OF(q);
        for (const fence__link *h = k->sholders.first; h != NULL; h = h->next) {
            FENCE_ASSERT(k->snap_ord > 0); /* set by the lock section */
            at = put_rec(at, RW_HOLD, k->snap_ord, KSHOLD_OF(h)->lease->id);
            n++;
        }
    }
    for (const fence__link *q = f->wait_list.first; q != NULL; q = q->next) {
        if (WAIT_OF(q)->shared) {
            at = put_rec(at, RW_WAIT, WAIT_OF(q)->id, 0);
            n++;
        }
    }
    FENCE_ASSERT(n <= UINT32_MAX);
    fence__put_u32(p, (uint32_t)n);
    FENCE_ASSERT((size_t)(at - p) == size);
    return size;
}

int fence__rw_snap_read(fence_fsm *n, const uint8_t *p, size_t len, size_t *used,
                        fence__lock **v, uint32_t nv)
{
    if (len < 4) {
        return FENCE_ST_INVALID;
    }
    uint64_t count = fence__get_u32(p);
    if (count > (len - 4) / RW_REC) {
        return FENCE_ST_INVALID;
    }
    const uint8_t *at = p + 4;
    uint64_t last_place = 0, last_wait = 0;
    bool waits = false;
    for (uint64_t i = 0; i < count; i++, at += RW_REC) {
        uint8_t kind = at[0];
        uint64_t a = fence__get_u64(at + 1);
        uint64_t b = fence__get_u64(at + 9);
        if (kind == RW_HOLD && !waits) {
            fence__lock *k = a >= 1 && a <= nv ? v[a - 1] : NULL;
            fence__lease *l = fence__lease_find(n, b);
            if (a < last_place || k == NULL || k->token == 0 || l == NULL || k->holder != NULL ||
                k->in_delay || fence__shold_of(l, k) != NULL ||
                fence__wait_of(l, k) != NULL) {
                return FENCE_ST_INVALID;
            }
            if (fence__shold_add(n, k, l) == NULL) {
                return FENCE_ST_LIMIT;
            }
            last_place = a;
        } else if (kind == RW_WAIT && b == 0) {
            fence__wait *w = fence__wait_find(n, a);
            if (a <= last_wait || w == NULL) {
                return FENCE_ST_INVALID;
            }
            w->shared = true;
            waits = true;
            last_wait = a;
        } else {
            return FENCE_ST_INVALID;
        }
    }
    *used = (size_t)(at - p);
    return 0;
}

