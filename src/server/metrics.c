/* fenced's metric families (see metrics.h and docs/metrics.md). */
#include "server/metrics.h"
#include "server/commands_table.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/assert.h"
#include "server/server.h"

/* One row of the family table. */
typedef struct family_def {
    size_t off;            /* offsetof the fence_metric * in fence_srv_metrics */
    int type;              /* enum fence_metric_type */
    const char *name;      /* metric name */
    const char *help;      /* help text */
    const char *label;     /* label name or NULL */
    uint32_t cap;          /* label cap */
    const double *bounds;  /* histogram bounds (set at init) */
    uint32_t n_bounds;     /* entries in bounds */
} family_def;

#define F(field) offsetof(fence_srv_metrics, field)
#define C FENCE_METRIC_COUNTER
#define G FENCE_METRIC_GAUGE
#define H FENCE_METRIC_HISTOGRAM

/* Every family fenced exports; histograms get their bounds in init. */
static const family_def defs[] = {
    {F(grants), C, "fenced_grants_total", "Locks granted (each a new fencing token).", NULL, 0, NULL, 0},
    {F(handoffs), C, "fenced_handoffs_total", "Grants to a queued waiter (a lock handed over on release or expiry).", NULL, 0, NULL, 0},
    {F(expirations), C, "fenced_lease_expirations_total", "Leases that ran out.", NULL, 0, NULL, 0},
    {F(expirations_locks), C, "fenced_lease_expirations_with_locks_total", "Leases that ran out while holding at least one lock (a paused or partitioned holder).", NULL, 0, NULL, 0},
    {F(revocations), C, "fenced_revocations_total", "Leases revoked by LEASE.REVOKE.", NULL, 0, NULL, 0},
    {F(leases), G, "fenced_leases", "Live leases.", NULL, 0, NULL, 0},
    {F(locks_held), G, "fenced_locks_held", "Locks with a holder.", NULL, 0, NULL, 0},
    {F(waiters), G, "fenced_lock_waiters", "Waiters queued on all locks.", NULL, 0, NULL, 0},
    {F(acquire_wait), H, "fenced_acquire_wait_seconds", "Time a granted waiter spent queued, in seconds.", NULL, 0, NULL, 0},
    {F(cmd_latency), H, "fenced_command_duration_seconds", "Request to reply, per command, in seconds.", "command", FENCE_SRV_METRIC_COMMANDS, NULL, 0},
    {F(term), G, "fenced_raft_term", "Current raft term.", NULL, 0, NULL, 0},
    {F(commit_index), G, "fenced_raft_commit_index", "Highest raft log index known committed.", NULL, 0, NULL, 0},
    {F(applied_index), G, "fenced_raft_applied_index", "Highest raft log index applied to the state machine.", NULL, 0, NULL, 0},
    {F(is_leader), G, "fenced_is_leader", "1 when this node is the raft leader.", NULL, 0, NULL, 0},
    {F(healthy), G, "fenced_healthy", "1 when this node can serve writes (what /health answers).", NULL, 0, NULL, 0},
    {F(leader_changes), C, "fenced_leader_changes_total", "Times this node saw the leader change.", NULL, 0, NULL, 0},
    {F(append_latency), H, "fenced_log_append_duration_seconds", "Raft log append (write and fsync) latency, in seconds.", NULL, 0, NULL, 0},
    {F(batch_size), H, "fenced_batch_commands", "Commands per raft entry (group-commit batch size).", NULL, 0, NULL, 0},
    {F(connections), G, "fenced_connections", "Open client connections.", NULL, 0, NULL, 0},
    {F(rejections), C, "fenced_rejections_total", "Requests or connections refused by a limit.", "limit", FENCE_SRV_METRIC_LIMITS, NULL, 0},
    {F(errors), C, "fenced_error_replies_total", "Error replies sent, by code.", "code", FENCE_SRV_METRIC_CODES, NULL, 0},
    {F(peer_refusals), C, "fenced_raft_peer_refusals_total", "Raft peer connections refused or dropped by the mutual-TLS transport, by reason.", "reason", FENCE_SRV_METRIC_CODES, NULL, 0},
    {F(auth_failures), C, "fenced_auth_failures_total", "Failed logins (AUTH or HELLO AUTH with a wrong user or password).", NULL, 0, NULL, 0},
};

