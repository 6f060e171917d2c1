/* The leader module's requests to raft (src/leader/leader.h ops): propose
 * an entry, propose a barrier, and what the module asks about
 * leadership, voters and the term; and the callbacks raft makes when a
 * request completes (raft_apply's and raft_barrier's), forwarded to the
 * module (src/leader/outcome.c).  The state machine raft drives on every
 * server is raft_fsm.c.
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
 *     pointer fsm->apply set (raft_fsm.c), right after that apply; it
 *     points into the leader module, so nobody frees it. */
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

/* ops->stored: raft has written its whole log to our disk (leader.h
 * "Pipelining").  libraft 0.15 moves last_stored in the append callback
 * (on the leader too: replication.c appendLeaderCb), and raft_apply puts
 * the entry in the in-memory log before it returns, so right after a
 * proposal this is false until that write completes. */
static bool op_stored(void *ctx)
{
    fence_server *s = ctx;
    return s->node.raft.last_stored >= raft_last_index(&s->node.raft);
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

/* Fill the raft side of the leader module's ops (ctx is the server). */
void fence__raft_ops(fence_leader_ops *ops)
{
    ops->propose = op_propose;
    ops->barrier = op_barrier;
    ops->is_leader = op_is_leader;
    ops->voters = op_voters;
    ops->term = op_term;
    ops->now_ms = op_now_ms;
    ops->stored = op_stored;
    ops->log = op_log;
}
