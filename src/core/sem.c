/* Semaphores of slots (issue 21 section 3; fsm.h "Semaphores").
 *
 * A semaphore of N permits is N slots, each its own fence: slot i is an
 * ordinary lock object named name#i in the lock table, flagged with the
 * semaphore (fence__lock.sem).  So a slot has one holder at a time by the
 * same code as any lock, takes the next global token when granted, is held
 * in its lease's held list (lease expiry and revoke release it, with the
 * lease's lock-delay), and counts against locks_max and the owner's
 * quota.  What differs is the queue: waiters wait for the semaphore (any
 * slot), in one FIFO on the semaphore object, and a slot that becomes
 * available goes to the first eligible waiter there.
 *
 * Invariants (fence__sem_check): N is fixed while the semaphore exists; it
 * exists while a slot lock exists or anyone waits; a waiter exists only
 * while every slot lock exists (held or in lock-delay), so a new acquire
 * that finds a free slot never passes a waiter; a lease holds at most one
 * slot of a semaphore and never waits for a semaphore it holds a slot of;
 * no lock outside the semaphore has its name or the name of one of its
 * slots (LOCK, ACQUIRE, UNLOCK of those answer WRONGTYPE, and the first
 * SEM_ACQUIRE answers WRONGTYPE while such a lock exists).
 */
#include <string.h>

#include "core/fsm_int.h"

/* Bytes of the longest slot suffix: '#' and up to four digits. */
#define SLOT_SUFFIX_MAX 5
_Static_assert(FENCE_SEM_PERMITS_MAX <= 10000, "a slot number has at most four digits");
_Static_assert(FENCE_SEM_PERMITS_MAX % 64 == 0, "the slot bitmap is whole words");

/* Decimal digits of v. */
static unsigned digits(uint32_t v)
{
    unsigned n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Write name#slot into buf (FENCE_NAME_MAX bytes); returns its length. */
static uint16_t slot_name(uint8_t *buf, const uint8_t *name, uint16_t len, uint32_t slot)
{
    FENCE_ASSERT(slot < FENCE_SEM_PERMITS_MAX);
    unsigned d = digits(slot);
    FENCE_ASSERT(len + 1u + d <= FENCE_NAME_MAX);
    memcpy(buf, name, len);
    buf[len] = '#';
    for (unsigned i = 0; i < d; i++) {
        buf[len + d - i] = (uint8_t)('0' + slot % 10);
        slot /= 10;
    }
    return (uint16_t)(len + 1 + d);
}

/* The semaphore with this name, or NULL. */
fence__sem *fence__sem_find(const fence_fsm *f, const uint8_t *name, uint16_t len)
{
    uint64_t hash = fence__hash_name(f->hash_seed, name, len);
    for (fence__hnode *h = fence__htab_bucket(&f->sems, hash); h != NULL; h = h->next) {
        if (h->hash != hash) {
            continue;
        }
        fence__sem *s = FENCE__CONTAINER(h, fence__sem, hn);
        if (s->name_len == len && memcmp(s->name, name, len) == 0) {
            return s;
        }
    }
    return NULL;
}

/* When name is base#i (i canonical decimal: no sign, no leading zero, at
 * most four digits), the length of base and i; false otherwise. */
bool fence__sem_split_slot(const uint8_t *name, uint16_t len, uint16_t *base_len, uint32_t *slot)
{
    uint16_t i = len;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') {
        i--;
    }
    uint16_t nd = (uint16_t)(len - i);
    if (nd == 0 || nd > 4 || i < 2 || name[i - 1] != '#' ||
        (nd > 1 && name[i] == '0')) {
        return false;
    }
    uint32_t v = 0;
    for (uint16_t j = i; j < len; j++) {
        v = v * 10 + (uint32_t)(name[j] - '0');
    }
    *base_len = (uint16_t)(i - 1);
    *slot = v;
    return true;
}

/* True when the name is a semaphore's or one of its slots'. */
bool fence__sem_claims(const fence_fsm *f, const uint8_t *name, uint16_t len)
{
    if (f->sems.count == 0) {
        return false;
    }
    if (fence__sem_find(f, name, len) != NULL) {
        return true;
    }
    uint16_t base_len;
    uint32_t slot;
    if (!fence__sem_split_slot(name, len, &base_len, &slot)) {
        return false;
    }
    const fence__sem *s = fence__sem_find(f, name, base_len);
    return s != NULL && slot < s->permits;
}