#undef F
#undef C
#undef G
#undef H

/* Register every family of defs. */
int fence__srv_metrics_init(fence_srv_metrics *m, char *errbuf, size_t errcap) {
    memset(m, 0, sizeof(*m));
    m->audit_grant.burst = FENCE_AUDIT_BURST;
    m->audit_expiry.burst = FENCE_AUDIT_BURST;
    atomic_init(&m->health, 0);
    atomic_init(&m->health_why, FENCE_HEALTH_STARTING);
    if (fence_metrics_new(&m->reg) != 0) {
        snprintf(errbuf, errcap, "metrics: out of memory");
        return -1;
    }
    for (size_t i = 0; i < sizeof(defs) / sizeof(defs[0]); i++) {
        const family_def *d = &defs[i];
        const double *b = d->bounds;
        uint32_t nb = d->n_bounds;
        if (d->type == FENCE_METRIC_HISTOGRAM) {
            if (d->off == offsetof(fence_srv_metrics, acquire_wait)) {
                b = fence_metric_wait_bounds;
                nb = fence_metric_wait_n;
            } else if (d->off == offsetof(fence_srv_metrics, batch_size)) {
                b = fence_metric_size_bounds;
                nb = fence_metric_size_n;
            } else {
                b = fence_metric_latency_bounds;
                nb = fence_metric_latency_n;
            }
        }
        fence_metric *f = fence_metrics_add(m->reg, d->type, d->name, d->help, d->label,
                                            d->cap, b, nb);
        if (f == NULL) {
            snprintf(errbuf, errcap, "metrics: %s: %s", d->name, fence_metrics_errmsg(m->reg));
            fence_metrics_free(m->reg);
            m->reg = NULL;
            return -1;
        }
        *(fence_metric **)((char *)m + d->off) = f;
    }
    return 0;
}

/* Start the endpoint. */
int fence__srv_metrics_listen(fence_srv_metrics *m, const char *bind, int port,
                              char *errbuf, size_t errcap) {
    FENCE_ASSERT(m->reg != NULL);
    fence_metrics_http_opts o = {0};
    o.bind = bind;
    o.port = port;
    o.metrics = m->reg;
    o.health = fence__srv_health;
    o.health_arg = m;
    return fence_metrics_http_start(&o, &m->http, errbuf, errcap);
}

/* Stop the endpoint, free the registry. */
void fence__srv_metrics_free(fence_srv_metrics *m) {
    fence_metrics_http_stop(m->http);
    m->http = NULL;
    fence_metrics_free(m->reg);
    m->reg = NULL;
}

/* Publish the core's counts (cumulative counters are set, not added: the
 * core keeps the totals). */
void fence__srv_metrics_core(fence_srv_metrics *m, const fence_srv_core_counts *c) {
    fence_metric_set(m->leases, (int64_t)c->leases);
    fence_metric_set(m->locks_held, (int64_t)c->locks);
    fence_metric_set(m->waiters, (int64_t)c->waiters);
    fence_metric_set(m->grants, (int64_t)c->grants);
    fence_metric_set(m->handoffs, (int64_t)c->handoffs);
    fence_metric_set(m->expirations, (int64_t)c->expirations);
    fence_metric_set(m->expirations_locks, (int64_t)c->expirations_with_locks);
    fence_metric_set(m->revocations, (int64_t)c->revocations);
}

/* Publish raft's state; count a change of the known leader (a term in
 * which this node knows no leader changes nothing). */
void fence__srv_metrics_raft(fence_srv_metrics *m, uint64_t term, uint64_t commit,
                             uint64_t applied, uint64_t leader_id, bool is_leader) {
    fence_metric_set(m->term, (int64_t)term);
    fence_metric_set(m->commit_index, (int64_t)commit);
    fence_metric_set(m->applied_index, (int64_t)applied);
    fence_metric_set(m->is_leader, is_leader ? 1 : 0);
    /* Every new leader seen counts, the first one included. */
    if (leader_id != 0 && leader_id != m->leader_id) {
        fence_metric_inc(m->leader_changes);
        m->leader_id = leader_id;
    }
}

