/* Snapshots: the whole state as deterministic bytes, and a restore that
 * trusts nothing.
 *
 * Layout (integers little-endian):
 *   "FNCS" | u32 version (2)
 *   u64 now_ms | u64 last_token | u64 next_lease_id | u64 next_wait_id
 *   u32 leases_max | u32 locks_max | u32 waiters_max | u32 dedup_max
 *   u32 nleases, then per lease (ascending id):
 *     u64 id | u64 ttl_ms | u64 lock_delay_ms | u64 deadline_ms | u8 dedicated
 *   u32 nlocks, then per lock (ascending current token; tokens are unique,
 *   and the lock's key in the snapshot):
 *     u16 name_len | name | u64 token | u64 holder lease (0: none)
 *     | u8 in_delay | u64 delay_ms | u64 delay_end_ms
 *   u32 nwaits, then per wait (ascending id, which is also FIFO order):
 *     u64 id | u64 lease | u64 lock token | u64 wait_ms | u64 deadline_ms
 *     | u8 flags (1: ACQUIRE, 2: has req_id) | u64 req_id
 *   u32 ndedup, then per record (oldest first: the eviction order):
 *     u64 req_id | u64 request fingerprint | u8 status | u64 lease
 *     | u64 token | u64 wait_id | u64 value
 *   u32 CRC32C of everything before it.
 */
#include <string.h>

#include "core/fsm_int.h"

#define SNAP_MAGIC "FNCS"
#define SNAP_VERSION 2u
#define SNAP_HEADER (4 + 4 + 8 * 4 + 4 * 4)
#define SNAP_LEASE (8 * 4 + 1)
#define SNAP_LOCK_FIXED (2 + 8 + 8 + 1 + 8 + 8)
#define SNAP_WAIT (8 * 5 + 1 + 8)
#define SNAP_DEDUP (8 + 8 + 1 + 8 * 4)
#define SNAP_WAIT_F_ACQUIRE 0x1
#define SNAP_WAIT_F_REQ 0x2

/* Furthest any deadline may lie beyond now in a valid state. */
#define SNAP_HORIZON_MS (FENCE_TTL_MS_MAX + FENCE_WAIT_MS_MAX)

/* CRC32C, reflected polynomial 0x82F63B78.  The byte table is built on the
 * stack at each call (2048 shift steps, negligible next to a snapshot), so
 * the core keeps no global state; then one lookup per byte. */
uint32_t fence__crc32c(const uint8_t *p, size_t n)
{
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int b = 0; b < 8; b++) {
            c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
        }
        table[i] = c;
    }
    uint32_t crc = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        crc = (crc >> 8) ^ table[(crc ^ p[i]) & 0xffu];
    }
    return crc ^ 0xffffffffu;
}

/* ---- Writing -------------------------------------------------------------- */

/* A bounded output cursor. */
typedef struct wbuf {
    uint8_t *p;   /* next byte to write */
    uint8_t *end; /* one past the last byte available */
} wbuf;

/* Append n bytes (the size was computed beforehand, so it must fit). */
static void put(wbuf *w, const void *src, size_t n)
{
    FENCE_ASSERT((size_t)(w->end - w->p) >= n);
    if (n > 0) {
        memcpy(w->p, src, n);
    }
    w->p += n;
}

/* Append an integer of `bytes` bytes, little-endian. */
static void put_le(wbuf *w, uint64_t v, int bytes)
{
    uint8_t b[8];
    for (int i = 0; i < bytes; i++) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
    put(w, b, (size_t)bytes);
}

/* Bytes needed for a snapshot of the current state. */
size_t fence_fsm_snapshot_size(const fence_fsm *f)
{
    size_t n = SNAP_HEADER + 4 * 4 + 4;
    n += (size_t)f->leases.count * SNAP_LEASE;
    for (const fence__lock *k = f->lock_head; k != NULL; k = k->tnext) {
        n += SNAP_LOCK_FIXED + k->name_len;
    }
    n += (size_t)f->waits.count * SNAP_WAIT;
    n += (size_t)f->dedup.count * SNAP_DEDUP;
    return n;
}

