/* The snapshot section "sem" (core/snapshot.c calls it last, before the
 * CRC, in a version-5 snapshot):
 *
 *   u32 nsems, then per semaphore (creation order):
 *     u16 name_len | name | u32 permits | u32 nwaits, then per wait (FIFO
 *     order, which is ascending id):
 *       u64 id | u64 lease | u64 wait_ms | u64 deadline_ms
 *       | u8 flags (1: a dedicated lease's, 2: has req_id) | u64 req_id
 *   u32 nrecs, then per dedup record whose result names a slot other than
 *   0 (the dedup section has no slot field), in the dedup section's order:
 *     u32 position in the dedup section | u32 slot
 *
 * The slot locks are in the locks section already (as name#slot): restore
 * flags every lock whose name is a slot of a restored semaphore.  The
 * waits join the wait table, the global wait list and their leases' lists,
 * which are by id, so those lists are sorted again after the section.
 * Restore trusts nothing: every field is checked here, and the whole state
 * by fence_fsm_check at the end of decode. */
#include <string.h>

#include "base/bytes.h"
#include "core/fsm_int.h"

#define SEM_FIXED (2 + 4 + 4)
#define SEM_WAIT (8 * 4 + 1 + 8)
#define SEM_WAIT_F_ACQUIRE 0x1
#define SEM_WAIT_F_REQ 0x2
/* Furthest any deadline may lie beyond now in a valid state. */
#define SEM_HORIZON_MS (FENCE_TTL_MS_MAX + FENCE_WAIT_MS_MAX)

/* Dedup records whose result carries a slot (other than 0). */
static uint32_t slot_records(const fence_fsm *f)
{
    uint32_t n = 0;
    for (const fence__link *p = f->dedup_list.first; p != NULL; p = p->next) {
        n += DEDUP_OF(p)->result.slot != 0;
    }
    return n;
}

size_t fence__sem_snap_size(const fence_fsm *f)
{
    size_t n = 4 + 4 + (size_t)slot_records(f) * 8;
    for (const fence__link *p = f->sem_list.first; p != NULL; p = p->next) {
        const fence__sem *s = SEM_OF(p);
        n += SEM_FIXED + s->name_len + (size_t)s->nwaiters * SEM_WAIT;
    }
    return n;
}

uint8_t *fence__sem_snap_write(const fence_fsm *f, uint8_t *p, const uint8_t *end)
{
    FENCE_ASSERT((size_t)(end - p) >= fence__sem_snap_size(f));
    fence__put_u32(p, f->sems.count);
    p += 4;
    for (const fence__link *q = f->sem_list.first; q != NULL; q = q->next) {
        const fence__sem *s = SEM_OF(q);
        fence__put_u16(p, s->name_len);
        memcpy(p + 2, s->name, s->name_len);
        p += 2 + s->name_len;
        fence__put_u32(p, s->permits);
        fence__put_u32(p + 4, s->nwaiters);
        p += 8;
        for (const fence__link *x = s->queue.first; x != NULL; x = x->next) {
            const fence__wait *w = QWAIT_OF(x);
            FENCE_ASSERT(w->sem == s);
            fence__put_u64(p, w->id);
            fence__put_u64(p + 8, w->lease->id);
            fence__put_u64(p + 16, w->wait_ms);
            fence__put_u64(p + 24, w->hi.deadline_ms);
            p[32] = (uint8_t)((w->acquire ? SEM_WAIT_F_ACQUIRE : 0) |
                              (w->has_req ? SEM_WAIT_F_REQ : 0));
            fence__put_u64(p + 33, w->req_id);
            p += SEM_WAIT;
        }
    }
    fence__put_u32(p, slot_records(f));
    p += 4;
    uint32_t pos = 0;
    for (const fence__link *q = f->dedup_list.first; q != NULL; q = q->next, pos++) {
        const fence__dedup *d = DEDUP_OF(q);
        if (d->result.slot != 0) {
            fence__put_u32(p, pos);
            fence__put_u32(p + 4, d->result.slot);
            p += 8;
        }
    }
    FENCE_ASSERT(p <= end);
    return p;
}

/* ---- Reading ---------------------------------------------------------------- */

/* A bounded cursor over the section. */
typedef struct cur {
    const uint8_t *p;
    const uint8_t *end;
} cur;

static bool has(const cur *c, size_t n)
{
    return (size_t)(c->end - c->p) >= n;
}

/* Merge-sort a chain of links (next pointers only) by the id of the wait
 * each is embedded in at offset off. */
static uint64_t id_at(const fence__link *l, size_t off)
{
    return ((const fence__wait *)(const void *)((const char *)l - off))->id;
}