static bool bit_get(const fence__sem *s, uint32_t i)
{
    return (s->used[i / 64] >> (i % 64)) & 1u;
}

static void bit_set(fence__sem *s, uint32_t i, bool on)
{
    uint64_t m = (uint64_t)1 << (i % 64);
    s->used[i / 64] = on ? (s->used[i / 64] | m) : (s->used[i / 64] & ~m);
}

/* The lowest slot without a lock, or permits when all exist. */
static uint32_t lowest_free(const fence__sem *s)
{
    for (uint32_t w = 0; w * 64 < s->permits; w++) {
        if (s->used[w] != UINT64_MAX) {
            uint32_t i = w * 64 + (uint32_t)__builtin_ctzll(~s->used[w]);
            return i < s->permits ? i : s->permits;
        }
    }
    return s->permits;
}

/* Create an empty semaphore (inside apply: memory never fails here). */
static fence__sem *sem_add(fence_fsm *f, const uint8_t *name, uint16_t len, uint32_t permits)
{
    FENCE_ASSERT(len >= 1 && len <= FENCE_NAME_MAX);
    FENCE_ASSERT(permits >= 1 && permits <= FENCE_SEM_PERMITS_MAX);
    FENCE_ASSERT(fence__sem_find(f, name, len) == NULL);
    fence__sem *s = fence__alloc(f, sizeof(*s) + len);
    if (s == NULL) {
        return NULL;
    }
    memset(s, 0, sizeof(*s));
    memcpy(s->name, name, len);
    s->name_len = len;
    s->permits = permits;
    s->hn.hash = fence__hash_name(f->hash_seed, name, len);
    fence__htab_insert(f, &f->sems, &s->hn);
    fence__list_append(&f->sem_list, &s->link);
    return s;
}

/* Free semaphore s when nothing keeps it. */
void fence__sem_maybe_destroy(fence_fsm *f, fence__sem *s)
{
    if (s->nslots > 0 || s->nwaiters > 0) {
        return;
    }
    FENCE_ASSERT(fence__list_empty(&s->queue));
    fence__htab_remove(&f->sems, &s->hn);
    fence__list_remove(&f->sem_list, &s->link);
    fence__free(f, s);
}

/* Free every semaphore (the state is being freed). */
void fence__sem_free_all(fence_fsm *f)
{
    fence__link *p = f->sem_list.first;
    while (p != NULL) {
        fence__link *next = p->next;
        fence__free(f, SEM_OF(p));
        p = next;
    }
    f->sem_list.first = f->sem_list.last = NULL;
}

/* Create the lock of slot i of s, free (the caller grants it at once).
 * NULL at the heap's index range. */
static fence__lock *slot_add(fence_fsm *f, fence__sem *s, uint32_t i)
{
    FENCE_ASSERT(i < s->permits);
    FENCE_ASSERT(!bit_get(s, i));
    uint8_t buf[FENCE_NAME_MAX];
    uint16_t n = slot_name(buf, s->name, s->name_len, i);
    fence__lock *k = fence__lock_add(f, buf, n, 0, NULL);
    if (k == NULL) {
        return NULL;
    }
    k->sem = s;
    k->slot = i;
    bit_set(s, i, true);
    s->nslots++;
    return k;
}

/* The lock of slot i of s, or NULL when it does not exist. */
static fence__lock *slot_find(const fence_fsm *f, const fence__sem *s, uint32_t i)
{
    if (!bit_get(s, i)) {
        return NULL;
    }
    uint8_t buf[FENCE_NAME_MAX];
    uint16_t n = slot_name(buf, s->name, s->name_len, i);
    fence__lock *k = fence__lock_find(f, buf, n);
    FENCE_ASSERT(k != NULL);
    FENCE_ASSERT(k->sem == s);
    return k;
}

