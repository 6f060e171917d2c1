/* Intrusive doubly-linked lists for the core (private to src/core).
 *
 * An object that sits on a list embeds a fence__link; the list itself is a
 * fence__list holding its first and last links.  Every operation is O(1)
 * and allocates nothing.  The lists are NULL-terminated, not circular: no
 * link ever points at the list head, so a head may be copied or moved with
 * the struct that holds it (fence_fsm_restore swaps whole state structs).
 *
 *   typedef struct item { fence__link link; int v; } item;
 *   fence__list l = FENCE__LIST_INIT;
 *   fence__list_append(&l, &it->link);
 *   for (fence__link *p = l.first; p != NULL; p = p->next) {
 *       item *it = FENCE__CONTAINER(p, item, link);
 *   }
 *   fence__list_remove(&l, &it->link);
 *
 * FENCE__LIST_ITEM(type, member, link) gives the object of a link, or NULL
 * for a NULL link, so that "the next lease" reads
 *   FENCE__LIST_ITEM(fence__lease, link, l->link.next).
 */
#ifndef FENCE_CORE_LIST_H
#define FENCE_CORE_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "base/assert.h"

/* The object that embeds member at address ptr. */
#define FENCE__CONTAINER(ptr, type, member)                                 \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* The object of a link that may be NULL. */
#define FENCE__LIST_ITEM(type, member, lnk)                                 \
    ((lnk) != NULL ? FENCE__CONTAINER((lnk), type, member) : (type *)NULL)

/* A list's link inside one object. */
typedef struct fence__link {
    struct fence__link *prev; /* previous on the list, NULL for the first */
    struct fence__link *next; /* next on the list, NULL for the last */
} fence__link;

/* A list: its ends. */
typedef struct fence__list {
    fence__link *first; /* NULL when empty */
    fence__link *last;  /* NULL when empty */
} fence__list;

#define FENCE__LIST_INIT {NULL, NULL}

/* True when the list has no link. */
static inline bool fence__list_empty(const fence__list *l)
{
    FENCE_ASSERT((l->first == NULL) == (l->last == NULL));
    return l->first == NULL;
}

/* Append link n (not on any list) at the end of l. */
static inline void fence__list_append(fence__list *l, fence__link *n)
{
    FENCE_ASSERT(l->last == NULL || l->last->next == NULL);
    n->next = NULL;
    n->prev = l->last;
    if (l->last != NULL) {
        l->last->next = n;
    } else {
        l->first = n;
    }
    l->last = n;
}

/* Insert link n (not on any list) before link at of l (at NULL: append). */
static inline void fence__list_insert_before(fence__list *l, fence__link *at, fence__link *n)
{
    if (at == NULL) {
        fence__list_append(l, n);
        return;
    }
    n->next = at;
    n->prev = at->prev;
    if (at->prev != NULL) {
        at->prev->next = n;
    } else {
        FENCE_ASSERT(l->first == at);
        l->first = n;
    }
    at->prev = n;
}

/* Remove link n, which is on l. */
static inline void fence__list_remove(fence__list *l, fence__link *n)
{
    if (n->prev != NULL) {
        FENCE_ASSERT(n->prev->next == n);
        n->prev->next = n->next;
    } else {
        FENCE_ASSERT(l->first == n);
        l->first = n->next;
    }
    if (n->next != NULL) {
        FENCE_ASSERT(n->next->prev == n);
        n->next->prev = n->prev;
    } else {
        FENCE_ASSERT(l->last == n);
        l->last = n->prev;
    }
    n->prev = n->next = NULL;
}

#endif /* FENCE_CORE_LIST_H */
