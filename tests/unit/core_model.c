/* The reference model of the lock state machine (core_model.h), for
 * test_core_model.c: the same commands, results and events as src/core,
 * computed the plain way. */
#include "core_model.h"

#include <string.h>

#include "../lib/test.h"

/* REQUIRE only: test.h keeps its failure counters static, so a CHECK here
 * would count in this file's copy, not in the test program's. */
#undef CHECK
#undef CHECK_EQ_U64
#undef CHECK_EQ_I64
#undef CHECK_STR

const char *const names[NNAMES] = {"a", "b", "c", "dd"};

/* The same request (every field a command type can use)?  A request id
 * reused for a different request is refused with INVALID. */
static bool m_same_request(const fence_cmd *a, const fence_cmd *b)
{
    return a->type == b->type && a->lease == b->lease &&
           a->token == b->token && a->wait_id == b->wait_id &&
           a->ttl_ms == b->ttl_ms && a->wait_ms == b->wait_ms &&
           a->lock_delay_ms == b->lock_delay_ms &&
           a->name_len == b->name_len &&
           (a->name_len == 0 || memcmp(a->name, b->name, a->name_len) == 0);
}

uint32_t m_count_leases(const model *m)
{
    uint32_t n = 0;
    for (uint64_t i = 1; i < m->next_lease; i++) {
        n += m->leases[i].used;
    }
    return n;
}

static uint32_t m_count_locks(const model *m)
{
    uint32_t n = 0;
    for (int i = 0; i < NNAMES; i++) {
        n += m->locks[i].used;
    }
    return n;
}

uint32_t m_waiters(const model *m, int k)
{
    uint32_t n = 0;
    for (uint64_t i = 1; i < m->next_wait; i++) {
        n += m->waits[i].used && m->waits[i].lock == k;
    }
    return n;
}

static uint32_t m_count_waits(const model *m)
{
    uint32_t n = 0;
    for (uint64_t i = 1; i < m->next_wait; i++) {
        n += m->waits[i].used;
    }
    return n;
}

/* True when one more wait on lock k would pass a limit. */
static bool m_waits_full(const model *m, int k)
{
    return m_waiters(m, k) >= m->lim.waiters_max ||
           m_count_waits(m) >= m->lim.waits_max;
}

static void m_event(model *m, uint64_t wid, fence_result r)
{
    REQUIRE(m->nev < MAXEV);
    m->ev[m->nev].wait_id = wid;
    m->ev[m->nev].result = r;
    m->nev++;
    /* Every request answered QUEUED with this wait sees its outcome: the
     * one that queued it and any LOCK of the same lease that joined it. */
    for (uint32_t i = 0; i < m->ndedup; i++) {
        if (m->dedup[i].r.status == FENCE_ST_QUEUED &&
            m->dedup[i].r.wait_id == wid) {
            m->dedup[i].r = r;
        }
    }
}

static void m_drop_lock_if_unused(model *m, int k)
{
    mlock *l = &m->locks[k];
    if (l->used && l->holder == 0 && !l->in_delay && m_waiters(m, k) == 0) {
        memset(l, 0, sizeof(*l));
    }
}

static void m_lease_remove(model *m, uint64_t id, bool expired);

static void m_grant(model *m, int k, uint64_t lease)
{
    m->locks[k].used = true;
    m->locks[k].holder = lease;
    m->locks[k].token = ++m->last_token;
}

/* Lock k became available: first waiter (lowest wait id) whose lease is
 * live and whose wait has not timed out gets it. */
static void m_handoff(model *m, int k)
{
    for (uint64_t i = 1; i < m->next_wait; i++) {
        mwait *w = &m->waits[i];
        if (!w->used || w->lock != k) {
            continue;
        }
        if (w->deadline <= m->now || m->leases[w->lease].deadline <= m->now) {
            continue;
        }
        w->used = false;
        m_grant(m, k, w->lease);
        if (w->acquire) {
            m->leases[w->lease].deadline = m->now + m->leases[w->lease].ttl;
        }
        fence_result r = {.status = FENCE_ST_OK, .lease = w->lease,
                          .token = m->last_token, .wait_id = i};
        m_event(m, i, r);
        return;
    }
    m_drop_lock_if_unused(m, k);
}

