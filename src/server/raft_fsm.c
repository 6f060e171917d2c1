/* raft's side of the leader module (src/leader/leader.h): the ops that
 * call raft (propose, barrier, and what the module asks about leadership,
 * voters and the term) and raft's callbacks, forwarded to the module:
 * the raft_apply and raft_barrier callbacks and the state machine raft
 * drives (fsm->apply, snapshot, restore).
 *
 * The rule for calling raft (leader.h): the module calls ops->propose and
 * ops->barrier only from fence__leader_step, which loop.c runs at its loop
 * check, never from inside a raft callback.  The callbacks below only
 * forward to the module, which records and replies.
 *
 * libraft 0.15 behaviour this file relies on (read in its v0.15.0
 * source; the rest is listed in leader.h):
 *   - client.c raft_apply(): the buffer belongs to raft only when it
 *     returns 0 (on failure logDiscard() does not free it; we do).
 *   - replication.c applyCommand(): the raft_apply callback gets the result
 *     pointer fsm->apply set, right after that apply; it points into the
 *     leader module, so nobody frees it.
 *   - snapshot.c snapshotRestore(): on success the restored buffer is the
 *     fsm's to raft_free.  With fsm version 3 and snapshot_finalize set,
 *     the buffers fsm->snapshot / snapshot_async hand out stay ours.
 *   - replication.c takeSnapshot(): a non-zero return of fsm->snapshot
 *     other than RAFT_BUSY propagates out of replicationApply (and on a
 *     follower fails the AppendEntries being handled); RAFT_BUSY is
 *     ignored and the snapshot retried at a later apply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/log.h"
#include "server/server.h"

/* One proposal handed to raft. */
typedef struct apply_req {
    struct raft_apply req; /* raft's request (data = this) */
    fence_server *srv;     /* the server */
    void *tag;             /* the leader module's batch */
} apply_req;

/* raft's status as the leader module's (leader.h fence_lstatus). */
static int lstatus(int rv)
{
    switch (rv) {
    case 0:
        return FENCE_LST_OK;
    case RAFT_NOTLEADER:
        return FENCE_LST_NOTLEADER;
    case RAFT_SHUTDOWN:
        return FENCE_LST_SHUTDOWN;
    default:
        return FENCE_LST_UNKNOWN; /* RAFT_LEADERSHIPLOST, RAFT_NOMEM, ... */
    }
}

/* ---- The ops that call raft ------------------------------------------------- */

/* raft_apply callback: hand the outcome to the module. */
static void batch_applied(struct raft_apply *req, int status, void *result)
{
    apply_req *a = req->data;
    fence_server *s = a->srv;
    void *tag = a->tag;
    free(a);
    if (status != 0)
        FENCE_LOG_W("entry not applied: %s", fence__raft_strerror(status));
    else /* the batch size, from the results apply decoded (not the bytes) */
        fence__server_metrics_batch(s, fence__leader_results(s->leader));
    fence__leader_applied(s->leader, tag, lstatus(status), result);
}

/* ops->propose: copy the entry into a raft buffer and raft_apply it. */
static int op_propose(void *ctx, void *tag, const uint8_t *entry, size_t len)
{
    fence_server *s = ctx;
    apply_req *a = malloc(sizeof(*a));
    uint8_t *buf = raft_malloc(len);
    int rv = RAFT_NOMEM;
    if (a != NULL && buf != NULL) {
        memcpy(buf, entry, len);
        a->req.data = a;
        a->srv = s;
        a->tag = tag;
        rv = fence__node_apply(&s->node, &a->req, buf, len, batch_applied);
    }
    if (rv != 0) {
        raft_free(buf); /* raft took ownership only on success */
        free(a);
        FENCE_LOG_W("propose of an entry of %zu bytes failed: %s", len,
                    fence__raft_strerror(rv));
        return lstatus(rv);
    }
    return FENCE_LST_OK;
}

/* raft_barrier callback: the catch-up is over (or failed). */
static void barrier_done(struct raft_barrier *req, int status)
{
    fence_server *s = req->data;
    fence__leader_barrier_done(s->leader, lstatus(status));
}

/* ops->barrier. */
static int op_barrier(void *ctx)
{
    fence_server *s = ctx;
    s->barrier.data = s;
    return lstatus(fence__node_barrier(&s->node, &s->barrier, barrier_done));
}

/* ops->is_leader. */
static bool op_is_leader(void *ctx)
{
    fence_server *s = ctx;
    return fence__node_is_leader(&s->node);
}

/* ops->voters. */
static unsigned op_voters(void *ctx)
{
    fence_server *s = ctx;
    return fence__node_voters(&s->node);
}

/* ops->term. */
static uint64_t op_term(void *ctx)
{
    fence_server *s = ctx;
    return fence__node_term(&s->node);
}

/* ops->now_ms. */
static uint64_t op_now_ms(void *ctx)
{
    (void)ctx;
    return uv_hrtime() / 1000000;
}

/* ops->log: the module's levels are base/log.h's. */
static void op_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    FENCE_LOG(level, "%s", msg);
}

/* ---- The raft state machine ----------------------------------------------- */

/* raft fsm->apply: the module applies the entry on every server. */
static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf,
                     void **result)
{
    fence_server *s = fsm->data;
    *result = (void *)fence__leader_apply(s->leader, buf->base, buf->len);
    return 0;
}

/* Scale the snapshot threshold with the state: the next snapshot comes
 * after max(--snapshot-threshold, live objects) entries, so encoding the
 * whole state costs a bounded amount per entry however big it is (a
 * million held locks are not serialized every 1,024 entries). */
