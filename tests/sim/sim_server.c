/* ------------------------------------------------------------------------
 * sim_server.c: The server: src/leader/ on each node, through its ops
 *
 * The sim links the same leader module as fenced and is its shell here,
 * as loop.c is in the daemon: ops->propose is raft_apply on the fixture,
 * ops->now_ms the node's monotonic clock, and the reply sink hands answers
 * to the simulated clients' pipelines.  The rule for calling raft
 * (leader.h) is checked from the outside too: s->in_cb counts raft
 * callbacks in progress, and the ops that call raft fail the run when it
 * is not zero.
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* The node's monotonic clock: fixture time plus a fixed per-node offset
 * (clocks of different machines do not agree). */
static uint64_t node_clock(sim *s, sim_node *n)
{
    return (uint64_t)((int64_t)s->fx.time + n->clock_offset);
}

/* raft's status as the leader module's (as loop.c maps it). */
static int sim_lstatus(int rv)
{
    if (rv == 0)
        return FENCE_LST_OK;
    if (rv == RAFT_NOTLEADER)
        return FENCE_LST_NOTLEADER;
    if (rv == RAFT_SHUTDOWN)
        return FENCE_LST_SHUTDOWN;
    return FENCE_LST_UNKNOWN;
}

/* Track a raft request made for a node's module. */
static sim_req_raft *raft_req_new(sim *s, sim_node *n, void *tag)
{
    sim_req_raft *q = calloc(1, sizeof *q);
    assert(q != NULL);
    q->node = n;
    q->tag = tag;
    q->next = s->raft_reqs;
    if (s->raft_reqs != NULL)
        s->raft_reqs->prev = q;
    s->raft_reqs = q;
    return q;
}

/* Forget a tracked raft request. */
void sim_raft_req_free(sim *s, sim_req_raft *q)
{
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        s->raft_reqs = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    free(q);
}

/* The rule: nothing calls raft from inside a raft callback. */
static void check_rule(sim *s, const char *what)
{
    if (s->in_cb != 0)
        sim_fail(s, "the leader module called raft (%s) from inside a raft "
                    "callback", what);
}

/* raft_apply callback: forward to the module (unless the node restarted
 * since: the process that proposed it is gone). */
static void apply_cb(struct raft_apply *req, int status, void *result)
{
    sim_req_raft *q = req->data;
    sim *s = g_sim;
    sim_node *n = q->node;
    void *tag = q->tag;
    bool stale = q->stale;
    sim_raft_req_free(s, q);
    if (stale)
        return;
    if (status != 0)
        s->res->unknown_batches++;
    s->in_cb++;
    fence__leader_applied(n->leader, tag, sim_lstatus(status), result);
    s->in_cb--;
}

/* ops->propose: the entry into a raft buffer, raft_apply on the fixture. */
static int op_propose(void *ctx, void *tag, const uint8_t *entry, size_t len)
{
    sim_node *n = ctx;
    sim *s = n->sim;
    check_rule(s, "propose");
    struct raft *r = raft_fixture_get(&s->fx, n->i);
    struct raft_buffer buf;
    buf.base = raft_malloc(len);
    assert(buf.base != NULL);
    memcpy(buf.base, entry, len);
    buf.len = len;
    sim_req_raft *q = raft_req_new(s, n, tag);
    q->u.apply.data = q;
    int rv = raft_apply(r, &q->u.apply, &buf, 1, apply_cb);
    if (rv != 0) {
        raft_free(buf.base);
        sim_raft_req_free(s, q);
    }
    return sim_lstatus(rv);
}

/* raft_barrier callback: forward to the module (unless stale). */
static void barrier_cb(struct raft_barrier *req, int status)
{
    sim_req_raft *q = req->data;
    sim *s = g_sim;
    sim_node *n = q->node;
    bool stale = q->stale;
    sim_raft_req_free(s, q);
    if (stale)
        return;
    s->in_cb++;
    fence__leader_barrier_done(n->leader, sim_lstatus(status));
    s->in_cb--;
}

/* ops->barrier. */
static int op_barrier(void *ctx)
{
    sim_node *n = ctx;
    sim *s = n->sim;
    check_rule(s, "barrier");
    sim_req_raft *q = raft_req_new(s, n, NULL);
    q->u.barrier.data = q;
    int rv = raft_barrier(raft_fixture_get(&s->fx, n->i), &q->u.barrier,
                          barrier_cb);
    if (rv != 0) {
        sim_raft_req_free(s, q);
        if (s->o.verbose > 1)
            sim_log(s, "node %u: barrier refused: %s", n->i, raft_strerror(rv));
    }
    return sim_lstatus(rv);
}

/* ops->is_leader: raft's state (a node that is down is not stepped at
 * all, but raft on it may still complete what was in flight). */
static bool op_is_leader(void *ctx)
{
    sim_node *n = ctx;
    return raft_state(raft_fixture_get(&n->sim->fx, n->i)) == RAFT_LEADER;
}

/* ops->voters. */
static unsigned op_voters(void *ctx)
{
    sim_node *n = ctx;
    struct raft *r = raft_fixture_get(&n->sim->fx, n->i);
    unsigned v = 0;
    for (unsigned k = 0; k < r->configuration.n; k++)
        if (r->configuration.servers[k].role == RAFT_VOTER)
            v++;
    return v;
}

