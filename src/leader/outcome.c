/* The outcome of the leader's own proposals, from raft's callbacks of
 * those requests (leader.h: they record and reply, never call raft): a
 * batch's entry applied (its results to its requests, a QUEUED one
 * registered as a wait) or failed, and the barrier.  What every server
 * does with a committed entry (apply it, deliver the events of waits
 * that ended, restore a snapshot) is replica.c's, which runs first. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "core/entry.h"
#include "leader/internal.h"

/* Handle one item of an applied entry.  res is its command result (NULL
 * for reads). */
static void item_done(fence_leader *l, lbatch *b, litem *it,
                      const fence_result *res)
{
    fence_lreq *r = it->req;
    if (r == NULL) {
        if (it->cmd.type == FENCE_CMD_TICK)
            l->tick_pending = false;
        if (it->cmd.type == FENCE_CMD_LEADER_START && l->phase == PH_STARTING) {
            if (!l->ops.is_leader(l->ops.ctx)) {
                /* Applied, but raft no longer leads: start over at the
                 * next step (a new barrier if it leads again). */
                l->phase = PH_NONE;
                return;
            }
            l->phase = PH_READY;
            l->rearm = true;
            llog(l, FENCE_LLOG_INFO, "leader ready: term %llu, last token %llu",
                 (unsigned long long)l->ops.term(l->ops.ctx),
                 (unsigned long long)fence_fsm_last_token(l->fsm));
        }
        return;
    }
    if (r->conn != NULL) {
        FENCE_ASSERT(r->conn->unapplied > 0);
        r->conn->unapplied--;
        if (!it->is_read && it->cmd.type == FENCE_CMD_LEASE_KEEPALIVE) {
            FENCE_ASSERT(r->conn->unapplied_ka > 0);
            r->conn->unapplied_ka--;
        }
    }
    if (it->is_read) {
        it->cmd.name = b->names + it->name_off;
        fence__ld_answer_read(l, fence__ld_req_release(r), &it->cmd);
        return;
    }
    FENCE_ASSERT(res != NULL);
    if (res->status != FENCE_ST_QUEUED) {
        fence__ld_answer_result(l, fence__ld_req_release(r), res, false);
        return;
    }
    /* The wait may already have ended within this same entry (the event
     * stays listed: another request of this entry may share the wait). */
    for (size_t i = 0; i < l->n_events; i++) {
        if (l->events[i].wait_id == res->wait_id) {
            fence_result er = l->events[i].result;
            fence__ld_answer_result(l, fence__ld_req_release(r), &er, true);
            return;
        }
    }
    if (r->conn == NULL) {
        /* The client went away before its wait was even registered. */
        if (!fence__ld_wait_has(l, res->wait_id))
            fence__ld_cancel_wait(l, res->wait_id);
        fence__ld_req_release(r);
        return;
    }
    if (!fence_fsm_wait_exists(l->fsm, res->wait_id)) {
        /* QUEUED for a wait that is gone.  The core resolves every record
         * attached to a wait when it ends, but a snapshot written by an
         * older core (which kept a joiner's record QUEUED) may still carry
         * such a record.  No event will ever come: answer rather than
         * hang. */
        llog(l, FENCE_LLOG_WARN, "QUEUED for wait %llu, which no longer "
             "exists; answering TRYAGAIN", (unsigned long long)res->wait_id);
        fence__ld_answer_error(l, fence__ld_req_release(r), FENCE_LERR_UNKNOWN);
        return;
    }
    fence__ld_wait_insert(l, r, res->wait_id);
}

/* Unlink b from the in-flight list (it is normally the oldest). */
static void inflight_remove(fence_leader *l, lbatch *b)
{
    lbatch **pp = &l->inflight;
    lbatch *prev = NULL;
    while (*pp != b) {
        FENCE_ASSERT(*pp != NULL);
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = b->next;
    if (l->inflight_tail == b)
        l->inflight_tail = prev;
    b->next = NULL;
    l->n_inflight--;
}

/* ---- raft's callbacks of a proposal ----------------------------------------- */

/* raft_apply callback: the batch's entry is committed and applied (status
 * OK; the results are those fence__leader_apply wrote just before), or its
 * outcome is unknown (leadership lost, shutdown).  Every request gets its
 * answer here or is registered as a wait. */
void fence__leader_applied(fence_leader *l, void *tag, int status,
                           const void *result)
{
    lbatch *b = tag;
    l->in_raft_cb++;
    inflight_remove(l, b);
    if (status != FENCE_LST_OK) {
        llog(l, FENCE_LLOG_WARN, "entry of %u commands not applied", b->n_cmds);
        fence__ld_batch_fail(l, b, status);
        l->in_raft_cb--;
        return;
    }
    FENCE_ASSERT(result == l->results);
    FENCE_ASSERT(l->n_results >= 0);
    if (b->proposed_mono > l->proof_mono)
        l->proof_mono = b->proposed_mono; /* leader.h "Renewals" */
    FENCE_ASSERT((uint32_t)l->n_results == b->n_cmds + (b->n_cmds == 0 ? 1u : 0u));
    uint32_t j = 0;
    /* Gathering (leader.h): who this entry answers, and what already
     * waits, before its answers go out. */
    l->gather_answered = 0;
    l->gather_base = l->pending != NULL ? l->pending->n_items : 0;
    l->gather_stamp++;
    for (uint32_t i = 0; i < b->n_items; i++) {
        litem *it = &b->items[i];
        /* Answered now (a queued wait's client hears nothing yet): its
         * client may be about to send again. */
        if (it->req != NULL && it->req->conn != NULL &&
            it->req->conn->gather_stamp != l->gather_stamp &&
            (it->is_read || l->results[j].status != FENCE_ST_QUEUED)) {
            it->req->conn->gather_stamp = l->gather_stamp;
            l->gather_answered++;
        }
        if (it->is_read) {
            item_done(l, b, it, NULL);
        } else {
            item_done(l, b, it, &l->results[j]);
            j++;
        }
    }
    l->rearm = true;
    fence__ld_batch_free(b);
    l->in_raft_cb--;
}

/* raft_barrier callback: the catch-up is over (status OK) or failed.  The
 * LEADER_START goes out at the next step (the rule). */
void fence__leader_barrier_done(fence_leader *l, int status)
{
    l->in_raft_cb++;
    FENCE_ASSERT(l->barriers > 0);
    l->barriers--;
    if (l->phase == PH_CATCHUP) {
        if (status == FENCE_LST_OK && l->ops.is_leader(l->ops.ctx) && !l->stopping)
            l->phase = PH_BARRIER_DONE;
        else
            l->phase = PH_NONE;
    }
    l->in_raft_cb--;
}