static void scale_snapshot_threshold(fence_server *s)
{
    fence_fsm_stats st;
    fence_fsm_stats_get(s->fsm, &st);
    uint64_t n = st.leases + st.locks + st.waiters;
    uint64_t thr = s->cfg->snapshot_threshold;
    if (n > thr)
        thr = n;
    if (thr > FENCE_SNAPSHOT_THRESHOLD_MAX)
        thr = FENCE_SNAPSHOT_THRESHOLD_MAX;
    raft_set_snapshot_threshold(&s->node.raft, (unsigned)thr);
}

/* raft fsm->snapshot (fsm version 3; the buffers are ours, freed in
 * fsm_snapshot_finalize).  With --snapshot-fork 1 this only forks a child
 * that encodes the state it inherited (snapfork.h), and
 * fsm_snapshot_async collects it; otherwise (or when raft's io has no
 * async_work) the state is encoded here, in the loop.  A snapshot that
 * cannot start is RAFT_BUSY, which raft ignores: it tries again at a
 * later apply. */
static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                        unsigned *n_bufs)
{
    fence_server *s = fsm->data;
    /* libraft 0.15 files a snapshot taken while a membership change is
     * uncommitted under the old committed configuration's index with the
     * new configuration, so the nodes that restore it disagree on who is a
     * member (found by the simulation; docs/cluster.md, libraft pitfalls).
     * Not yet: raft asks again at a later apply, once the change commits. */
    if (s->node.raft.configuration_uncommitted_index != 0)
        return RAFT_BUSY;
    if (fsm->snapshot_async != NULL) {
        *bufs = NULL;
        *n_bufs = 0;
        if (fence__snapfork_start(&s->snap, s->fsm) != FENCE_SNAPFORK_OK)
            return RAFT_BUSY;
        scale_snapshot_threshold(s);
        return 0;
    }
    FENCE_ASSERT(s->snap_inline == NULL);
    uint64_t t0 = uv_hrtime();
    size_t size = fence_fsm_snapshot_size(s->fsm);
    struct raft_buffer *b = malloc(sizeof(*b));
    if (b == NULL)
        return RAFT_BUSY;
    s->snap_inline = malloc(size);
    if (s->snap_inline == NULL) {
        free(b);
        return RAFT_BUSY;
    }
    b->base = s->snap_inline;
    b->len = fence_fsm_snapshot(s->fsm, s->snap_inline, size);
    FENCE_ASSERT(b->len == size);
    *bufs = b;
    *n_bufs = 1;
    scale_snapshot_threshold(s);
    FENCE_LOG_I("snapshot taken: %zu bytes, in the loop: encode %.1f ms, last token %llu",
                size, (double)(uv_hrtime() - t0) / 1e6,
                (unsigned long long)fence_fsm_last_token(s->fsm));
    return 0;
}

/* raft fsm->snapshot_async, in libuv's thread pool: wait for the child
 * fsm_snapshot forked.  It must not (and does not) read the live state,
 * which raft keeps applying to meanwhile. */
static int fsm_snapshot_async(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                              unsigned *n_bufs)
{
    fence_server *s = fsm->data;
    return fence__snapfork_collect(&s->snap, bufs, n_bufs);
}

/* raft fsm->snapshot_finalize, in the loop, after every snapshot that
 * fsm_snapshot started (written, failed or abandoned). */
static int fsm_snapshot_finalize(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                                 unsigned *n_bufs)
{
    fence_server *s = fsm->data;
    /* Told apart by what fsm_snapshot made, not by snapshot_async: raft
     * may take an in-loop snapshot inside raft_start, before that is set. */
    if (s->snap_inline != NULL) {
        free(s->snap_inline);
        s->snap_inline = NULL;
        free(*bufs);
    } else {
        fence__snapfork_finish(&s->snap);
    }
    *bufs = NULL;
    *n_bufs = 0;
    return 0;
}

/* raft fsm->restore: replace the state; on success the buffer is ours. */
static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    fence_server *s = fsm->data;
    uint64_t t0 = uv_hrtime();
    int rv = fence_fsm_restore(s->fsm, buf->base, buf->len);
    if (rv != 0) {
        FENCE_LOG_E("snapshot restore failed (%d): corrupt or unknown version", rv);
        return rv == FENCE_ST_LIMIT ? RAFT_NOMEM : RAFT_CORRUPT;
    }
    raft_free(buf->base);
    FENCE_LOG_I("snapshot restored: %zu bytes in %.1f ms, last token %llu", buf->len,
                (double)(uv_hrtime() - t0) / 1e6,
                (unsigned long long)fence_fsm_last_token(s->fsm));
    scale_snapshot_threshold(s);
    fence__leader_restored(s->leader);
    return 0;
}

/* Fill the raft side of the leader module's ops (ctx is the server). */
void fence__raft_ops(fence_leader_ops *ops)
{
    ops->propose = op_propose;
    ops->barrier = op_barrier;
    ops->is_leader = op_is_leader;
    ops->voters = op_voters;
    ops->term = op_term;
    ops->now_ms = op_now_ms;
    ops->log = op_log;
}

/* Set up raft's view of the state machine (snapshot_async is set once
 * raft's io is known: fence__raft_fsm_async). */
void fence__raft_fsm_init(fence_server *s)
{
    s->raft_fsm.version = 3;
    s->raft_fsm.data = s;
    s->raft_fsm.apply = fsm_apply;
    s->raft_fsm.snapshot = fsm_snapshot;
    s->raft_fsm.restore = fsm_restore;
    s->raft_fsm.snapshot_finalize = fsm_snapshot_finalize;
    s->raft_fsm.snapshot_async = NULL;
}

/* Encode snapshots in a forked child from now on (snapfork.h). */
void fence__raft_fsm_async(fence_server *s)
{
    s->raft_fsm.snapshot_async = fsm_snapshot_async;
}
