/* Private to src/core: the state machine's objects and the functions the
 * core's files share.
 *
 * Files: mem.c (memory: the injected allocator and its failure rule),
 * fsm.c (lifecycle, queries), htab.c (hash tables and hashes), heap.c
 * (the deadline heap), lease.c (leases and the locks they
 * hold), lock.c (locks, their FIFOs and the waits), dedup.c (request ids),
 * grant.c (the lock machinery: grants, hand-off, releases, time, the
 * shared checks), kinds.c (the kinds' hooks, f->kinds), apply.c (the
 * commands, the dispatch, dedup), multi.c (LOCK_MULTI:
 * one wait over many locks, and its snapshot section), sem.c (semaphores
 * of slots) and sem_snap.c (their snapshot section), check.c (the
 * invariant check), entry.c (the log-entry codec), snapshot.c (the snapshot
 * codec), shared.c (shared holds: the holders of one shared phase of a lock),
 * elect.c and elect_snap.c (leader election: core/elect.h).
 *
 * Layout in one paragraph: leases, locks, waits and dedup records live in
 * chained hash tables keyed by id / name / req_id.  Every object with a
 * deadline (lease expiry, wait timeout, lock-delay end) embeds a heap item;
 * one binary min-heap orders them by (deadline, kind, id).  Intrusive lists
 * (list.h) keep the orders the snapshot and the semantics need without
 * sorting: leases by id (creation order), locks by current token (every
 * grant moves its lock to the tail), waits by id, a lock's queue FIFO (= by
 * wait id), a lease's held locks by token and its waits by id, dedup
 * records by age, and a wait's dedup records (those answered QUEUED with
 * it) by age.  No object points at the fence_fsm struct or at a list
 * head, so a whole state can be swapped by value (restore).
 */
#ifndef FENCE_FSM_INT_H
#define FENCE_FSM_INT_H

#include <stdlib.h>

#include "base/assert.h"
#include "base/crc32c.h"
#include "core/fsm.h"
#include "core/heap.h"
#include "core/htab.h"
#include "core/list.h"

/* Events the array holds from the start (fence__fsm_new). */
#define FENCE__EVENTS_INIT 64

/* What a failed allocation does (fence_fsm.oom).  Apply's outcome must be
 * a function of (state, entry) alone, never of the allocator. */
enum {
    FENCE__OOM_RETURN = 0,  /* report it: create, restore into a fresh fsm */
    FENCE__OOM_APPLY = 1,   /* fence__fatal: the state has applied entries */
    FENCE__OOM_RESTORE = 2, /* fence__fatal: restore into a live state */
};

typedef struct fence__lock fence__lock;
typedef struct fence__wait fence__wait;
typedef struct fence__sem fence__sem;
typedef struct fence__shold fence__shold;
typedef struct fence__elect fence__elect;
typedef struct fence__cand fence__cand;

/* Slots of the table of revisions of elections that are gone (elect.c). */
#define FENCE__ELECT_TOMBS 256u

/* What one owner has (for the quotas, fsm.h): exists while the owner has a
 * lease; derived state (a snapshot does not carry it; restore rebuilds it
 * as it adds the leases, locks and waits). */
typedef struct fence__owner {
    fence__hnode hn;   /* in fsm.owners, by owner id */
    fence__link link;  /* in fsm.owner_list (creation order; freeing only) */
    uint64_t owner;    /* the owner id */
    uint32_t leases;   /* its leases */
    uint32_t locks;    /* locks its leases hold */
    uint32_t waits;    /* waits its leases have queued */
} fence__owner;

/* A lease. */
typedef struct fence__lease {
    fence__hnode hn;        /* in fsm.leases, by id */
    fence__hitem hi;        /* expiry */
    fence__link link;       /* in fsm.lease_list, by id */
    uint64_t id;            /* from 1, never reused */
    uint64_t ttl_ms;        /* granted TTL */
    uint64_t lock_delay_ms; /* lock-delay applied when it expires */
    uint64_t owner;         /* owner of the command that created it */
    fence__owner *own;      /* that owner's counts (never NULL) */
    fence__wait *acq_wait;  /* the ACQUIRE's wait while queued */
    fence__list held;       /* locks held (fence__lock.hlink), by token */
    fence__list waits;      /* waits queued (fence__wait.llink), by id */
    fence__list sheld;      /* shared holds (fence__shold.llink), by the
                               lock's token (shared.c) */
    uint32_t nheld;         /* length of held */
    uint32_t nwaits;        /* length of waits */
    uint32_t nsheld;        /* length of sheld */
    bool dedicated;         /* created by ACQUIRE */
    /* The small fields last and together: 168 bytes, not 184 with the
     * holes between them (one 16-byte malloc size class less per lease;
     * the memory rows of make bench, docs/resources.md). */
} fence__lease;

