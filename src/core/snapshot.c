/* Snapshots: the whole state as deterministic bytes, and a restore that
 * trusts nothing.
 *
 * Layout (integers little-endian):
 *   "FNCS" | u32 version (5)
 *   u64 now_ms | u64 last_token | u64 next_lease_id | u64 next_wait_id
 *   u32 leases_max | u32 locks_max | u32 waiters_max | u32 dedup_max
 *   | u32 waits_max (version 3 only; a version-2 snapshot, written before
 *   the global bound on waits, restores with UINT32_MAX: no bound)
 *   u32 nleases, then per lease (ascending id):
 *     u64 id | u64 ttl_ms | u64 lock_delay_ms | u64 deadline_ms | u8 dedicated
 *     | u64 owner (version 4 on; older snapshots restore with owner 0)
 *   u32 nlocks, then per lock (ascending current token; up to version 4
 *   tokens are unique and the lock's key in the snapshot; from version 5
 *   the locks of one multi-lock share a token, in grant order, and a lock
 *   never granted, kept for a queued multi-lock, has token 0, no holder and
 *   no lock-delay; a lock's key is then its 1-based place in this list):
 *     u16 name_len | name | u64 token | u64 holder lease (0: none)
 *     | u8 in_delay | u64 delay_ms | u64 delay_end_ms
 *   u32 nwaits, then per wait (ascending id, which is also FIFO order;
 *   from version 5 the waits for one lock only, multi-locks in their own
 *   section):
 *     u64 id | u64 lease | u64 lock token (version 5: the lock's place)
 *     | u64 wait_ms | u64 deadline_ms
 *     | u8 flags (1: ACQUIRE, 2: has req_id) | u64 req_id
 *   u32 ndedup, then per record (oldest first: the eviction order):
 *     u64 req_id | u64 owner (version 4 on) | u64 request fingerprint
 *     | u8 status | u64 lease
 *     | u64 token | u64 wait_id | u64 value
 *   version 5 on, one section per coordination kind, in the order rw,
 *   multi, elect, sem, each u32 count | records, written and read by the
 *   kind's own file (a version-4 snapshot restores with them empty):
 *     rw (core/shared.c): the shared holds and shared waits; a lock held
 *     shared is a lock record above with holder 0 and not in lock-delay
 *     multi (core/multi.c): the multi waits
 *     elect (core/elect_snap.c): the elections
 *     sem (core/sem_snap.c): the semaphores and their waits
 *   The waits section above holds the waits on one lock only; a
 *   multi-lock's waits and a semaphore's are in their kinds' sections.
 *   u32 CRC32C of everything before it.
 */
#include <string.h>

#include "base/bytes.h"
#include "base/crc32c.h"
#include "core/fsm_int.h"
#include "core/snapshot.h"

#define SNAP_MAGIC "FNCS"
#define SNAP_VERSION 5u
#define SNAP_VERSION_MIN 2u
#define SNAP_HEADER (4 + 4 + 8 * 4 + 5 * 4)
/* The shortest header (version 2). */
#define SNAP_HEADER_MIN (4 + 4 + 8 * 4 + 4 * 4)
#define SNAP_LEASE (8 * 4 + 1 + 8)
#define SNAP_LOCK_FIXED (2 + 8 + 8 + 1 + 8 + 8)
#define SNAP_WAIT (8 * 5 + 1 + 8)
#define SNAP_DEDUP (8 + 8 + 8 + 1 + 8 * 4)
/* Record sizes of versions 2 and 3 (no owners): bounds for their counts. */
#define SNAP_LEASE_V3 (8 * 4 + 1)
#define SNAP_DEDUP_V3 (8 + 8 + 1 + 8 * 4)
#define SNAP_WAIT_F_ACQUIRE 0x1
#define SNAP_WAIT_F_REQ 0x2

/* Furthest any deadline may lie beyond now in a valid state. */
#define SNAP_HORIZON_MS (FENCE_TTL_MS_MAX + FENCE_WAIT_MS_MAX)

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

