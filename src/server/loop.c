/* The daemon's shell around the leader module (leader.h): it owns the
 * libuv handles (the loop check, the leader timer, the signals) and
 * raft's state machine and callbacks, and forwards all of them to the
 * module, which holds group commit, the leadership phases, fsm time,
 * TICKs, the wait table, batch failure and shutdown.
 *
 * The rule for calling raft (leader.h): the module calls ops->propose and
 * ops->barrier only from fence__leader_step, which runs here at the loop
 * check, never from inside a raft callback.  The callbacks below only
 * forward to the module, which records and replies.
 *
 * libraft 0.15 behaviour this shell relies on (read in its v0.15.0
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
#include <sys/random.h>

#include "common/assert.h"
#include "common/log.h"
#include "server/server.h"

/* One proposal handed to raft. */
typedef struct apply_req {
    struct raft_apply req; /* raft's request (data = this) */
    fence_server *srv;     /* the server */
    void *tag;             /* the leader module's batch */
} apply_req;

/* Monotonic milliseconds (uv_hrtime never jumps with the wall clock). */
static uint64_t mono_ms(void)
{
    return uv_hrtime() / 1000000;
}

/* Current fsm time (leader.h "Time"). */
uint64_t fence__server_now(fence_server *s)
{
    return fence__leader_now(s->leader);
}

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

/* ---- The leader module's ops ------------------------------------------------ */

/* raft_apply callback: hand the outcome to the module. */
static void batch_applied(struct raft_apply *req, int status, void *result)
{
    apply_req *a = req->data;
    fence_server *s = a->srv;
    void *tag = a->tag;
    free(a);
    if (status != 0)
        FENCE_LOG_W("entry not applied: %s", fence__raft_strerror(status));
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
        fence__server_metrics_entry(s, entry, len);
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
    return mono_ms();
}

/* ops->log: the module's levels are common/log.h's. */
static void op_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    FENCE_LOG(level, "%s", msg);
}

/* The reply sink: a command's result or a wait's outcome. */
static void op_reply_result(void *ctx, void *req, const fence_result *r,
                            bool from_wait)
{
    fence_slot *slot = req;
    (void)ctx;
    (void)from_wait;
    FENCE_ASSERT(slot->state == SLOT_LEADER);
    slot->state = SLOT_NEW;
    fence__cmd_reply_result(slot, r);
}

/* The reply sink: a read, answered from the state now. */
static void op_reply_read(void *ctx, void *req, const fence_cmd *cmd)
{
    fence_slot *slot = req;
    FENCE_ASSERT(slot->state == SLOT_LEADER);
    slot->state = SLOT_NEW;
    fence__cmd_reply_read(ctx, slot, cmd);
}

/* The reply sink: an error. */
static void op_reply_error(void *ctx, void *req, int err)
{
    fence_slot *slot = req;
    FENCE_ASSERT(slot->state == SLOT_LEADER);
    slot->state = SLOT_NEW;
    fence__cmd_reply_error(ctx, slot, err);
}

/* Hand a request to the module (server.h). */
void fence__server_submit(fence_server *s, fence_slot *slot, const fence_cmd *cmd,
                          bool is_read)
{
    FENCE_ASSERT(slot->conn != NULL);
    slot->state = SLOT_LEADER;
    fence__leader_submit(s->leader, &slot->conn->lconn, slot, cmd, is_read);
}