/* Write the snapshot into buf; returns the length written. */
size_t fence_fsm_snapshot(const fence_fsm *f, uint8_t *buf, size_t cap)
{
    size_t size = fence_fsm_snapshot_size(f);
    FENCE_ASSERT(buf != NULL);
    FENCE_ASSERT(cap >= size);
    wbuf w = {buf, buf + cap};
    put(&w, SNAP_MAGIC, 4);
    put_le(&w, SNAP_VERSION, 4);
    put_le(&w, f->now_ms, 8);
    put_le(&w, f->last_token, 8);
    put_le(&w, f->next_lease_id, 8);
    put_le(&w, f->next_wait_id, 8);
    put_le(&w, f->limits.leases_max, 4);
    put_le(&w, f->limits.locks_max, 4);
    put_le(&w, f->limits.waiters_max, 4);
    put_le(&w, f->limits.dedup_max, 4);
    put_le(&w, f->leases.count, 4);
    uint64_t last = 0;
    for (const fence__lease *l = f->lease_head; l != NULL; l = l->next) {
        FENCE_ASSERT(l->id > last);
        FENCE_ASSERT(l->id < f->next_lease_id);
        last = l->id;
        put_le(&w, l->id, 8);
        put_le(&w, l->ttl_ms, 8);
        put_le(&w, l->lock_delay_ms, 8);
        put_le(&w, l->hi.deadline_ms, 8);
        put_le(&w, l->dedicated ? 1 : 0, 1);
    }
    put_le(&w, f->locks.count, 4);
    last = 0;
    for (const fence__lock *k = f->lock_head; k != NULL; k = k->tnext) {
        FENCE_ASSERT(k->token > last);
        FENCE_ASSERT(k->token <= f->last_token);
        FENCE_ASSERT((k->holder != NULL) != k->in_delay);
        last = k->token;
        put_le(&w, k->name_len, 2);
        put(&w, k->name, k->name_len);
        put_le(&w, k->token, 8);
        put_le(&w, k->holder ? k->holder->id : 0, 8);
        put_le(&w, k->in_delay ? 1 : 0, 1);
        put_le(&w, k->in_delay ? k->delay_ms : 0, 8);
        put_le(&w, k->in_delay ? k->hi.deadline_ms : 0, 8);
    }
    put_le(&w, f->waits.count, 4);
    last = 0;
    for (const fence__wait *x = f->wait_head; x != NULL; x = x->wnext) {
        FENCE_ASSERT(x->id > last);
        FENCE_ASSERT(x->lock->holder != x->lease);
        FENCE_ASSERT(x->has_req || x->req_id == 0);
        last = x->id;
        put_le(&w, x->id, 8);
        put_le(&w, x->lease->id, 8);
        put_le(&w, x->lock->token, 8);
        put_le(&w, x->wait_ms, 8);
        put_le(&w, x->hi.deadline_ms, 8);
        put_le(&w, (x->acquire ? SNAP_WAIT_F_ACQUIRE : 0) |
                       (x->has_req ? SNAP_WAIT_F_REQ : 0), 1);
        put_le(&w, x->req_id, 8);
    }
    put_le(&w, f->dedup.count, 4);
    FENCE_ASSERT(f->dedup.count <= f->limits.dedup_max);
    for (const fence__dedup *d = f->dd_head; d != NULL; d = d->next) {
        FENCE_ASSERT(d->result.status <= FENCE_ST_INVALID);
        put_le(&w, d->req_id, 8);
        put_le(&w, d->fp, 8);
        put_le(&w, d->result.status, 1);
        put_le(&w, d->result.lease, 8);
        put_le(&w, d->result.token, 8);
        put_le(&w, d->result.wait_id, 8);
        put_le(&w, d->result.value, 8);
    }
    size_t body = (size_t)(w.p - buf);
    put_le(&w, fence__crc32c(buf, body), 4);
    FENCE_ASSERT((size_t)(w.p - buf) == size);
    return size;
}