/* Room for n more bytes at the cursor; returns where they go. */
static uint8_t *room(wbuf *w, size_t n)
{
    FENCE_ASSERT((size_t)(w->end - w->p) >= n);
    uint8_t *at = w->p;
    w->p += n;
    return at;
}

/* Append integers, little-endian. */
static void put8(wbuf *w, uint8_t v)
{
    *room(w, 1) = v;
}

static void put16(wbuf *w, uint16_t v)
{
    fence__put_u16(room(w, 2), v);
}

static void put32(wbuf *w, uint32_t v)
{
    fence__put_u32(room(w, 4), v);
}

static void put64(wbuf *w, uint64_t v)
{
    fence__put_u64(room(w, 8), v);
}

/* Bytes needed for a snapshot of the current state. */
size_t fence_fsm_snapshot_size(const fence_fsm *f)
{
    size_t n = SNAP_HEADER + 4 * 4 + 4;
    n += (size_t)f->leases.count * SNAP_LEASE;
    for (const fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        n += SNAP_LOCK_FIXED + LOCK_OF(p)->name_len;
    }
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *x = WAIT_OF(p);
        n += x->parts == NULL && x->sem == NULL ? SNAP_WAIT : 0;
    }
    n += (size_t)f->dedup.count * SNAP_DEDUP;
    n += fence__rw_snap_size(f);
    n += fence__multi_snap_size(f);
    n += fence__elect_snap_size(f);
    n += fence__sem_snap_size(f);
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
    put32(&w, SNAP_VERSION);
    put64(&w, f->now_ms);
    put64(&w, f->last_token);
    put64(&w, f->next_lease_id);
    put64(&w, f->next_wait_id);
    put32(&w, f->limits.leases_max);
    put32(&w, f->limits.locks_max);
    put32(&w, f->limits.waiters_max);
    put32(&w, f->limits.dedup_max);
    put32(&w, f->limits.waits_max);
    put32(&w, f->leases.count);
    uint64_t last = 0;
    for (const fence__link *p = f->lease_list.first; p != NULL; p = p->next) {
        const fence__lease *l = LEASE_OF(p);
        FENCE_ASSERT(l->id > last);
        FENCE_ASSERT(l->id < f->next_lease_id);
        last = l->id;
        put64(&w, l->id);
        put64(&w, l->ttl_ms);
        put64(&w, l->lock_delay_ms);
        put64(&w, l->hi.deadline_ms);
        put8(&w, l->dedicated ? 1 : 0);
        put64(&w, l->owner);
    }
    put32(&w, f->locks.count);
    last = 0;
    uint32_t ord = 0;
    for (const fence__link *p = f->lock_list.first; p != NULL; p = p->next) {
        const fence__lock *k = LOCK_OF(p);
        FENCE_ASSERT(k->token >= last);
        FENCE_ASSERT(k->token <= f->last_token);
        FENCE_ASSERT(k->holder == NULL || !k->in_delay);
        FENCE_ASSERT(k->nsholders == 0 || (k->holder == NULL && !k->in_delay));
        last = k->token;
        /* The scratch place (fsm_int.h: not state, so writing it through
         * the const state changes nothing a reader of the state sees). */
        ((fence__lock *)k)->snap_ord = ++ord;
        put16(&w, k->name_len);
        put(&w, k->name, k->name_len);
        put64(&w, k->token);
        put64(&w, k->holder ? k->holder->id : 0);
        put8(&w, k->in_delay ? 1 : 0);
        put64(&w, k->in_delay ? k->delay_ms : 0);
        put64(&w, k->in_delay ? k->hi.deadline_ms : 0);
    }
    uint8_t *nwaits_at = room(&w, 4);
    uint32_t nwaits = 0;
    last = 0;
    for (const fence__link *p = f->wait_list.first; p != NULL; p = p->next) {
        const fence__wait *x = WAIT_OF(p);
        if (x->parts != NULL || x->sem != NULL) {
            continue; /* a multi-lock's or a semaphore's: their sections */
        }
        nwaits++;
        FENCE_ASSERT(x->id > last);
        FENCE_ASSERT(x->lock->holder != x->lease);
        FENCE_ASSERT(x->has_req || x->req_id == 0);
        last = x->id;
        put64(&w, x->id);
        put64(&w, x->lease->id);
        put64(&w, x->lock->snap_ord);
        put64(&w, x->wait_ms);
        put64(&w, x->hi.deadline_ms);
        put8(&w, (x->acquire ? SNAP_WAIT_F_ACQUIRE : 0) |
                       (x->has_req ? SNAP_WAIT_F_REQ : 0));
        put64(&w, x->req_id);
    }
    fence__put_u32(nwaits_at, nwaits);
    put32(&w, f->dedup.count);
    FENCE_ASSERT(f->dedup.count <= f->limits.dedup_max);
    for (const fence__link *p = f->dedup_list.first; p != NULL; p = p->next) {
        const fence__dedup *d = DEDUP_OF(p);
        FENCE_ASSERT(d->result.status <= FENCE_ST_LAST);
        put64(&w, d->req_id);
        put64(&w, d->owner);
        put64(&w, d->fp);
        put8(&w, d->result.status);
        put64(&w, d->result.lease);
        put64(&w, d->result.token);
        put64(&w, d->result.wait_id);
        put64(&w, d->result.value);
    }
    w.p += fence__rw_snap_write(f, w.p, (size_t)(w.end - w.p));
    w.p = fence__multi_snap_write(f, w.p, w.end);
    w.p += fence__elect_snap_write(f, w.p, (size_t)(w.end - w.p));
    w.p = fence__sem_snap_write(f, w.p, w.end);
    size_t body = (size_t)(w.p - buf);
    put32(&w, fence__crc32c(buf, body));
    FENCE_ASSERT((size_t)(w.p - buf) == size);
    return size;
}