/* A lock object: exists while held (by one exclusive holder, or by the
 * shared holders of one phase, shared.c), in lock-delay, while free and kept
 * for the multi-lock first in its FIFO (multi.c), or (only transiently,
 * inside fence_fsm_advance) while free with waiters that are due to fail. */
struct fence__lock {
    fence__hnode hn;       /* in fsm.locks, by name */
    fence__hitem hi;       /* lock-delay end */
    fence__link hlink;     /* in holder's held list */
    fence__link tlink;     /* in fsm.lock_list, by token */
    uint64_t token;        /* token of the last grant (shared only by the
                              locks of one multi-lock grant, or while
                              shared-held, the phase's token, which every
                              shared holder carries; 0: never granted, kept
                              for a queued multi-lock) */
    struct fence__lease *holder; /* the exclusive holder, NULL otherwise */
    fence__list sholders;  /* shared holders (fence__shold.klink), in
                              admission order; empty unless shared-held */
    uint64_t delay_ms;     /* the lock-delay in force */
    fence__list queue;     /* FIFO of waiters (fence__wait.qlink) */
    fence__sem *sem;       /* a semaphore's slot lock (name#slot): the
                              semaphore (sem.c); NULL for a plain lock */
    fence__elect *elect;   /* non-NULL: the name is an election (elect.c) */
    uint32_t nsholders;    /* length of sholders */
    uint32_t nwaiters;     /* length of the FIFO */
    uint32_t slot;         /* with sem: the slot, 0..permits-1 */
    uint32_t snap_ord;     /* scratch, not state: the lock's 1-based place
                              in the lock section of the snapshot being
                              written (snapshot.c sets it as it writes that
                              section; waits name their locks by it, since
                              the locks of one multi-lock share a token) */
    /* The small fields last and together, the name right after them: the
     * name starts at byte 163, not 170 (with a short name, one 16-byte
     * malloc size class less per lock). */
    uint16_t name_len;     /* 1..FENCE_NAME_MAX */
    bool in_delay;         /* unavailable until hi.deadline_ms */
    uint8_t name[];        /* the name bytes */
};

/* A queued LOCK or ACQUIRE. */
struct fence__wait {
    fence__hnode hn;             /* in fsm.waits, by id */
    fence__hitem hi;             /* timeout */
    fence__link qlink;           /* in the lock's FIFO */
    fence__link llink;           /* in the lease's waits */
    fence__link wlink;           /* in fsm.wait_list, by id */
    uint64_t id;                 /* from 1, never reused */
    uint64_t wait_ms;            /* requested wait, for LEADER_START rebase */
    struct fence__lease *lease;  /* the lease that waits */
    fence__lock *lock;           /* the lock waited for (NULL for a
                                    semaphore's or a multi wait) */
    fence__sem *sem;             /* SEM_ACQUIRE: the semaphore waited for
                                    (in its FIFO by qlink), else NULL */
    bool acquire;                /* an ACQUIRE (its lease is dedicated) */
    bool shared;                 /* a shared (FENCE_CMD_F_SHARED) request */
    bool has_req;                /* req_id is a dedup key */
    uint64_t req_id;             /* client request id */
    fence__list reqs;            /* dedup records answered QUEUED with
                                  * this wait (fence__dedup.wlink), oldest
                                  * first: its own and those of LOCKs that
                                  * joined it; resolved when it ends */
    uint32_t nreqs;              /* length of reqs */
    struct fence__wait *head;    /* a LOCK_MULTI's place in one lock's
                                  * FIFO: the multi wait it belongs to
                                  * (only qlink, lock, lease and id are
                                  * used); NULL for a wait in its own
                                  * right */
    struct fence__wait *parts;   /* a LOCK_MULTI wait: its places, one per
                                  * name in request order (lock is NULL, qlink
                                  * unused); NULL for a wait on one lock */
    uint16_t nparts;             /* length of parts (0: not a multi wait) */
    fence__cand *cand;           /* ELECT_CAMPAIGN: the candidate's value
                                  * (elect.c); NULL for a LOCK/ACQUIRE */
};