/* Publish the health state. */
void fence__srv_metrics_health_set(fence_srv_metrics *m, int why) {
    int ok = why == FENCE_HEALTH_LEADER || why == FENCE_HEALTH_FOLLOWER;
    atomic_store_explicit(&m->health_why, why, memory_order_relaxed);
    atomic_store_explicit(&m->health, ok, memory_order_release);
    fence_metric_set(m->healthy, ok);
}

/* The health answer (any thread). */
bool fence__srv_health(void *arg, char *reason, size_t cap) {
    static const char *const why_text[] = {
        [FENCE_HEALTH_STARTING] = "starting",
        [FENCE_HEALTH_LEADER] = "leader, ready",
        [FENCE_HEALTH_FOLLOWER] = "follower of a ready leader",
        [FENCE_HEALTH_CATCHUP] = "leader, not ready yet (catching up)",
        [FENCE_HEALTH_NO_LEADER] = "no leader (no quorum or an election in progress)",
        [FENCE_HEALTH_STOPPING] = "stopping",
    };
    fence_srv_metrics *m = arg;
    int ok = atomic_load_explicit(&m->health, memory_order_acquire);
    int why = atomic_load_explicit(&m->health_why, memory_order_relaxed);
    if (why < 0 || why > FENCE_HEALTH_STOPPING)
        why = FENCE_HEALTH_STARTING;
    snprintf(reason, cap, "%s", why_text[why]);
    return ok != 0;
}

/* Count an error reply by code, and a LIMIT one by its limit too. */
void fence__srv_metrics_error(fence_srv_metrics *m, const char *code, const char *limit) {
    fence_series_inc(fence_metric_with(m->errors, code, strlen(code)));
    if (limit != NULL)
        fence__srv_metrics_reject(m, limit);
}

/* Count a refusal by a limit. */
void fence__srv_metrics_reject(fence_srv_metrics *m, const char *limit) {
    fence_series_inc(fence_metric_with(m->rejections, limit, strlen(limit)));
}

/* Observe one command's latency. */
void fence__srv_metrics_command(fence_srv_metrics *m, const char *command, double secs) {
    fence_series_observe(fence_metric_with(m->cmd_latency, command, strlen(command)), secs);
}

/* Monotonic seconds. */
double fence__srv_metrics_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- The server's side: what feeds the families ---------------------------- */

/* Publish the numbers other parts keep (once per loop turn: a handful of
 * relaxed stores). */
void fence__server_metrics_publish(fence_server *s)
{
    fence_srv_metrics *m = &s->metrics;
    fence_fsm_stats st;
    fence_fsm_stats_get(s->fsm, &st);
    fence_srv_core_counts c = {
        .leases = st.leases,
        .locks = st.locks,
        .waiters = st.waiters,
        .grants = st.grants,
        .handoffs = st.handoffs,
        .expirations = st.expirations,
        .expirations_with_locks = st.expirations_with_locks,
        .revocations = st.revocations,
    };
    fence__srv_metrics_core(m, &c);
    if (st.expirations_with_locks > m->expired_held_seen) {
        unsigned long dropped;
        if (fence__log_limit_take(&m->audit_expiry, &dropped))
            FENCE_LOG_I("audit: expiry-with-locks: %llu lease(s) ran out while holding locks "
                        "(%llu since start; their locks moved on; fencing stops the old "
                        "holders' writes)%s",
                        (unsigned long long)(st.expirations_with_locks - m->expired_held_seen),
                        (unsigned long long)st.expirations_with_locks,
                        dropped ? " (earlier lines dropped by the rate limit)" : "");
        m->expired_held_seen = st.expirations_with_locks;
    }
    const fence_peer *lp = fence__node_leader_peer(&s->node);
    bool leader = fence__node_is_leader(&s->node);
    fence__srv_metrics_raft(m, fence__node_term(&s->node), fence__node_commit_index(&s->node),
                            fence__node_applied_index(&s->node), lp != NULL ? lp->id : 0,
                            leader);
    fence_metric_set(m->connections, (int64_t)s->net.n_conns);
    fence_series_set(fence_metric_with(m->rejections, "clients", 7),
                     (int64_t)s->net.stat_refused);
    fence_series_set(fence_metric_with(m->rejections, "obuf", 4),
                     (int64_t)s->net.stat_slow_closed);
    int why;
    if (s->stopping)
        why = FENCE_HEALTH_STOPPING;
    else if (leader)
        why = fence__leader_ready(s->leader) ? FENCE_HEALTH_LEADER : FENCE_HEALTH_CATCHUP;
    else if (lp != NULL)
        why = FENCE_HEALTH_FOLLOWER;
    else
        why = FENCE_HEALTH_NO_LEADER;
    fence__srv_metrics_health_set(m, why);
}

