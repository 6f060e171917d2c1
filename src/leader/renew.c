/* Renewals without a log entry each (leader.h "Renewals", docs/leases.md):
 * the leader answers a LEASE_KEEPALIVE itself when the lease's replicated
 * deadline is comfortably ahead, records it, and proposes the recorded ids
 * as LEASE_CHECKPOINT commands once per CKPT_INTERVAL_MS.  Apply (core
 * checkpoint.c) restarts each live listed lease's TTL at the checkpoint's
 * time, so the replicated state alone decides expiry and grants, as
 * before; what the leader answered only decides when the checkpoint is
 * written.
 *
 * Why the answer holds: the checkpoint's timestamp is taken when it is
 * proposed, after the answer, so once applied the lease lives at least
 * ttl from the answer.  It is proposed at most CKPT_INTERVAL_MS after the
 * first renewal it carries, and the renewal was answered only while the
 * replicated deadline was more than 2 intervals + ttl/4 ahead: the
 * checkpoint has at least ttl/4 + 1 interval to commit before the old
 * deadline could pass.  If leadership is lost before it commits, the next
 * leader's LEADER_START restarts every lease's TTL at its own start; a
 * renewal answered by a deposed leader after that start is covered only
 * by that restart, which is why a cluster's reply subtracts the renew
 * window (the election timeout: how long a deposed leader can go on
 * believing it leads, check-quorum).  If raft refuses a checkpoint (a
 * leadership transfer refuses every proposal), it goes out again ahead
 * of any other batch (batch.c), and nothing is answered here until an
 * entry proposed after the refusal is applied. */
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/bytes.h"
#include "core/entry.h"
#include "leader/internal.h"

/* See leader.h. */
void fence__leader_renew_window(fence_leader *l, uint64_t window_ms)
{
    l->renew_window_ms = window_ms;
}

/* Append n ids to the recorded renewals; false out of memory. */
static bool record(fence_leader *l, const uint8_t *ids, uint32_t n)
{
    if (l->renew_n + n > l->renew_cap) {
        uint32_t cap = l->renew_cap ? l->renew_cap : 1024;
        while (cap < l->renew_n + n)
            cap *= 2;
        uint8_t *v = realloc(l->renew_ids, (size_t)cap * 8);
        if (v == NULL)
            return false;
        l->renew_ids = v;
        l->renew_cap = cap;
    }
    if (l->renew_n == 0) {
        l->ckpt_due = l->ops.now_ms(l->ops.ctx) + CKPT_INTERVAL_MS;
        l->rearm = true;
    }
    memcpy(l->renew_ids + (size_t)l->renew_n * 8, ids, (size_t)n * 8);
    l->renew_n += n;
    if (l->renew_n >= RENEW_PENDING_MAX)
        l->ckpt_due = l->ops.now_ms(l->ops.ctx); /* at the next step */
    return true;
}

/* See internal.h. */
void fence__ld_renew_record(fence_leader *l, const uint8_t *ids, uint32_t n)
{
    if (l->phase != PH_READY || l->stopping)
        return;
    if (!record(l, ids, n))
        llog(l, FENCE_LLOG_WARN, "out of memory: %u renewals not checkpointed", n);
}

/* See internal.h. */
void fence__ld_renew_reset(fence_leader *l)
{
    l->renew_n = 0;
    l->ckpt_due = 0;
    l->renew_last = 0;
    l->ckpt_owed = false;
}

/* See internal.h. */
bool fence__ld_renew_local(fence_leader *l, fence_lconn *c, void *req,
                           const fence_cmd *cmd)
{
    FENCE_ASSERT(cmd->type == FENCE_CMD_LEASE_KEEPALIVE);
    if (l->phase != PH_READY || l->stopping || (cmd->flags & FENCE_CMD_F_REQID) ||
        c->unapplied > c->unapplied_ka || !l->ops.is_leader(l->ops.ctx))
        return false;
    /* Raft refused a proposal of ours (a leadership transfer refuses every
     * one until it ends): the checkpoint could not be written within the
     * margin, so renewals go through the log until an entry proposed since
     * has been applied (seed 1538 of the simulation: a lease expired 582 ms
     * before the TTL answered during a transfer ran out). */
    if (l->refused_mono != 0 && l->proof_mono <= l->refused_mono)
        return false;
    uint64_t now = ld_now(l);
    fence_fsm_lease_state st;
    if (fence_fsm_lease_info(l->fsm, cmd->lease, now, &st) != 0)
        return false; /* unknown or expired: the log answers NOLEASE */
    if (st.owner != cmd->owner && !(cmd->flags & FENCE_CMD_F_ADMIN))
        return false; /* the log answers NOPERM */
    if (st.deadline_ms - now <= RENEW_MARGIN(st.ttl_ms))
        return false;
    uint64_t window = 0;
    if (l->ops.voters(l->ops.ctx) > 1) {
        window = l->renew_window_ms;
        if (st.ttl_ms <= 2 * window)
            return false; /* a leader change could take most of it */
        /* Sure to lead: an entry of ours proposed less than a window ago
         * has been applied, so a majority followed us then, and none of
         * them votes for another before its election timeout. */
        if (l->ops.now_ms(l->ops.ctx) - l->proof_mono >= window)
            return false;
    }
    /* Renewals recorded before a stall go out first, stamped with their own
     * time: one checkpoint never spans more than an interval. */
    fence__ld_ckpt_maybe(l, false);
    uint8_t id[8];
    fence__put_u64(id, cmd->lease);
    if (!record(l, id, 1))
        return false;
    l->renew_last = now;
    l->stats.renewals_local++;
    fence_result r;
    memset(&r, 0, sizeof(r));
    r.status = FENCE_ST_OK;
    r.lease = cmd->lease;
    r.value = st.ttl_ms - window;
    l->ops.reply_result(l->ops.ctx, req, &r, false);
    return true;
}