static fence__link *msort(fence__link *h, size_t off)
{
    if (h == NULL || h->next == NULL) {
        return h;
    }
    fence__link *slow = h;
    fence__link *fast = h->next;
    while (fast != NULL && fast->next != NULL) {
        slow = slow->next;
        fast = fast->next->next;
    }
    fence__link *b = slow->next;
    slow->next = NULL;
    fence__link *a = msort(h, off);
    b = msort(b, off);
    fence__link head = {NULL, NULL};
    fence__link *t = &head;
    while (a != NULL && b != NULL) {
        if (id_at(a, off) < id_at(b, off)) {
            t->next = a;
            a = a->next;
        } else {
            t->next = b;
            b = b->next;
        }
        t = t->next;
    }
    t->next = a != NULL ? a : b;
    return head.next;
}

/* Sort list l of waits (linked at offset off) by id. */
static void sort_waits(fence__list *l, size_t off)
{
    fence__link *h = msort(l->first, off);
    l->first = h;
    fence__link *prev = NULL;
    for (fence__link *p = h; p != NULL; p = p->next) {
        p->prev = prev;
        prev = p;
    }
    l->last = prev;
}

/* One wait of semaphore s. */
static int read_wait(fence_fsm *n, cur *c, fence__sem *s, uint64_t *last)
{
    if (!has(c, SEM_WAIT)) {
        return FENCE_ST_INVALID;
    }
    uint64_t id = fence__get_u64(c->p);
    uint64_t lease_id = fence__get_u64(c->p + 8);
    uint64_t wait_ms = fence__get_u64(c->p + 16);
    uint64_t deadline = fence__get_u64(c->p + 24);
    uint8_t flags = c->p[32];
    uint64_t req_id = fence__get_u64(c->p + 33);
    c->p += SEM_WAIT;
    if (id <= *last || id >= n->next_wait_id || wait_ms == 0 ||
        wait_ms > FENCE_WAIT_MS_MAX || deadline <= n->now_ms ||
        deadline > n->now_ms + SEM_HORIZON_MS ||
        (flags & ~(SEM_WAIT_F_ACQUIRE | SEM_WAIT_F_REQ)) != 0 ||
        ((flags & SEM_WAIT_F_REQ) == 0 && req_id != 0) ||
        fence__wait_find(n, id) != NULL) {
        return FENCE_ST_INVALID;
    }
    *last = id;
    fence__lease *l = fence__lease_find(n, lease_id);
    if (l == NULL) {
        return FENCE_ST_INVALID;
    }
    bool acquire = (flags & SEM_WAIT_F_ACQUIRE) != 0;
    if (acquire && (!l->dedicated || l->acq_wait != NULL || l->hi.deadline_ms < deadline)) {
        return FENCE_ST_INVALID;
    }
    for (const fence__link *p = l->waits.first; p != NULL; p = p->next) {
        if (LWAIT_OF(p)->sem == s) {
            return FENCE_ST_INVALID;
        }
    }
    if (!fence__heap_room(n, 1)) {
        return FENCE_ST_LIMIT;
    }
    fence__wait *w = fence__alloc(n, sizeof(*w));
    if (w == NULL) {
        return FENCE_ST_LIMIT;
    }
    memset(w, 0, sizeof(*w));
    w->id = id;
    w->wait_ms = wait_ms;
    w->lease = l;
    w->sem = s;
    w->acquire = acquire;
    w->has_req = (flags & SEM_WAIT_F_REQ) != 0;
    w->req_id = req_id;
    w->hn.hash = fence__key_hash(n, id);
    w->hi.kind = FENCE__K_WAIT;
    w->hi.id = id;
    w->hi.deadline_ms = deadline;
    w->hi.idx = FENCE__NOT_IN_HEAP;
    fence__list_append(&s->queue, &w->qlink);
    s->nwaiters++;
    n->n_sem_waits++;
    /* Out of id order for now: sorted after the section. */
    fence__list_append(&l->waits, &w->llink);
    l->nwaits++;
    l->own->waits++;
    fence__list_append(&n->wait_list, &w->wlink);
    if (acquire) {
        l->acq_wait = w;
    }
    fence__htab_insert(n, &n->waits, &w->hn);
    fence__heap_push(&n->heap, &w->hi);
    return 0;
}