/* A value of an election: a candidate's (on its wait) or the leader's. */
struct fence__cand {
    uint32_t len;      /* 0..FENCE_ELECT_VALUE_MAX */
    uint8_t bytes[];
};

/* An election (elect.c): the lock object of its name carries it.  The
 * lock's holder is the leader, its FIFO the candidates. */
struct fence__elect {
    uint64_t revision;  /* fsm.elect_rev at its last change (> 0) */
    fence__cand *value; /* the leader's value; non-NULL iff the lock has a
                         * holder */
};

/* One shared hold: lease `lease` holds lock `lock` in the lock's current
 * shared phase (its token is lock->token).  shared.c. */
struct fence__shold {
    fence__link klink;    /* in lock->sholders, admission order */
    fence__link llink;    /* in lease->sheld, by lock token */
    fence__lock *lock;
    struct fence__lease *lease;
};

/* A remembered command result for idempotent retries. */
typedef struct fence__dedup {
    fence__hnode hn;     /* in fsm.dedup, by (req_id, owner) */
    fence__link link;    /* in fsm.dedup_list, by age, oldest first */
    fence__link wlink;   /* in wait->reqs while attached */
    fence__wait *wait;   /* the wait its QUEUED result names; NULL once
                          * resolved (or for any other result) */
    uint64_t req_id;     /* the client request id */
    uint64_t owner;      /* the requesting owner (key: req_id, owner) */
    uint64_t fp;         /* fingerprint of the command (fence__cmd_fp) */
    fence_result result; /* what the command answered */
} fence__dedup;

/* The semaphores of sem.c (struct fence__sem there). */
typedef struct fence__sem fence__sem;

/* What the kinds of lock add to the machinery (grant.c, lock.c) at its
 * hand-off and release points, filled in once by kinds.c (the one place a
 * kind registers): a table in the state instead of a call up from the
 * machinery to the kinds' files.  Each is a no-op for a plain lock or
 * wait.  Not state: the same in every fence_fsm. */
typedef struct fence__kind_hooks {
    /* multi.c: offer a freed place to multi wait m; fail multi wait m. */
    bool (*multi_try)(fence_fsm *f, fence__wait *m);
    void (*multi_fail)(fence_fsm *f, fence__wait *m, uint8_t status,
                       bool revoke_dedicated);
    /* elect.c: election lock k was handed to wait w; k's holder just left
     * (held_unlink); wait w goes away without winning; lock k is being
     * destroyed. */
    void (*elect_won)(fence_fsm *f, fence__lock *k, fence__wait *w);
    void (*elect_lost)(fence_fsm *f, fence__lock *k);
    void (*elect_cand_free)(fence_fsm *f, fence__wait *w);
    void (*elect_lock_gone)(fence_fsm *f, fence__lock *k);
    /* sem.c: slot lock k just became available (handoff); free
     * semaphore s when nothing keeps it (wait_fail); take wait w out of
     * its semaphore's FIFO (lock.c wait_unlink). */
    void (*sem_slot_free)(fence_fsm *f, fence__lock *k);
    void (*sem_maybe_destroy)(fence_fsm *f, fence__sem *s);
    void (*sem_unqueue)(fence__wait *w);
} fence__kind_hooks;

