/* The deadline heap (private to src/core): one binary min-heap of every
 * pending deadline (lease expiry, wait timeout, lock-delay end), ordered by
 * (key, kind, id).  Items are embedded in their owners and know their
 * position, so removal and re-keying are O(log n).  Capacity is reserved
 * when an owner is created, so pushing never allocates.
 *
 * An item's key is its deadline less its slack, and the slack is 0 except
 * after fence__heap_extend: a renewal (LEASE_KEEPALIVE, LEASE_CHECKPOINT)
 * only moves a lease's deadline later and leaves its place in the heap,
 * so a checkpoint of thousands of ids does not sift the heap once per id
 * (each sift a walk to a leaf, a cache miss a level, at a million leases)
 * while the key is more than half a TTL away.
 * The stale key comes due early; whoever finds it due at the top
 * (fence__heap_settle: process_due in grant.c, fence_fsm_next_deadline)
 * re-keys it to its deadline then; a renewal within half a TTL of the
 * key sifts as before (a lease renewed every ttl/3 sifts at every other
 * renewal, and its stale key never comes due).  Every key is at most its deadline,
 * so an item's true (deadline, kind, id) is reached in the same order as
 * with exact keys: expiry order, and so apply, does not depend on the
 * slack, nor does a snapshot (it carries deadlines), and a restored state
 * (all slack 0) expires its leases alike (docs/leases.md).
 */
#ifndef FENCE_CORE_HEAP_H
#define FENCE_CORE_HEAP_H

#include <stdbool.h>
#include <stdint.h>

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

/* Largest slack (ms): a renewal that would move a deadline further past
 * its key is re-keyed at once (fence__heap_move). */
#define FENCE__HEAP_SLACK_MAX ((1u << 24) - 1)

/* One deadline in the heap, embedded in its owner. */
typedef struct fence__hitem {
    uint64_t deadline_ms; /* fsm time at which it is due */
    uint64_t id;          /* lease id, wait id, or the lock's token */
    uint32_t idx;         /* position in the heap, or FENCE__NOT_IN_HEAP */
    uint32_t kind : 8;    /* FENCE__K_* */
    uint32_t slack : 24;  /* deadline_ms - heap key (fence__heap_extend) */
} fence__hitem;

/* The heap. */
typedef struct fence__heap {
    fence__hitem **items; /* the array, items[0] the earliest */
    uint32_t len;         /* items in the heap */
    uint32_t cap;         /* slots allocated */
} fence__heap;

/* The order of heap items: (key, kind, id), key = deadline - slack. */
bool fence__hitem_less(const fence__hitem *a, const fence__hitem *b);

/* Make room for need items in all.  false when need exceeds the heap's
 * index range (a function of the counts alone, the same on every replica)
 * or on lack of memory in a fresh state machine; nothing changed then. */
bool fence__heap_reserve(fence_fsm *f, fence__heap *h, uint64_t need);
/* Free the array. */
void fence__heap_free(fence_fsm *f, fence__heap *h);
/* Add an item that is not in the heap (capacity was reserved). */
void fence__heap_push(fence__heap *h, fence__hitem *it);
/* Remove an item if it is in the heap. */
void fence__heap_remove(fence__heap *h, fence__hitem *it);
/* Change an item's deadline, keeping its position right (slack 0). */
void fence__heap_move(fence__heap *h, fence__hitem *it, uint64_t deadline_ms);
/* Move an item's deadline later, leaving its place (and key) as they are
 * when its key is later than lazy_after and the slack allows; otherwise
 * as fence__heap_move.  lazy_after (a renewal: now + ttl/2) bounds how
 * soon a stale key may come due: a lease renewed more often than every
 * ttl/2 is re-keyed by a renewal before its key comes due, so stale keys
 * never come due in a wave (a million leases granted in one second would
 * otherwise all be re-keyed in the same second, TTL later). */
void fence__heap_extend(fence__heap *h, fence__hitem *it, uint64_t deadline_ms,
                        uint64_t lazy_after);
/* Re-key the items at the top whose key is below their deadline and at
 * most now_ms, until the top's key is its deadline or later than now_ms:
 * then the top's key is the earliest deadline if that is at most now_ms,
 * and a lower bound of it later than now_ms otherwise.  UINT64_MAX
 * settles the top completely.  Changes no deadline, only places. */
void fence__heap_settle(fence__heap *h, uint64_t now_ms);
/* Restore the heap order over the whole array (after every deadline
 * changed; every slack becomes 0). */
void fence__heap_rebuild(fence__heap *h);
/* The earliest item, or NULL. */
fence__hitem *fence__heap_top(const fence__heap *h);

#endif /* FENCE_CORE_HEAP_H */