/* One semaphore and its waits. */
static int read_sem(fence_fsm *n, cur *c)
{
    if (!has(c, 2)) {
        return FENCE_ST_INVALID;
    }
    uint16_t len = fence__get_u16(c->p);
    c->p += 2;
    if (len == 0 || len > FENCE_NAME_MAX || !has(c, (size_t)len + 8)) {
        return FENCE_ST_INVALID;
    }
    const uint8_t *name = c->p;
    c->p += len;
    uint32_t permits = fence__get_u32(c->p);
    uint32_t nwaits = fence__get_u32(c->p + 4);
    c->p += 8;
    if (permits < 1 || permits > FENCE_SEM_PERMITS_MAX ||
        len + 1u + (permits > 1000 ? 4u : permits > 100 ? 3u : permits > 10 ? 2u : 1u) >
            FENCE_NAME_MAX ||
        nwaits > (size_t)(c->end - c->p) / SEM_WAIT || fence__sem_find(n, name, len) != NULL) {
        return FENCE_ST_INVALID;
    }
    fence__sem *s = fence__alloc(n, sizeof(*s) + len);
    if (s == NULL) {
        return FENCE_ST_LIMIT;
    }
    memset(s, 0, sizeof(*s));
    memcpy(s->name, name, len);
    s->name_len = len;
    s->permits = permits;
    s->hn.hash = fence__hash_name(n->hash_seed, name, len);
    fence__htab_insert(n, &n->sems, &s->hn);
    fence__list_append(&n->sem_list, &s->link);
    uint64_t last = 0;
    for (uint32_t i = 0; i < nwaits; i++) {
        int rc = read_wait(n, c, s, &last);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* Flag the slot locks: every lock named base#i with a semaphore base of
 * more than i permits.  (A lock the semaphore does not own under such a
 * name cannot exist: fence_fsm_check refuses the state afterwards if a
 * slot is missing or a semaphore is empty.) */
static int link_slots(fence_fsm *n)
{
    for (fence__link *p = n->lock_list.first; p != NULL; p = p->next) {
        fence__lock *k = LOCK_OF(p);
        uint16_t base_len;
        uint32_t slot;
        if (!fence__sem_split_slot(k->name, k->name_len, &base_len, &slot)) {
            continue;
        }
        fence__sem *s = fence__sem_find(n, k->name, base_len);
        if (s == NULL) {
            continue;
        }
        if (slot >= s->permits) {
            continue;
        }
        if (k->nwaiters != 0) {
            return FENCE_ST_INVALID;
        }
        FENCE_ASSERT(((s->used[slot / 64] >> (slot % 64)) & 1u) == 0);
        k->sem = s;
        k->slot = slot;
        s->used[slot / 64] |= (uint64_t)1 << (slot % 64);
        s->nslots++;
    }
    return 0;
}

/* The slots of the dedup records' results. */
static int read_slot_records(fence_fsm *n, cur *c)
{
    if (!has(c, 4)) {
        return FENCE_ST_INVALID;
    }
    uint32_t count = fence__get_u32(c->p);
    c->p += 4;
    if (count > n->dedup.count || !has(c, (size_t)count * 8)) {
        return FENCE_ST_INVALID;
    }
    fence__link *q = n->dedup_list.first;
    uint32_t at = 0;
    for (uint32_t i = 0; i < count; i++) {
        uint32_t pos = fence__get_u32(c->p);
        uint32_t slot = fence__get_u32(c->p + 4);
        c->p += 8;
        if (pos < at || pos >= n->dedup.count || slot == 0 || slot >= FENCE_SEM_PERMITS_MAX) {
            return FENCE_ST_INVALID;
        }
        while (at < pos) {
            q = q->next;
            at++;
        }
        FENCE_ASSERT(q != NULL);
        DEDUP_OF(q)->result.slot = slot;
        q = q->next;
        at++;
    }
    return 0;
}

int fence__sem_snap_read(fence_fsm *n, const uint8_t **p, const uint8_t *end)
{
    cur c = {*p, end};
    if (!has(&c, 4)) {
        return FENCE_ST_INVALID;
    }
    uint32_t count = fence__get_u32(c.p);
    c.p += 4;
    if (count > (size_t)(c.end - c.p) / (SEM_FIXED + 1)) {
        return FENCE_ST_INVALID;
    }
    fence__htab_reserve(n, &n->sems, count);
    for (uint32_t i = 0; i < count; i++) {
        int rc = read_sem(n, &c);
        if (rc != 0) {
            return rc;
        }
    }
    int rc = link_slots(n);
    if (rc != 0) {
        return rc;
    }
    rc = read_slot_records(n, &c);
    if (rc != 0) {
        return rc;
    }
    if (n->n_sem_waits > 0) {
        sort_waits(&n->wait_list, offsetof(fence__wait, wlink));
        for (fence__link *q = n->lease_list.first; q != NULL; q = q->next) {
            fence__lease *l = LEASE_OF(q);
            if (l->nwaits > 1) {
                sort_waits(&l->waits, offsetof(fence__wait, llink));
            }
        }
    }
    *p = c.p;
    return 0;
}