static void m_fail_wait(model *m, uint64_t wid, uint8_t st, bool revoke)
{
    mwait *w = &m->waits[wid];
    w->used = false;
    fence_result r = {.status = st, .wait_id = wid};
    m_event(m, wid, r);
    m_drop_lock_if_unused(m, w->lock);
    if (w->acquire && revoke) {
        m_lease_remove(m, w->lease, false);
    }
}

static void m_lease_remove(model *m, uint64_t id, bool expired)
{
    mlease *l = &m->leases[id];
    for (;;) {
        int best = -1;
        for (int k = 0; k < NNAMES; k++) {
            if (m->locks[k].used && m->locks[k].holder == id &&
                (best < 0 || m->locks[k].token < m->locks[best].token)) {
                best = k;
            }
        }
        if (best < 0) {
            break;
        }
        m->locks[best].holder = 0;
        if (expired && l->delay > 0) {
            m->locks[best].in_delay = true;
            m->locks[best].delay_ms = l->delay;
            m->locks[best].delay_end = m->now + l->delay;
        } else {
            m_handoff(m, best);
        }
    }
    for (uint64_t i = 1; i < m->next_wait; i++) {
        if (m->waits[i].used && m->waits[i].lease == id) {
            m_fail_wait(m, i, FENCE_ST_NOLEASE, false);
        }
    }
    memset(l, 0, sizeof(*l));
}

/* The queued ACQUIRE wait of a dedicated lease, or 0. */
static uint64_t m_acq_wait(const model *m, uint64_t lease)
{
    for (uint64_t i = 1; i < m->next_wait; i++) {
        if (m->waits[i].used && m->waits[i].lease == lease &&
            m->waits[i].acquire) {
            return i;
        }
    }
    return 0;
}

static uint64_t m_lease_deadline(const model *m, uint64_t id)
{
    uint64_t d = m->now + m->leases[id].ttl;
    uint64_t w = m_acq_wait(m, id);
    if (w && m->waits[w].deadline > d) {
        d = m->waits[w].deadline;
    }
    return d;
}

/* The earliest due thing as (deadline, kind, id); false if none. */
bool m_next(const model *m, uint64_t *dl, int *kind, uint64_t *id)
{
    bool any = false;
#define CONSIDER(D, K, I)                                                   \
    do {                                                                    \
        if (!any || (D) < *dl || ((D) == *dl && (K) < *kind) ||             \
            ((D) == *dl && (K) == *kind && (I) < *id)) {                    \
            *dl = (D);                                                      \
            *kind = (K);                                                    \
            *id = (I);                                                      \
            any = true;                                                     \
        }                                                                   \
    } while (0)
    for (uint64_t i = 1; i < m->next_wait; i++) {
        if (m->waits[i].used) {
            CONSIDER(m->waits[i].deadline, 0, i);
        }
    }
    for (uint64_t i = 1; i < m->next_lease; i++) {
        if (m->leases[i].used) {
            CONSIDER(m->leases[i].deadline, 1, i);
        }
    }
    for (int k = 0; k < NNAMES; k++) {
        if (m->locks[k].used && m->locks[k].in_delay) {
            CONSIDER(m->locks[k].delay_end, 2, m->locks[k].token);
        }
    }
#undef CONSIDER
    return any;
}

static int m_lock_by_token(const model *m, uint64_t token)
{
    for (int k = 0; k < NNAMES; k++) {
        if (m->locks[k].used && m->locks[k].token == token) {
            return k;
        }
    }
    return -1;
}