/* The slot lock of s that lease l holds, or NULL. */
static fence__lock *held_slot(const fence__lease *l, const fence__sem *s)
{
    for (const fence__link *p = l->held.first; p != NULL; p = p->next) {
        fence__lock *k = HELD_OF(p);
        if (k->sem == s) {
            return k;
        }
    }
    return NULL;
}

/* The wait of lease l on s, or NULL. */
static fence__wait *sem_wait_of(const fence__lease *l, const fence__sem *s)
{
    for (const fence__link *p = l->waits.first; p != NULL; p = p->next) {
        fence__wait *w = LWAIT_OF(p);
        if (w->sem == s) {
            return w;
        }
    }
    return NULL;
}

/* Take w out of its semaphore's FIFO. */
void fence__sem_unqueue(fence__wait *w)
{
    fence__sem *s = w->sem;
    FENCE_ASSERT(s != NULL);
    FENCE_ASSERT(s->nwaiters > 0);
    fence__list_remove(&s->queue, &w->qlink);
    s->nwaiters--;
}

/* Slot lock k became available: the first eligible waiter takes it;
 * otherwise the slot lock goes (and the semaphore, if nothing is left). */
void fence__sem_slot_free(fence_fsm *f, fence__lock *k)
{
    fence__sem *s = k->sem;
    FENCE_ASSERT(s != NULL);
    FENCE_ASSERT(k->holder == NULL);
    FENCE_ASSERT(!k->in_delay);
    FENCE_ASSERT(bit_get(s, k->slot));
    fence__wait *w = QWAIT_OF(s->queue.first);
    while (w != NULL && !fence__waiter_eligible(f, w)) {
        w = QWAIT_OF(w->qlink.next);
    }
    if (w == NULL) {
        bit_set(s, k->slot, false);
        FENCE_ASSERT(s->nslots > 0);
        s->nslots--;
        k->sem = NULL;
        fence__lock_maybe_destroy(f, k);
        fence__sem_maybe_destroy(f, s);
        return;
    }
    fence__lease *l = w->lease;
    bool acq = w->acquire;
    FENCE_ASSERT(held_slot(l, s) == NULL);
    fence__wait_unlink(f, w);
    uint64_t token = fence__grant(f, k, l);
    f->n_handoffs++;
    if (acq) {
        FENCE_ASSERT(l->dedicated);
        fence__heap_move(&f->heap, &l->hi, f->now_ms + l->ttl_ms);
    }
    fence_result r;
    memset(&r, 0, sizeof(r));
    r.status = FENCE_ST_OK;
    r.lease = l->id;
    r.token = token;
    r.slot = k->slot;
    r.wait_id = w->id;
    fence__emit(f, w, &r);
    fence__free(f, w);
}

/* Queue lease l on s (the caller checked the limits).  NULL at the heap's
 * index range. */