/* ops->stored: raft's whole log is on this node's disk (as raft_ops.c). */
static bool op_stored(void *ctx)
{
    sim_node *n = ctx;
    struct raft *r = raft_fixture_get(&n->sim->fx, n->i);
    return r->last_stored >= raft_last_index(r);
}

/* ops->term. */
static uint64_t op_term(void *ctx)
{
    sim_node *n = ctx;
    return raft_fixture_get(&n->sim->fx, n->i)->current_term;
}

/* ops->now_ms. */
static uint64_t op_now_ms(void *ctx)
{
    sim_node *n = ctx;
    return node_clock(n->sim, n);
}

/* ops->log: the module's lines, when verbose. */
static void op_log(void *ctx, int level, const char *msg)
{
    sim_node *n = ctx;
    (void)level;
    sim_log(n->sim, "node %u: %s", n->i, msg);
    if (strncmp(msg, "leader ready", 12) == 0)
        n->sim->res->leader_terms++;
}

/* The client owning a request handle. */
static sim_client *req_client(sim *s, sim_req *q)
{
    for (unsigned c = 0; c < s->o.clients; c++) {
        sim_client *cl = &s->clients[c];
        if (q >= &cl->pipes[0][0] && q < &cl->pipes[0][0] + 2 * SIM_PIPE_MAX)
            return cl;
    }
    return NULL;
}

/* Record an answer (the client processes answers in order later).  Every
 * handle is answered at most once, and only while its client is still
 * connected to this node. */
static sim_req *answer(sim_node *n, void *req, int kind)
{
    sim *s = n->sim;
    sim_req *q = req;
    sim_client *cl = req_client(s, q);
    if (cl == NULL || cl->node != (int)n->i || !q->sent || q->ans != ANS_NONE) {
        sim_fail(s, "node %u answered a request that is %s", n->i,
                 cl == NULL         ? "not a client's"
                 : cl->node != (int)n->i ? "of a connection closed or elsewhere"
                 : !q->sent         ? "not sent"
                                    : "already answered");
        return NULL;
    }
    q->ans = kind;
    q->state_index = n->last_cmd_index;
    return q;
}

/* Sink: a command's result or a wait's outcome. */
static void op_reply_result(void *ctx, void *req, const fence_result *r,
                            bool from_wait)
{
    sim_req *q = answer(ctx, req, ANS_RESULT);
    if (q == NULL)
        return;
    q->r = *r;
    q->from_wait = from_wait;
}

/* Sink: a read, evaluated now (as cmd.c does) from the node's state. */
static void op_reply_read(void *ctx, void *req, const fence_cmd *cmd)
{
    sim_node *n = ctx;
    sim_req *q = answer(n, req, ANS_READ);
    if (q == NULL)
        return;
    if (cmd->name_len == 0) {
        fence_fsm_lease_state li;
        q->read_ok = fence_fsm_lease_info(n->fsm, cmd->lease,
                                          fence__leader_now(n->leader), &li) == 0;
    } else {
        fence_fsm_lock_state ki;
        q->read_ok = fence_fsm_lock_info(n->fsm, cmd->name, cmd->name_len, &ki);
    }
}

/* Sink: an error. */
static void op_reply_error(void *ctx, void *req, int err)
{
    sim_req *q = answer(ctx, req, ANS_ERROR);
    if (q == NULL)
        return;
    q->err = err;
}

/* The limits every LEADER_START carries (small, so the sim reaches them). */
static void sim_limits(fence_limits *l)
{
    fence_limits_default(l);
    l->leases_max = 40;
    l->locks_max = 4;
    l->waiters_max = 6;
    l->dedup_max = 4096;
}

/* A fresh server process on node n: a new fsm and leader module. */
void sim_node_server_new(sim_node *n)
{
    fence_leader_ops ops = {
        .ctx = n,
        .propose = op_propose,
        .barrier = op_barrier,
        .is_leader = op_is_leader,
        .voters = op_voters,
        .term = op_term,
        .now_ms = op_now_ms,
        .stored = op_stored,
        .log = op_log,
        .reply_result = op_reply_result,
        .reply_read = op_reply_read,
        .reply_error = op_reply_error,
    };
    fence_limits lim;
    sim_limits(&lim);
    n->fsm = sim_node_fsm_new(n);
    int rv = fence__leader_create(&ops, n->fsm, &lim, &n->leader);
    assert(rv == 0);
    (void)rv;
    /* As fenced does (loop.c): a leader change may take up to the election
     * timeout from a renewal answered without an entry. */
    fence__leader_renew_window(n->leader, SIM_ELECTION_MS);
    n->timer_at = UINT64_MAX;
}

/* One turn of a node's server loop, as loop.c's check does: fire the
 * leader timer when due, the module's step, re-arm the timer. */
void sim_node_drive(sim *s, sim_node *n)
{
    if (n->down)
        return; /* a paused or dead process runs nothing */
    assert(s->in_cb == 0);
    if (n->timer_at != UINT64_MAX && node_clock(s, n) >= n->timer_at) {
        n->timer_at = UINT64_MAX;
        fence__leader_timer(n->leader);
    }
    fence__leader_step(n->leader);
    uint64_t delay;
    if (fence__leader_timer_take(n->leader, &delay))
        n->timer_at = delay == UINT64_MAX ? UINT64_MAX : node_clock(s, n) + delay;
}
