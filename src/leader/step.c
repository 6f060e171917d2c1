/* The leader module's life and its step (see leader.h for the contract, the
 * phases, the rule for calling raft and the libraft 0.15 behaviour it
 * relies on).  No libuv, no raft, no connection internals: what the module
 * needs from outside comes through fence_leader_ops. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "core/entry.h"
#include "leader/internal.h"

/* Current fsm time: monotonic ms plus the offset chosen when this server
 * became leader, so fsm time never goes back across leaders; off the
 * leader, the time of the last applied entry. */
uint64_t fence__leader_now(const fence_leader *l)
{
    return ld_now(l);
}

/* Whether this server is a ready leader (LEADER_START applied). */
bool fence__leader_ready(const fence_leader *l)
{
    return l->phase == PH_READY;
}

/* Copy the counters out. */
void fence__leader_stats_get(const fence_leader *l, fence_leader_stats *out)
{
    *out = l->stats;
    out->waits = l->n_waits;
}

/* Commands in the last applied entry; see leader.h. */
size_t fence__leader_results(const fence_leader *l)
{
    return l->n_results > 0 ? (size_t)l->n_results : 0;
}

/* Set up a connection's module state. */
void fence__leader_conn_init(fence_lconn *c)
{
    memset(c, 0, sizeof(*c));
}

/* ---- The loop side ------------------------------------------------------------ */

/* Follow raft's state: start the catch-up on becoming leader; on losing
 * leadership refuse what is not yet proposed and stop the timer. */
static void watch_leadership(fence_leader *l)
{
    bool leader = l->ops.is_leader(l->ops.ctx);
    if (leader && l->phase == PH_NONE && l->barriers == 0 && !l->stopping) {
        if (l->ops.barrier(l->ops.ctx) == FENCE_LST_OK) {
            l->barriers++;
            l->nudge_mono = l->ops.now_ms(l->ops.ctx);
            l->phase = PH_CATCHUP;
            llog(l, FENCE_LLOG_INFO, "became leader (term %llu); catching up",
                 (unsigned long long)l->ops.term(l->ops.ctx));
        }
    } else if (!leader && l->phase != PH_NONE) {
        llog(l, FENCE_LLOG_INFO, "no longer leader (term %llu)",
             (unsigned long long)l->ops.term(l->ops.ctx));
        l->phase = PH_NONE;
        l->rearm = true; /* followers run no timer */
        /* Requests not yet proposed: tell their clients where to go. */
        fence__ld_fail_unproposed(l, FENCE_LST_NOTLEADER);
        l->tick_pending = false;
        fence__ld_renew_reset(l); /* the next LEADER_START restarts every TTL */
        l->proof_mono = 0;
    }
}

/* The barrier is applied (the previous callback said so): fix the time
 * offset so fsm time never goes back, then propose LEADER_START with our
 * limits, alone in its entry; writes wait for it. */
static void start_leadership(fence_leader *l)
{
    uint64_t mono = l->ops.now_ms(l->ops.ctx);
    uint64_t fsm_now = fence_fsm_now(l->fsm);
    if (fsm_now > mono && fsm_now - mono > l->time_offset)
        l->time_offset = fsm_now - mono;
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_LEADER_START;
    cmd.limits = l->limits;
    l->phase = PH_STARTING;
    l->nudge_mono = mono;
    /* LEADER_START goes alone, ahead of anything else. */
    fence__ld_batch_close(l);
    fence__ld_propose_closed(l);
    if (!fence__ld_batch_add_internal(l, &cmd)) {
        l->phase = PH_NONE;
        return;
    }
    fence__ld_batch_close(l);
    fence__ld_propose_closed(l);
}

/* libraft 0.15 (docs/cluster.md, libraft pitfalls, 5): a server elected
 * while its write of an entry it got as a follower was in flight may not
 * count itself for that entry once the write completes; with 2 voters
 * nothing it has commits until it appends again, and the module appends
 * nothing while its barrier or LEADER_START waits.  So while one of them
 * has waited NUDGE_MS, one more barrier (a no-op entry) goes out, at most
 * one per NUDGE_MS (tests/sim/test_libraft_selfvote.c shows both the stall
 * and that one more append ends it). */