/* ---- Reading -------------------------------------------------------------- */

/* A bounded input cursor; ok turns false on the first short read. */
typedef struct rbuf {
    const uint8_t *p;   /* next byte to read */
    const uint8_t *end; /* one past the last byte */
    bool ok;            /* false once a read ran past the end */
} rbuf;

/* Read an integer of `bytes` bytes, little-endian (0 when short). */
static uint64_t get_le(rbuf *r, int bytes)
{
    if (!r->ok || (size_t)(r->end - r->p) < (size_t)bytes) {
        r->ok = false;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v |= (uint64_t)r->p[i] << (8 * i);
    }
    r->p += bytes;
    return v;
}

/* Bytes left to read. */
static size_t left(const rbuf *r)
{
    return r->ok ? (size_t)(r->end - r->p) : 0;
}

/* Find a lock by token in an array sorted by token; NULL if absent. */
static fence__lock *lock_by_token(fence__lock **v, uint32_t n, uint64_t token)
{
    uint32_t lo = 0;
    uint32_t hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (v[mid]->token < token) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return (lo < n && v[lo]->token == token) ? v[lo] : NULL;
}

/* True when a deadline is plausible for a state at time now. */
static bool deadline_ok(uint64_t now, uint64_t d)
{
#ifdef FENCE_BUG_GRANT_EXPIRED
    return d <= now + SNAP_HORIZON_MS;
#else
    return d > now && d <= now + SNAP_HORIZON_MS;
#endif
}

/* Decode the leases section into n. */
static int read_leases(fence_fsm *n, rbuf *r)
{
    uint64_t count = get_le(r, 4);
    if (!r->ok || count > left(r) / SNAP_LEASE) {
        return FENCE_ST_INVALID;
    }
    uint64_t last = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t id = get_le(r, 8);
        uint64_t ttl = get_le(r, 8);
        uint64_t delay = get_le(r, 8);
        uint64_t deadline = get_le(r, 8);
        uint64_t dedicated = get_le(r, 1);
        if (!r->ok || id <= last || id >= n->next_lease_id ||
            ttl < FENCE_TTL_MS_MIN || ttl > FENCE_TTL_MS_MAX ||
            delay > FENCE_LOCK_DELAY_MS_MAX || dedicated > 1 ||
            !deadline_ok(n->now_ms, deadline)) {
            return FENCE_ST_INVALID;
        }
        if (fence__lease_add(n, id, ttl, delay, deadline, dedicated == 1) ==
            NULL) {
            return FENCE_ST_LIMIT;
        }
        last = id;
    }
    return 0;
}

/* Decode the locks section into n; *vec receives the locks by token. */
static int read_locks(fence_fsm *n, rbuf *r, fence__lock ***vec,
                      uint32_t *vec_len)
{
    uint64_t count = get_le(r, 4);
    if (!r->ok || count > left(r) / (SNAP_LOCK_FIXED + 1)) {
        return FENCE_ST_INVALID;
    }
    fence__lock **v = NULL;
    if (count > 0) {
        v = fence__alloc(n, (size_t)count * sizeof(*v));
        if (v == NULL) {
            return FENCE_ST_LIMIT;
        }
    }
    *vec = v;
    *vec_len = 0;
    uint64_t last = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t len = get_le(r, 2);
        if (!r->ok || len == 0 || len > FENCE_NAME_MAX || left(r) < len) {
            return FENCE_ST_INVALID;
        }
        const uint8_t *name = r->p;
        r->p += len;
        uint64_t token = get_le(r, 8);
        uint64_t holder_id = get_le(r, 8);
        uint64_t in_delay = get_le(r, 1);
        uint64_t delay_ms = get_le(r, 8);
        uint64_t delay_end = get_le(r, 8);
        if (!r->ok || token <= last || token > n->last_token || in_delay > 1) {
            return FENCE_ST_INVALID;
        }
        if (fence__lock_find(n, name, (uint16_t)len) != NULL) {
            return FENCE_ST_INVALID;
        }
        fence__lease *holder = NULL;
        if (holder_id != 0) {
            holder = fence__lease_find(n, holder_id);
            if (holder == NULL || in_delay || delay_ms != 0 ||
                delay_end != 0) {
                return FENCE_ST_INVALID;
            }
        } else if (!in_delay || delay_ms == 0 ||
                   delay_ms > FENCE_LOCK_DELAY_MS_MAX ||
                   !deadline_ok(n->now_ms, delay_end)) {
            return FENCE_ST_INVALID;
        }
        fence__lock *k = fence__lock_add(n, name, (uint16_t)len, token, holder);
        if (k == NULL) {
            return FENCE_ST_LIMIT;
        }
        if (in_delay) {
            fence__lock_set_delay(n, k, delay_ms, delay_end);
        }
        v[(*vec_len)++] = k;
        last = token;
    }
    return 0;
}

