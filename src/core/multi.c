/* Atomic multi-locks (LOCK_MULTI): all names or none, in one entry, with
 * one token valid at every one of those fences.
 *
 * A multi-lock that cannot be granted at once waits as ONE wait (one id,
 * one timeout, one event, one entry against waits_max) with one place in
 * the FIFO of every lock it names, all enqueued in the same apply step.
 * It holds nothing while it waits.  It is granted when, for every name,
 * the lock is free (no holder, no lock-delay) and the multi-lock's place is
 * the first eligible one of that lock's FIFO; then all names are granted
 * at once with one token (last_token + 1), each lock recording it.
 *
 * FIFO fairness per lock is strict: a free lock whose first waiter is a
 * multi-lock blocked elsewhere stays free (reserved for it) and later
 * requests queue behind it, so a multi-lock is never starved by a stream
 * of single locks.
 *
 * No deadlock: every FIFO is in wait-id order, and a wait gets its id and
 * all its places in one step, so two waits that share locks are in the
 * same order in every FIFO they share.  A waiter is blocked only by a
 * holder (which lets go when its lease ends) or by a waiter ahead of it in
 * some FIFO, i.e. one with a smaller id.  So the "blocked by" relation
 * among waiters only points at smaller ids and can have no cycle: the
 * waiter with the smallest id is blocked by holders alone and is granted
 * once they release, expire or are revoked.
 *
 * Release: the locks of one multi-lock share their token and holder, and
 * no other grant shares a token, so "the locks held by lease l with token
 * t" is exactly the group.  UNLOCK of any one of them with that token
 * releases all (apply.c, cmd_unlock); lease expiry and revocation release
 * all as they do every lock of the lease.
 *
 * The ACQUIRE form (lease 0) creates a dedicated lease as ACQUIRE does,
 * revoked with the multi-lock's release or failure.
 */
#include <string.h>

#include "base/bytes.h"
#include "core/fsm_int.h"

/* Flags of a multi wait record in the snapshot. */
#define MSNAP_F_ACQUIRE 0x1
#define MSNAP_F_REQ 0x2
/* Fixed bytes of one record, before its ordinals. */
#define MSNAP_FIXED (8 * 4 + 1 + 8 + 2)

/* Whether lock k is free: no holder of either mode (a shared-held lock is
 * held: shared.c) and no lock-delay. */
static bool lock_free(const fence__lock *k)
{
    return fence__lock_is_free(k);
}

/* Whether FIFO place p may be granted now (its wait has not timed out and
 * its lease is live); the same rule as apply.c's hand-off. */
static bool place_eligible(const fence_fsm *f, const fence__wait *p)
{
    const fence__wait *w = p->head != NULL ? p->head : p;
    return w->hi.deadline_ms > f->now_ms && fence__lease_live(f, w->lease);
}

/* The first eligible place of lock k's FIFO, or NULL. */
static const fence__wait *first_eligible(const fence_fsm *f, const fence__lock *k)
{
    for (const fence__link *p = k->queue.first; p != NULL; p = p->next) {
        const fence__wait *w = QWAIT_OF(p);
        if (place_eligible(f, w)) {
            return w;
        }
    }
    return NULL;
}

/* Whether multi wait m could be granted now. */
static bool grantable(const fence_fsm *f, const fence__wait *m)
{
    FENCE_ASSERT(m->parts != NULL);
    if (!place_eligible(f, m)) {
        return false;
    }
    for (uint16_t i = 0; i < m->nparts; i++) {
        const fence__wait *p = &m->parts[i];
        FENCE_ASSERT(p->head == m);
        if (!lock_free(p->lock) || first_eligible(f, p->lock) != p) {
            return false;
        }
    }
    return true;
}

/* Take multi wait m out of every FIFO and table; ks receives its locks in
 * request order (the caller frees m). */