/* A connection is closing (server.h). */
void fence__server_conn_closed(fence_server *s, fence_conn *c)
{
    fence__leader_conn_close(s->leader, &c->lconn);
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

/* Allocator handed to the core. */
static void *core_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

/* Deallocator handed to the core. */
static void core_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

/* ---- Timer and loop check --------------------------------------------------- */

/* The earliest fsm deadline passed: the module queues a TICK. */
static void tick_cb(uv_timer_t *t)
{
    fence_server *s = t->data;
    fence__leader_timer(s->leader);
}

/* Arm or stop the one leader timer when the module says so. */
static void rearm_timer(fence_server *s)
{
    uint64_t delay;
    if (!fence__leader_timer_take(s->leader, &delay))
        return;
    if (delay == UINT64_MAX || s->stopping)
        uv_timer_stop(&s->tick_timer);
    else
        uv_timer_start(&s->tick_timer, tick_cb, delay, 0);
}

/* End of every loop turn: the module's step (follow leadership, propose),
 * flush replies, re-arm the timer. */
static void check_cb(uv_check_t *h)
{
    fence_server *s = h->data;
    fence__leader_step(s->leader);
    fence__conns_flush(s);
    /* Flushing resumes paused connections, whose buffered requests may
     * have filled the batch again; nothing else would wake the loop for
     * them, so step again now. */
    fence__leader_step(s->leader);
    fence__conns_flush(s);
    rearm_timer(s);
    fence__server_metrics_publish(s);
}

/* ---- Start and stop --------------------------------------------------------- */

/* SIGTERM / SIGINT: stop cleanly. */
static void signal_cb(uv_signal_t *h, int signum)
{
    fence_server *s = h->data;
    FENCE_LOG_I("signal %d: shutting down", signum);
    fence__server_stop(s);
}

/* raft is closed: close our remaining handles so the loop ends. */
static void node_closed(fence_node *n)
{
    fence_server *s = (fence_server *)((char *)n - offsetof(fence_server, node));
    uv_close((uv_handle_t *)&s->check, NULL);
    uv_close((uv_handle_t *)&s->tick_timer, NULL);
    fence__lag_close(&s->lag);
    uv_close((uv_handle_t *)&s->sig_term, NULL);
    uv_close((uv_handle_t *)&s->sig_int, NULL);
    FENCE_LOG_I("stopped");
}

/* Begin a clean shutdown: no new clients, answer what is not proposed,
 * close connections, close raft. */
void fence__server_stop(fence_server *s)
{
    if (s->stopping)
        return;
    s->stopping = true;
    fence__listen_close(s);
    fence__leader_stop(s->leader);
    fence__snapfork_cancel(&s->snap);
    fence__conns_close_all(s);
    uv_timer_stop(&s->tick_timer);
    fence__node_close(&s->node, node_closed);
}

/* Set up the state machine, the leader module, raft, handles, listeners. */
int fence__server_init(fence_server *s, uv_loop_t *loop, fence_config *cfg)
{
    memset(s, 0, sizeof(*s));
    s->loop = loop;
    s->cfg = cfg;
    s->start_ms = mono_ms();
    char merr[256];
    if (fence__srv_metrics_init(&s->metrics, merr, sizeof(merr)) != 0) {
        FENCE_LOG_E("%s", merr);
        return -1;
    }
    fence_resp_limits_default(&s->resp_lim);
    s->resp_lim.bulk_max = cfg->max_bulk;
    fence_fsm_opts fo;
    memset(&fo, 0, sizeof(fo));
    fo.alloc.alloc = core_alloc;
    fo.alloc.free = core_free;
    /* Keys the core's hash tables so clients cannot choose lock names or
     * request ids that all land in one bucket.  It changes no result and no
     * snapshot byte, so every node may use its own. */
    if (getrandom(&fo.hash_seed, sizeof(fo.hash_seed), 0) !=
        (ssize_t)sizeof(fo.hash_seed))
        fo.hash_seed = (uint64_t)uv_hrtime() ^ ((uint64_t)getpid() << 32);
    if (fence_fsm_create(&fo, &s->fsm) != 0) {
        FENCE_LOG_E("cannot create the state machine");
        return -1;
    }
    fence_leader_ops ops = {
        .ctx = s,
        .propose = op_propose,
        .barrier = op_barrier,
        .is_leader = op_is_leader,
        .voters = op_voters,
        .term = op_term,
        .now_ms = op_now_ms,
        .log = op_log,
        .reply_result = op_reply_result,
        .reply_read = op_reply_read,
        .reply_error = op_reply_error,
    };
    fence_limits lim;
    fence_limits_default(&lim);
    lim.leases_max = (uint32_t)cfg->max_leases;
    lim.locks_max = (uint32_t)cfg->max_locks;
    lim.waiters_max = (uint32_t)cfg->max_waiters;
    lim.dedup_max = (uint32_t)cfg->max_dedup;
    lim.waits_max = (uint32_t)cfg->max_waits;
    if (fence__leader_create(&ops, s->fsm, &lim, &s->leader) != 0) {
        FENCE_LOG_E("out of memory at start");
        return -1;
    }
    s->raft_fsm.version = 3;
    s->raft_fsm.data = s;
    s->raft_fsm.apply = fsm_apply;
    s->raft_fsm.snapshot = fsm_snapshot;
    s->raft_fsm.restore = fsm_restore;
    s->raft_fsm.snapshot_finalize = fsm_snapshot_finalize;
    s->raft_fsm.snapshot_async = NULL; /* set below once raft's io is known */

    uv_check_init(loop, &s->check);
    s->check.data = s;
    uv_check_start(&s->check, check_cb);
    uv_timer_init(loop, &s->tick_timer);
    s->tick_timer.data = s;
    fence__lag_start(&s->lag, loop);
    uv_signal_init(loop, &s->sig_term);
    s->sig_term.data = s;
    uv_signal_start(&s->sig_term, signal_cb, SIGTERM);
    uv_signal_init(loop, &s->sig_int);
    s->sig_int.data = s;
    uv_signal_start(&s->sig_int, signal_cb, SIGINT);

    if (fence__node_start(&s->node, loop, cfg, &s->raft_fsm) != 0)
        return -1;
    /* raft calls io->async_work unchecked when snapshot_async is set, and
     * reads the field at each snapshot: setting it after raft_start, before
     * the loop runs any apply, is in time.  (raft_uv_init of libraft 0.15
     * fills async_work but leaves io->version at 1: test the function.) */
    if (cfg->snapshot_fork && s->node.io.async_work != NULL &&
        fence__snapfork_init(&s->snap))
        s->raft_fsm.snapshot_async = fsm_snapshot_async;
    else
        FENCE_LOG_I("snapshots are encoded in the loop%s",
                    cfg->snapshot_fork ? " (fork mode unavailable)" : "");
    s->node.append_latency = s->metrics.append_latency; /* after start's memset */
    fence__node_set_peer_refusals(&s->node, s->metrics.peer_refusals);
    if (fence__listen(s) != 0)
        return -1;
    if (cfg->daemon.metrics_port != 0) {
        if (fence__srv_metrics_listen(&s->metrics, cfg->daemon.metrics_bind,
                                      (int)cfg->daemon.metrics_port, merr,
                                      sizeof(merr)) != 0) {
            FENCE_LOG_E("metrics-port: %s", merr);
            return -1;
        }
        FENCE_LOG_I("metrics on http://%s:%llu/metrics", cfg->daemon.metrics_bind,
                    (unsigned long long)cfg->daemon.metrics_port);
    }
    return 0;
}

/* Release what the loop no longer uses (after uv_run returned). */
void fence__server_free(fence_server *s)
{
    if (s->node.started)
        raft_uv_close(&s->node.io);
    if (s->node.tcp && !s->node.peer_tls)
        raft_uv_tcp_close(&s->node.transport);
    fence__srv_metrics_free(&s->metrics);
    fence__owners_free(s);
    fence__leader_destroy(s->leader);
    fence__snapfork_free(&s->snap);
    fence_fsm_destroy(s->fsm);
    fence__server_acl_free(s);
}
