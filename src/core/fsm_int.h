/* Private to src/core: the state machine's data structures, shared by
 * fsm.c (commands, time, queries, check), snapshot.c and entry.c.
 *
 * Layout in one paragraph: leases, locks, waits and dedup records live in
 * chained hash tables keyed by id / name / req_id.  Every object with a
 * deadline (lease expiry, wait timeout, lock-delay end) embeds a heap item;
 * one binary min-heap orders them by (deadline, kind, id).  Intrusive lists
 * keep the orders the snapshot and the semantics need without sorting:
 * leases by id (creation order), locks by current token (every grant moves
 * its lock to the tail), waits by id, a lock's queue FIFO (= by wait id), a
 * lease's held locks by token and its waits by id, dedup records by age.
 */
#ifndef FENCE_FSM_INT_H
#define FENCE_FSM_INT_H

#include <stdlib.h>

#include "common/assert.h"
#include "core/fsm.h"

/* Kinds of heap items; also the tie-break order at equal deadlines: a wait
 * timeout runs before a lease expiry, so a queued ACQUIRE whose dedicated
 * lease ends at the same instant fails as a timeout (NIL). */
enum {
    FENCE__K_WAIT = 0,  /* a queued wait times out */
    FENCE__K_LEASE = 1, /* a lease expires */
    FENCE__K_DELAY = 2, /* a lock's lock-delay ends */
};

#define FENCE__NOT_IN_HEAP UINT32_MAX

/* One deadline in the heap, embedded in its owner. */
typedef struct fence__hitem {
    uint64_t deadline_ms; /* fsm time at which it is due */
    uint64_t id;          /* lease id, wait id, or the lock's token */
    uint8_t kind;         /* FENCE__K_* */
    uint32_t idx;         /* position in the heap, or FENCE__NOT_IN_HEAP */
} fence__hitem;

/* Intrusive hash chain link. */
typedef struct fence__hnode {
    struct fence__hnode *next; /* next in the bucket */
    uint64_t hash;             /* full hash of the key */
} fence__hnode;

/* A chained hash table; the bucket array doubles when count > buckets (if
 * memory allows; otherwise chains just grow longer). */
typedef struct fence__htab {
    fence__hnode **b; /* buckets */
    uint32_t mask;    /* buckets - 1 (a power of two) */
    uint32_t count;   /* nodes in the table */
} fence__htab;

typedef struct fence__lock fence__lock;
typedef struct fence__wait fence__wait;

/* A lease. */
typedef struct fence__lease {
    fence__hnode hn;                  /* in fsm.leases, by id */
    fence__hitem hi;                  /* expiry */
    uint64_t id;                      /* from 1, never reused */
    uint64_t ttl_ms;                  /* granted TTL */
    uint64_t lock_delay_ms;           /* lock-delay applied when it expires */
    bool dedicated;                   /* created by ACQUIRE */
    fence__wait *acq_wait;            /* the ACQUIRE's wait while queued */
    struct fence__lease *prev, *next; /* all leases, by id */
    fence__lock *held_head;           /* locks held, by token */
    fence__lock *held_tail;           /* last of held */
    uint32_t nheld;                   /* length of held */
    fence__wait *waits_head;          /* waits queued, by wait id */
    fence__wait *waits_tail;          /* last of waits */
    uint32_t nwaits;                  /* length of waits */
} fence__lease;

/* A lock object: exists while held, in lock-delay, or (only transiently,
 * inside fence_fsm_advance) while free with waiters that are due to fail. */
struct fence__lock {
    fence__hnode hn;                    /* in fsm.locks, by name */
    fence__hitem hi;                    /* lock-delay end */
    uint64_t token;                     /* token of the last grant (unique) */
    fence__lease *holder;               /* NULL when free */
    fence__lock *hprev, *hnext;         /* in holder's held list */
    fence__lock *tprev, *tnext;         /* all locks, by token */
    bool in_delay;                      /* unavailable until hi.deadline_ms */
    uint64_t delay_ms;                  /* the lock-delay in force */
    fence__wait *q_head;                /* FIFO of waiters */
    fence__wait *q_tail;                /* last waiter */
    uint32_t nwaiters;                  /* length of the FIFO */
    uint16_t name_len;                  /* 1..FENCE_NAME_MAX */
    uint8_t name[];                     /* the name bytes */
};

/* A queued LOCK or ACQUIRE. */
struct fence__wait {
    fence__hnode hn;            /* in fsm.waits, by id */
    fence__hitem hi;            /* timeout */
    uint64_t id;                /* from 1, never reused */
    uint64_t wait_ms;           /* requested wait, for LEADER_START rebase */
    fence__lease *lease;        /* the lease that waits */
    fence__lock *lock;          /* the lock waited for */
    bool acquire;               /* an ACQUIRE (its lease is dedicated) */
    bool has_req;               /* req_id is a dedup key */
    uint64_t req_id;            /* client request id */
    fence__wait *qprev, *qnext; /* in the lock's FIFO */
    fence__wait *lprev, *lnext; /* in the lease's waits */
    fence__wait *wprev, *wnext; /* all waits, by id */
};

