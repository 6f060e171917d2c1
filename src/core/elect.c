/* Leader election (core/elect.h): the ELECT_* commands, the hooks the lock
 * machinery calls when an election's lock changes hands, the invariants,
 * and the snapshot section "elect".  An election is a lock object with an
 * fence__elect attached; its candidates are ordinary waits carrying a
 * fence__cand, so queueing, timeouts, leases, lock-delay, CANCEL, REQID
 * and LEADER_START's rebase are the lock's. */
#include <string.h>

#include "base/bytes.h"
#include "base/hash.h"
#include "core/elect.h"
#include "core/fsm_int.h"

/* ---- Values and revisions --------------------------------------------------- */

/* A copy of a value (fence__alloc stops the process on failure in apply;
 * NULL only in FENCE__OOM_RETURN mode). */
static fence__cand *cand_new(fence_fsm *f, const uint8_t *v, uint32_t len)
{
    FENCE_ASSERT(len <= FENCE_ELECT_VALUE_MAX);
    FENCE_ASSERT(len == 0 || v != NULL);
    fence__cand *c = fence__alloc(f, sizeof(*c) + len);
    if (c == NULL) {
        return NULL;
    }
    c->len = len;
    if (len > 0) {
        memcpy(c->bytes, v, len);
    }
    return c;
}

/* The election changed: it takes the next revision. */
static void bump(fence_fsm *f, fence__elect *el)
{
    FENCE_ASSERT(f->elect_rev < UINT64_MAX);
    el->revision = ++f->elect_rev;
}

/* The tomb slot of a name (unkeyed, so that every replica agrees). */
static uint32_t tomb_slot(const uint8_t *name, uint16_t len)
{
    return (uint32_t)(fence__fnv1a64(name, len) % FENCE__ELECT_TOMBS);
}

static bool name_ok(const fence_cmd *c)
{
    return c->name != NULL && c->name_len >= 1 && c->name_len <= FENCE_NAME_MAX;
}

static bool value_ok(const fence_cmd *c)
{
    return c->value_len <= FENCE_ELECT_VALUE_MAX && (c->value_len == 0 || c->value != NULL);
}

/* Attach a new election to a fresh lock object. */
static fence__elect *elect_attach(fence_fsm *f, fence__lock *k)
{
    FENCE_ASSERT(k->elect == NULL);
    fence__elect *el = fence__alloc(f, sizeof(*el));
    if (el == NULL) {
        return NULL;
    }
    memset(el, 0, sizeof(*el));
    k->elect = el;
    f->nelect++;
    return el;
}

/* ---- Hooks of the lock machinery ---------------------------------------- */

void fence__elect_won(fence_fsm *f, fence__lock *k, fence__wait *w)
{
    fence__elect *el = k->elect;
    if (el == NULL) {
        FENCE_ASSERT(w->cand == NULL);
        return;
    }
    FENCE_ASSERT(w->cand != NULL);
    FENCE_ASSERT(el->value == NULL);
    FENCE_ASSERT(k->holder == w->lease);
    el->value = w->cand;
    w->cand = NULL;
    bump(f, el);
}

void fence__elect_lost(fence_fsm *f, fence__lock *k)
{
    fence__elect *el = k->elect;
    if (el == NULL) {
        return;
    }
    FENCE_ASSERT(k->holder == NULL);
    FENCE_ASSERT(el->value != NULL);
    fence__free(f, el->value);
    el->value = NULL;
    bump(f, el);
}

void fence__elect_cand_free(fence_fsm *f, fence__wait *w)
{
    fence__free(f, w->cand);
    w->cand = NULL;
}

void fence__elect_lock_gone(fence_fsm *f, fence__lock *k)
{
    fence__elect *el = k->elect;
    if (el == NULL) {
        return;
    }
    uint32_t s = tomb_slot(k->name, k->name_len);
    if (el->revision > f->elect_tomb[s]) {
        f->elect_tomb[s] = el->revision;
    }
    fence__free(f, el->value);
    fence__free(f, el);
    k->elect = NULL;
    FENCE_ASSERT(f->nelect > 0);
    f->nelect--;
}