struct fence_fsm {
    fence_alloc alloc;       /* the injected allocator */
    uint64_t hash_seed;      /* keys the hash tables (not state) */
    uint8_t oom;             /* FENCE__OOM_*: what a failed allocation does */
    fence_event *events;     /* events of the last apply/advance call */
    size_t n_events;         /* entries used in events */
    size_t cap_events;       /* entries allocated in events */
    fence_limits limits;     /* in force */
    uint64_t now_ms;         /* fsm time */
    uint64_t last_token;     /* last token issued; 0 before any */
    uint64_t next_lease_id;  /* id of the next lease */
    uint64_t next_wait_id;   /* id of the next wait */
    fence__htab leases;      /* by id */
    fence__htab locks;       /* by name */
    fence__htab waits;       /* by id */
    fence__htab dedup;       /* by req_id */
    fence__htab owners;      /* fence__owner, by owner id (derived) */
    fence__list owner_list;  /* every fence__owner (fence__owner.link) */
    fence__list lease_list;  /* all leases (fence__lease.link), by id */
    fence__list lock_list;   /* all locks (fence__lock.tlink), by token */
    fence__list wait_list;   /* all waits (fence__wait.wlink), by id */
    fence__list dedup_list;  /* dedup records (fence__dedup.link), by age */
    uint64_t nheld;          /* locks with an exclusive holder */
    uint64_t nsheld;         /* shared holds, over all locks */
    uint64_t nslocks;        /* locks held shared (nsholders > 0) */
    uint64_t elect_rev;      /* last election revision given (elect.c) */
    uint64_t nelect;         /* lock objects that are elections */
    uint64_t elect_tomb[FENCE__ELECT_TOMBS]; /* per slot of an unkeyed name
                              * hash: the highest revision of an election
                              * that went away (elect.c) */
    uint64_t n_grants;       /* counted events (fence_fsm_stats; not state) */
    uint64_t n_handoffs;     /* grants to a queued waiter */
    uint64_t n_expired;      /* leases that ran out */
    uint64_t n_expired_held; /* ... holding at least one lock */
    uint64_t n_revoked;      /* live leases revoked */
    fence__heap heap;        /* every pending deadline */
    fence__htab sems;        /* semaphores (fence__sem), by name (sem.c) */
    fence__list sem_list;    /* every semaphore (fence__sem.link), by
                                creation */
    uint64_t n_sem_waits;    /* waits in the semaphores' FIFOs (part of
                                waits.count) */
    fence__kind_hooks kinds; /* the kinds' hooks (kinds.c; not state) */
};

/* The object of a list link, or NULL (for walking the lists). */
#define LEASE_OF(lnk) FENCE__LIST_ITEM(fence__lease, link, (lnk))
#define HELD_OF(lnk) FENCE__LIST_ITEM(fence__lock, hlink, (lnk))
#define LOCK_OF(lnk) FENCE__LIST_ITEM(fence__lock, tlink, (lnk))
#define QWAIT_OF(lnk) FENCE__LIST_ITEM(fence__wait, qlink, (lnk))
#define LWAIT_OF(lnk) FENCE__LIST_ITEM(fence__wait, llink, (lnk))
#define WAIT_OF(lnk) FENCE__LIST_ITEM(fence__wait, wlink, (lnk))
#define DEDUP_OF(lnk) FENCE__LIST_ITEM(fence__dedup, link, (lnk))
#define OWNER_OF(lnk) FENCE__LIST_ITEM(fence__owner, link, (lnk))
#define WDEDUP_OF(lnk) FENCE__LIST_ITEM(fence__dedup, wlink, (lnk))
#define KSHOLD_OF(lnk) FENCE__LIST_ITEM(fence__shold, klink, (lnk))
#define LSHOLD_OF(lnk) FENCE__LIST_ITEM(fence__shold, llink, (lnk))

/* ---- mem.c: memory ------------------------------------------------------- */

/* Allocation through the injected allocator.  A failure returns NULL in
 * FENCE__OOM_RETURN mode and stops the process in the others. */
void *fence__alloc(fence_fsm *f, size_t size);
void fence__free(fence_fsm *f, void *p);
/* What a failed allocation does in mode oom (returns only in RETURN). */
void fence__oom(uint8_t oom);

/* ---- heap.c (beside heap.h) ------------------------------------------------ */

/* Room in the heap for every object that may need a slot plus extra new
 * ones; false as for fence__heap_reserve. */
bool fence__heap_room(fence_fsm *f, uint32_t extra);

/* ---- fsm.c: lifecycle ------------------------------------------------------ */

/* Keyed hash of a 64-bit key (ids, request ids).  Still a bijection, so
 * equal hashes mean equal keys and lookups compare hashes only. */
static inline uint64_t fence__key_hash(const fence_fsm *f, uint64_t key)
{
    return fence__hash_u64(key ^ f->hash_seed);
}

/* Create an empty state with the given allocator and FENCE__OOM_* mode;
 * NULL on lack of memory (RETURN mode only). */
fence_fsm *fence__fsm_new(const fence_alloc *a, uint64_t hash_seed,
                          uint8_t oom);
/* Free every object of the state and the state itself. */
void fence__fsm_free(fence_fsm *f);

/* ---- lease.c ---------------------------------------------------------------- */

/* Create a lease of owner and link it everywhere (and count it for its
 * owner).  NULL at the heap's index range, or on lack of memory in
 * FENCE__OOM_RETURN mode. */
fence__lease *fence__lease_add(fence_fsm *f, uint64_t id, uint64_t ttl_ms,
                               uint64_t lock_delay_ms, uint64_t deadline_ms,
                               bool dedicated, uint64_t owner);