#define NUDGE_MS 1000

static void nudge(fence_leader *l)
{
    if ((l->phase != PH_CATCHUP && l->phase != PH_STARTING) || l->stopping)
        return;
    uint64_t mono = l->ops.now_ms(l->ops.ctx);
    if (mono - l->nudge_mono < NUDGE_MS)
        return;
    l->nudge_mono = mono;
    if (l->ops.barrier(l->ops.ctx) == FENCE_LST_OK) {
        l->barriers++;
        llog(l, FENCE_LLOG_INFO, "%s still waits after %d ms; one more barrier",
             l->phase == PH_CATCHUP ? "the catch-up barrier" : "LEADER_START", NUDGE_MS);
    }
}

/* Whether the pending batch goes out now (leader.h "Group commit",
 * "Pipelining", "Holding"). */
static bool may_propose(fence_leader *l)
{
    if (l->n_inflight == 0)
        return !fence__ld_batch_hold(l);
    if (l->phase != PH_READY || l->stopping || l->n_inflight >= PIPELINE_MAX ||
        l->ops.stored == NULL || l->ops.voters(l->ops.ctx) <= 1 ||
        !l->ops.stored(l->ops.ctx))
        return false;
    /* Waits-to-be only: they wait for the entries in flight, then for
     * company as ever ("Holding"); sent now, they would take the disk from
     * the UNLOCK that is about to come. */
    if (!l->hold_over && fence__ld_batch_waits_only(l))
        return false;
    l->stats.pipelined++;
    return true;
}

/* One step of the loop; see leader.h (THE RULE FOR CALLING RAFT). */
void fence__leader_step(fence_leader *l)
{
    FENCE_ASSERT(l->in_raft_cb == 0);
    FENCE_ASSERT(!l->in_step);
    l->in_step = true;
    watch_leadership(l);
    nudge(l);
    if (l->phase == PH_BARRIER_DONE && !l->stopping)
        start_leadership(l);
    if (l->phase != PH_NONE) {
        fence__ld_ckpt_maybe(l, false);
        fence__ld_propose_closed(l);
        if (l->pending != NULL && may_propose(l)) {
            fence__ld_ckpt_ride(l);
            fence__ld_batch_close(l);
            fence__ld_propose_closed(l);
        }
    }
    l->in_step = false;
}

/* The earliest fsm deadline passed: queue a TICK so the core processes
 * it (lease expiry, wait timeouts, lock-delay ends). */
void fence__leader_timer(fence_leader *l)
{
    FENCE_ASSERT(l->in_raft_cb == 0);
    bool held = l->hold_until != 0;
    if (held) {
        /* The hold is over (leader.h "Holding"): the batch goes at the
         * next step. */
        l->hold_over = true;
        l->rearm = true;
    }
    bool ckpt = fence__ld_ckpt_maybe(l, false);
    if (!ckpt && l->renew_n > 0)
        l->rearm = true; /* fired a hair early for the checkpoint */
    if (l->phase != PH_READY || l->tick_pending || l->stopping)
        return;
    uint64_t now = ld_now(l);
    uint64_t next = fence_fsm_next_deadline_by(l->fsm, now);
    if (next > now) {
        /* It fired for the hold or the checkpoint only, or for a heap key
         * a renewal left early (src/core/heap.h): nothing is due yet. */
        l->rearm = true;
        return;
    }
    fence_cmd cmd;
    memset(&cmd, 0, sizeof(cmd));
    cmd.type = FENCE_CMD_TICK;
    l->tick_deadline = next;
    if (fence__ld_batch_add_internal(l, &cmd))
        l->tick_pending = true;
    else
        l->rearm = true; /* out of memory: try again after a back-off */
}

/* The delay for the one leader timer (the core's next deadline); see
 * leader.h. */