/* ---- Reading -------------------------------------------------------------- */

/* A bounded input cursor; ok turns false on the first short read. */
typedef struct rbuf {
    const uint8_t *p;   /* next byte to read */
    const uint8_t *end; /* one past the last byte */
    bool ok;            /* false once a read ran past the end */
    uint32_t version;   /* the snapshot's format version */
} rbuf;

/* The next n bytes, or NULL (and ok turns false) when short. */
static const uint8_t *take(rbuf *r, size_t n)
{
    if (!r->ok || (size_t)(r->end - r->p) < n) {
        r->ok = false;
        return NULL;
    }
    const uint8_t *at = r->p;
    r->p += n;
    return at;
}

/* Read integers, little-endian (0 when short). */
static uint64_t get8(rbuf *r)
{
    const uint8_t *p = take(r, 1);
    return p != NULL ? p[0] : 0;
}

static uint64_t get16(rbuf *r)
{
    const uint8_t *p = take(r, 2);
    return p != NULL ? fence__get_u16(p) : 0;
}

static uint64_t get32(rbuf *r)
{
    const uint8_t *p = take(r, 4);
    return p != NULL ? fence__get_u32(p) : 0;
}

static uint64_t get64(rbuf *r)
{
    const uint8_t *p = take(r, 8);
    return p != NULL ? fence__get_u64(p) : 0;
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
    return d > now && d <= now + SNAP_HORIZON_MS;
}

/* Records ahead whose lease-table bucket read_leases prefetches. */
#define LEASES_AHEAD 8u