void fence__elect_free_all(fence_fsm *f)
{
    for (fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        fence__elect_cand_free(f, WAIT_OF(p));
    }
    for (fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        fence__lock *k = LOCK_OF(p);
        if (k->elect != NULL) {
            fence__free(f, k->elect->value);
            fence__free(f, k->elect);
            k->elect = NULL;
        }
    }
    f->nelect = 0;
}

/* ---- Commands -------------------------------------------------------------- */

/* ELECT_CAMPAIGN: elected at once, already the leader, queued, or NIL. */
void fence__elect_campaign(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c) || !value_ok(c) || c->wait_ms > FENCE_WAIT_MS_MAX) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    fence__lease *l = fence__lease_find(f, c->lease);
    if (l == NULL || !fence__lease_live(f, l)) {
        r->status = FENCE_ST_NOLEASE;
        return;
    }
    if (!fence__may_use(c, l)) {
        r->status = FENCE_ST_NOPERM;
        return;
    }
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if ((k != NULL && k->elect == NULL) || fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE; /* the name is a lock or a semaphore's */
        return;
    }
    if ((k == NULL || (k->holder != l && fence__wait_of(l, k) == NULL)) &&
        fence__quota_locks_full(f, c, 1)) {
        r->status = FENCE_ST_LIMIT;
        return;
    }
    if (k == NULL) {
        if (f->locks.count >= f->limits.locks_max) {
            r->status = FENCE_ST_LIMIT;
            return;
        }
        k = fence__lock_add(f, c->name, c->name_len, 0, NULL);
        if (k == NULL) {
            r->status = FENCE_ST_LIMIT; /* the heap's index range */
            return;
        }
        elect_attach(f, k);
    }
    fence__elect *el = k->elect;
    FENCE_ASSERT(el != NULL);
    r->lease = l->id;
    if (k->holder == l) {
        r->status = FENCE_ST_OK; /* already the leader: its token */
        r->token = k->token;
    } else if (k->holder == NULL && !k->in_delay) {
        FENCE_ASSERT(k->nwaiters == 0);
        r->status = FENCE_ST_OK;
        r->token = fence__grant(f, k, l);
        FENCE_ASSERT(el->value == NULL);
        el->value = cand_new(f, c->value, c->value_len);
        bump(f, el);
    } else {
        fence__wait *w = fence__wait_of(l, k);
        if (w != NULL) {
            r->status = FENCE_ST_QUEUED; /* joins its candidacy */
            r->wait_id = w->id;
        } else if (c->wait_ms == 0) {
            r->status = FENCE_ST_NIL;
            r->lease = 0;
        } else if ((w = fence__enqueue(f, l, k, c, r)) != NULL) {
            w->cand = cand_new(f, c->value, c->value_len);
        }
    }
    r->revision = f->elect_rev;
}

/* The election k of c's name with c->token as its leader's token: NULL and
 * r filled otherwise (value 0, or WRONGTYPE / NOPERM). */
static fence__lock *leader_of(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    r->status = FENCE_ST_OK;
    r->revision = f->elect_rev;
    fence__lock *k = fence__lock_find(f, c->name, c->name_len);
    if ((k != NULL && k->elect == NULL) || fence__sem_claims(f, c->name, c->name_len)) {
        r->status = FENCE_ST_WRONGTYPE;
        return NULL;
    }
    if (k == NULL || k->holder == NULL || k->token != c->token) {
        r->value = 0;
        return NULL;
    }
    if (!fence__may_use(c, k->holder)) {
        r->status = FENCE_ST_NOPERM;
        return NULL;
    }
    return k;
}

/* ELECT_PROCLAIM: the leader's new value. */
void fence__elect_proclaim(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c) || !value_ok(c)) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    fence__lock *k = leader_of(f, c, r);
    if (k == NULL) {
        return;
    }
    fence__elect *el = k->elect;
    fence__cand *v = cand_new(f, c->value, c->value_len);
    fence__free(f, el->value);
    el->value = v;
    bump(f, el);
    r->token = k->token;
    r->lease = k->holder->id;
    r->value = el->revision;
    r->revision = f->elect_rev;
}

