/* Group commit (leader.h "Group commit", "Holding"): the pending batch
 * (built by pending.c), the closed ones, proposals (encoded and framed,
 * from step only), and the intake of requests and of closing connections. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "core/entry.h"
#include "leader/internal.h"


/* Append to the pending batch (pending.c). */
static litem *batch_add(fence_leader *l, const fence_cmd *cmd, bool is_read,
                        fence_lreq *r, fence_lconn *c)
{
    return fence__ld_batch_add(l, cmd, is_read, r, c);
}

/* Propose CANCEL for a wait whose client went away.  Only a ready leader
 * can; otherwise the wait ends by its timeout or its lease. */
void fence__ld_cancel_wait(fence_leader *l, uint64_t wait_id)
{
    if (l->phase != PH_READY || l->stopping)
        return;
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_CANCEL;
    cmd.wait_id = wait_id;
    if (!fence__ld_batch_add_internal(l, &cmd))
        llog(l, FENCE_LLOG_WARN, "out of memory: wait %llu not cancelled",
             (unsigned long long)wait_id);
}

/* An internal command (no request) was not applied: its proposal failed or
 * its outcome is unknown.  A lost TICK must not stop the timer: while this
 * server stays a ready leader (say a leadership transfer made raft refuse
 * the entry, then timed out) nothing else would process expired leases and
 * wait timeouts until some client writes.  So the timer is re-armed;
 * fence__leader_timer_take backs off when the deadline is already due. */
static void internal_fail(fence_leader *l, const lbatch *b, const litem *it)
{
    FENCE_ASSERT(it->req == NULL);
    if (it->cmd.type == FENCE_CMD_LEASE_CHECKPOINT) {
        /* Renewals answered here: still owed while this server leads, and
         * before anything else it proposes (an entry stamped later could
         * expire their leases first; renew.c). */
        fence__ld_renew_record(l, b->names + it->name_off, it->cmd.ids_count);
        l->ckpt_owed = l->renew_n > 0;
    }
    if (it->cmd.type == FENCE_CMD_TICK) {
        l->tick_pending = false;
        l->rearm = true;
    }
    if (it->cmd.type == FENCE_CMD_LEADER_START && l->phase == PH_STARTING)
        l->phase = PH_NONE;
}

/* Give an item its answer for a failed proposal (outcome unknown, or never
 * proposed: status NOTLEADER / SHUTDOWN). */