/* Decode the leases section into n. */
static int read_leases(fence_fsm *n, rbuf *r)
{
    uint64_t count = get32(r);
    if (!r->ok || count > left(r) / (r->version >= 4 ? SNAP_LEASE : SNAP_LEASE_V3)) {
        return FENCE_ST_INVALID;
    }
    /* The count is bounded by the bytes left, so this cannot be made to
     * allocate more than the buffer's size warrants. */
    fence__htab_reserve(n, &n->leases, (uint32_t)count);
    /* Each insert writes a bucket of a big table, a cache miss: prefetch
     * the bucket of the record LEASES_AHEAD places ahead (the records
     * have one size and the count fits the bytes left, so that record is
     * inside the buffer; a wrong guess costs only the fetch). */
    size_t rec = r->version >= 4 ? SNAP_LEASE : SNAP_LEASE_V3;
    for (uint64_t i = 0; i < count && i < LEASES_AHEAD; i++) {
        fence__htab_prefetch(&n->leases, fence__key_hash(n, fence__get_u64(r->p + i * rec)));
    }
    uint64_t last = 0;
    for (uint64_t i = 0; i < count; i++) {
        if (i + LEASES_AHEAD < count) {
            const uint8_t *q = r->p + LEASES_AHEAD * rec;
            fence__htab_prefetch(&n->leases, fence__key_hash(n, fence__get_u64(q)));
        }
        uint64_t id = get64(r);
        uint64_t ttl = get64(r);
        uint64_t delay = get64(r);
        uint64_t deadline = get64(r);
        uint64_t dedicated = get8(r);
        uint64_t owner = r->version >= 4 ? get64(r) : 0;
        if (!r->ok || id <= last || id >= n->next_lease_id ||
            ttl < FENCE_TTL_MS_MIN || ttl > FENCE_TTL_MS_MAX ||
            delay > FENCE_LOCK_DELAY_MS_MAX || dedicated > 1 ||
            !deadline_ok(n->now_ms, deadline)) {
            return FENCE_ST_INVALID;
        }
        fence__lease *l = fence__lease_add(n, id, ttl, delay, deadline, dedicated == 1,
                                           owner);
        if (l == NULL) {
            return FENCE_ST_LIMIT;
        }
        last = id;
    }
    FENCE_ASSERT(n->leases.count == count);
    return 0;
}

/* Records ahead whose lock-table bucket read_locks prefetches (and, half
 * as far ahead, whose bucket's first node). */
#define LOCKS_AHEAD 8

/* A read-ahead over the lock records: it only hashes names to prefetch
 * their buckets (each lookup of a big table misses the cache; fetching a
 * few records ahead overlaps the misses), and keeps the hashes of the
 * last LOCKS_AHEAD records for the second step, the chain's first node
 * (where the lookup compares).  It trusts nothing either: at the first
 * record that does not fit it stops, and it changes no result. */
typedef struct lock_ahead {
    const uint8_t *p;   /* the next record to prefetch for */
    const uint8_t *end; /* end of the snapshot */
    uint64_t left;      /* records not yet prefetched */
    uint64_t done;      /* records prefetched so far */
    uint64_t hash[LOCKS_AHEAD]; /* record j's name hash in [j % LOCKS_AHEAD] */
} lock_ahead;

/* Prefetch the bucket of the next record; false when there is none. */
static bool ahead_step(fence_fsm *n, lock_ahead *a)
{
    if (a->left == 0 || a->end - a->p < 2) {
        return false;
    }
    uint16_t len = fence__get_u16(a->p);
    if (len == 0 || len > FENCE_NAME_MAX ||
        (size_t)(a->end - a->p) < 2u + len + SNAP_LOCK_FIXED - 2u) {
        a->left = 0;
        return false;
    }
    uint64_t h = fence__hash_name(n->hash_seed, a->p + 2, len);
    fence__htab_prefetch(&n->locks, h);
    a->hash[a->done % LOCKS_AHEAD] = h;
    a->done++;
    a->p += 2u + len + SNAP_LOCK_FIXED - 2u;
    a->left--;
    return true;
}