/* The counts of owner, or NULL when it has no lease. */
fence__owner *fence__owner_counts(const fence_fsm *f, uint64_t owner);
fence__lease *fence__lease_find(const fence_fsm *f, uint64_t id);
/* Unlink and free a lease that holds nothing and waits for nothing. */
void fence__lease_destroy(fence_fsm *f, fence__lease *l);
/* True when the lease is live at fsm time now. */
bool fence__lease_live(const fence_fsm *f, const fence__lease *l);
/* The deadline a (re)started lease gets now. */
uint64_t fence__lease_deadline(const fence_fsm *f, const fence__lease *l);
/* Lock k (free) becomes held by l, at the end of l's held list. */
void fence__held_append(fence_fsm *f, fence__lease *l, fence__lock *k);
/* Lock k leaves its holder's held list and becomes free. */
void fence__held_unlink(fence_fsm *f, fence__lock *k);

/* ---- lock.c ---------------------------------------------------------------- */

/* The hash the lock table keys a name by. */
static inline uint64_t fence__lock_hash(const fence_fsm *f, const uint8_t *name, uint16_t len)
{
    return fence__hash_name(f->hash_seed, name, len);
}
fence__lock *fence__lock_find(const fence_fsm *f, const uint8_t *name,
                              uint16_t len);
/* The same with hash = fence__lock_hash(f, name, len), for a caller that
 * needs the hash again (to add the lock it did not find). */
fence__lock *fence__lock_find_hashed(const fence_fsm *f, const uint8_t *name,
                                     uint16_t len, uint64_t hash);
/* Create a lock object with the given token and holder (NULL: the caller
 * grants it or puts it in lock-delay at once).  NULL as for
 * fence__lease_add. */
fence__lock *fence__lock_add(fence_fsm *f, const uint8_t *name, uint16_t len,
                             uint64_t token, fence__lease *holder);
/* The same with the name's hash given (fence__lock_hash). */
fence__lock *fence__lock_add_hashed(fence_fsm *f, const uint8_t *name, uint16_t len,
                                    uint64_t hash, uint64_t token, fence__lease *holder);
/* Put a free lock into lock-delay until end_ms. */
void fence__lock_set_delay(fence_fsm *f, fence__lock *k, uint64_t delay_ms,
                           uint64_t end_ms);
/* Give lock k a new (larger) token: it moves to the end of the by-token
 * list. */
void fence__lock_retoken(fence_fsm *f, fence__lock *k, uint64_t token);
/* Destroy a lock object if nothing keeps it alive any more. */
void fence__lock_maybe_destroy(fence_fsm *f, fence__lock *k);
fence__wait *fence__wait_find(const fence_fsm *f, uint64_t id);
/* Create a wait at the tail of lock k's FIFO.  NULL as for
 * fence__lease_add. */
fence__wait *fence__wait_add(fence_fsm *f, uint64_t id, fence__lease *l,
                             fence__lock *k, uint64_t wait_ms,
                             uint64_t deadline_ms, bool acquire, bool has_req,
                             uint64_t req_id);
/* Unlink a wait from every structure (the caller frees it). */
void fence__wait_unlink(fence_fsm *f, fence__wait *w);
/* The wait of lease l on lock k, or NULL (scans the shorter list). */
fence__wait *fence__wait_of(const fence__lease *l, const fence__lock *k);
/* True when lease l already waits for lock k. */
bool fence__is_waiting(const fence__lease *l, const fence__lock *k);

/* ---- dedup.c --------------------------------------------------------------- */

fence__dedup *fence__dedup_find(const fence_fsm *f, uint64_t req_id, uint64_t owner);
/* A fingerprint of everything a command asks for. */
uint64_t fence__cmd_fp(const fence_cmd *cmd);
/* Add a record as the newest (restore uses it).  NULL on lack of memory
 * (FENCE__OOM_RETURN mode only). */
fence__dedup *fence__dedup_add(fence_fsm *f, uint64_t req_id, uint64_t owner, uint64_t fp,
                               const fence_result *r);
/* Link a filled-in record as the newest. */
void fence__dedup_link(fence_fsm *f, fence__dedup *d);
/* Unlink the oldest record and hand it back (not freed). */
fence__dedup *fence__dedup_pop_oldest(fence_fsm *f);
/* Unlink a record and free it. */
void fence__dedup_forget(fence_fsm *f, fence__dedup *d);
/* Attach record d (its result QUEUED with wait w's id) to w, so that the
 * end of w resolves it. */