bool fence__leader_timer_take(fence_leader *l, uint64_t *delay_ms)
{
    if (!l->rearm)
        return false;
    l->rearm = false;
    *delay_ms = UINT64_MAX;
    if (l->phase != PH_READY || l->stopping)
        return true;
    uint64_t hold = UINT64_MAX;
    uint64_t mono = l->ops.now_ms(l->ops.ctx);
    if (l->hold_until != 0)
        hold = l->hold_until > mono ? l->hold_until - mono : 0;
    if (l->renew_n > 0) {
        /* The next checkpoint ("Renewals"); +1 as for deadlines. */
        uint64_t ck = l->ckpt_due > mono ? l->ckpt_due - mono + 1 : 0;
        if (ck < hold)
            hold = ck;
    }
    uint64_t now = ld_now(l);
    /* A lower bound when nothing is due by now: the timer may fire early
     * and finds nothing due then (fence__leader_timer). */
    uint64_t deadline = fence_fsm_next_deadline_by(l->fsm, now);
    if (deadline == UINT64_MAX) {
        *delay_ms = hold;
        return true;
    }
    /* +1: loop time is whole ms, so never fire a hair before the deadline. */
    uint64_t delay = deadline > now ? deadline - now + 1 : 0;
    if (delay == 0 && !l->tick_pending && deadline == l->tick_deadline) {
        /* A TICK for this deadline was tried and the deadline is still
         * pending: its proposal failed (raft refused it, say during a
         * leadership transfer), or, were it applied, a core bug.  Retry
         * after a back-off instead of spinning on TICKs. */
        llog(l, FENCE_LLOG_WARN,
             "deadline %llu still pending after a TICK; retrying in %d ms",
             (unsigned long long)deadline, TICK_RETRY_MS);
        delay = TICK_RETRY_MS;
    }
    *delay_ms = delay < hold ? delay : hold;
    return true;
}

/* Shutdown: no new requests; the unproposed ones are answered. */
void fence__leader_stop(fence_leader *l)
{
    FENCE_ASSERT(l->in_raft_cb == 0);
    if (l->stopping)
        return;
    l->stopping = true;
    l->rearm = true;
    fence__ld_fail_unproposed(l, FENCE_LST_SHUTDOWN);
    fence__ld_renew_reset(l);
}

/* ---- Life ------------------------------------------------------------------------ */

/* Create the module; see leader.h. */
int fence__leader_create(const fence_leader_ops *ops, fence_fsm *fsm,
                         const fence_limits *limits, fence_leader **out)
{
    fence_leader *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return -1;
    l->ops = *ops;
    l->fsm = fsm;
    l->limits = *limits;
    l->wait_nb = WAIT_TAB_INITIAL;
    l->wait_tab = calloc(l->wait_nb, sizeof(*l->wait_tab));
    l->cmds = calloc(FENCE_BATCH_MAX, sizeof(*l->cmds));
    if (l->wait_tab == NULL || l->cmds == NULL) {
        fence__leader_destroy(l);
        return -1;
    }
    *out = l;
    return 0;
}

/* Free a batch list with its requests (destroy only). */
static void free_batches(lbatch *b)
{
    while (b != NULL) {
        lbatch *next = b->next;
        for (uint32_t i = 0; i < b->n_items; i++)
            if (b->items[i].req != NULL) {
                fence__ld_conn_unlink(b->items[i].req);
                free(b->items[i].req);
            }
        fence__ld_batch_free(b);
        b = next;
    }
}

/* Free everything left; see leader.h. */
void fence__leader_destroy(fence_leader *l)
{
    if (l == NULL)
        return;
    free_batches(l->pending);
    free_batches(l->closed);
    free_batches(l->inflight);
    for (size_t b = 0; l->wait_tab != NULL && b < l->wait_nb; b++) {
        fence_lreq *r = l->wait_tab[b];
        while (r != NULL) {
            fence_lreq *next = r->wnext;
            fence__ld_conn_unlink(r);
            free(r);
            r = next;
        }
    }
    free(l->wait_tab);
    free(l->cmds);
    free(l->ebuf);
    free(l->renew_ids);
    free(l);
}