static void m_advance(model *m, uint64_t now)
{
    if (now > m->now) {
        m->now = now;
    }
    uint64_t dl = 0, id = 0;
    int kind = 0;
    while (m_next(m, &dl, &kind, &id) && dl <= m->now) {
        if (kind == 0) {
            m_fail_wait(m, id, FENCE_ST_NIL, true);
        } else if (kind == 1) {
            m_lease_remove(m, id, true);
        } else {
            int k = m_lock_by_token(m, id);
            REQUIRE(k >= 0);
            m->locks[k].in_delay = false;
            m->locks[k].delay_ms = 0;
            m->locks[k].delay_end = 0;
            m_handoff(m, k);
        }
    }
}

static int m_name(const fence_cmd *c)
{
    for (int k = 0; k < NNAMES; k++) {
        if (c->name_len == strlen(names[k]) &&
            memcmp(c->name, names[k], c->name_len) == 0) {
            return k;
        }
    }
    return -1;
}

bool m_live(const model *m, uint64_t id)
{
    return id > 0 && id < m->next_lease && m->leases[id].used &&
           m->leases[id].deadline > m->now;
}

static fence_result m_enqueue(model *m, int k, uint64_t lease,
                              const fence_cmd *c, bool acquire)
{
    fence_result r = {0};
    uint64_t id = m->next_wait++;
    REQUIRE(id < MAXID);
    mwait *w = &m->waits[id];
    w->used = true;
    w->lease = lease;
    w->lock = k;
    w->wait_ms = c->wait_ms;
    w->deadline = m->now + c->wait_ms;
    w->acquire = acquire;
    w->has_req = (c->flags & FENCE_CMD_F_REQID) != 0;
    w->req = c->req_id;
    r.status = FENCE_ST_QUEUED;
    r.wait_id = id;
    r.lease = lease;
    return r;
}

/* Whether command c may act on lease id: the owner, or an admin. */
static bool m_may(const model *m, const fence_cmd *c, uint64_t id)
{
    return m->leases[id].owner == c->owner || (c->flags & FENCE_CMD_F_ADMIN) != 0;
}