static void multi_unlink(fence_fsm *f, fence__wait *m, fence__lock **ks)
{
    fence__lease *l = m->lease;
    for (uint16_t i = 0; i < m->nparts; i++) {
        fence__wait *p = &m->parts[i];
        fence__lock *k = p->lock;
        FENCE_ASSERT(k->nwaiters > 0);
        fence__list_remove(&k->queue, &p->qlink);
        k->nwaiters--;
        ks[i] = k;
    }
    FENCE_ASSERT(l->nwaits > 0);
    fence__list_remove(&l->waits, &m->llink);
    l->nwaits--;
    FENCE_ASSERT(l->own->waits >= m->nparts);
    l->own->waits -= m->nparts;
    fence__list_remove(&f->wait_list, &m->wlink);
    if (l->acq_wait == m) {
        l->acq_wait = NULL;
    }
    fence__htab_remove(&f->waits, &m->hn);
    fence__heap_remove(&f->heap, &m->hi);
}

/* Grant the n locks ks (all free) to lease l with one new token. */
static uint64_t grant_all(fence_fsm *f, fence__lease *l, fence__lock **ks, uint16_t n)
{
    FENCE_ASSERT(n >= 1 && n <= FENCE_MULTI_NAMES_MAX);
    FENCE_ASSERT(fence__lease_live(f, l));
    FENCE_ASSERT(f->last_token < UINT64_MAX);
    uint64_t token = ++f->last_token;
    for (uint16_t i = 0; i < n; i++) {
        FENCE_ASSERT(lock_free(ks[i]));
        fence__lock_retoken(f, ks[i], token);
        fence__held_append(f, l, ks[i]);
        FENCE_ASSERT(ks[i]->holder == l);
        FENCE_ASSERT(ks[i]->token == token);
    }
    f->n_grants++;
    return token;
}

bool fence__multi_try(fence_fsm *f, fence__wait *m)
{
    if (!grantable(f, m)) {
        return false;
    }
    fence__lock *ks[FENCE_MULTI_NAMES_MAX];
    fence__lease *l = m->lease;
    uint16_t n = m->nparts;
    bool acq = m->acquire;
    multi_unlink(f, m, ks);
    uint64_t token = grant_all(f, l, ks, n);
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
    r.wait_id = m->id;
    fence__emit(f, m, &r);
    fence__free(f, m);
    return true;
}

void fence__multi_fail(fence_fsm *f, fence__wait *m, uint8_t status, bool revoke_dedicated)
{
    FENCE_ASSERT(m->parts != NULL);
    FENCE_ASSERT(status == FENCE_ST_NIL || status == FENCE_ST_NOLEASE);
    fence__lock *ks[FENCE_MULTI_NAMES_MAX];
    fence__lease *l = m->lease;
    uint16_t n = m->nparts;
    bool acq = m->acquire;
    multi_unlink(f, m, ks);
    fence_result r;
    memset(&r, 0, sizeof(r));
    r.status = status;
    r.wait_id = m->id;
    fence__emit(f, m, &r);
    fence__free(f, m);
    /* The places it leaves may uncover a waiter that can go now (a lock
     * it kept reserved, or a multi-lock that was behind it): offer each
     * free lock on, in request order.  A hand-off only takes locks, so a
     * later lock of ks is either still free or just granted. */
    for (uint16_t i = 0; i < n; i++) {
        if (lock_free(ks[i])) {
            fence__handoff(f, ks[i]);
        } else if (ks[i]->nsholders > 0) {
            /* The shared waiters it held back may join the phase. */
            fence__admit_shared(f, ks[i]);
        }
    }
    if (acq && revoke_dedicated) {
        FENCE_ASSERT(l->dedicated);
        fence__lease_remove(f, l, false);
    }
}

/* ---- The command ------------------------------------------------------------ */

/* Whether the names of c are acceptable: 1..FENCE_MULTI_NAMES_MAX of them,
 * each 1..FENCE_NAME_MAX bytes, no two equal. */
