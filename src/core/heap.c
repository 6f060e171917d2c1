/* The deadline heap (see heap.h). */
#include <string.h>

#include "core/fsm_int.h"

/* Order of heap items: (key, kind, id), key = deadline - slack. */
bool fence__hitem_less(const fence__hitem *a, const fence__hitem *b)
{
    uint64_t ka = a->deadline_ms - a->slack, kb = b->deadline_ms - b->slack;
    if (ka != kb) {
        return ka < kb;
    }
    if (a->kind != b->kind) {
        return a->kind < b->kind;
    }
    if (a->id != b->id) {
        return a->id < b->id;
    }
    /* Only lock-delays share an id (the token): the locks of one
     * multi-lock.  Their names, unique, order them alike on every replica
     * and after a restore. */
    FENCE_ASSERT(a == b || a->kind == FENCE__K_DELAY);
    if (a == b) {
        return false;
    }
    const fence__lock *x = FENCE__CONTAINER(a, fence__lock, hi);
    const fence__lock *y = FENCE__CONTAINER(b, fence__lock, hi);
    uint16_t n = x->name_len < y->name_len ? x->name_len : y->name_len;
    int c = memcmp(x->name, y->name, n);
    FENCE_ASSERT(c != 0 || x->name_len != y->name_len);
    return c != 0 ? c < 0 : x->name_len < y->name_len;
}

/* Put item it at position pos. */
static void set(fence__heap *h, uint32_t pos, fence__hitem *it)
{
    h->items[pos] = it;
    it->idx = pos;
}

/* Move the item at pos up until its parent is smaller. */
static void up(fence__heap *h, uint32_t pos)
{
    fence__hitem *it = h->items[pos];
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (!fence__hitem_less(it, h->items[parent])) {
            break;
        }
        set(h, pos, h->items[parent]);
        pos = parent;
    }
    set(h, pos, it);
}

/* Move the item at pos down until both children are larger. */
static void down(fence__heap *h, uint32_t pos)
{
    fence__hitem *it = h->items[pos];
    for (;;) {
        uint32_t c = 2 * pos + 1;
        if (c >= h->len) {
            break;
        }
        if (c + 1 < h->len && fence__hitem_less(h->items[c + 1], h->items[c])) {
            c++;
        }
        if (!fence__hitem_less(h->items[c], it)) {
            break;
        }
        set(h, pos, h->items[c]);
        pos = c;
    }
    set(h, pos, it);
}

/* Make room for need items. */
bool fence__heap_reserve(fence_fsm *f, fence__heap *h, uint64_t need)
{
    if (need <= h->cap) {
        return true;
    }
    if (need > UINT32_MAX / 2) {
        return false;
    }
    uint64_t cap = h->cap ? (uint64_t)h->cap * 2 : 64;
    if (cap < need) {
        cap = need;
    }
    fence__hitem **v = fence__alloc(f, (size_t)cap * sizeof(*v));
    if (v == NULL) {
        return false;
    }
    if (h->len > 0) {
        memcpy(v, h->items, h->len * sizeof(*v));
    }
    fence__free(f, h->items);
    h->items = v;
    h->cap = (uint32_t)cap;
    FENCE_ASSERT(h->cap >= need);
    return true;
}

/* Room in the heap for every object that may ever need a slot (every
 * lease, wait and lock) plus extra new ones. */
bool fence__heap_room(fence_fsm *f, uint32_t extra)
{
    uint64_t need = (uint64_t)f->leases.count + f->waits.count +
                    f->locks.count + extra;
    return fence__heap_reserve(f, &f->heap, need);
}

/* Free the array. */
void fence__heap_free(fence_fsm *f, fence__heap *h)
{
    fence__free(f, h->items);
    h->items = NULL;
    h->len = h->cap = 0;
}

/* Add an item (capacity was reserved when its owner was created). */
void fence__heap_push(fence__heap *h, fence__hitem *it)
{
    FENCE_ASSERT(it->idx == FENCE__NOT_IN_HEAP);
    FENCE_ASSERT(h->len < h->cap);
    it->slack = 0;
    h->items[h->len] = it;
    it->idx = h->len;
    h->len++;
    up(h, it->idx);
}

/* Remove an item if it is in the heap. */
void fence__heap_remove(fence__heap *h, fence__hitem *it)
{
    if (it->idx == FENCE__NOT_IN_HEAP) {
        return;
    }
    uint32_t pos = it->idx;
    FENCE_ASSERT(pos < h->len);
    FENCE_ASSERT(h->items[pos] == it);
    h->len--;
    it->idx = FENCE__NOT_IN_HEAP;
    if (pos == h->len) {
        return;
    }
    fence__hitem *moved = h->items[h->len];
    set(h, pos, moved);
    down(h, pos);
    up(h, moved->idx);
}

/* Change an item's deadline, keeping its heap position right. */
void fence__heap_move(fence__heap *h, fence__hitem *it, uint64_t deadline_ms)
{
    it->deadline_ms = deadline_ms;
    it->slack = 0;
    if (it->idx == FENCE__NOT_IN_HEAP) {
        return;
    }
    FENCE_ASSERT(h->items[it->idx] == it);
    down(h, it->idx);
    up(h, it->idx);
}

/* Move a deadline later in place: the key stays, the slack grows. */
void fence__heap_extend(fence__heap *h, fence__hitem *it, uint64_t deadline_ms,
                        uint64_t lazy_after)
{
    uint64_t key = it->deadline_ms - it->slack;
    if (it->idx == FENCE__NOT_IN_HEAP || key <= lazy_after || deadline_ms < key ||
        deadline_ms - key > FENCE__HEAP_SLACK_MAX) {
        fence__heap_move(h, it, deadline_ms);
        return;
    }
    it->deadline_ms = deadline_ms;
    it->slack = (uint32_t)(deadline_ms - key);
}

/* Re-key stale tops whose key is due by now_ms. */
void fence__heap_settle(fence__heap *h, uint64_t now_ms)
{
    while (h->len > 0 && h->items[0]->slack != 0 &&
           h->items[0]->deadline_ms - h->items[0]->slack <= now_ms) {
        fence__hitem *it = h->items[0];
        it->slack = 0; /* its key only grows: it can only move down */
        down(h, 0);
    }
}

/* Restore the heap property over the whole array (after LEADER_START has
 * changed every deadline). */
void fence__heap_rebuild(fence__heap *h)
{
    for (uint32_t i = 0; i < h->len; i++) {
        h->items[i]->slack = 0;
    }
    for (uint32_t i = h->len / 2; i-- > 0;) {
        down(h, i);
    }
}

/* The earliest item, or NULL. */
fence__hitem *fence__heap_top(const fence__heap *h)
{
    return h->len > 0 ? h->items[0] : NULL;
}
