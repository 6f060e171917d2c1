/* The state machine's lifecycle and the read-only queries (its memory
 * rules are mem.c's).  See fsm.h for the semantics, fsm_int.h for the data
 * structures and which file holds what. */
#include <string.h>

#include "core/fsm_int.h"

/* ---- Lifecycle ------------------------------------------------------------ */

/* Set the default limits from limits.h. */
void fence_limits_default(fence_limits *l)
{
    l->leases_max = FENCE_LEASES_DEFAULT;
    l->locks_max = FENCE_LOCKS_DEFAULT;
    l->waiters_max = FENCE_WAITERS_DEFAULT;
    l->waits_max = FENCE_WAITS_DEFAULT;
    l->dedup_max = FENCE_DEDUP_DEFAULT;
}

/* Create an empty state whose failed allocations do what oom says; NULL on
 * lack of memory (FENCE__OOM_RETURN only). */
fence_fsm *fence__fsm_new(const fence_alloc *a, uint64_t hash_seed,
                          uint8_t oom)
{
    FENCE_ASSERT(a->alloc != NULL);
    FENCE_ASSERT(a->free != NULL);
    FENCE_ASSERT(oom <= FENCE__OOM_RESTORE);
    fence_fsm *f = a->alloc(a->ctx, sizeof(*f));
    if (f == NULL) {
        fence__oom(oom);
        return NULL;
    }
    memset(f, 0, sizeof(*f));
    f->oom = oom;
    f->alloc = *a;
    f->hash_seed = hash_seed;
    fence__kinds_init(f);
    fence_limits_default(&f->limits);
    f->next_lease_id = 1;
    f->next_wait_id = 1;
    if (!fence__htab_init(f, &f->leases) || !fence__htab_init(f, &f->locks) ||
        !fence__htab_init(f, &f->waits) || !fence__htab_init(f, &f->dedup) ||
        !fence__htab_init(f, &f->owners) || !fence__htab_init(f, &f->sems) ||
        !fence__heap_room(f, 0)) {
        fence__fsm_free(f);
        return NULL;
    }
    /* Room for the events of a typical call, so that most calls never
     * grow the array (growth inside apply may only fail fatally). */
    f->events = fence__alloc(f, FENCE__EVENTS_INIT * sizeof(*f->events));
    if (f->events == NULL) {
        fence__fsm_free(f);
        return NULL;
    }
    f->cap_events = FENCE__EVENTS_INIT;
    return f;
}

/* Free every object on list l, whose link sits at link_offset inside it. */
static void free_all(fence_fsm *f, fence__list *l, size_t link_offset)
{
    fence__link *p = l->first;
    while (p != NULL) {
        fence__link *next = p->next;
        fence__free(f, (char *)p - link_offset);
        p = next;
    }
    l->first = l->last = NULL;
}

/* Free every object and the state itself. */
void fence__fsm_free(fence_fsm *f)
{
    if (f == NULL) {
        return;
    }
    for (fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        free_all(f, &LOCK_OF(p)->sholders, offsetof(fence__shold, klink));
    }
    fence__elect_free_all(f);
    free_all(f, &f->wait_list, offsetof(fence__wait, wlink));
    free_all(f, &f->lock_list, offsetof(fence__lock, tlink));
    free_all(f, &f->lease_list, offsetof(fence__lease, link));
    free_all(f, &f->dedup_list, offsetof(fence__dedup, link));
    free_all(f, &f->owner_list, offsetof(fence__owner, link));
    fence__sem_free_all(f);
    fence__htab_free(f, &f->leases);
    fence__htab_free(f, &f->locks);
    fence__htab_free(f, &f->waits);
    fence__htab_free(f, &f->dedup);
    fence__htab_free(f, &f->owners);
    fence__htab_free(f, &f->sems);
    fence__heap_free(f, &f->heap);
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
    fence_fsm *f = fence__fsm_new(&opts->alloc, opts->hash_seed,
                                  FENCE__OOM_RETURN);
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
    FENCE_ASSERT(f != NULL);
    FENCE_ASSERT(f->now_ms <= FENCE_TIME_MS_MAX);
    return f->now_ms;
}

/* The last token issued, 0 before any grant. */
uint64_t fence_fsm_last_token(const fence_fsm *f)
{
    FENCE_ASSERT(f != NULL);
    return f->last_token;
}

