/* The requests the leader module holds (leader.h "Requests", "Waits"):
 * each connection's list, the wait table (wait_id -> requests) and the
 * answers through the shell's reply sink. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "core/entry.h"
#include "leader/internal.h"

/* Link r into its connection's list. */
void fence__ld_conn_link(fence_lconn *c, fence_lreq *r)
{
    r->conn = c;
    r->cprev = NULL;
    r->cnext = c->reqs;
    if (c->reqs != NULL)
        c->reqs->cprev = r;
    c->reqs = r;
}

/* Unlink r from its connection (if it still has one). */
void fence__ld_conn_unlink(fence_lreq *r)
{
    fence_lconn *c = r->conn;
    if (c == NULL)
        return;
    if (r->cprev != NULL)
        r->cprev->cnext = r->cnext;
    else
        c->reqs = r->cnext;
    if (r->cnext != NULL)
        r->cnext->cprev = r->cprev;
    r->cprev = r->cnext = NULL;
    r->conn = NULL;
}

/* Take the request out of the module and return the shell's handle, or
 * NULL for an orphan (nobody to answer).  Call before the sink: a reply
 * can close the connection, and that must find nothing of r. */
void *fence__ld_req_release(fence_lreq *r)
{
    void *h = r->conn != NULL ? r->handle : NULL;
    fence__ld_conn_unlink(r);
    free(r);
    return h;
}

/* Answer an error to a released handle (NULL: an orphan, nothing). */
void fence__ld_answer_error(fence_leader *l, void *h, int err)
{
    if (h != NULL)
        l->ops.reply_error(l->ops.ctx, h, err);
}

/* Answer a result to a released handle (NULL: nothing). */
void fence__ld_answer_result(fence_leader *l, void *h, const fence_result *r,
                          bool from_wait)
{
    FENCE_ASSERT(r->status != FENCE_ST_QUEUED);
    if (h != NULL)
        l->ops.reply_result(l->ops.ctx, h, r, from_wait);
}

/* Answer a read from the state now to a released handle (NULL: nothing). */
void fence__ld_answer_read(fence_leader *l, void *h, const fence_cmd *cmd)
{
    if (h != NULL)
        l->ops.reply_read(l->ops.ctx, h, cmd);
}

/* ---- The wait table: wait_id -> requests --------------------------------- */

/* Bucket of a wait id (ids are sequential; a multiplicative hash spreads
 * them anyway). */
static size_t wait_bucket(const fence_leader *l, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ULL) >> 20) & (l->wait_nb - 1);
}

/* Double the bucket array when the table gets crowded (best effort: a
 * failed grow leaves longer chains, nothing else). */
static void wait_grow(fence_leader *l)
{
    size_t nb = l->wait_nb * 2;
    fence_lreq **tab = calloc(nb, sizeof(*tab));
    if (tab == NULL)
        return;
    size_t old_nb = l->wait_nb;
    fence_lreq **old = l->wait_tab;
    l->wait_tab = tab;
    l->wait_nb = nb;
    for (size_t i = 0; i < old_nb; i++) {
        fence_lreq *p = old[i];
        while (p != NULL) {
            fence_lreq *next = p->wnext;
            size_t b = wait_bucket(l, p->wait_id);
            p->wnext = tab[b];
            tab[b] = p;
            p = next;
        }
    }
    free(old);
}

/* Register r as waiting for wait_id's outcome. */
void fence__ld_wait_insert(fence_leader *l, fence_lreq *r, uint64_t wait_id)
{
    if (l->n_waits >= l->wait_nb)
        wait_grow(l);
    r->wait_id = wait_id;
    r->state = RQ_WAIT;
    size_t b = wait_bucket(l, wait_id);
    r->wnext = l->wait_tab[b];
    l->wait_tab[b] = r;
    l->n_waits++;
}

/* Find and unlink one request waiting for wait_id, or NULL.  Several can
 * wait for the same wait_id: the core answers a LOCK by a lease that
 * already waits for that lock with the existing wait (a retry, or a
 * second connection of the same client). */
fence_lreq *fence__ld_wait_take(fence_leader *l, uint64_t wait_id)
{
    fence_lreq **pp = &l->wait_tab[wait_bucket(l, wait_id)];
    for (; *pp != NULL; pp = &(*pp)->wnext) {
        fence_lreq *r = *pp;
        if (r->wait_id == wait_id) {
            *pp = r->wnext;
            r->wnext = NULL;
            l->n_waits--;
            return r;
        }
    }
    return NULL;
}

/* Whether any request waits for wait_id. */
bool fence__ld_wait_has(const fence_leader *l, uint64_t wait_id)
{
    for (fence_lreq *p = l->wait_tab[wait_bucket(l, wait_id)]; p != NULL;
         p = p->wnext)
        if (p->wait_id == wait_id)
            return true;
    return false;
}

/* Unlink this registered request; true when no other request waits for
 * the same wait (then the wait itself can be cancelled). */
bool fence__ld_wait_remove(fence_leader *l, fence_lreq *r)
{
    FENCE_ASSERT(r->state == RQ_WAIT);
    fence_lreq **pp = &l->wait_tab[wait_bucket(l, r->wait_id)];
    while (*pp != r) {
        FENCE_ASSERT(*pp != NULL);
        pp = &(*pp)->wnext;
    }
    *pp = r->wnext;
    r->wnext = NULL;
    l->n_waits--;
    return !fence__ld_wait_has(l, r->wait_id);
}


/* Free a batch's memory (its requests are handled by the caller). */
void fence__ld_batch_free(lbatch *b)
{
    free(b->items);
    free(b->names);
    free(b);
}