/* ELECT_RESIGN: the leader steps down; the next candidate is elected. */
void fence__elect_resign(fence_fsm *f, const fence_cmd *c, fence_result *r)
{
    if (!name_ok(c)) {
        r->status = FENCE_ST_INVALID;
        return;
    }
    fence__lock *k = leader_of(f, c, r);
    if (k == NULL) {
        return;
    }
    fence__held_unlink(f, k);
    fence__elect_lost(f, k);
    fence__handoff(f, k); /* may destroy k */
    r->value = 1;
    r->revision = f->elect_rev;
}

/* ---- Queries --------------------------------------------------------------- */

int fence_fsm_elect_info(const fence_fsm *f, const uint8_t *name, uint16_t len,
                         fence_fsm_elect_state *out)
{
    FENCE_ASSERT(f != NULL);
    FENCE_ASSERT(out != NULL);
    memset(out, 0, sizeof(*out));
    if (name == NULL || len == 0 || len > FENCE_NAME_MAX) {
        return FENCE_ST_INVALID;
    }
    const fence__lock *k = fence__lock_find(f, name, len);
    if (k == NULL && fence__sem_claims(f, name, len)) {
        return FENCE_ST_WRONGTYPE; /* a semaphore's name */
    }
    if (k == NULL) {
        out->revision = f->elect_tomb[tomb_slot(name, len)];
        return 0;
    }
    if (k->elect == NULL) {
        return FENCE_ST_WRONGTYPE;
    }
    out->exists = true;
    out->revision = k->elect->revision;
    out->candidates = k->nwaiters;
    if (k->holder != NULL) {
        FENCE_ASSERT(k->elect->value != NULL);
        out->has_leader = true;
        out->token = k->token;
        out->lease = k->holder->id;
        out->deadline_ms = k->holder->hi.deadline_ms;
        out->value = k->elect->value->bytes;
        out->value_len = k->elect->value->len;
    }
    return 0;
}

uint64_t fence_fsm_elect_revision(const fence_fsm *f)
{
    return f->elect_rev;
}

bool fence_fsm_is_election(const fence_fsm *f, const uint8_t *name, uint16_t len)
{
    if (name == NULL || len == 0 || len > FENCE_NAME_MAX) {
        return false;
    }
    const fence__lock *k = fence__lock_find(f, name, len);
    return k != NULL && k->elect != NULL;
}

/* ---- Invariants -------------------------------------------------------------- */

const char *fence__elect_check(const fence_fsm *f)
{
    uint64_t n = 0;
    for (const fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        const fence__lock *k = LOCK_OF(p);
        const fence__elect *el = k->elect;
        if (el == NULL) {
            continue;
        }
        n++;
        if (el->revision == 0 || el->revision > f->elect_rev) {
            return "election revision out of range";
        }
        if ((el->value != NULL) != (k->holder != NULL)) {
            return "election value without a leader, or a leader without one";
        }
        if (el->value != NULL && el->value->len > FENCE_ELECT_VALUE_MAX) {
            return "election value too long";
        }
        for (const fence__link *q = k->queue.first; q != NULL; q = q->next) {
            const fence__wait *w = QWAIT_OF(q);
            if (w->cand == NULL || w->cand->len > FENCE_ELECT_VALUE_MAX) {
                return "election candidate without a value";
            }
            if (w->acquire) {
                return "election candidate from an ACQUIRE";
            }
        }
    }
    if (n != f->nelect) {
        return "election count wrong";
    }
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *w = WAIT_OF(p);
        /* A multi-lock's wait has no lock of its own (core/multi.c). */
        if ((w->lock == NULL || w->lock->elect == NULL) && w->cand != NULL) {
            return "a lock's waiter carries a candidate value";
        }
    }
    for (uint32_t i = 0; i < FENCE__ELECT_TOMBS; i++) {
        if (f->elect_tomb[i] > f->elect_rev) {
            return "gone election's revision above the counter";
        }
    }
    return NULL;
}