/* A slot's reply is final (reply.c): latency by command, errors by code. */
void fence__server_metrics_slot(fence_slot *slot, const char *code)
{
    if (slot->conn == NULL)
        return; /* orphaned: nobody is waiting for this reply */
    fence_srv_metrics *m = &slot->conn->srv->metrics;
    double secs = (double)(uv_hrtime() - slot->t0_ns) * 1e-9;
    if (slot->def != NULL) {
        /* The label is the command's name in the one table; the series of
         * each row is looked up once, then kept. */
        size_t row = (size_t)(slot->def - fence__server_commands);
        FENCE_ASSERT(row < fence__server_commands_n);
        FENCE_ASSERT(row < FENCE_SRV_METRIC_COMMANDS);
        fence_metric_series **ser = &m->cmd_series[row];
        if (*ser == NULL)
            *ser = fence_metric_with(m->cmd_latency, slot->def->name, strlen(slot->def->name));
        fence_series_observe(*ser, secs);
    } else {
        fence__srv_metrics_command(m, "OTHER", secs);
    }
    if (code != NULL)
        fence__srv_metrics_error(m, code, strcmp(code, "LIMIT") == 0 ? "state" : NULL);
}

/* A grant reply (cmd.c): acquire wait and the audit line. */
void fence__server_metrics_grant(fence_slot *slot, const fence_result *r)
{
    if (slot->conn == NULL)
        return;
    fence_srv_metrics *m = &slot->conn->srv->metrics;
    double secs = (double)(uv_hrtime() - slot->t0_ns) * 1e-9;
    bool waited = r->wait_id != 0;
    if (waited)
        fence_metric_observe(m->acquire_wait, secs);
    if (fence__log_level > FENCE_LOG_INFO)
        return;
    unsigned long dropped;
    if (!fence__log_limit_take(&m->audit_grant, &dropped))
        return;
    if (dropped != 0)
        FENCE_LOG_I("audit: %lu grant/handoff lines dropped by the rate limit (%d a second)",
                    dropped, FENCE_AUDIT_BURST);
    const fence_owner *ow = fence__owner_find(slot->conn->srv, r->lease);
    const char *who = ow != NULL ? ow->tag->name : slot->conn->compat.name;
    if (waited)
        FENCE_LOG_I("audit: handoff: token %llu to lease %llu (conn %llu, client '%s') after "
                    "%.3f s queued",
                    (unsigned long long)r->token, (unsigned long long)r->lease,
                    (unsigned long long)slot->conn->id, who, secs);
    else
        FENCE_LOG_I("audit: grant: token %llu to lease %llu (conn %llu, client '%s')",
                    (unsigned long long)r->token, (unsigned long long)r->lease,
                    (unsigned long long)slot->conn->id, who);
}

/* The batch size of an entry applied on this leader (raft_ops.c, in the
 * entry's raft_apply callback): the number of its results, which apply
 * already decoded, not its bytes. */
void fence__server_metrics_batch(fence_server *s, size_t n)
{
    fence_metric_observe(s->metrics.batch_size, (double)n);
}
