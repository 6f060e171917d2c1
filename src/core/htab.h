/* Chained hash tables and the hashes that key them (private to src/core).
 *
 * A table holds intrusive nodes (fence__hnode, embedded in the object) in
 * a power-of-two bucket array that doubles when the table holds more nodes
 * than buckets.  Keys are compared by their full 64-bit hash: for 64-bit
 * keys the hash is a bijection, so equal hashes mean equal keys; lock
 * names compare their bytes as well (lock.c).  Memory comes from the state
 * machine's injected allocator (fence__alloc), so a failed growth follows
 * its rule: reported only in a fresh state machine, fatal once it is live.
 */
#ifndef FENCE_CORE_HTAB_H
#define FENCE_CORE_HTAB_H

#include <stdbool.h>
#include <stdint.h>

#include "core/fsm.h"

/* Intrusive hash chain link. */
typedef struct fence__hnode {
    struct fence__hnode *next; /* next in the bucket */
    uint64_t hash;             /* full hash of the key */
} fence__hnode;

/* A chained hash table. */
typedef struct fence__htab {
    fence__hnode **b; /* buckets */
    uint32_t mask;    /* buckets - 1 (a power of two) */
    uint32_t count;   /* nodes in the table */
} fence__htab;

/* Hash of a 64-bit key (a bijection, so equal hashes mean equal keys). */
uint64_t fence__hash_u64(uint64_t x);
/* Keyed hash of a lock name. */
uint64_t fence__hash_name(uint64_t seed, const uint8_t *name, uint16_t len);

/* Give t its first bucket array.  false on lack of memory (fresh state
 * machines only; a live one stops in fence__alloc). */
bool fence__htab_init(fence_fsm *f, fence__htab *t);
/* Free t's bucket array (not the nodes). */
void fence__htab_free(fence_fsm *f, fence__htab *t);
/* Size t's bucket array for n nodes in one step (never shrinks; a failed
 * allocation only leaves it smaller, as for growth). */
void fence__htab_reserve(fence_fsm *f, fence__htab *t, uint32_t n);
/* Insert node h, whose hash is set (grows the table first when full). */
void fence__htab_insert(fence_fsm *f, fence__htab *t, fence__hnode *h);
/* Remove node h, which is in t. */
void fence__htab_remove(fence__htab *t, fence__hnode *h);
/* The first node with this hash, or NULL. */
fence__hnode *fence__htab_first(const fence__htab *t, uint64_t hash);
/* Hint that hash's bucket is read soon (a walk over many objects looks
 * each up: fetching a few ahead overlaps their cache misses).  Changes no
 * result.  Call it (and the next one) from a function with effects of its
 * own: GCC 12 finds a void static helper that does nothing but prefetch
 * free of effects and drops its calls, prefetches and all (the apply
 * read-ahead had none for that reason; check with objdump -d | grep
 * prefetch). */
static inline void fence__htab_prefetch(const fence__htab *t, uint64_t hash)
{
#if defined(__GNUC__)
    __builtin_prefetch(&t->b[hash & t->mask]);
#else
    (void)t;
    (void)hash;
#endif
}
/* The second step of a two-step read-ahead: hash's bucket was prefetched
 * a while ago, so reading it is cheap now; fetch the first node of its
 * chain (where the hash compare will look).  Changes no result. */
static inline void fence__htab_prefetch_node(const fence__htab *t, uint64_t hash)
{
#if defined(__GNUC__)
    const fence__hnode *h = t->b[hash & t->mask];
    if (h != NULL) {
        __builtin_prefetch(h);
    }
#else
    (void)t;
    (void)hash;
#endif
}

/* The first node of hash's bucket (to walk a chain by hand), or NULL. */
fence__hnode *fence__htab_bucket(const fence__htab *t, uint64_t hash);

#endif /* FENCE_CORE_HTAB_H */
