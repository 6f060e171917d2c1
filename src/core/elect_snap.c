/* The snapshot section "elect" (core/elect.h; called by snapshot.c for
 * version 5 on, after the version-4 layout and the sections of rw and
 * multi, before sem's).  Integers little-endian:
 *   u32 count (elections)
 *   u64 revision counter
 *   u32 ntombs, then per non-zero tomb slot (ascending): u16 slot | u64 revision
 *   count x election (ascending lock token, the key of the locks section):
 *     u64 lock token | u64 revision
 *     | (the lock has a holder) u32 len | the leader's value
 *     | u32 candidates (= the lock's waiters), then per candidate in FIFO
 *       order: u32 len | value
 * Restore trusts nothing: every election names a lock of the locks
 * section, in order, every waiter of it gets a value, and
 * fence_fsm_check runs last (snapshot.c). */
#include <string.h>

#include "base/bytes.h"
#include "core/elect.h"
#include "core/fsm_int.h"

/* Bytes of the section. */
size_t fence__elect_snap_size(const fence_fsm *f)
{
    size_t n = 4 + 8 + 4;
    for (uint32_t i = 0; i < FENCE__ELECT_TOMBS; i++) {
        if (f->elect_tomb[i] != 0) {
            n += 2 + 8;
        }
    }
    for (const fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        const fence__lock *k = LOCK_OF(p);
        if (k->elect == NULL) {
            continue;
        }
        n += 8 + 8 + 4;
        if (k->elect->value != NULL) {
            n += 4 + k->elect->value->len;
        }
        for (const fence__link *q = k->queue.first; q != NULL; q = q->next) {
            n += 4 + QWAIT_OF(q)->cand->len;
        }
    }
    return n;
}

/* A bounded cursor over the caller's buffer. */
typedef struct cur {
    uint8_t *p;
    uint8_t *end;
} cur;

static uint8_t *room(cur *w, size_t n)
{
    FENCE_ASSERT((size_t)(w->end - w->p) >= n);
    uint8_t *at = w->p;
    w->p += n;
    return at;
}

static void put_value(cur *w, const fence__cand *v)
{
    fence__put_u32(room(w, 4), v->len);
    if (v->len > 0) {
        memcpy(room(w, v->len), v->bytes, v->len);
    }
}

size_t fence__elect_snap_write(const fence_fsm *f, uint8_t *p, size_t cap)
{
    cur w = {p, p + cap};
    fence__put_u32(room(&w, 4), (uint32_t)f->nelect);
    fence__put_u64(room(&w, 8), f->elect_rev);
    uint32_t ntombs = 0;
    for (uint32_t i = 0; i < FENCE__ELECT_TOMBS; i++) {
        ntombs += f->elect_tomb[i] != 0;
    }
    fence__put_u32(room(&w, 4), ntombs);
    for (uint32_t i = 0; i < FENCE__ELECT_TOMBS; i++) {
        if (f->elect_tomb[i] != 0) {
            fence__put_u16(room(&w, 2), (uint16_t)i);
            fence__put_u64(room(&w, 8), f->elect_tomb[i]);
        }
    }
    uint64_t written = 0;
    for (const fence__link *lk = f->lock_list.first; lk != NULL; lk = lk->next) {
        const fence__lock *k = LOCK_OF(lk);
        if (k->elect == NULL) {
            continue;
        }
        written++;
        fence__put_u64(room(&w, 8), k->token);
        fence__put_u64(room(&w, 8), k->elect->revision);
        FENCE_ASSERT((k->elect->value != NULL) == (k->holder != NULL));
        if (k->elect->value != NULL) {
            put_value(&w, k->elect->value);
        }
        fence__put_u32(room(&w, 4), k->nwaiters);
        for (const fence__link *q = k->queue.first; q != NULL; q = q->next) {
            put_value(&w, QWAIT_OF(q)->cand);
        }
    }
    FENCE_ASSERT(written == f->nelect);
    return (size_t)(w.p - p);
}

/* ---- Reading ------------------------------------------------------------------ */