/* Decode the locks section into n; *vec receives the locks by token. */
static int read_locks(fence_fsm *n, rbuf *r, fence__lock ***vec,
                      uint32_t *vec_len)
{
    uint64_t count = get32(r);
    if (!r->ok || count > left(r) / (SNAP_LOCK_FIXED + 1)) {
        return FENCE_ST_INVALID;
    }
    fence__htab_reserve(n, &n->locks, (uint32_t)count);
    fence__lock **v = NULL;
    if (count > 0) {
        v = fence__alloc(n, (size_t)count * sizeof(*v));
        if (v == NULL) {
            return FENCE_ST_LIMIT;
        }
    }
    *vec = v;
    *vec_len = 0;
    lock_ahead ahead;
    memset(&ahead, 0, sizeof(ahead));
    ahead.p = r->p;
    ahead.end = r->end;
    ahead.left = count;
    for (int i = 0; i < LOCKS_AHEAD && ahead_step(n, &ahead); i++) {
    }
    uint64_t last = 0;
    for (uint64_t i = 0; i < count; i++) {
        /* The second step, for the record half as far ahead (in this
         * body, not a helper of its own: see htab.h). */
        uint64_t h2 = i + LOCKS_AHEAD / 2;
        if (h2 < ahead.done && h2 + LOCKS_AHEAD >= ahead.done) {
            fence__htab_prefetch_node(&n->locks, ahead.hash[h2 % LOCKS_AHEAD]);
        }
        ahead_step(n, &ahead);
        uint64_t len = get16(r);
        if (!r->ok || len == 0 || len > FENCE_NAME_MAX || left(r) < len) {
            return FENCE_ST_INVALID;
        }
        const uint8_t *name = r->p;
        r->p += len;
        uint64_t token = get64(r);
        uint64_t holder_id = get64(r);
        uint64_t in_delay = get8(r);
        uint64_t delay_ms = get64(r);
        uint64_t delay_end = get64(r);
        /* Version 5: equal tokens (one multi-lock's locks) and token 0
         * (a lock kept for a queued multi-lock) are allowed; the final
         * check decides whether the state they make is valid. */
        bool v5 = r->version >= 5;
        if (!r->ok || (v5 ? token < last : token <= last) || token > n->last_token ||
            in_delay > 1) {
            return FENCE_ST_INVALID;
        }
        uint64_t hash = fence__lock_hash(n, name, (uint16_t)len);
        if (fence__lock_find_hashed(n, name, (uint16_t)len, hash) != NULL) {
            return FENCE_ST_INVALID;
        }
        fence__lease *holder = NULL;
        if (holder_id != 0) {
            holder = fence__lease_find(n, holder_id);
            if (holder == NULL || in_delay || delay_ms != 0 ||
                delay_end != 0) {
                return FENCE_ST_INVALID;
            }
        } else if (v5 && !in_delay) {
            /* Held shared (its holders come in the rw section), or kept
             * for a queued multi-lock; the final check refuses a lock
             * that is neither. */
            if (delay_ms != 0 || delay_end != 0) {
                return FENCE_ST_INVALID;
            }
        } else if (!in_delay || delay_ms == 0 ||
                   delay_ms > FENCE_LOCK_DELAY_MS_MAX ||
                   !deadline_ok(n->now_ms, delay_end)) {
            return FENCE_ST_INVALID;
        }
        fence__lock *k = fence__lock_add_hashed(n, name, (uint16_t)len, hash, token, holder);
        if (k == NULL) {
            return FENCE_ST_LIMIT;
        }
        if (in_delay) {
            fence__lock_set_delay(n, k, delay_ms, delay_end);
        }
        v[(*vec_len)++] = k;
        last = token;
    }
    FENCE_ASSERT(n->locks.count == count);
    FENCE_ASSERT(*vec_len == count);
    return 0;
}

