/* Chained hash tables and the core's hashes (see htab.h). */
#include <string.h>

#include "core/fsm_int.h"

#define HTAB_INIT_BUCKETS 16u
#define HTAB_MAX_BUCKETS (1u << 30)

/* Mix a 64-bit key into a hash.  Every step is invertible, so two keys
 * have equal hashes only if they are equal. */
uint64_t fence__hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Keyed hash of a lock name: the bytes, eight at a time, are chained
 * through the mixer starting from the seed.  Clients choose names, so
 * without the (per-process) seed they cannot aim names at one bucket. */
uint64_t fence__hash_name(uint64_t seed, const uint8_t *name, uint16_t len)
{
    FENCE_ASSERT(len == 0 || name != NULL);
    uint64_t h = fence__hash_u64(seed ^ (0x9e3779b97f4a7c15ULL * (len + 1u)));
    uint16_t i = 0;
    while (i < len) {
        uint64_t block = 0;
        for (int b = 0; b < 8 && i < len; b++, i++) {
            block = (block << 8) | name[i];
        }
        h = fence__hash_u64(h ^ block) + seed;
    }
    return fence__hash_u64(h);
}

/* Give a table its first bucket array. */
bool fence__htab_init(fence_fsm *f, fence__htab *t)
{
    t->b = fence__alloc(f, HTAB_INIT_BUCKETS * sizeof(*t->b));
    if (t->b == NULL) {
        return false;
    }
    memset(t->b, 0, HTAB_INIT_BUCKETS * sizeof(*t->b));
    t->mask = HTAB_INIT_BUCKETS - 1;
    t->count = 0;
    return true;
}

/* Free the bucket array; NULL buckets (a failed init) are fine. */
void fence__htab_free(fence_fsm *f, fence__htab *t)
{
    fence__free(f, t->b);
    t->b = NULL;
    t->mask = 0;
    t->count = 0;
}

/* Move every node into a new array of nb_n buckets (a power of two).
 * Only a restore into a fresh state machine survives a failed allocation
 * here (fence__alloc stops the process elsewhere); its chains then just
 * get longer, which changes no result. */
static void resize(fence_fsm *f, fence__htab *t, uint32_t nb_n)
{
    uint32_t n = t->mask + 1;
    FENCE_ASSERT(nb_n > n);
    FENCE_ASSERT((nb_n & (nb_n - 1)) == 0);
    fence__hnode **nb = fence__alloc(f, (size_t)nb_n * sizeof(*nb));
    if (nb == NULL) {
        FENCE_ASSERT(f->oom == FENCE__OOM_RETURN);
        return;
    }
    memset(nb, 0, (size_t)nb_n * sizeof(*nb));
    uint32_t nmask = nb_n - 1;
    uint32_t moved = 0;
    for (uint32_t i = 0; i < n; i++) {
        fence__hnode *h = t->b[i];
        while (h != NULL) {
            fence__hnode *next = h->next;
            h->next = nb[h->hash & nmask];
            nb[h->hash & nmask] = h;
            h = next;
            moved++;
        }
    }
    FENCE_ASSERT(moved == t->count);
    fence__free(f, t->b);
    t->b = nb;
    t->mask = nmask;
}

/* Double the bucket array when the table is fuller than one node per
 * bucket. */
static void maybe_grow(fence_fsm *f, fence__htab *t)
{
    uint32_t n = t->mask + 1;
    if (t->count < n || n >= HTAB_MAX_BUCKETS) {
        return;
    }
    resize(f, t, 2 * n);
}

/* Size the bucket array for n nodes at once (a restore knows its counts):
 * the doublings on the way there would move every node again and again. */
void fence__htab_reserve(fence_fsm *f, fence__htab *t, uint32_t n)
{
    FENCE_ASSERT(t->b != NULL);
    uint32_t want = t->mask + 1;
    while (want <= n && want < HTAB_MAX_BUCKETS) {
        want *= 2;
    }
    if (want > t->mask + 1) {
        resize(f, t, want);
    }
}

/* Insert a node whose hash is set.  Never fails. */
void fence__htab_insert(fence_fsm *f, fence__htab *t, fence__hnode *h)
{
    FENCE_ASSERT(t->b != NULL);
    maybe_grow(f, t);
    h->next = t->b[h->hash & t->mask];
    t->b[h->hash & t->mask] = h;
    t->count++;
    FENCE_ASSERT(t->count != 0);
}

/* Remove a node that is in the table. */
void fence__htab_remove(fence__htab *t, fence__hnode *h)
{
    fence__hnode **pp = &t->b[h->hash & t->mask];
    while (*pp != h) {
        FENCE_ASSERT(*pp != NULL);
        pp = &(*pp)->next;
    }
    *pp = h->next;
    h->next = NULL;
    FENCE_ASSERT(t->count > 0);
    t->count--;
}

/* The first node with this hash, or NULL. */
fence__hnode *fence__htab_first(const fence__htab *t, uint64_t hash)
{
    fence__hnode *h = t->b[hash & t->mask];
    while (h != NULL && h->hash != hash) {
        h = h->next;
    }
    return h;
}

/* The head of hash's chain. */
fence__hnode *fence__htab_bucket(const fence__htab *t, uint64_t hash)
{
    return t->b[hash & t->mask];
}