static bool names_ok(const fence_fsm *f, const fence_cmd *c)
{
    if (c->names == NULL || c->names_count < 1 || c->names_count > FENCE_MULTI_NAMES_MAX) {
        return false;
    }
    uint64_t h[FENCE_MULTI_NAMES_MAX];
    for (uint16_t i = 0; i < c->names_count; i++) {
        const fence_name *a = &c->names[i];
        if (a->name == NULL || a->len < 1 || a->len > FENCE_NAME_MAX) {
            return false;
        }
        h[i] = fence__hash_name(f->hash_seed, a->name, a->len);
        for (uint16_t j = 0; j < i; j++) {
            const fence_name *b = &c->names[j];
            if (h[j] == h[i] && a->len == b->len && memcmp(a->name, b->name, a->len) == 0) {
                return false;
            }
        }
    }
    return true;
}

/* How many locks lease l holds with token t (one grant's locks). */
static uint32_t group_size(const fence__lease *l, uint64_t t)
{
    uint32_t n = 0;
    for (const fence__link *p = l->held.first; p != NULL; p = p->next) {
        n += HELD_OF(p)->token == t;
    }
    return n;
}

/* A LOCK_MULTI of existing lease l that holds or waits for some of its
 * names: answer it (reentrant OK, joined QUEUED, or INVALID) and return
 * true; false when l has nothing to do with any of them. */
static bool answer_known(const fence_cmd *c, fence__lease *l, fence__lock **ks,
                         fence_result *r)
{
    uint16_t n = c->names_count;
    uint16_t held = 0, waited = 0;
    fence__wait *m = NULL;
    bool one_wait = true;
    for (uint16_t i = 0; i < n; i++) {
        if (ks[i] == NULL) {
            continue;
        }
        if (ks[i]->holder == l ||
            (ks[i]->nsholders > 0 && fence__shold_of(l, ks[i]) != NULL)) {
            /* A shared hold of l counts as held: never the same grant, so
             * the set is answered INVALID below (it would wait for
             * itself). */
            held++;
            continue;
        }
        fence__wait *w = fence__wait_of(l, ks[i]);
        if (w != NULL) {
            waited++;
            one_wait = one_wait && (m == NULL || m == w);
            m = w;
        }
    }
    if (held == 0 && waited == 0) {
        return false;
    }
    r->lease = l->id;
    if (held == n && group_size(l, ks[0]->token) == n) {
        bool same = true;
        for (uint16_t i = 1; i < n; i++) {
            same = same && ks[i]->token == ks[0]->token;
        }
        if (same) {
            /* Reentrant, as LOCK: this lease holds exactly these names
             * from one grant. */
            r->status = FENCE_ST_OK;
            r->token = ks[0]->token;
            return true;
        }
    }
    if (held == 0 && waited == n && one_wait && m->parts != NULL && m->nparts == n) {
        /* The same request again (a retry without REQID): join the wait,
         * as LOCK joins its lease's wait. */
        r->status = FENCE_ST_QUEUED;
        r->wait_id = m->id;
        return true;
    }
    /* Holding or waiting for part of the set would wait for itself. */
    r->status = FENCE_ST_INVALID;
    r->lease = 0;
    return true;
}

/* Create the missing locks of ks (NULL entries) with no holder; reserved
 * ones (queue) go to the head of the by-token list, where token 0 sorts. */
static void add_missing(fence_fsm *f, const fence_cmd *c, fence__lock **ks, bool queue)
{
    for (uint16_t i = 0; i < c->names_count; i++) {
        if (ks[i] != NULL) {
            continue;
        }
        ks[i] = fence__lock_add(f, c->names[i].name, c->names[i].len, 0, NULL);
        FENCE_ASSERT(ks[i] != NULL); /* heap room reserved, memory stops */
        if (queue) {
            fence__list_remove(&f->lock_list, &ks[i]->tlink);
            fence__list_insert_before(&f->lock_list, f->lock_list.first, &ks[i]->tlink);
        }
    }
}