/* Decode the waits section into n. */
static int read_waits(fence_fsm *n, rbuf *r, fence__lock **v, uint32_t nv)
{
    uint64_t count = get32(r);
    if (!r->ok || count > left(r) / SNAP_WAIT) {
        return FENCE_ST_INVALID;
    }
    fence__htab_reserve(n, &n->waits, (uint32_t)count);
    uint64_t last = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t id = get64(r);
        uint64_t lease_id = get64(r);
        uint64_t token = get64(r);
        uint64_t wait_ms = get64(r);
        uint64_t deadline = get64(r);
        uint64_t flags = get8(r);
        uint64_t req_id = get64(r);
        if (!r->ok || id <= last || id >= n->next_wait_id || wait_ms == 0 ||
            wait_ms > FENCE_WAIT_MS_MAX || !deadline_ok(n->now_ms, deadline) ||
            (flags & ~(uint64_t)(SNAP_WAIT_F_ACQUIRE | SNAP_WAIT_F_REQ)) ||
            (!(flags & SNAP_WAIT_F_REQ) && req_id != 0)) {
            return FENCE_ST_INVALID;
        }
        fence__lease *l = fence__lease_find(n, lease_id);
        fence__lock *k = r->version >= 5 ? (token >= 1 && token <= nv ? v[token - 1] : NULL)
                                         : lock_by_token(v, nv, token);
        if (l == NULL || k == NULL || k->holder == l ||
            fence__is_waiting(l, k)) {
            return FENCE_ST_INVALID;
        }
        bool acquire = (flags & SNAP_WAIT_F_ACQUIRE) != 0;
        if (acquire && (!l->dedicated || l->acq_wait != NULL ||
                        l->hi.deadline_ms < deadline)) {
            return FENCE_ST_INVALID;
        }
        fence__wait *w = fence__wait_add(n, id, l, k, wait_ms, deadline, acquire,
                                         (flags & SNAP_WAIT_F_REQ) != 0, req_id);
        if (w == NULL) {
            return FENCE_ST_LIMIT;
        }
        last = id;
    }
    FENCE_ASSERT(n->waits.count == count);
    return 0;
}

/* Decode the dedup section into n. */
static int read_dedup(fence_fsm *n, rbuf *r)
{
    uint64_t count = get32(r);
    if (!r->ok || count > left(r) / (r->version >= 4 ? SNAP_DEDUP : SNAP_DEDUP_V3) ||
        count > n->limits.dedup_max) {
        return FENCE_ST_INVALID;
    }
    fence__htab_reserve(n, &n->dedup, (uint32_t)count);
    for (uint64_t i = 0; i < count; i++) {
        fence_result res;
        memset(&res, 0, sizeof(res));
        uint64_t req_id = get64(r);
        uint64_t owner = r->version >= 4 ? get64(r) : 0;
        uint64_t fp = get64(r);
        uint64_t status = get8(r);
        res.lease = get64(r);
        res.token = get64(r);
        res.wait_id = get64(r);
        res.value = get64(r);
        if (!r->ok || status > FENCE_ST_LAST ||
            res.token > n->last_token || res.lease >= n->next_lease_id ||
            res.wait_id >= n->next_wait_id ||
            fence__dedup_find(n, req_id, owner) != NULL) {
            return FENCE_ST_INVALID;
        }
        res.status = (uint8_t)status;
        fence__dedup *d = fence__dedup_add(n, req_id, owner, fp, &res);
        if (d == NULL) {
            return FENCE_ST_LIMIT;
        }
        /* A QUEUED record goes back onto the wait it names (the live state
         * attaches it when it answers QUEUED; records are oldest first in
         * both, so each wait's list comes back in the same order).  One
         * whose wait is gone can come only from a snapshot written before
         * joined waits resolved their records: it stays as it is, and the
         * leader answers TRYAGAIN for it (fence_fsm_wait_exists). */
        if (res.status == FENCE_ST_QUEUED) {
            fence__wait *w = fence__wait_find(n, res.wait_id);
            if (w != NULL) {
                fence__dedup_attach(d, w);
            }
        }
    }
    FENCE_ASSERT(n->dedup.count == count);
    return 0;
}

/* Attach the QUEUED dedup records of waits restored after the dedup
 * section (the kinds' sections), oldest first as read_dedup does. */
static void attach_late(fence_fsm *n)
{
    for (fence__link *p = n->dedup_list.first; p != NULL; p = p->next) {
        fence__dedup *d = DEDUP_OF(p);
        if (d->result.status == FENCE_ST_QUEUED && d->wait == NULL) {
            fence__wait *w = fence__wait_find(n, d->result.wait_id);
            if (w != NULL) {
                fence__dedup_attach(d, w);
            }
        }
    }
}