void fence__dedup_attach(fence__dedup *d, fence__wait *w);
/* Detach record d from its wait, if attached. */
void fence__dedup_detach(fence__dedup *d);
/* Evict the oldest records until at most max remain. */
void fence__dedup_trim(fence_fsm *f, uint32_t max);

/* ---- shared.c: shared (read) holds ------------------------------------------ */

/* True when lock k has no holder of either mode and is not in lock-delay. */
static inline bool fence__lock_is_free(const fence__lock *k)
{
    return k->holder == NULL && k->nsholders == 0 && !k->in_delay;
}
/* Lease l's shared hold of lock k, or NULL (scans the shorter list).
 * Inline: lock.c asks it too, and shared.c calls down into lock.c. */
static inline fence__shold *fence__shold_of(const fence__lease *l, const fence__lock *k)
{
    if (l->nsheld <= k->nsholders) {
        for (fence__link *p = l->sheld.first; p != NULL; p = p->next) {
            if (LSHOLD_OF(p)->lock == k) {
                return LSHOLD_OF(p);
            }
        }
        return NULL;
    }
    for (fence__link *p = k->sholders.first; p != NULL; p = p->next) {
        if (KSHOLD_OF(p)->lease == l) {
            return KSHOLD_OF(p);
        }
    }
    return NULL;
}
/* Lease l joins lock k's shared phase (k not exclusive-held, not in
 * delay; l not already a holder).  NULL on lack of memory (RETURN mode). */
fence__shold *fence__shold_add(fence_fsm *f, fence__lock *k, fence__lease *l);
/* End one shared hold (unlinked and freed); the lock may become free. */
void fence__shold_remove(fence_fsm *f, fence__shold *s);
/* Shared-held lock k: admit into its phase the shared waiters now at the
 * head of its FIFO (grant.c; multi.c calls it when a multi wait leaves). */
void fence__admit_shared(fence_fsm *f, fence__lock *k);
/* The invariants of the shared holds (check.c calls it). */
const char *fence__check_shared(const fence_fsm *f);
/* The snapshot's "rw" section (snapshot.c calls these). */
size_t fence__rw_snap_size(const fence_fsm *f);
size_t fence__rw_snap_write(const fence_fsm *f, uint8_t *p, size_t cap);
/* Decode the section from p[0..len) into n (v: n's locks in section order);
 * *used receives the bytes read.  0, FENCE_ST_INVALID or FENCE_ST_LIMIT. */
int fence__rw_snap_read(fence_fsm *n, const uint8_t *p, size_t len, size_t *used,
                        fence__lock **v, uint32_t nv);

/* ---- grant.c: the lock machinery ------------------------------------------ */

/* Forget the events of the previous call (keeps the array). */
void fence__events_reset(fence_fsm *f);
/* The body of fence_fsm_advance without the events reset. */
void fence__advance(fence_fsm *f, uint64_t now_ms);
/* Process every deadline due at fsm time, in (deadline, kind, id) order. */
void fence__process_due(fence_fsm *f);
/* Hand free lock k to its first eligible waiter (or free it); report the
 * end of wait w (its dedup records resolved, an event); remove a lease
 * (its locks released, its waits failed); fail a queued wait (NIL or
 * NOLEASE; a dedicated lease too when revoke_dedicated); forget every
 * remembered result attached to wait w (CANCEL). */
void fence__handoff(fence_fsm *f, fence__lock *k);
void fence__emit(fence_fsm *f, fence__wait *w, const fence_result *r);
void fence__lease_remove(fence_fsm *f, fence__lease *l, bool expired);
void fence__wait_fail(fence_fsm *f, fence__wait *w, uint8_t status,
                      bool revoke_dedicated);
void fence__forget_reqs(fence_fsm *f, fence__wait *w);
/* Whether waiter w (a FIFO place) may be granted now. */
bool fence__waiter_eligible(const fence_fsm *f, const fence__wait *w);
/* Whether the owner of c would pass quota_leases with one more lease, or
 * quota_locks with n more locks. */