/* Decode the waits section into n. */
static int read_waits(fence_fsm *n, rbuf *r, fence__lock **v, uint32_t nv)
{
    uint64_t count = get_le(r, 4);
    if (!r->ok || count > left(r) / SNAP_WAIT) {
        return FENCE_ST_INVALID;
    }
    uint64_t last = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t id = get_le(r, 8);
        uint64_t lease_id = get_le(r, 8);
        uint64_t token = get_le(r, 8);
        uint64_t wait_ms = get_le(r, 8);
        uint64_t deadline = get_le(r, 8);
        uint64_t flags = get_le(r, 1);
        uint64_t req_id = get_le(r, 8);
        if (!r->ok || id <= last || id >= n->next_wait_id || wait_ms == 0 ||
            wait_ms > FENCE_WAIT_MS_MAX || !deadline_ok(n->now_ms, deadline) ||
            (flags & ~(uint64_t)(SNAP_WAIT_F_ACQUIRE | SNAP_WAIT_F_REQ)) ||
            (!(flags & SNAP_WAIT_F_REQ) && req_id != 0)) {
            return FENCE_ST_INVALID;
        }
        fence__lease *l = fence__lease_find(n, lease_id);
        fence__lock *k = lock_by_token(v, nv, token);
        if (l == NULL || k == NULL || k->holder == l ||
            fence__is_waiting(l, k)) {
            return FENCE_ST_INVALID;
        }
        bool acquire = (flags & SNAP_WAIT_F_ACQUIRE) != 0;
        if (acquire && (!l->dedicated || l->acq_wait != NULL ||
                        l->hi.deadline_ms < deadline)) {
            return FENCE_ST_INVALID;
        }
        if (fence__wait_add(n, id, l, k, wait_ms, deadline, acquire,
                            (flags & SNAP_WAIT_F_REQ) != 0, req_id) == NULL) {
            return FENCE_ST_LIMIT;
        }
        last = id;
    }
    return 0;
}

/* Decode the dedup section into n. */
static int read_dedup(fence_fsm *n, rbuf *r)
{
    uint64_t count = get_le(r, 4);
    if (!r->ok || count > left(r) / SNAP_DEDUP ||
        count > n->limits.dedup_max) {
        return FENCE_ST_INVALID;
    }
    for (uint64_t i = 0; i < count; i++) {
        fence_result res;
        memset(&res, 0, sizeof(res));
        uint64_t req_id = get_le(r, 8);
        uint64_t fp = get_le(r, 8);
        uint64_t status = get_le(r, 1);
        res.lease = get_le(r, 8);
        res.token = get_le(r, 8);
        res.wait_id = get_le(r, 8);
        res.value = get_le(r, 8);
        if (!r->ok || status > FENCE_ST_INVALID ||
            res.token > n->last_token || res.lease >= n->next_lease_id ||
            res.wait_id >= n->next_wait_id ||
            fence__dedup_find(n, req_id) != NULL) {
            return FENCE_ST_INVALID;
        }
        res.status = (uint8_t)status;
        if (fence__dedup_add(n, req_id, fp, &res) == NULL) {
            return FENCE_ST_LIMIT;
        }
    }
    return 0;
}