static fence_result m_dispatch(model *m, const fence_cmd *c)
{
    fence_result r = {0};
    bool name_ok = c->name_len >= 1 && c->name_len <= FENCE_NAME_MAX;
    int k = name_ok ? m_name(c) : -1;
    switch (c->type) {
    case FENCE_CMD_LEADER_START:
        if (!c->limits.leases_max || !c->limits.locks_max ||
            !c->limits.waiters_max || !c->limits.waits_max) {
            r.status = FENCE_ST_INVALID;
            break;
        }
        m->lim = c->limits;
        while (m->ndedup > m->lim.dedup_max) {
            memmove(&m->dedup[0], &m->dedup[1],
                    (m->ndedup - 1) * sizeof(m->dedup[0]));
            m->ndedup--;
        }
        for (uint64_t i = 1; i < m->next_wait; i++) {
            if (m->waits[i].used) {
                m->waits[i].deadline = m->now + m->waits[i].wait_ms;
            }
        }
        for (uint64_t i = 1; i < m->next_lease; i++) {
            if (m->leases[i].used) {
                m->leases[i].deadline = m_lease_deadline(m, i);
            }
        }
        for (int j = 0; j < NNAMES; j++) {
            if (m->locks[j].used && m->locks[j].in_delay) {
                m->locks[j].delay_end = m->now + m->locks[j].delay_ms;
            }
        }
        r.status = FENCE_ST_OK;
        break;
    case FENCE_CMD_TICK:
        r.status = FENCE_ST_OK;
        break;
    case FENCE_CMD_LEASE_GRANT:
        if (c->ttl_ms < FENCE_TTL_MS_MIN || c->ttl_ms > FENCE_TTL_MS_MAX ||
            c->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX) {
            r.status = FENCE_ST_INVALID;
        } else if (m_count_leases(m) >= m->lim.leases_max) {
            r.status = FENCE_ST_LIMIT;
        } else {
            uint64_t id = m->next_lease++;
            REQUIRE(id < MAXID);
            m->leases[id] = (mlease){true, c->ttl_ms, c->lock_delay_ms,
                                     m->now + c->ttl_ms, false, c->owner};
            r.status = FENCE_ST_OK;
            r.lease = id;
            r.value = c->ttl_ms;
        }
        break;
    case FENCE_CMD_LEASE_KEEPALIVE:
        if (!m_live(m, c->lease)) {
            r.status = FENCE_ST_NOLEASE;
        } else if (!m_may(m, c, c->lease)) {
            r.status = FENCE_ST_NOPERM;
        } else {
            m->leases[c->lease].deadline = m_lease_deadline(m, c->lease);
            r.status = FENCE_ST_OK;
            r.lease = c->lease;
            r.value = m->leases[c->lease].ttl;
        }
        break;
    case FENCE_CMD_LEASE_REVOKE:
        if (m_live(m, c->lease) && !m_may(m, c, c->lease)) {
            r.status = FENCE_ST_NOPERM;
            break;
        }
        if (m_live(m, c->lease)) {
            m_lease_remove(m, c->lease, false);
        }
        r.status = FENCE_ST_OK;
        break;
    case FENCE_CMD_LOCK:
        if (!name_ok || c->wait_ms > FENCE_WAIT_MS_MAX) {
            r.status = FENCE_ST_INVALID;
            break;
        }
        if (!m_live(m, c->lease)) {
            r.status = FENCE_ST_NOLEASE;
            break;
        }
        if (!m_may(m, c, c->lease)) {
            r.status = FENCE_ST_NOPERM;
            break;
        }
        REQUIRE(k >= 0);
        if (!m->locks[k].used) {
            if (m_count_locks(m) >= m->lim.locks_max) {
                r.status = FENCE_ST_LIMIT;
                break;
            }
            m_grant(m, k, c->lease);
            r.status = FENCE_ST_OK;
            r.token = m->last_token;
            r.lease = c->lease;
            break;
        }
        if (m->locks[k].holder == c->lease) {
            r.status = FENCE_ST_OK;
            r.token = m->locks[k].token;
            r.lease = c->lease;
            break;
        }
        if (m->locks[k].holder == 0 && !m->locks[k].in_delay) {
            m_grant(m, k, c->lease);
            r.status = FENCE_ST_OK;
            r.token = m->last_token;
            r.lease = c->lease;
            break;
        }
        for (uint64_t i = 1; i < m->next_wait; i++) {
            if (m->waits[i].used && m->waits[i].lock == k &&
                m->waits[i].lease == c->lease) {
                r.status = FENCE_ST_QUEUED;
                r.wait_id = i;
                r.lease = c->lease;
                return r;
            }
        }
        if (c->wait_ms == 0) {
            r.status = FENCE_ST_NIL;
        } else if (m_waits_full(m, k)) {
            r.status = FENCE_ST_LIMIT;
        } else {
            r = m_enqueue(m, k, c->lease, c, false);
        }
        break;
    case FENCE_CMD_UNLOCK:
        if (!name_ok) {
            r.status = FENCE_ST_INVALID;
            break;
        }
        r.status = FENCE_ST_OK;
        if (k >= 0 && m->locks[k].used && m->locks[k].holder != 0 &&
            m->locks[k].token == c->token) {
            uint64_t holder = m->locks[k].holder;
            if (!m_may(m, c, holder)) {
                r.status = FENCE_ST_NOPERM;
                break;
            }
            m->locks[k].holder = 0;
            m_handoff(m, k);
            if (m->leases[holder].dedicated) {
                m_lease_remove(m, holder, false);
            }
            r.value = 1;
        }
        break;
    case FENCE_CMD_ACQUIRE: {
        if (!name_ok || c->ttl_ms < FENCE_TTL_MS_MIN ||
            c->ttl_ms > FENCE_TTL_MS_MAX ||
            c->lock_delay_ms > FENCE_LOCK_DELAY_MS_MAX ||
            c->wait_ms > FENCE_WAIT_MS_MAX) {
            r.status = FENCE_ST_INVALID;
            break;
        }
        if (m_count_leases(m) >= m->lim.leases_max) {
            r.status = FENCE_ST_LIMIT;
            break;
        }
        REQUIRE(k >= 0);
        bool exists = m->locks[k].used;
        bool free_now = !exists ||
                        (m->locks[k].holder == 0 && !m->locks[k].in_delay);
        if (!free_now) {
            if (c->wait_ms == 0) {
                r.status = FENCE_ST_NIL;
                break;
            }
            if (m_waits_full(m, k)) {
                r.status = FENCE_ST_LIMIT;
                break;
            }
        } else if (!exists && m_count_locks(m) >= m->lim.locks_max) {
            r.status = FENCE_ST_LIMIT;
            break;
        }
        uint64_t id = m->next_lease++;
        REQUIRE(id < MAXID);
        m->leases[id] = (mlease){true, c->ttl_ms, c->lock_delay_ms,
                                 m->now + c->ttl_ms, true, c->owner};
        if (free_now) {
            m_grant(m, k, id);
            r.status = FENCE_ST_OK;
            r.token = m->last_token;
            r.lease = id;
        } else {
            r = m_enqueue(m, k, id, c, true);
            m->leases[id].deadline = m_lease_deadline(m, id);
        }
        break;
    }
    case FENCE_CMD_CANCEL:
        if (c->wait_id > 0 && c->wait_id < m->next_wait &&
            m->waits[c->wait_id].used) {
            m_fail_wait(m, c->wait_id, FENCE_ST_NIL, true);
            /* Every request attached to a cancelled wait is forgotten
             * (the one that queued it and those that joined it): a retry
             * queues afresh.  The wait just resolved them to NIL. */
            for (uint32_t i = 0; i < m->ndedup;) {
                if (m->dedup[i].r.status == FENCE_ST_NIL &&
                    m->dedup[i].r.wait_id == c->wait_id) {
                    memmove(&m->dedup[i], &m->dedup[i + 1],
                            (m->ndedup - i - 1) * sizeof(m->dedup[0]));
                    m->ndedup--;
                } else {
                    i++;
                }
            }
        }
        r.status = FENCE_ST_OK;
        break;
    default:
        r.status = FENCE_ST_INVALID;
        break;
    }
    return r;
}