bool fence__quota_leases_full(const fence_fsm *f, const fence_cmd *c);
bool fence__quota_locks_full(const fence_fsm *f, const fence_cmd *c, uint32_t n);
/* Whether command c may act on lease l (its owner, or ADMIN). */
bool fence__may_use(const fence_cmd *c, const fence__lease *l);
/* UNLOCK_SHARED (apply.c). */
void fence__cmd_unlock_shared(fence_fsm *f, const fence_cmd *c, fence_result *r);
/* Grant free lock k to l (the next token); lease l joins k's current
 * shared phase (its token); begin a shared phase on free k with l (the
 * next token); queue l on k (fills r: QUEUED or LIMIT), as a LOCK's wait,
 * or as an ACQUIRE's when acquire. */
uint64_t fence__grant(fence_fsm *f, fence__lock *k, fence__lease *l);
uint64_t fence__join_shared(fence_fsm *f, fence__lock *k, fence__lease *l);
uint64_t fence__grant_shared(fence_fsm *f, fence__lock *k, fence__lease *l);
fence__wait *fence__enqueue(fence_fsm *f, fence__lease *l, fence__lock *k,
                            const fence_cmd *c, fence_result *r);
fence__wait *fence__enqueue_as(fence_fsm *f, fence__lease *l, fence__lock *k,
                               const fence_cmd *c, bool acquire, fence_result *r);

/* ---- kinds.c: the kinds' hooks ------------------------------------------------ */

/* Fill f->kinds (fence__fsm_new). */
void fence__kinds_init(fence_fsm *f);

/* ---- apply.c --------------------------------------------------------------- */

/* The body of fence_fsm_apply without the events reset (apply_entry runs
 * a batch through it and keeps every command's events). */
void fence__apply_one(fence_fsm *f, uint64_t now_ms, const fence_cmd *cmd,
                      fence_result *out);

/* ---- multi.c ---------------------------------------------------------------- */

/* LOCK_MULTI (fsm.h, docs/protocol.md "LOCK.MULTI"). */
void fence__multi_cmd(fence_fsm *f, const fence_cmd *c, fence_result *r);
/* Grant multi wait m if it is the first eligible waiter of every lock it
 * names and all of them are free; true when granted (m is freed).  With
 * fence__multi_fail, a hook of the lock machinery (f->kinds, kinds.c). */
bool fence__multi_try(fence_fsm *f, fence__wait *m);
/* Fail multi wait m (NIL or NOLEASE) and offer its freed places on; a
 * dedicated lease goes too when revoke_dedicated is set. */
void fence__multi_fail(fence_fsm *f, fence__wait *m, uint8_t status, bool revoke_dedicated);
/* Names (FIFO places) a wait covers: 1, or a multi wait's count. */
static inline uint32_t fence__wait_names(const fence__wait *w)
{
    return w->parts != NULL ? w->nparts : 1;
}
/* The wait a FIFO place belongs to. */
static inline fence__wait *fence__wait_owner(fence__wait *w)
{
    return w->head != NULL ? w->head : w;
}
/* The multi section of a snapshot (after the dedup section): its size,
 * writer and reader (v: the locks in snapshot order; the reader also
 * attaches the QUEUED dedup records of the multi waits). */
size_t fence__multi_snap_size(const fence_fsm *f);
uint8_t *fence__multi_snap_write(const fence_fsm *f, uint8_t *p, uint8_t *end);
int fence__multi_snap_read(fence_fsm *n, const uint8_t **p, const uint8_t *end,
                           fence__lock **v, uint32_t nv);
/* What check.c asks of the multi waits: NULL when all holds. */
const char *fence__multi_check(const fence_fsm *f);

/* ---- checkpoint.c ---------------------------------------------------------- */

/* LEASE_CHECKPOINT (dispatched by apply.c). */
void fence__cmd_checkpoint(fence_fsm *f, const fence_cmd *c, fence_result *r);

/* ---- elect.c --------------------------------------------------------------- */

void fence__elect_campaign(fence_fsm *f, const fence_cmd *c, fence_result *r);
void fence__elect_proclaim(fence_fsm *f, const fence_cmd *c, fence_result *r);
void fence__elect_resign(fence_fsm *f, const fence_cmd *c, fence_result *r);
/* Hooks of the lock machinery (f->kinds, kinds.c; each a no-op for a plain
 * lock / wait): election lock k was handed to wait w (w's value becomes
 * the leader's); k's holder just left (held_unlink); wait w goes away
 * without winning; lock k is being destroyed. */