static fence__wait *sem_enqueue(fence_fsm *f, fence__sem *s, fence__lease *l,
                                const fence_cmd *c, bool acquire)
{
    FENCE_ASSERT(c->wait_ms > 0);
    FENCE_ASSERT(!acquire || (l->dedicated && l->acq_wait == NULL));
    if (!fence__heap_room(f, 1)) {
        return NULL;
    }
    fence__wait *w = fence__alloc(f, sizeof(*w));
    FENCE_ASSERT(w != NULL); /* fence__alloc stops on failure inside apply */
    memset(w, 0, sizeof(*w));
    w->id = f->next_wait_id++;
    w->wait_ms = c->wait_ms;
    w->lease = l;
    w->sem = s;
    w->acquire = acquire;
    w->has_req = (c->flags & FENCE_CMD_F_REQID) != 0;
    w->req_id = w->has_req ? c->req_id : 0;
    w->hn.hash = fence__key_hash(f, w->id);
    w->hi.kind = FENCE__K_WAIT;
    w->hi.id = w->id;
    w->hi.deadline_ms = f->now_ms + c->wait_ms;
    w->hi.idx = FENCE__NOT_IN_HEAP;
    FENCE_ASSERT(f->wait_list.last == NULL || WAIT_OF(f->wait_list.last)->id < w->id);
    fence__list_append(&s->queue, &w->qlink);
    s->nwaiters++;
    f->n_sem_waits++;
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

/* Whether a first SEM_ACQUIRE of name with permits would collide with
 * another kind: a lock (or a semaphore's slot) of that name, or a lock or
 * a semaphore named name#i for a slot i. */
static bool name_taken(const fence_fsm *f, const fence_cmd *c)
{
    if (fence__lock_find(f, c->name, c->name_len) != NULL ||
        fence__sem_claims(f, c->name, c->name_len)) {
        return true;
    }
    uint8_t buf[FENCE_NAME_MAX];
    for (uint32_t i = 0; i < c->permits; i++) {
        uint16_t n = slot_name(buf, c->name, c->name_len, i);
        if (fence__lock_find(f, buf, n) != NULL || fence__sem_find(f, buf, n) != NULL) {
            return true;
        }
    }
    return false;
}

/* SEM_ACQUIRE's fields are in range. */
static bool acquire_valid(const fence_cmd *c)
{
    if (c->name == NULL || c->name_len < 1 || c->name_len > FENCE_NAME_MAX ||
        c->permits < 1 || c->permits > FENCE_SEM_PERMITS_MAX ||
        c->wait_ms > FENCE_WAIT_MS_MAX ||
        c->name_len + 1u + digits(c->permits - 1) > FENCE_NAME_MAX) {
        return false;
    }
    if (c->lease == 0) {
        return c->ttl_ms >= FENCE_TTL_MS_MIN && c->ttl_ms <= FENCE_TTL_MS_MAX &&
               c->lock_delay_ms <= FENCE_LOCK_DELAY_MS_MAX;
    }
    return c->ttl_ms == 0 && c->lock_delay_ms == 0;
}

/* SEM_ACQUIRE: the lowest free slot, the slot this lease holds already,
 * a place in the FIFO, or NIL. */
void fence__cmd_sem_acquire(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!acquire_valid(c)) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    fence__sem *s = fence__sem_find(f, c->name, c->name_len);
    if (s == NULL && name_taken(f, c)) {
        r->status = FENCE_ST_WRONGTYPE;
        return;
    }
    if (s != NULL && s->permits != c->permits) {
        r->status = FENCE_ST_WRONGTYPE;
        r->value = s->permits;
        return;
    }
    bool dedicated = c->lease == 0;
    fence__lease *l = NULL;
    if (!dedicated) {
        l = fence__lease_find(f, c->lease);
        if (l == NULL || !fence__lease_live(f, l)) {
            r->status = FENCE_ST_NOLEASE;
            return;
        }
        if (!fence__may_use(c, l)) {
            r->status = FENCE_ST_NOPERM;
            return;
        }
        if (s != NULL) {
            fence__lock *k = held_slot(l, s);
            if (k != NULL) {
                r->status = FENCE_ST_OK;
                r->token = k->token;
                r->lease = l->id;
                r->slot = k->slot;
                return;
            }
            fence__wait *w = sem_wait_of(l, s);
            if (w != NULL) {
                r->status = FENCE_ST_QUEUED;
                r->wait_id = w->id;
                r->lease = l->id;
                return;
            }
        }
    } else if (f->leases.count >= f->limits.leases_max || fence__quota_leases_full(f, c)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (fence__quota_locks_full(f, c, 1)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    uint32_t slot = s != NULL ? lowest_free(s) : 0;
    bool free_now = s == NULL || slot < s->permits;
    if (free_now) {
        if (f->locks.count >= f->limits.locks_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
    } else {
        FENCE_ASSERT(s->nslots == s->permits);
        if (c->wait_ms == 0) {
            r->status = FENCE_ST_NIL;
            return;
        }
        if (s->nwaiters >= f->limits.waiters_max || f->waits.count >= f->limits.waits_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
    }
    if (dedicated) {
        l = fence__lease_add(f, f->next_lease_id, c->ttl_ms, c->lock_delay_ms,
                             f->now_ms + c->ttl_ms, true, c->owner);
        if (l == NULL) {
            /* The heap's index range (counts only). */
            r->status = FENCE_ST_LIMIT;
            return;
        }
    }
    bool created = s == NULL;
    if (created) {
        s = sem_add(f, c->name, c->name_len, c->permits);
        FENCE_ASSERT(s != NULL); /* fence__alloc stops on failure inside apply */
    }
    if (free_now) {
        fence__lock *k = slot_add(f, s, slot);
        if (k == NULL) {
            /* The heap's index range (counts only). */
            fence__sem_maybe_destroy(f, s);
            if (dedicated) {
                fence__lease_destroy(f, l);
            }
            r->status = FENCE_ST_LIMIT;
            return;
        }
        if (dedicated) {
            f->next_lease_id++;
        }
        r->status = FENCE_ST_OK;
        r->token = fence__grant(f, k, l);
        r->lease = l->id;
        r->slot = slot;
        return;
    }
    fence__wait *w = sem_enqueue(f, s, l, c, dedicated);
    if (w == NULL) {
        /* The heap's index range (counts only). */
        if (dedicated) {
            fence__lease_destroy(f, l);
        }
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (dedicated) {
        f->next_lease_id++;
        fence__heap_move(&f->heap, &l->hi, fence__lease_deadline(f, l));
    }
    r->status = FENCE_ST_QUEUED;
    r->wait_id = w->id;
    r->lease = l->id;
}

/* SEM_RELEASE: free the slot if the token is its holder's (value 1, else
 * 0); a dedicated lease goes with it. */
void fence__cmd_sem_release(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (c->name == NULL || c->name_len < 1 || c->name_len > FENCE_NAME_MAX ||
        c->slot >= FENCE_SEM_PERMITS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    fence__sem *s = fence__sem_find(f, c->name, c->name_len);
    if (s == NULL) {
        /* A lock (or a slot) of that name is another kind. */
        bool lock = fence__lock_find(f, c->name, c->name_len) != NULL ||
                    fence__sem_claims(f, c->name, c->name_len);
        r->status = lock ? FENCE_ST_WRONGTYPE : FENCE_ST_OK;
        return;
    }
    if (c->slot >= s->permits) {
        r->status = FENCE_ST_INVALID;
        r->value = s->permits;
        return;
    }
    r->status = FENCE_ST_OK;
    fence__lock *k = slot_find(f, s, c->slot);
    if (k == NULL || k->holder == NULL || k->token != c->token) {
        r->value = 0;
        return;
    }
    fence__lease *l = k->holder;
    if (!fence__may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    fence__held_unlink(f, k);
    fence__sem_slot_free(f, k);
    if (l->dedicated) {
        fence__lease_remove(f, l, false);
    }
    r->value = 1;
}

/* ---- Queries and the invariant check ---------------------------------------- */

/* Describe a semaphore (fsm.h). */
bool fence_fsm_sem_info(const fence_fsm *f, const uint8_t *name, uint16_t len,
                        fence_fsm_sem_state *out, fence_fsm_sem_slot *slots, size_t cap,
                        size_t *n)
{
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(n != NULL);
    FENCE_ASSERT(slots != NULL || cap == 0);
    *n = 0;
    if (name == NULL || len == 0 || len > FENCE_NAME_MAX) {
        return false;
    }
    const fence__sem *s = fence__sem_find(f, name, len);
    if (s == NULL) {
        return false;
    }
    memset(out, 0, sizeof(*out));
    out->permits = s->permits;
    out->slots_used = s->nslots;
    out->waiters = s->nwaiters;
    for (uint32_t i = 0; i < s->permits && *n < cap; i++) {
        const fence__lock *k = slot_find(f, s, i);
        if (k == NULL) {
            continue;
        }
        fence_fsm_sem_slot *e = &slots[(*n)++];
        e->slot = i;
        e->token = k->token;
        e->lease = k->holder != NULL ? k->holder->id : 0;
        e->deadline_ms = k->holder != NULL ? k->holder->hi.deadline_ms : k->hi.deadline_ms;
        e->owner = k->holder != NULL ? k->holder->owner : 0;
    }
    return true;
}

/* One semaphore's own invariants and those of its slot locks and FIFO. */
static const char *check_sem(const fence_fsm *f, const fence__sem *s)
{
    if (fence__sem_find(f, s->name, s->name_len) != s) {
        return "semaphore not found by name";
    }
    if (s->permits < 1 || s->permits > FENCE_SEM_PERMITS_MAX ||
        s->name_len + 1u + digits(s->permits - 1) > FENCE_NAME_MAX) {
        return "semaphore permits out of range";
    }
    uint32_t bits = 0;
    for (uint32_t w = 0; w < FENCE_SEM_PERMITS_MAX / 64; w++) {
        bits += (uint32_t)__builtin_popcountll(s->used[w]);
    }
    if (bits != s->nslots || s->nslots > s->permits || lowest_free(s) > s->permits) {
        return "semaphore slot count wrong";
    }
    for (uint32_t i = s->permits; i < FENCE_SEM_PERMITS_MAX; i++) {
        if (bit_get(s, i)) {
            return "semaphore slot beyond its permits";
        }
    }
    if (s->nslots == 0 && s->nwaiters == 0) {
        return "a semaphore exists without slots or waiters";
    }
    if (s->nwaiters > 0 && s->nslots != s->permits) {
        return "a semaphore has waiters while a slot is free";
    }
    for (uint32_t i = 0; i < s->permits; i++) {
        if (!bit_get(s, i)) {
            continue;
        }
        uint8_t buf[FENCE_NAME_MAX];
        uint16_t n = slot_name(buf, s->name, s->name_len, i);
        const fence__lock *k = fence__lock_find(f, buf, n);
        if (k == NULL || k->sem != s || k->slot != i) {
            return "a semaphore's slot lock is missing or not flagged";
        }
        if (k->nwaiters != 0) {
            return "a semaphore's slot lock has lock waiters";
        }
    }
    uint64_t count = 0;
    uint64_t last = 0;
    const fence__link *prev = NULL;
    for (const fence__link *p = s->queue.first; p != NULL; p = p->next) {
        const fence__wait *w = QWAIT_OF(p);
        if (p->prev != prev || count == s->nwaiters) {
            return "semaphore FIFO broken";
        }
        prev = p;
        count++;
        if (w->sem != s || w->lock != NULL) {
            return "semaphore waiter names another object";
        }
        if (w->id <= last) {
            return "semaphore FIFO not in wait id order";
        }
        last = w->id;
        if (fence__lease_find(f, w->lease->id) != w->lease) {
            return "semaphore waiter's lease does not exist";
        }
        if (held_slot(w->lease, s) != NULL) {
            return "a lease waits for a semaphore it holds a slot of";
        }
        if (sem_wait_of(w->lease, s) != w) {
            return "a lease waits twice for one semaphore";
        }
    }
    if (s->queue.last != prev || count != s->nwaiters) {
        return "semaphore FIFO length wrong";
    }
    return NULL;
}

/* Every semaphore, every slot lock, and the one name space. */
const char *fence__sem_check(const fence_fsm *f)
{
    uint64_t nsems = 0;
    uint64_t nwaits = 0;
    for (const fence__link *p = f->sem_list.first; p != NULL; p = p->next) {
        const fence__sem *s = SEM_OF(p);
        const char *e = check_sem(f, s);
        if (e != NULL) {
            return e;
        }
        nsems++;
        nwaits += s->nwaiters;
    }
    if (nsems != f->sems.count) {
        return "semaphore list and table differ";
    }
    if (nwaits != f->n_sem_waits) {
        return "semaphore waiter count wrong";
    }
    for (const fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        const fence__lock *k = LOCK_OF(p);
        if (k->sem == NULL) {
            if (fence__sem_claims(f, k->name, k->name_len)) {
                return "a plain lock has a semaphore's name or slot name";
            }
            continue;
        }
        uint8_t buf[FENCE_NAME_MAX];
        if (k->slot >= k->sem->permits || !bit_get(k->sem, k->slot) ||
            slot_name(buf, k->sem->name, k->sem->name_len, k->slot) != k->name_len ||
            memcmp(buf, k->name, k->name_len) != 0) {
            return "a slot lock does not match its semaphore";
        }
    }
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *w = WAIT_OF(p);
        if (w->parts == NULL && (w->lock == NULL) != (w->sem != NULL)) {
            return "a wait is for neither or both of a lock and a semaphore";
        }
    }
    return NULL;
}