/* Decode a whole snapshot into the empty state n. */
static int decode(fence_fsm *n, const uint8_t *buf, size_t len)
{
    rbuf r = {buf, buf + len, true, 0};
    if (memcmp(r.p, SNAP_MAGIC, 4) != 0) {
        return FENCE_ST_INVALID;
    }
    r.p += 4;
    uint64_t version = get32(&r);
    if (version < SNAP_VERSION_MIN || version > SNAP_VERSION) {
        return FENCE_ST_INVALID;
    }
    r.version = (uint32_t)version;
    n->now_ms = get64(&r);
    n->last_token = get64(&r);
    n->next_lease_id = get64(&r);
    n->next_wait_id = get64(&r);
    n->limits.leases_max = (uint32_t)get32(&r);
    n->limits.locks_max = (uint32_t)get32(&r);
    n->limits.waiters_max = (uint32_t)get32(&r);
    n->limits.dedup_max = (uint32_t)get32(&r);
    n->limits.waits_max =
        version >= 3 ? (uint32_t)get32(&r) : UINT32_MAX;
    if (!r.ok || n->now_ms > FENCE_TIME_MS_MAX || n->next_lease_id == 0 ||
        n->next_wait_id == 0 || n->last_token == UINT64_MAX ||
        n->next_lease_id == UINT64_MAX || n->next_wait_id == UINT64_MAX ||
        n->limits.leases_max == 0 || n->limits.locks_max == 0 ||
        n->limits.waiters_max == 0 || n->limits.waits_max == 0) {
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
    if (rc == 0) {
        rc = read_dedup(n, &r);
    }
    if (rc == 0 && version >= 5) {
        /* The kinds' sections, in the order rw, multi, elect, sem. */
        size_t used = 0;
        rc = r.ok ? fence__rw_snap_read(n, r.p, left(&r), &used, v, nv) : FENCE_ST_INVALID;
        r.p += rc == 0 ? used : 0;
        if (rc == 0) {
            rc = r.ok ? fence__multi_snap_read(n, &r.p, r.end, v, nv) : FENCE_ST_INVALID;
        }
    }
    fence__free(n, v);
    if (rc != 0) {
        return rc;
    }
    if (version >= 5 && r.ok) {
        size_t used = 0;
        rc = fence__elect_snap_read(n, r.p, left(&r), &used);
        if (rc != 0) {
            return rc;
        }
        r.p += used;
    }
    if (version >= 5 && r.ok) {
        rc = fence__sem_snap_read(n, &r.p, r.end);
        if (rc != 0) {
            return rc;
        }
        attach_late(n);
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
    if (buf == NULL || len < SNAP_HEADER_MIN + 4 * 4 + 4) {
        return FENCE_ST_INVALID;
    }
    uint32_t crc = fence__get_u32(buf + len - 4);
    if (fence__crc32c(buf, len - 4) != crc) {
        return FENCE_ST_INVALID;
    }
    /* Into a state that has applied entries, running out of memory stops
     * the process (the replica cannot follow the others); into a fresh
     * one, it is reported. */
    uint8_t oom = f->oom == FENCE__OOM_RETURN ? FENCE__OOM_RETURN
                                              : FENCE__OOM_RESTORE;
    fence_fsm *n = fence__fsm_new(&f->alloc, f->hash_seed, oom);
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
    /* Nor are the event counters (metrics): they go on counting. */
    f->n_grants = old.n_grants;
    f->n_handoffs = old.n_handoffs;
    f->n_expired = old.n_expired;
    f->n_expired_held = old.n_expired_held;
    f->n_revoked = old.n_revoked;
    *n = old;
    fence__fsm_free(n);
    /* The state is live now: later failures stop the process. */
    f->oom = FENCE__OOM_APPLY;
    FENCE_ASSERT(f->now_ms <= FENCE_TIME_MS_MAX);
    return 0;
}