/* Queue a new multi wait of lease l over the locks ks. */
static fence__wait *multi_add(fence_fsm *f, const fence_cmd *c, fence__lease *l,
                              fence__lock **ks, bool acquire)
{
    uint16_t n = c->names_count;
    fence__wait *m = fence__alloc(f, sizeof(*m) * (1u + n));
    FENCE_ASSERT(m != NULL); /* fence__alloc stops on failure in apply */
    memset(m, 0, sizeof(*m) * (1u + n));
    m->id = f->next_wait_id++;
    m->wait_ms = c->wait_ms;
    m->lease = l;
    m->acquire = acquire;
    m->has_req = (c->flags & FENCE_CMD_F_REQID) != 0;
    m->req_id = m->has_req ? c->req_id : 0;
    m->parts = m + 1;
    m->nparts = n;
    m->hn.hash = fence__key_hash(f, m->id);
    m->hi.kind = FENCE__K_WAIT;
    m->hi.id = m->id;
    m->hi.deadline_ms = f->now_ms + c->wait_ms;
    m->hi.idx = FENCE__NOT_IN_HEAP;
    for (uint16_t i = 0; i < n; i++) {
        fence__wait *p = &m->parts[i];
        p->id = m->id;
        p->lease = l;
        p->lock = ks[i];
        p->head = m;
        p->hi.idx = FENCE__NOT_IN_HEAP;
        fence__list_append(&ks[i]->queue, &p->qlink);
        ks[i]->nwaiters++;
    }
    FENCE_ASSERT(l->waits.last == NULL || LWAIT_OF(l->waits.last)->id < m->id);
    fence__list_append(&l->waits, &m->llink);
    l->nwaits++;
    l->own->waits += n;
    FENCE_ASSERT(f->wait_list.last == NULL || WAIT_OF(f->wait_list.last)->id < m->id);
    fence__list_append(&f->wait_list, &m->wlink);
    if (acquire) {
        FENCE_ASSERT(l->acq_wait == NULL);
        l->acq_wait = m;
    }
    fence__htab_insert(f, &f->waits, &m->hn);
    fence__heap_push(&f->heap, &m->hi);
    return m;
}

void fence__multi_cmd(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    bool dedicated = c->lease == 0;
    if (!names_ok(f, c) || c->wait_ms > FENCE_WAIT_MS_MAX ||
        (dedicated && (c->ttl_ms < FENCE_TTL_MS_MIN || c->ttl_ms > FENCE_TTL_MS_MAX ||
                       c->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX)) ||
        (!dedicated && (c->ttl_ms != 0 || c->lock_delay_ms != 0))) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    uint16_t n = c->names_count;
    for (uint16_t i = 0; i < n; i++) {
        /* One name space: a semaphore's name or slot, and an election's
         * name, are other kinds (an election's name granted as a lock
         * would leave the election without its value). */
        const fence__lock *k = fence__lock_find(f, c->names[i].name, c->names[i].len);
        if ((k != NULL && k->elect != NULL) ||
            fence__sem_claims(f, c->names[i].name, c->names[i].len)) {
            r->status = FENCE_ST_WRONGTYPE;
            return;
        }
    }
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
    }
    fence__lock *ks[FENCE_MULTI_NAMES_MAX];
    uint32_t missing = 0;
    bool free_now = true;
    for (uint16_t i = 0; i < n; i++) {
        ks[i] = fence__lock_find(f, c->names[i].name, c->names[i].len);
        missing += ks[i] == NULL;
        free_now = free_now && (ks[i] == NULL || (lock_free(ks[i]) && ks[i]->nwaiters == 0));
    }
    if (l != NULL && answer_known(c, l, ks, r)) {
        return;
    }
    if ((dedicated && (f->leases.count >= f->limits.leases_max ||
                       fence__quota_leases_full(f, c))) ||
        fence__quota_locks_full(f, c, n)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (!free_now) {
        if (c->wait_ms == 0) {
            r->status = FENCE_ST_NIL;
            return;
        }
        bool full = f->waits.count >= f->limits.waits_max;
        for (uint16_t i = 0; i < n && !full; i++) {
            full = ks[i] != NULL && ks[i]->nwaiters >= f->limits.waiters_max;
        }
        if (full) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
    }
    if ((uint64_t)f->locks.count + missing > f->limits.locks_max ||
        !fence__heap_room(f, missing + (dedicated ? 1u : 0u) + (free_now ? 0u : 1u))) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (dedicated) {
        l = fence__lease_add(f, f->next_lease_id, c->ttl_ms, c->lock_delay_ms,
                             f->now_ms + c->ttl_ms, true, c->owner);
        FENCE_ASSERT(l != NULL); /* heap room reserved, memory stops */
        f->next_lease_id++;
    }
    add_missing(f, c, ks, !free_now);
    r->lease = l->id;
    if (free_now) {
        r->status = FENCE_ST_OK;
        r->token = grant_all(f, l, ks, n);
        return;
    }
    fence__wait *m = multi_add(f, c, l, ks, dedicated);
    if (dedicated) {
        fence__heap_move(&f->heap, &l->hi, fence__lease_deadline(f, l));
    }
    r->status = FENCE_ST_QUEUED;
    r->wait_id = m->id;
}