/* Whether wait wait_id is still queued. */
bool fence_fsm_wait_exists(const fence_fsm *f, uint64_t wait_id)
{
    return fence__wait_find(f, wait_id) != NULL;
}

/* Describe a lease that is live at now_ms. */
int fence_fsm_lease_info(const fence_fsm *f, uint64_t lease, uint64_t now_ms,
                         fence_fsm_lease_state *out)
{
    FENCE_ASSERT(out != NULL);
    const fence__lease *l = fence__lease_find(f, lease);
    if (l == NULL || l->hi.deadline_ms <= now_ms) {
        return FENCE_ST_NOLEASE;
    }
    FENCE_ASSERT(l->id == lease);
    memset(out, 0, sizeof(*out));
    out->ttl_ms = l->ttl_ms;
    out->deadline_ms = l->hi.deadline_ms;
    out->locks_held = l->nheld + l->nsheld;
    out->lock_delay_ms = l->lock_delay_ms;
    out->owner = l->owner;
    return 0;
}

/* Describe a held lock; false when it is free (or in lock-delay). */
bool fence_fsm_lock_info(const fence_fsm *f, const uint8_t *name,
                         uint16_t name_len, fence_fsm_lock_state *out)
{
    if (name == NULL || name_len == 0 || name_len > FENCE_NAME_MAX) {
        return false;
    }
    const fence__lock *k = fence__lock_find(f, name, name_len);
    if (k == NULL || (k->holder == NULL && k->nsholders == 0)) {
        return false;
    }
    FENCE_ASSERT(!k->in_delay);
    FENCE_ASSERT(k->token > 0);
    FENCE_ASSERT(k->token <= f->last_token);
    FENCE_ASSERT(out != NULL);
    memset(out, 0, sizeof(*out));
    out->token = k->token;
    out->waiters = k->nwaiters;
    if (k->holder != NULL) {
        out->lease = k->holder->id;
        out->deadline_ms = k->holder->hi.deadline_ms;
        out->owner = k->holder->owner;
        out->holders = 1;
        return true;
    }
    /* Shared: the first holder, and the latest deadline of them all (the
     * lock stays held until then). */
    const fence__lease *first = KSHOLD_OF(k->sholders.first)->lease;
    out->lease = first->id;
    out->owner = first->owner;
    out->shared = true;
    out->holders = k->nsholders;
    for (const fence__link *p = k->sholders.first; p != NULL; p = p->next) {
        const fence__lease *l = KSHOLD_OF(p)->lease;
        if (l->hi.deadline_ms > out->deadline_ms) {
            out->deadline_ms = l->hi.deadline_ms;
        }
    }
    return true;
}

/* The holders of a held lock, in admission order (see fsm.h). */
size_t fence_fsm_lock_holders(const fence_fsm *f, const uint8_t *name, uint16_t name_len,
                              fence_fsm_holder *out, size_t cap)
{
    FENCE_ASSERT(out != NULL || cap == 0);
    if (name == NULL || name_len == 0 || name_len > FENCE_NAME_MAX) {
        return 0;
    }
    const fence__lock *k = fence__lock_find(f, name, name_len);
    if (k == NULL) {
        return 0;
    }
    if (k->holder != NULL) {
        if (cap > 0) {
            out[0].lease = k->holder->id;
            out[0].deadline_ms = k->holder->hi.deadline_ms;
            out[0].owner = k->holder->owner;
        }
        return 1;
    }
    size_t n = 0;
    for (const fence__link *p = k->sholders.first; p != NULL; p = p->next, n++) {
        if (n < cap) {
            const fence__lease *l = KSHOLD_OF(p)->lease;
            out[n].lease = l->id;
            out[n].deadline_ms = l->hi.deadline_ms;
            out[n].owner = l->owner;
        }
    }
    return n;
}