static fence_result m_apply_cmd(model *m, const fence_cmd *c);

fence_result m_apply(model *m, uint64_t now, const fence_cmd *c)
{
    if (c->type == FENCE_CMD_LEADER_START) {
        if (now > m->now) {
            m->now = now;
        }
    } else {
        m_advance(m, now);
    }
    fence_result r = m_apply_cmd(m, c);
    m_advance(m, m->now); /* an unapplied LEADER_START leaves work due */
    return r;
}

static fence_result m_apply_cmd(model *m, const fence_cmd *c)
{
    fence_result r = {0};
    if (c->flags & ~FENCE_CMD_F_ALL) {
        r.status = FENCE_ST_INVALID;
        return r;
    }
    bool rec = false;
    if (c->flags & FENCE_CMD_F_REQID) {
        for (uint32_t i = 0; i < m->ndedup; i++) {
            if (m->dedup[i].req == c->req_id && m->dedup[i].cmd.owner == c->owner) {
                if (!m_same_request(&m->dedup[i].cmd, c)) {
                    r.status = FENCE_ST_INVALID;
                    return r;
                }
                return m->dedup[i].r;
            }
        }
        if (m->lim.dedup_max > 0) {
            rec = true;
            if (m->ndedup >= m->lim.dedup_max) {
                memmove(&m->dedup[0], &m->dedup[1],
                        (m->ndedup - 1) * sizeof(m->dedup[0]));
                m->ndedup--;
            }
        }
    }
    r = m_dispatch(m, c);
    if (rec) {
        REQUIRE(m->ndedup < 64);
        m->dedup[m->ndedup].req = c->req_id;
        m->dedup[m->ndedup].cmd = *c;
        m->dedup[m->ndedup].r = r;
        m->ndedup++;
        while (m->ndedup > m->lim.dedup_max) {
            memmove(&m->dedup[0], &m->dedup[1],
                    (m->ndedup - 1) * sizeof(m->dedup[0]));
            m->ndedup--;
        }
    }
    return r;
}