/* ---- Check ------------------------------------------------------------------ */

const char *fence__multi_check(const fence_fsm *f)
{
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *m = WAIT_OF(p);
        if (m->head != NULL) {
            return "a FIFO place is in the wait list";
        }
        if (m->parts == NULL) {
            /* A wait on one lock, or a semaphore's (sem.c checks it). */
            if (m->nparts != 0 || (m->lock == NULL && m->sem == NULL)) {
                return "a single wait without its lock";
            }
            continue;
        }
        if (m->lock != NULL || m->nparts < 1 || m->nparts > FENCE_MULTI_NAMES_MAX ||
            m->parts != m + 1) {
            return "multi wait malformed";
        }
        for (uint16_t i = 0; i < m->nparts; i++) {
            const fence__wait *q = &m->parts[i];
            if (q->head != m || q->id != m->id || q->lease != m->lease || q->lock == NULL ||
                q->parts != NULL) {
                return "multi wait place malformed";
            }
            if (q->lock->holder == m->lease) {
                return "a multi-lock granted partly (its lease holds one of its names)";
            }
            for (uint16_t j = 0; j < i; j++) {
                if (m->parts[j].lock == q->lock) {
                    return "a multi wait names one lock twice";
                }
            }
        }
        if (grantable(f, m)) {
            return "a multi wait could be granted but waits";
        }
    }
    /* A free lock exists only for the multi-lock at the head of its FIFO
     * (reserved for it); never-granted ones (token 0) sort first. */
    bool seen_token = false;
    for (const fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        const fence__lock *k = LOCK_OF(p);
        if (k->token == 0 && (seen_token || !lock_free(k))) {
            return "a never-granted lock after a granted one, or held";
        }
        seen_token = seen_token || k->token != 0;
        if (!lock_free(k)) {
            continue;
        }
        if (k->nwaiters == 0) {
            return "a lock exists that is neither held nor in lock-delay nor reserved";
        }
        const fence__wait *w = QWAIT_OF(k->queue.first);
        if (w->head == NULL) {
            return "a free lock's first waiter is not a blocked multi-lock";
        }
    }
    return NULL;
}

/* ---- Snapshot section "multi" -------------------------------------------------
 *
 *   u32 count, then per multi wait (ascending id):
 *     u64 id | u64 lease | u64 wait_ms | u64 deadline_ms
 *     | u8 flags (1: ACQUIRE form, 2: has req_id) | u64 req_id
 *     | u16 nnames | nnames x u32 lock (1-based place in the lock section)
 * The places go back into each lock's FIFO by id. */

size_t fence__multi_snap_size(const fence_fsm *f)
{
    size_t n = 4;
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *m = WAIT_OF(p);
        if (m->parts != NULL) {
            n += MSNAP_FIXED + 4u * m->nparts;
        }
    }
    return n;
}