/* A remembered command result for idempotent retries. */
typedef struct fence__dedup {
    fence__hnode hn;                  /* in fsm.dedup, by req_id */
    uint64_t req_id;                  /* the client request id */
    uint64_t fp;                      /* fingerprint of the command (fence__cmd_fp) */
    fence_result result;              /* what the command answered */
    struct fence__dedup *prev, *next; /* by age, oldest first */
} fence__dedup;

struct fence_fsm {
    fence_alloc alloc;         /* the injected allocator */
    fence_event *events;       /* events of the last apply/advance call */
    size_t n_events;           /* entries used in events */
    size_t cap_events;         /* entries allocated in events */
    uint64_t hash_seed;        /* keys the hash tables (not state) */
    fence_limits limits;       /* in force */
    uint64_t now_ms;           /* fsm time */
    uint64_t last_token;       /* last token issued; 0 before any */
    uint64_t next_lease_id;    /* id of the next lease */
    uint64_t next_wait_id;     /* id of the next wait */
    fence__htab leases;        /* by id */
    fence__htab locks;         /* by name */
    fence__htab waits;         /* by id */
    fence__htab dedup;         /* by req_id */
    fence__lease *lease_head;  /* all leases by id */
    fence__lease *lease_tail;  /* last lease */
    fence__lock *lock_head;    /* all locks by token */
    fence__lock *lock_tail;    /* last lock */
    fence__wait *wait_head;    /* all waits by id */
    fence__wait *wait_tail;    /* last wait */
    fence__dedup *dd_head;     /* oldest dedup record */
    fence__dedup *dd_tail;     /* newest dedup record */
    uint64_t nheld;            /* locks with a holder */
    fence__hitem **heap;       /* min-heap of deadlines */
    uint32_t heap_len;         /* items in the heap */
    uint32_t heap_cap;         /* >= leases + waits + locks, always */
};

/* Forget the events of the previous call (keeps the array). */
void fence__events_reset(fence_fsm *f);
/* The body of fence_fsm_apply without the events reset (apply_entry runs
 * a batch through it and keeps every command's events). */
void fence__apply_one(fence_fsm *f, uint64_t now_ms, const fence_cmd *cmd,
                      fence_result *out);
/* The body of fence_fsm_advance without the events reset. */
void fence__advance(fence_fsm *f, uint64_t now_ms);

/* Allocation through the injected allocator. */
void *fence__alloc(fence_fsm *f, size_t size);
void fence__free(fence_fsm *f, void *p);

/* Hash of a 64-bit key (a bijection, so equal hashes mean equal keys). */
uint64_t fence__hash_u64(uint64_t x);
/* Keyed hash of a lock name. */
uint64_t fence__hash_name(uint64_t seed, const uint8_t *name, uint16_t len);

/* Create an empty state with the given allocator; NULL on lack of memory. */
fence_fsm *fence__fsm_new(const fence_alloc *a, uint64_t hash_seed);
/* Free every object of the state and the state itself. */
void fence__fsm_free(fence_fsm *f);

/* Building blocks restore uses to rebuild a state (fsm.c).  Each returns
 * NULL on lack of memory. */
fence__lease *fence__lease_add(fence_fsm *f, uint64_t id, uint64_t ttl_ms,
                               uint64_t lock_delay_ms, uint64_t deadline_ms,
                               bool dedicated);
fence__lease *fence__lease_find(const fence_fsm *f, uint64_t id);
fence__lock *fence__lock_find(const fence_fsm *f, const uint8_t *name,
                              uint16_t len);
fence__lock *fence__lock_add(fence_fsm *f, const uint8_t *name, uint16_t len,
                             uint64_t token, fence__lease *holder);
void fence__lock_set_delay(fence_fsm *f, fence__lock *k, uint64_t delay_ms,
                           uint64_t end_ms);
fence__wait *fence__wait_find(const fence_fsm *f, uint64_t id);
fence__wait *fence__wait_add(fence_fsm *f, uint64_t id, fence__lease *l,
                             fence__lock *k, uint64_t wait_ms,
                             uint64_t deadline_ms, bool acquire, bool has_req,
                             uint64_t req_id);
fence__dedup *fence__dedup_find(const fence_fsm *f, uint64_t req_id);
uint64_t fence__cmd_fp(const fence_cmd *cmd);
fence__dedup *fence__dedup_add(fence_fsm *f, uint64_t req_id, uint64_t fp,
                               const fence_result *r);
/* True when lease l already waits for lock k. */
bool fence__is_waiting(const fence__lease *l, const fence__lock *k);

/* CRC32C (Castagnoli) of a buffer, bit by bit (no tables, no globals). */
uint32_t fence__crc32c(const uint8_t *p, size_t n);

#endif /* FENCE_FSM_INT_H */