/* Iterate the locks in token order (see fsm.h). */
size_t fence_fsm_locks_list(const fence_fsm *f, uint64_t after, size_t max_visit,
                            bool (*match)(void *ctx, const uint8_t *name, uint16_t len),
                            void *ctx, fence_fsm_lock_entry *out, size_t cap,
                            uint64_t *next)
{
    FENCE_ASSERT(next != NULL);
    FENCE_ASSERT(out != NULL || cap == 0);
    size_t n = 0;
    size_t visited = 0;
    const fence__link *lnk = f->lock_list.first;
    while (lnk != NULL && LOCK_OF(lnk)->token <= after) {
        lnk = lnk->next;
    }
    uint64_t last = after;
    /* The locks of one multi-lock share a token, and the cursor is a
     * token: a page that would end inside such a group ends before it
     * instead (written entries of the group are taken back), unless the
     * group is all the page has; then the page ends after the group's
     * first cap members (a COUNT below FENCE_MULTI_NAMES_MAX can so skip
     * names of one multi-lock). */
    size_t n_before = 0;       /* entries written before last's group */
    uint64_t token_before = after;
    for (; lnk != NULL && n < cap && visited < max_visit; lnk = lnk->next) {
        const fence__lock *k = LOCK_OF(lnk);
        FENCE_ASSERT(k->token >= last);
        if (k->token != last) {
            n_before = n;
            token_before = last;
        }
        last = k->token;
        visited++;
        if (match != NULL && !match(ctx, k->name, k->name_len)) {
            continue;
        }
        fence_fsm_lock_entry *e = &out[n++];
        e->name = k->name;
        e->name_len = k->name_len;
        e->token = k->token;
        e->lease = k->holder != NULL ? k->holder->id : 0;
        e->deadline_ms = k->holder != NULL ? k->holder->hi.deadline_ms
                                           : (k->in_delay ? k->hi.deadline_ms : 0);
        e->waiters = k->nwaiters;
        e->holders = k->holder != NULL ? 1 : k->nsholders;
        e->shared = k->nsholders > 0;
        if (k->nsholders > 0) {
            /* The first holder, and the latest deadline of them all. */
            e->lease = KSHOLD_OF(k->sholders.first)->lease->id;
            for (const fence__link *q = k->sholders.first; q != NULL; q = q->next) {
                const fence__lease *l = KSHOLD_OF(q)->lease;
                if (l->hi.deadline_ms > e->deadline_ms) {
                    e->deadline_ms = l->hi.deadline_ms;
                }
            }
        }
    }
    if (lnk != NULL && LOCK_OF(lnk)->token == last && token_before != after) {
        n = n_before;
        last = token_before;
    }
    *next = lnk != NULL ? last : 0;
    return n;
}

/* Iterate the leases in id order (see fsm.h). */
size_t fence_fsm_leases_list(const fence_fsm *f, uint64_t after, fence_fsm_lease_entry *out,
                             size_t cap, uint64_t *next)
{
    FENCE_ASSERT(next != NULL);
    FENCE_ASSERT(out != NULL || cap == 0);
    size_t n = 0;
    const fence__link *lnk = f->lease_list.first;
    while (lnk != NULL && LEASE_OF(lnk)->id <= after) {
        lnk = lnk->next;
    }
    uint64_t last = after;
    for (; lnk != NULL && n < cap; lnk = lnk->next) {
        const fence__lease *l = LEASE_OF(lnk);
        FENCE_ASSERT(l->id > last);
        last = l->id;
        fence_fsm_lease_entry *e = &out[n++];
        e->id = l->id;
        e->ttl_ms = l->ttl_ms;
        e->deadline_ms = l->hi.deadline_ms;
        e->locks_held = l->nheld + l->nsheld;
        e->waits = l->nwaits;
        e->owner = l->owner;
    }
    *next = lnk != NULL ? last : 0;
    return n;
}

/* The build note: NULL, this is a real build (a planted-bug build from
 * tests/mutants/ returns a warning instead). */
const char *fence_fsm_build_note(void)
{
    return NULL;
}

/* Counters for INFO. */
void fence_fsm_stats_get(const fence_fsm *f, fence_fsm_stats *out)
{
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(f->nheld <= f->locks.count);
    memset(out, 0, sizeof(*out));
    out->leases = f->leases.count;
    out->locks = f->nheld + f->nslocks;
    out->waiters = f->waits.count;
    out->last_token = f->last_token;
    out->now_ms = f->now_ms;
    out->grants = f->n_grants;
    out->handoffs = f->n_handoffs;
    out->expirations = f->n_expired;
    out->expirations_with_locks = f->n_expired_held;
    out->revocations = f->n_revoked;
}