typedef struct rcur {
    const uint8_t *p;
    const uint8_t *end;
    bool ok;
} rcur;

static const uint8_t *take(rcur *r, size_t n)
{
    if (!r->ok || (size_t)(r->end - r->p) < n) {
        r->ok = false;
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += n;
    return at;
}

static uint64_t get16(rcur *r)
{
    const uint8_t *p = take(r, 2);
    return p != NULL ? fence__get_u16(p) : 0;
}

static uint64_t get32(rcur *r)
{
    const uint8_t *p = take(r, 4);
    return p != NULL ? fence__get_u32(p) : 0;
}

static uint64_t get64(rcur *r)
{
    const uint8_t *p = take(r, 8);
    return p != NULL ? fence__get_u64(p) : 0;
}

/* A value: *out set (NULL on a malformed one); FENCE_ST_LIMIT for lack of
 * memory, FENCE_ST_INVALID when malformed. */
static int get_value(fence_fsm *n, rcur *r, fence__cand **out)
{
    *out = NULL;
    uint64_t len = get32(r);
    if (!r->ok || len > FENCE_ELECT_VALUE_MAX) {
        return FENCE_ST_INVALID;
    }
    const uint8_t *b = take(r, (size_t)len);
    if (!r->ok) {
        return FENCE_ST_INVALID;
    }
    fence__cand *v = fence__alloc(n, sizeof(*v) + (size_t)len);
    if (v == NULL) {
        return FENCE_ST_LIMIT;
    }
    v->len = (uint32_t)len;
    if (len > 0) {
        memcpy(v->bytes, b, (size_t)len);
    }
    *out = v;
    return 0;
}

int fence__elect_snap_read(fence_fsm *n, const uint8_t *p, size_t len, size_t *used)
{
    rcur r = {p, p + len, true};
    uint64_t count = get32(&r);
    uint64_t rev = get64(&r);
    uint64_t ntombs = get32(&r);
    if (!r.ok || count > n->locks.count || rev == UINT64_MAX ||
        ntombs > FENCE__ELECT_TOMBS) {
        return FENCE_ST_INVALID;
    }
    n->elect_rev = rev;
    int64_t last_slot = -1;
    for (uint64_t i = 0; i < ntombs; i++) {
        uint64_t slot = get16(&r);
        uint64_t t = get64(&r);
        if (!r.ok || (int64_t)slot <= last_slot || slot >= FENCE__ELECT_TOMBS ||
            t == 0 || t > rev) {
            return FENCE_ST_INVALID;
        }
        n->elect_tomb[slot] = t;
        last_slot = (int64_t)slot;
    }
    fence__link *lk = n->lock_list.first;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t token = get64(&r);
        uint64_t erev = get64(&r);
        if (!r.ok || erev == 0 || erev > rev) {
            return FENCE_ST_INVALID;
        }
        while (lk != NULL && LOCK_OF(lk)->token < token) {
            lk = lk->next;
        }
        if (lk == NULL || LOCK_OF(lk)->token != token) {
            return FENCE_ST_INVALID;
        }
        fence__lock *k = LOCK_OF(lk);
        lk = lk->next; /* tokens ascend strictly: never the same lock twice */
        fence__elect *el = fence__alloc(n, sizeof(*el));
        if (el == NULL) {
            return FENCE_ST_LIMIT;
        }
        memset(el, 0, sizeof(*el));
        k->elect = el;
        n->nelect++;
        el->revision = erev;
        int rc;
        if (k->holder != NULL && (rc = get_value(n, &r, &el->value)) != 0) {
            return rc;
        }
        uint64_t ncands = get32(&r);
        if (!r.ok || ncands != k->nwaiters) {
            return FENCE_ST_INVALID;
        }
        for (fence__link *q = k->queue.first; q != NULL; q = q->next) {
            fence__wait *w = QWAIT_OF(q);
            if (w->acquire) {
                return FENCE_ST_INVALID;
            }
            if ((rc = get_value(n, &r, &w->cand)) != 0) {
                return rc;
            }
        }
    }
    *used = (size_t)(r.p - p);
    return 0;
}