uint8_t *fence__multi_snap_write(const fence_fsm *f, uint8_t *p, uint8_t *end)
{
    FENCE_ASSERT(end - p >= 4);
    uint8_t *countp = p;
    p += 4;
    uint32_t count = 0;
    for (const fence__link *q = f->wait_list.first; q != NULL; q = q->next) {
        const fence__wait *m = WAIT_OF(q);
        if (m->parts == NULL) {
            continue;
        }
        FENCE_ASSERT((size_t)(end - p) >= MSNAP_FIXED + 4u * m->nparts);
        fence__put_u64(p, m->id);
        fence__put_u64(p + 8, m->lease->id);
        fence__put_u64(p + 16, m->wait_ms);
        fence__put_u64(p + 24, m->hi.deadline_ms);
        p[32] = (uint8_t)((m->acquire ? MSNAP_F_ACQUIRE : 0) | (m->has_req ? MSNAP_F_REQ : 0));
        fence__put_u64(p + 33, m->req_id);
        fence__put_u16(p + 41, m->nparts);
        p += MSNAP_FIXED;
        for (uint16_t i = 0; i < m->nparts; i++) {
            FENCE_ASSERT(m->parts[i].lock->snap_ord > 0);
            fence__put_u32(p, m->parts[i].lock->snap_ord);
            p += 4;
        }
        count++;
    }
    fence__put_u32(countp, count);
    return p;
}

/* Insert FIFO place q into lock k's queue by id. */
static void fifo_insert(fence__lock *k, fence__wait *q)
{
    fence__link *at = k->queue.last;
    while (at != NULL && QWAIT_OF(at)->id > q->id) {
        at = at->prev;
    }
    fence__list_insert_before(&k->queue, at != NULL ? at->next : k->queue.first, &q->qlink);
    k->nwaiters++;
}

/* Insert wait m into lease l's waits by id. */
static void lease_insert(fence__lease *l, fence__wait *m)
{
    fence__link *at = l->waits.last;
    while (at != NULL && LWAIT_OF(at)->id > m->id) {
        at = at->prev;
    }
    fence__list_insert_before(&l->waits, at != NULL ? at->next : l->waits.first, &m->llink);
    l->nwaits++;
}

/* Decode one record and link it in (*cursor: the first wait of n's wait
 * list with a larger id than the records so far). */
