/* The deadline heap (private to src/core): one binary min-heap of every
 * pending deadline (lease expiry, wait timeout, lock-delay end), ordered by
 * (deadline, kind, id).  Items are embedded in their owners and know their
 * position, so removal and re-keying are O(log n).  Capacity is reserved
 * when an owner is created, so pushing never allocates.
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

/* One deadline in the heap, embedded in its owner. */
typedef struct fence__hitem {
    uint64_t deadline_ms; /* fsm time at which it is due */
    uint64_t id;          /* lease id, wait id, or the lock's token */
    uint8_t kind;         /* FENCE__K_* */
    uint32_t idx;         /* position in the heap, or FENCE__NOT_IN_HEAP */
} fence__hitem;

/* The heap. */
typedef struct fence__heap {
    fence__hitem **items; /* the array, items[0] the earliest */
    uint32_t len;         /* items in the heap */
    uint32_t cap;         /* slots allocated */
} fence__heap;

/* The order of heap items: (deadline, kind, id). */
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
/* Change an item's deadline, keeping its position right. */
void fence__heap_move(fence__heap *h, fence__hitem *it, uint64_t deadline_ms);
/* Restore the heap order over the whole array (after every deadline
 * changed). */
void fence__heap_rebuild(fence__heap *h);
/* The earliest item, or NULL. */
fence__hitem *fence__heap_top(const fence__heap *h);

#endif /* FENCE_CORE_HEAP_H */