/* Decode a whole snapshot into the empty state n. */
static int decode(fence_fsm *n, const uint8_t *buf, size_t len)
{
    rbuf r = {buf, buf + len, true};
    if (memcmp(r.p, SNAP_MAGIC, 4) != 0) {
        return FENCE_ST_INVALID;
    }
    r.p += 4;
    if (get_le(&r, 4) != SNAP_VERSION) {
        return FENCE_ST_INVALID;
    }
    n->now_ms = get_le(&r, 8);
    n->last_token = get_le(&r, 8);
    n->next_lease_id = get_le(&r, 8);
    n->next_wait_id = get_le(&r, 8);
    n->limits.leases_max = (uint32_t)get_le(&r, 4);
    n->limits.locks_max = (uint32_t)get_le(&r, 4);
    n->limits.waiters_max = (uint32_t)get_le(&r, 4);
    n->limits.dedup_max = (uint32_t)get_le(&r, 4);
    if (!r.ok || n->now_ms > FENCE_TIME_MS_MAX || n->next_lease_id == 0 ||
        n->next_wait_id == 0 || n->last_token == UINT64_MAX ||
        n->next_lease_id == UINT64_MAX || n->next_wait_id == UINT64_MAX ||
        n->limits.leases_max == 0 || n->limits.locks_max == 0 ||
        n->limits.waiters_max == 0) {
        return FENCE_ST_INVALID;
    }
    int rc = read_leases(n, &r);
    if (rc != 0) {
        return rc;
    }
    fence__lock **v = NULL;
    uint32_t nv = 0;
    rc = read_locks(n, &r, &v, &nv);
    if (rc == 0) {
        rc = read_waits(n, &r, v, nv);
    }
    fence__free(n, v);
    if (rc != 0) {
        return rc;
    }
    rc = read_dedup(n, &r);
    if (rc != 0) {
        return rc;
    }
    if (!r.ok || r.p != r.end) {
        return FENCE_ST_INVALID;
    }
    /* Last gate: the rebuilt state must satisfy every invariant. */
    if (fence_fsm_check(n) != NULL) {
        return FENCE_ST_INVALID;
    }
    return 0;
}

/* Replace the state with a decoded snapshot; on any error the state is
 * unchanged.  The new state is built aside and swapped in at the end. */
int fence_fsm_restore(fence_fsm *f, const uint8_t *buf, size_t len)
{
    FENCE_ASSERT(f != NULL);
    if (buf == NULL || len < SNAP_HEADER + 4 * 4 + 4) {
        return FENCE_ST_INVALID;
    }
    uint32_t crc = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 |
                   (uint32_t)buf[len - 2] << 16 | (uint32_t)buf[len - 1] << 24;
    if (fence__crc32c(buf, len - 4) != crc) {
        return FENCE_ST_INVALID;
    }
    fence_fsm *n = fence__fsm_new(&f->alloc, f->hash_seed);
    if (n == NULL) {
        return FENCE_ST_LIMIT;
    }
    int rc = decode(n, buf, len - 4);
    if (rc != 0) {
        fence__fsm_free(n);
        return rc;
    }
    /* Swap the contents: f takes the new state, n the old one, which is
     * then freed.  Nothing inside the objects points at the fsm struct. */
    fence_fsm old = *f;
    fence_event *n_events = n->events;
    size_t n_cap = n->cap_events;
    *f = *n;
    /* The event array is no state: f keeps its own, emptied, and n's goes
     * with the old state. */
    f->events = old.events;
    f->n_events = 0;
    f->cap_events = old.cap_events;
    old.events = n_events;
    old.n_events = 0;
    old.cap_events = n_cap;
    *n = old;
    fence__fsm_free(n);
    FENCE_ASSERT(f->now_ms <= FENCE_TIME_MS_MAX);
    return 0;
}