/* Add the recorded ids to the pending batch as LEASE_CHECKPOINT commands;
 * how many went (fewer only out of memory). */
static uint32_t queue_ids(fence_leader *l)
{
    uint32_t done = 0;
    while (done < l->renew_n) {
        uint32_t k = l->renew_n - done;
        if (k > FENCE_CHECKPOINT_IDS_MAX)
            k = FENCE_CHECKPOINT_IDS_MAX;
        fence_cmd cmd;
        memset(&cmd, 0, sizeof(cmd));
        cmd.type = FENCE_CMD_LEASE_CHECKPOINT;
        cmd.ids = l->renew_ids + (size_t)done * 8;
        cmd.ids_count = k;
        if (!fence__ld_batch_add_internal(l, &cmd))
            break;
        l->stats.checkpoints++;
        l->stats.checkpoint_ids += k;
        done += k;
    }
    return done;
}

/* The first done ids went out: keep the rest (out of memory) for the next
 * interval (renew_last stays: it covers them). */
static void ids_sent(fence_leader *l, uint32_t done)
{
    if (done < l->renew_n) {
        memmove(l->renew_ids, l->renew_ids + (size_t)done * 8,
                (size_t)(l->renew_n - done) * 8);
        l->renew_n -= done;
        l->ckpt_due = l->ops.now_ms(l->ops.ctx) + CKPT_INTERVAL_MS;
        l->rearm = true;
        llog(l, FENCE_LLOG_WARN, "out of memory: %u renewals wait for the next checkpoint",
             l->renew_n);
    } else {
        l->renew_n = 0;
        l->ckpt_due = 0;
        l->ckpt_owed = false;
    }
}

/* See internal.h. */
void fence__ld_ckpt_ride(fence_leader *l)
{
    lbatch *b = l->pending;
    if (l->renew_n == 0 || b == NULL || l->ckpt_owed || l->phase != PH_READY || l->stopping)
        return;
    /* Due (or overdue after a stall): an entry of their own, stamped with
     * the last renewal's time (fence__ld_ckpt_maybe). */
    uint64_t mono = l->ops.now_ms(l->ops.ctx);
    if (mono >= l->ckpt_due)
        return;
    /* All of them in this batch, or none (no cut batch to stamp). */
    uint32_t chunks = (l->renew_n + FENCE_CHECKPOINT_IDS_MAX - 1) / FENCE_CHECKPOINT_IDS_MAX;
    if (b->n_items + chunks > FENCE_BATCH_MAX)
        return;
    /* Stamped with the moment checked above (one clock reading, so no
     * pause can fall between the check and the stamp): less than an
     * interval after the first renewal it carries, so less than
     * RENEW_MARGIN after any answer it covers, and nothing it lists can
     * have expired by then. */
    b->ts = ld_now_at(l, mono);
    uint64_t queued = l->stats.checkpoints;
    uint32_t done = queue_ids(l);
    FENCE_ASSERT(l->pending == b);
    l->stats.checkpoints_rode += l->stats.checkpoints - queued;
    ids_sent(l, done);
}

/* See internal.h. */
bool fence__ld_ckpt_maybe(fence_leader *l, bool force)
{
    if (l->renew_n == 0 || l->phase != PH_READY || l->stopping)
        return false;
    if (!force && l->ops.now_ms(l->ops.ctx) < l->ckpt_due)
        return false;
    /* The checkpoint goes ahead of everything not yet proposed, in entries
     * of its own stamped with the fsm time of the last renewal it carries:
     * were this server paused after answering (a stall longer than the
     * margin), an entry stamped after the pause would expire the leases
     * before renewing them.  Stamped so, nothing proposed after the
     * renewals can expire a lease before the checkpoint renews it. */
    lbatch *pending = l->pending, *closed = l->closed, *closed_tail = l->closed_tail;
    uint64_t hold_until = l->hold_until;
    bool hold_over = l->hold_over;
    l->pending = NULL;
    l->closed = l->closed_tail = NULL;
    uint32_t done = queue_ids(l);
    fence__ld_batch_close(l);
    for (lbatch *b = l->closed; b != NULL; b = b->next)
        b->ts = l->renew_last;
    if (l->closed_tail != NULL) {
        l->closed_tail->next = closed;
        if (closed != NULL)
            l->closed_tail = closed_tail;
    } else {
        l->closed = closed;
        l->closed_tail = closed_tail;
    }
    l->pending = pending;
    l->hold_until = hold_until;
    l->hold_over = hold_over;
    ids_sent(l, done);
    return done > 0;
}