void fence__elect_won(fence_fsm *f, fence__lock *k, fence__wait *w);
void fence__elect_lost(fence_fsm *f, fence__lock *k);
void fence__elect_cand_free(fence_fsm *f, fence__wait *w);
void fence__elect_lock_gone(fence_fsm *f, fence__lock *k);
/* Free every election's and candidate's memory (fence__fsm_free). */
void fence__elect_free_all(fence_fsm *f);
/* The invariants of elections (check.c). */
const char *fence__elect_check(const fence_fsm *f);
/* Snapshot section "elect" (snapshot.c): its size, writing it at p (cap
 * bytes, at least the size; returns the bytes written), and reading it
 * into the restored state n from p (len bytes left): 0 and *used, or
 * FENCE_ST_INVALID / FENCE_ST_LIMIT. */
size_t fence__elect_snap_size(const fence_fsm *f);
size_t fence__elect_snap_write(const fence_fsm *f, uint8_t *p, size_t cap);
int fence__elect_snap_read(fence_fsm *n, const uint8_t *p, size_t len, size_t *used);

/* For sem.c (with fence__grant above): whether waiter w may be granted
 * now. */
bool fence__waiter_eligible(const fence_fsm *f, const fence__wait *w);

/* ---- sem.c: semaphores of slots ---------------------------------------------- */

/* A semaphore of permits slots.  Slot i is an ordinary lock object named
 * name#i (the fence a resource guards), with sem/slot set: it is held,
 * released, expired and put in lock-delay like any lock, but hand-off goes
 * to the semaphore's FIFO (fence__sem_slot_free).  The semaphore exists
 * while a slot lock exists (held or in lock-delay) or anyone waits. */
struct fence__sem {
    fence__hnode hn;       /* in fsm.sems, by name */
    fence__link link;      /* in fsm.sem_list, by creation */
    uint32_t permits;      /* N: 1..FENCE_SEM_PERMITS_MAX, fixed */
    uint32_t nslots;       /* slot locks that exist (bits set in used) */
    uint64_t used[FENCE_SEM_PERMITS_MAX / 64]; /* bit i: slot lock i exists */
    fence__list queue;     /* FIFO of waits (fence__wait.qlink), by id */
    uint32_t nwaiters;     /* length of queue */
    uint16_t name_len;     /* 1..FENCE_NAME_MAX */
    uint8_t name[];        /* the name bytes */
};
#define SEM_OF(lnk) FENCE__LIST_ITEM(fence__sem, link, (lnk))

fence__sem *fence__sem_find(const fence_fsm *f, const uint8_t *name, uint16_t len);
/* When name is base#i (i canonical decimal: no sign, no leading zero, at
 * most four digits): true, with base's length and i. */
bool fence__sem_split_slot(const uint8_t *name, uint16_t len, uint16_t *base_len,
                           uint32_t *slot);
/* True when name belongs to a semaphore: its own name, or name#i of a slot
 * i < N of an existing semaphore.  LOCK, ACQUIRE and UNLOCK of such a name
 * answer WRONGTYPE (one holder per fence). */
bool fence__sem_claims(const fence_fsm *f, const uint8_t *name, uint16_t len);
/* Slot lock k (k->sem set) just became available (holder NULL, no
 * lock-delay): grant it to the semaphore's first eligible waiter, or free
 * it (and the semaphore when nothing keeps it). */
void fence__sem_slot_free(fence_fsm *f, fence__lock *k);
/* Free semaphore s when no slot lock exists and no one waits. */
void fence__sem_maybe_destroy(fence_fsm *f, fence__sem *s);
/* Take wait w (w->sem set) out of its semaphore's FIFO (wait_unlink). */
void fence__sem_unqueue(fence__wait *w);
void fence__cmd_sem_acquire(fence_fsm *f, const fence_cmd *c, fence_result *r);
void fence__cmd_sem_release(fence_fsm *f, const fence_cmd *c, fence_result *r);
/* Free every semaphore (fence__fsm_free). */
void fence__sem_free_all(fence_fsm *f);
/* The invariants of the semaphores and their slot locks (check.c). */
const char *fence__sem_check(const fence_fsm *f);
/* Snapshot section "sem" (sem_snap.c): size, write (returns the end),
 * read into a state being restored (0 or FENCE_ST_*). */
size_t fence__sem_snap_size(const fence_fsm *f);
uint8_t *fence__sem_snap_write(const fence_fsm *f, uint8_t *p, const uint8_t *end);
int fence__sem_snap_read(fence_fsm *n, const uint8_t **p, const uint8_t *end);

#endif /* FENCE_FSM_INT_H */