static int read_one(fence_fsm *n, const uint8_t **pp, const uint8_t *end, fence__lock **v,
                    uint32_t nv, uint64_t *last, fence__link **cursor)
{
    const uint8_t *p = *pp;
    if ((size_t)(end - p) < MSNAP_FIXED) {
        return FENCE_ST_INVALID;
    }
    uint64_t id = fence__get_u64(p);
    uint64_t lease_id = fence__get_u64(p + 8);
    uint64_t wait_ms = fence__get_u64(p + 16);
    uint64_t deadline = fence__get_u64(p + 24);
    uint8_t flags = p[32];
    uint64_t req_id = fence__get_u64(p + 33);
    uint16_t cnt = fence__get_u16(p + 41);
    p += MSNAP_FIXED;
    fence__lease *l = fence__lease_find(n, lease_id);
    bool acquire = (flags & MSNAP_F_ACQUIRE) != 0;
    if (id <= *last || id >= n->next_wait_id || fence__wait_find(n, id) != NULL ||
        l == NULL || wait_ms == 0 || wait_ms > FENCE_WAIT_MS_MAX ||
        deadline <= n->now_ms || deadline > n->now_ms + wait_ms ||
        (flags & ~(MSNAP_F_ACQUIRE | MSNAP_F_REQ)) != 0 ||
        (!(flags & MSNAP_F_REQ) && req_id != 0) || cnt < 1 ||
        cnt > FENCE_MULTI_NAMES_MAX || (size_t)(end - p) < 4u * cnt ||
        (acquire && (!l->dedicated || l->acq_wait != NULL || l->hi.deadline_ms < deadline))) {
        return FENCE_ST_INVALID;
    }
    fence__lock *ks[FENCE_MULTI_NAMES_MAX];
    for (uint16_t i = 0; i < cnt; i++) {
        uint32_t ord = fence__get_u32(p + 4u * i);
        if (ord < 1 || ord > nv) {
            return FENCE_ST_INVALID;
        }
        ks[i] = v[ord - 1];
        if (ks[i]->holder == l || fence__is_waiting(l, ks[i]) ||
            (ks[i]->nsholders > 0 && fence__shold_of(l, ks[i]) != NULL)) {
            return FENCE_ST_INVALID;
        }
        for (uint16_t j = 0; j < i; j++) {
            if (ks[j] == ks[i]) {
                return FENCE_ST_INVALID;
            }
        }
    }
    *pp = p + 4u * cnt;
    if (!fence__heap_room(n, 1)) {
        return FENCE_ST_LIMIT;
    }
    fence__wait *m = fence__alloc(n, sizeof(*m) * (1u + cnt));
    if (m == NULL) {
        return FENCE_ST_LIMIT;
    }
    memset(m, 0, sizeof(*m) * (1u + cnt));
    m->id = id;
    m->wait_ms = wait_ms;
    m->lease = l;
    m->acquire = acquire;
    m->has_req = (flags & MSNAP_F_REQ) != 0;
    m->req_id = req_id;
    m->parts = m + 1;
    m->nparts = cnt;
    m->hn.hash = fence__key_hash(n, id);
    m->hi.kind = FENCE__K_WAIT;
    m->hi.id = id;
    m->hi.deadline_ms = deadline;
    m->hi.idx = FENCE__NOT_IN_HEAP;
    for (uint16_t i = 0; i < cnt; i++) {
        fence__wait *q = &m->parts[i];
        q->id = id;
        q->lease = l;
        q->lock = ks[i];
        q->head = m;
        q->hi.idx = FENCE__NOT_IN_HEAP;
        fifo_insert(ks[i], q);
    }
    lease_insert(l, m);
    l->own->waits += cnt;
    while (*cursor != NULL && WAIT_OF(*cursor)->id < id) {
        *cursor = (*cursor)->next;
    }
    fence__list_insert_before(&n->wait_list, *cursor, &m->wlink);
    if (acquire) {
        l->acq_wait = m;
    }
    fence__htab_insert(n, &n->waits, &m->hn);
    fence__heap_push(&n->heap, &m->hi);
    *last = id;
    return 0;
}

int fence__multi_snap_read(fence_fsm *n, const uint8_t **pp, const uint8_t *end,
                           fence__lock **v, uint32_t nv)
{
    if (end - *pp < 4) {
        return FENCE_ST_INVALID;
    }
    uint64_t count = fence__get_u32(*pp);
    *pp += 4;
    if (count > (uint64_t)(end - *pp) / (MSNAP_FIXED + 4)) {
        return FENCE_ST_INVALID;
    }
    uint64_t last = 0;
    fence__link *cursor = n->wait_list.first;
    for (uint64_t i = 0; i < count; i++) {
        int rc = read_one(n, pp, end, v, nv, &last, &cursor);
        if (rc != 0) {
            return rc;
        }
    }
    /* The QUEUED dedup records of multi waits (the dedup section came
     * before this one, so they found no wait then): attach them, oldest
     * first, as the live state did. */
    for (fence__link *p = n->dedup_list.first; p != NULL; p = p->next) {
        fence__dedup *d = DEDUP_OF(p);
        if (d->result.status != FENCE_ST_QUEUED || d->wait != NULL) {
            continue;
        }
        fence__wait *w = fence__wait_find(n, d->result.wait_id);
        if (w != NULL && w->parts != NULL) {
            fence__dedup_attach(d, w);
        }
    }
    return 0;
}