static void item_fail(fence_leader *l, const lbatch *b, litem *it, int status)
{
    fence_lreq *r = it->req;
    if (r == NULL) {
        internal_fail(l, b, it);
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
    void *h = fence__ld_req_release(r);
    if (status == FENCE_LST_NOTLEADER || status == FENCE_LST_SHUTDOWN)
        fence__ld_answer_error(l, h, FENCE_LERR_UNAVAILABLE);
    else if (it->is_read)
        fence__ld_answer_error(l, h, FENCE_LERR_READ_RETRY);
    else
        fence__ld_answer_error(l, h, FENCE_LERR_UNKNOWN);
}

/* Fail every item of a batch that is out of every list, then free it. */
void fence__ld_batch_fail(fence_leader *l, lbatch *b, int status)
{
    for (uint32_t i = 0; i < b->n_items; i++)
        item_fail(l, b, &b->items[i], status);
    fence__ld_batch_free(b);
}

/* Fail the batches not yet proposed (leadership lost, shutdown).  Each is
 * unlinked before its replies, which may add CANCELs to a new pending. */
void fence__ld_fail_unproposed(fence_leader *l, int status)
{
    while (l->closed != NULL) {
        lbatch *b = l->closed;
        l->closed = b->next;
        if (l->closed == NULL)
            l->closed_tail = NULL;
        fence__ld_batch_fail(l, b, status);
    }
    lbatch *b = l->pending;
    l->pending = NULL;
    l->hold_until = 0;
    l->hold_over = false;
    if (b != NULL)
        fence__ld_batch_fail(l, b, status);
}

/* Encode b as one framed entry and propose it (from step only).  With zero
 * commands (reads only) the entry carries a TICK so it is not empty. */
static void propose(fence_leader *l, lbatch *b)
{
    FENCE_ASSERT(l->in_step);
    FENCE_ASSERT(l->in_raft_cb == 0);
    if (l->gather_skip > 0)
        l->gather_skip--;
    uint32_t n = 0;
    /* LOCK_MULTI's name arrays, rebuilt over the batch's name bytes for
     * the encoder (freed once it has run). */
    size_t n_multi = 0;
    for (uint32_t i = 0; i < b->n_items; i++)
        n_multi += b->items[i].is_read ? 0 : b->items[i].cmd.names_count;
    fence_name *multi = n_multi > 0 ? malloc(n_multi * sizeof(*multi)) : NULL;
    if (n_multi > 0 && multi == NULL) {
        llog(l, FENCE_LLOG_WARN, "out of memory encoding a batch");
        fence__ld_batch_fail(l, b, FENCE_LST_UNKNOWN);
        return;
    }
    size_t used = 0;
    for (uint32_t i = 0; i < b->n_items; i++) {
        litem *it = &b->items[i];
        if (it->is_read)
            continue;
        FENCE_ASSERT(n < FENCE_BATCH_MAX);
        l->cmds[n] = it->cmd;
        l->cmds[n].name = it->cmd.name_len ? b->names + it->name_off : NULL;
        if (it->cmd.names_count > 0) {
            const uint8_t *p = b->names + it->name_off + it->cmd.name_len + it->cmd.value_len;
            l->cmds[n].names = multi + used;
            for (uint16_t k = 0; k < it->cmd.names_count; k++) {
                multi[used].len = (uint16_t)(p[0] | (p[1] << 8));
                multi[used].name = p + 2;
                p += 2u + multi[used].len;
                used++;
            }
        }
        if (it->cmd.type == FENCE_CMD_LEASE_CHECKPOINT)
            l->cmds[n].ids = b->names + it->name_off;
        l->cmds[n].value =
            it->cmd.value_len ? b->names + it->name_off + it->cmd.name_len : NULL;
        n++;
    }
    FENCE_ASSERT(used == n_multi);
    FENCE_ASSERT(n == b->n_cmds);
    if (n == 0) {
        memset(&l->cmds[0], 0, sizeof(l->cmds[0]));
        l->cmds[0].type = FENCE_CMD_TICK;
        n = 1;
    }
    uint64_t ts = b->ts != 0 ? b->ts : ld_now(l);
    b->proposed_mono = l->ops.now_ms(l->ops.ctx);
    size_t size = fence_entry_size(l->cmds, n);
    size_t framed = fence__entry_framed_len(size);
    int rv = FENCE_LST_UNKNOWN;
    if (framed > l->ebuf_cap) {
        uint8_t *nb = realloc(l->ebuf, framed);
        if (nb != NULL) {
            l->ebuf = nb;
            l->ebuf_cap = framed;
        }
    }
    if (framed <= l->ebuf_cap) {
        size_t len = fence_entry_encode(ts, l->cmds, n, l->ebuf, size);
        FENCE_ASSERT(len == size);
        len = fence__entry_frame(l->ebuf, len);
        FENCE_ASSERT(len == framed);
        rv = l->ops.propose(l->ops.ctx, b, l->ebuf, len);
    }
    free(multi);
    if (rv != FENCE_LST_OK) {
        llog(l, FENCE_LLOG_WARN, "propose of %u commands failed", n);
        l->refused_mono = b->proposed_mono; /* no renewals answered here (renew.c) */
        fence__ld_batch_fail(l, b, rv);
        return;
    }
    l->stats.batches++;
    l->stats.batch_cmds += b->n_cmds;
    l->stats.entry_bytes += framed;
    b->next = NULL;
    if (l->inflight_tail != NULL)
        l->inflight_tail->next = b;
    else
        l->inflight = b;
    l->inflight_tail = b;
    l->n_inflight++;
}

/* Propose the closed batches, oldest first. */
void fence__ld_propose_closed(fence_leader *l)
{
    if (l->ckpt_owed && l->closed != NULL)
        fence__ld_ckpt_maybe(l, true); /* a refused checkpoint goes first */
    while (l->closed != NULL) {
        lbatch *b = l->closed;
        l->closed = b->next;
        if (l->closed == NULL)
            l->closed_tail = NULL;
        propose(l, b);
    }
}

/* Whether item it of a batch (names: the batch's name bytes) would be
 * answered QUEUED if it were applied now: a LOCK or ACQUIRE that may wait,
 * on a lock another lease holds (live at fsm time now).  Such an item's
 * client hears nothing when its entry applies, so its entry is in no hurry
 * (leader.h "Holding").  Anything else, internal commands and reads
 * included, is in a hurry. */
static bool item_will_queue(const fence_leader *l, const litem *it,
                            const uint8_t *names, uint64_t now)
{
    const fence_cmd *c = &it->cmd;
    if (it->is_read || it->req == NULL || c->wait_ms == 0 || c->name_len == 0)
        return false;
    if (c->type != FENCE_CMD_LOCK && c->type != FENCE_CMD_ACQUIRE)
        return false;
    fence_fsm_lock_state st;
    if (!fence_fsm_lock_info(l->fsm, names + it->name_off, c->name_len, &st))
        return false; /* free, or in its lock-delay */
    if (c->type == FENCE_CMD_LOCK && c->lease == st.lease)
        return false; /* reentrant: answered at once */
    if (st.shared && (c->flags & FENCE_CMD_F_SHARED) && st.waiters == 0)
        return false; /* joins the shared phase at once */
    return st.deadline_ms > now;
}

/* With no entry in flight: whether the pending batch waits for the clients
 * the last entry answered (leader.h "Gathering"). */
static bool gather(fence_leader *l, const lbatch *b)
{
    uint32_t n = l->gather_answered;
    if (n < GATHER_MIN || l->gather_skip > 0)
        return false;
    return b->n_items < l->gather_base + n - n / GATHER_SLACK_DIV;
}

/* Whether every item of the pending batch would only queue (see
 * item_will_queue).  Items already found to queue are not looked up again
 * until an entry applies.  With entries in flight the fsm is behind them,
 * so the answer may be yes for an item that will not queue after all
 * (the lock's holder is leaving in one of them): such a batch then waits
 * for those entries, as it did before pipelining, and is looked at again. */
bool fence__ld_batch_waits_only(fence_leader *l)
{
    lbatch *b = l->pending;
    FENCE_ASSERT(b != NULL);
    if (b->held_seq != l->apply_seq) {
        b->held_seq = l->apply_seq;
        b->n_held = 0;
    }
    uint64_t now = ld_now(l);
    while (b->n_held < b->n_items &&
           item_will_queue(l, &b->items[b->n_held], b->names, now))
        b->n_held++;
    return b->n_held == b->n_items;
}

/* With no entry in flight: whether the pending batch is held back (leader.h
 * "Gathering", then "Holding") rather than proposed now.  It waits while
 * gather() says so, and while every item in it would queue, for at most
 * HOLD_MS either way.  For the second, the first item in a hurry (typically
 * the UNLOCK of the holder, whose reply was sent with the grant that made
 * these clients ask again) ends the hold and the whole batch goes out as
 * one entry, in arrival order.  Items already found to queue are not
 * looked up again until an entry applies. */
bool fence__ld_batch_hold(fence_leader *l)
{
    FENCE_ASSERT(l->pending != NULL);
    FENCE_ASSERT(l->n_inflight == 0);
    if (l->hold_over || l->stopping) {
        if (l->gathering && l->hold_over) {
            /* They did not come back: think time, or a client that lost
             * its core.  Gather again later, later still if it recurs. */
            uint32_t p = l->gather_penalty < GATHER_SKIP_MIN ? GATHER_SKIP_MIN
                                                             : l->gather_penalty;
            l->gather_skip = p;
            l->gather_penalty = p < GATHER_SKIP_MAX ? 2 * p : GATHER_SKIP_MAX;
            l->stats.gathers_timed_out++;
        }
        l->gathering = false;
        return false;
    }
    if (gather(l, l->pending)) {
        if (l->hold_until == 0) {
            l->hold_until = l->ops.now_ms(l->ops.ctx) + HOLD_MS;
            l->rearm = true;
            l->stats.gathers++;
        }
        l->gathering = true;
        return true;
    }
    if (l->gathering) {
        /* Gathered: the batch goes now (unless every item would queue). */
        l->gathering = false;
        l->hold_until = 0;
        l->gather_penalty /= 2; /* back toward the least, not at once */
    }
    if (!fence__ld_batch_waits_only(l))
        return false;
    if (l->hold_until == 0) {
        l->hold_until = l->ops.now_ms(l->ops.ctx) + HOLD_MS;
        l->rearm = true;
        l->stats.holds++;
    }
    return true;
}

/* ---- Requests from the shell ------------------------------------------------ */

/* Take a request; see leader.h. */
void fence__leader_submit(fence_leader *l, fence_lconn *c, void *req,
                          const fence_cmd *cmd, bool is_read)
{
    FENCE_ASSERT(req != NULL);
    if (l->phase != PH_READY || l->stopping) {
        l->ops.reply_error(l->ops.ctx, req, FENCE_LERR_UNAVAILABLE);
        return;
    }
    /* A renewal the leader may answer itself (leader.h "Renewals"). */
    if (!is_read && cmd->type == FENCE_CMD_LEASE_KEEPALIVE &&
        fence__ld_renew_local(l, c, req, cmd))
        return;
    /* Linearizable reads: in a cluster they ride the next entry; in a
     * cluster of one they only wait for this connection's own earlier
     * writes, so a pipeline reads its own writes. */
    if (is_read && l->ops.voters(l->ops.ctx) <= 1 && c->unapplied == 0) {
        l->ops.reply_read(l->ops.ctx, req, cmd);
        return;
    }
    fence_lreq *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        l->ops.reply_error(l->ops.ctx, req, FENCE_LERR_NOMEM);
        return;
    }
    r->handle = req;
    if (batch_add(l, cmd, is_read, r, c) == NULL) {
        free(r);
        l->ops.reply_error(l->ops.ctx, req, FENCE_LERR_NOMEM);
        return;
    }
    fence__ld_conn_link(c, r);
}

/* Forget a closed connection's requests; see leader.h. */
void fence__leader_conn_close(fence_leader *l, fence_lconn *c)
{
    fence_lreq *r = c->reqs;
    while (r != NULL) {
        fence_lreq *next = r->cnext;
        r->cprev = r->cnext = NULL;
        r->conn = NULL;
        r->handle = NULL;
        if (r->state == RQ_WAIT) {
            if (fence__ld_wait_remove(l, r))
                fence__ld_cancel_wait(l, r->wait_id);
            free(r);
        }
        /* RQ_BATCH: an orphan now; its batch frees it. */
        r = next;
    }
    c->reqs = NULL;
    c->unapplied = 0;
    c->unapplied_ka = 0;
}
