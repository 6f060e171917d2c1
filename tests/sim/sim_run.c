/* ------------------------------------------------------------------------
 * sim_run.c: failure reporting, the run loop and the final checks
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* The run in progress (sim_int.h). */
sim *g_sim;

/* Record the first invariant violation of the run, with the step and time
 * where it was seen; later ones are dropped (the run stops after the step). */
void sim_fail(sim *s, const char *fmt, ...)
{
    if (s->res->failed)
        return;
    s->res->failed = 1;
    s->res->step = s->step;
    s->res->time_ms = s->fx.time;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->res->msg, sizeof s->res->msg, fmt, ap);
    va_end(ap);
}

/* Print a line about the run when verbose. */
void sim_log(sim *s, const char *fmt, ...)
{
    if (!s->o.verbose)
        return;
    va_list ap;
    fprintf(stderr, "# t=%-7" PRIu64 " ", (uint64_t)s->fx.time);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Grow a dynamic array to hold at least need elements (zeroing new space);
 * the sim treats running out of memory as fatal. */
void *sim_grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    uint8_t *np = realloc(p, ncap * elem);
    if (np == NULL) {
        fprintf(stderr, "sim: out of memory\n");
        abort();
    }
    memset(np + *cap * elem, 0, (ncap - *cap) * elem);
    *cap = ncap;
    return np;
}

/* ------------------------------------------------------------------------
 * The run
 * ------------------------------------------------------------------------ */

/* Everything between two fixture steps (also runs inside the fixture's own
 * elect/depose loops, with faults off). */
static void hook(struct raft_fixture *fx, struct raft_fixture_event *ev)
{
    (void)fx;
    (void)ev;
    sim *s = g_sim;
    s->step++;
    sim_nodes_updown(s);
    sim_observe_drive(s); /* requests read in this turn, after its applies */
    for (unsigned k = 0; k < s->n_nodes; k++)
        sim_node_drive(s, &s->nodes[k]);
    sim_observe_turns(s);
    for (unsigned c = 0; c < s->o.clients; c++)
        sim_client_drive(s, &s->clients[c]);
    if (s->faults && !s->in_fixture_op && s->fx.time >= s->next_fault_at) {
        sim_fault_one(s);
        s->next_fault_at = s->fx.time + rng_range(&s->rng, 100, 1500);
    }
    sim_member_drive(s);
    /* FENCE_SIM_DEBUG_CONF=1: trace every node's configuration changes. */
    if (s->o.membership && getenv("FENCE_SIM_DEBUG_CONF"))
        for (unsigned k = 0; k < s->n_nodes; k++) {
            static raft_index last_ci[SIM_MAX_NODES], last_uci[SIM_MAX_NODES];
            static unsigned last_n[SIM_MAX_NODES];
            struct raft *r = raft_fixture_get(&s->fx, k);
            if (r->configuration_index != last_ci[k] ||
                r->configuration_uncommitted_index != last_uci[k] ||
                r->configuration.n != last_n[k]) {
                last_ci[k] = r->configuration_index;
                last_uci[k] = r->configuration_uncommitted_index;
                last_n[k] = r->configuration.n;
                char b[128];
                size_t w = 0;
                for (unsigned j = 0; j < r->configuration.n && w < 100; j++)
                    w += (size_t)snprintf(b + w, sizeof b - w, " %llu:%d",
                                          (unsigned long long)r->configuration.servers[j].id,
                                          r->configuration.servers[j].role);
                b[w] = 0;
                sim_log(s, "conf: node %u %llu/%llu {%s } last %llu applied %llu", k,
                        (unsigned long long)r->configuration_index,
                        (unsigned long long)r->configuration_uncommitted_index, b,
                        (unsigned long long)raft_last_index(r),
                        (unsigned long long)raft_last_applied(r));
            }
        }
    for (unsigned k = 0; k < s->n_nodes && !s->res->failed; k++) {
        const char *bad = fence_fsm_check(s->nodes[k].fsm);
        if (bad != NULL)
            sim_fail(s, "node %u: fence_fsm_check: %s", k, bad);
    }
}

/* Whether the cluster has settled: a ready leader, every node up, no
 * client request in the pipeline, and every node applied the leader's
 * whole log. */
static bool settled(sim *s)
{
    unsigned L = sim_leader_index(s);
    if (L >= s->n_nodes || !fence__leader_ready(s->nodes[L].leader))
        return false;
    struct raft *lr = raft_fixture_get(&s->fx, L);
    raft_index last = raft_last_index(lr);
    for (unsigned k = 0; k < s->n_nodes; k++) {
        /* With membership changes: the nodes the leader replicates to. */
        if (s->o.membership && !sim_replicates(s, L, k))
            continue;
        if (s->nodes[k].down)
            return false;
        if (raft_last_applied(raft_fixture_get(&s->fx, k)) != last)
            return false;
    }
    for (unsigned c = 0; c < s->o.clients; c++)
        if (s->clients[c].n_pipe > 0 || s->clients[c].n_retry > 0)
            return false;
    return true;
}

/* Final checks: every acknowledged grant is in the history with the same
 * lock and lease; every node holds the same state. */
static void final_checks(sim *s)
{
    for (size_t k = 0; k < s->n_acks && !s->res->failed; k++) {
        const sim_ack *a = &s->acks[k];
        sim_grant *g = sim_grant_find(s, a->token);
        char nm[8] = "lock0";
        if (a->lock >= SIM_ELECT_BASE)
            memcpy(nm, "elec", 4);
        nm[4] = (char)('0' + a->lock % SIM_ELECT_BASE);
        if (a->lock >= SIM_SEM_SLOT) /* a semaphore's slot: the fence sem#i */
            snprintf(nm, sizeof nm, "sem#%c", (char)('0' + (a->lock - SIM_SEM_SLOT) % 10));
        if (g == NULL)
            sim_fail(s, "acknowledged token %" PRIu64 " (lock%u, lease %" PRIu64
                        ", acked at t=%" PRIu64 ") is not in the history",
                     a->token, a->lock, a->lease, a->time_ms);
        /* "?": a waiter's slot released again in the entry that granted
         * it (its name was not found, sim_fsm.c): the lease is all that
         * can be compared, as for a lock. */
        else if (a->lock >= SIM_SEM_SLOT &&
                 (g->lease != a->lease ||
                  (!(g->name_len == 1 && g->name[0] == '?') &&
                   (g->name_len != 5 || memcmp(g->name, nm, 5) != 0))))
            sim_fail(s, "acknowledged token %" PRIu64 " was slot %s/lease %" PRIu64
                        " for the client but %.*s/lease %" PRIu64 " in the history "
                        "(a slot granted twice)",
                     a->token, nm, a->lease, (int)g->name_len, g->name, g->lease);
        else if ((g->lease != a->lease && !g->shared) ||
                 (g->name_len == 5 && memcmp(g->name, nm, 5) != 0))
            sim_fail(s, "acknowledged token %" PRIu64 " was lock%u/lease %"
                        PRIu64 " for the client but %.*s/lease %" PRIu64
                        " in the history",
                     a->token, a->lock, a->lease, (int)g->name_len, g->name,
                     g->lease);
    }
    /* Without membership changes node 0 is the reference; with them, the
     * leader, compared with every node it replicates to. */
    unsigned ref = 0;
    if (s->o.membership) {
        ref = sim_leader_index(s);
        assert(ref < s->n_nodes); /* settled */
    }
    uint64_t h0 = sim_node_snap_hash(&s->nodes[ref]);
    for (unsigned k = 0; k < s->n_nodes && !s->res->failed; k++) {
        if (k == ref || (s->o.membership && !sim_replicates(s, ref, k)))
            continue;
        if (sim_node_snap_hash(&s->nodes[k]) != h0)
            sim_fail(s, "final state of node %u differs from node %u", k, ref);
    }
}

/* Set up the cluster: N nodes on the fixture, each with the wrapper io and
 * a fresh fsm, bootstrapped with all as voters, started. */
static void cluster_setup(sim *s)
{
    int rv = raft_fixture_initialize(&s->fx);
    assert(rv == 0);
    for (unsigned k = 0; k < s->n_nodes; k++) {
        sim_node *n = &s->nodes[k];
        n->sim = s;
        n->i = k;
        n->disk_fault = -1;
        sim_node_server_new(n);
        n->rfsm.version = 1;
        n->rfsm.data = n;
        n->rfsm.apply = sim_rfsm_apply;
        n->rfsm.snapshot = sim_rfsm_snapshot;
        n->rfsm.restore = sim_rfsm_restore;
        rv = raft_fixture_grow(&s->fx, &n->rfsm);
        assert(rv == 0);
        /* Route raft through the wrapper (raft_init already ran the
         * fixture's init; ours forwards everything else). */
        struct raft *r = raft_fixture_get(&s->fx, k);
        sim_wio_setup(n, r->io);
        n->wio.data = r;
        r->io = &n->wio;
        raft_set_pre_vote(r, !s->o.no_pre_vote);
        raft_set_snapshot_threshold(r, 32);
        raft_set_snapshot_trailing(r, 8);
        n->clock_offset = k == 0 ? 0 : (int64_t)rng_range(&s->rng, 0, 3000);
        raft_fixture_set_randomized_election_timeout(
            &s->fx, k,
            (unsigned)rng_range(&s->rng, SIM_ELECTION_MS, 2 * SIM_ELECTION_MS));
    }
    struct raft_configuration conf;
    rv = raft_fixture_configuration(&s->fx, s->n_nodes, &conf);
    assert(rv == 0);
    rv = raft_fixture_bootstrap(&s->fx, &conf);
    assert(rv == 0);
    raft_configuration_close(&conf);
    rv = raft_fixture_start(&s->fx);
    assert(rv == 0);
    (void)rv;
    raft_fixture_hook(&s->fx, hook);
}

/* Release everything of a run. */
static void cluster_teardown(sim *s)
{
    for (unsigned k = 0; k < s->n_nodes; k++)
        if (s->nodes[k].down)
            raft_fixture_revive(&s->fx, k);
    for (sim_req_raft *q = s->raft_reqs; q != NULL; q = q->next)
        q->stale = true;
    raft_fixture_close(&s->fx);
    while (s->raft_reqs != NULL)
        sim_raft_req_free(s, s->raft_reqs);
    for (unsigned k = 0; k < s->n_nodes; k++) {
        sim_node *n = &s->nodes[k];
        fence__leader_destroy(n->leader);
        fence_fsm_destroy(n->fsm);
        free(n->snapbuf);
        free(n->pend);
        while (n->ops_head) {
            sim_diskop *op = n->ops_head;
            n->ops_head = op->next;
            free(op);
        }
        for (size_t j = 0; j < n->d_n; j++)
            raft_free(n->d_ent[j].buf.base);
        free(n->d_ent);
        sim_snap_free(n->d_snap);
    }
    free(s->hist);
    free(s->grants);
    free(s->acks);
    free(s->wshared);
    free(s->mmulti);
    free(s->mleases);
    free(s->reqids);
    free(s->mwaits);
    for (unsigned e = 0; e < SIM_LOCKS; e++)
        free(s->erevs[e]);
}

/* Run one seeded simulation (see sim.h): set up the cluster, step it with
 * traffic and faults for the run's duration, heal everything and let it
 * settle, then run the final checks. */
int fence_sim_run(const fence_sim_opts *opts, fence_sim_result *out)
{
    sim *s = calloc(1, sizeof *s);
    assert(s != NULL);
    memset(out, 0, sizeof *out);
    s->o = *opts;
    if (s->o.nodes < 1 || s->o.nodes > SIM_MAX_NODES)
        s->o.nodes = 3;
    s->n_nodes = s->o.nodes;
    if (s->o.clients > SIM_MAX_CLIENTS)
        s->o.clients = SIM_MAX_CLIENTS;
    s->res = out;
    s->rng = opts->seed * 0x2545f4914f6cdd1dULL + 1;
    s->mrng = opts->seed * 0x9e3779b97f4a7c15ULL + 7;
    s->mb.next_at = 3000;
    g_sim = s;
    for (unsigned c = 0; c < s->o.clients; c++) {
        s->clients[c].id = c;
        s->clients[c].node = -1;
        s->clients[c].pipe = s->clients[c].pipes[0];
    }
    sim_observe_setup(s);
    cluster_setup(s);

    /* Traffic and faults for the run's duration. */
    s->traffic = true;
    s->faults = true;
    s->next_fault_at = 2000;
    while (s->fx.time < s->o.duration_ms && !out->failed) {
        if (s->want_op)
            sim_fixture_op(s);
        raft_fixture_step(&s->fx);
    }

    /* Heal everything, stop new traffic, and let the cluster settle. */
    s->faults = false;
    s->traffic = false;
    memset(s->part, 0, sizeof s->part);
    for (unsigned k = 0; k < s->n_nodes; k++) {
        raft_fixture_set_disk_latency(&s->fx, k, 10);
        raft_fixture_set_network_latency(&s->fx, k, 15);
        s->nodes[k].disk_fault = -1;
        if (s->nodes[k].down)
            s->nodes[k].up_at = s->fx.time;
        /* The fixture's election timers are not random: with 2 voters
         * equal ones split every vote (seed 300), so they differ here. */
        if (s->o.membership)
            raft_fixture_set_randomized_election_timeout(&s->fx, k,
                                                         SIM_ELECTION_MS + 130 * k);
    }
    sim_net_apply(s);
    uint64_t settle_end = s->fx.time + SIM_SETTLE_MS;
    while (!out->failed && !settled(s) && s->fx.time < settle_end)
        raft_fixture_step(&s->fx);
    if (!out->failed && !settled(s)) {
        char why[320];
        size_t w = 0;
        for (unsigned k = 0; k < s->n_nodes && w < sizeof why; k++) {
            struct raft *r = raft_fixture_get(&s->fx, k);
            int m = snprintf(why + w, sizeof why - w,
                             " [n%u st%d t%" PRIu64 " last%" PRIu64 " app%" PRIu64
                             " ready%d%s%s%s]",
                             k, raft_state(r), (uint64_t)r->current_term,
                             (uint64_t)raft_last_index(r),
                             (uint64_t)raft_last_applied(r),
                             (int)fence__leader_ready(s->nodes[k].leader),
                             s->nodes[k].down ? " down" : "",
                             s->nodes[k].gone ? " removed" : "",
                             s->nodes[k].n_pend ? " io" : "");
            if (m < 0)
                break;
            w += (size_t)m;
        }
        if (getenv("FENCE_SIM_DEBUG"))
            for (unsigned k = 0; k < s->n_nodes; k++) {
                struct raft *r = raft_fixture_get(&s->fx, k);
                fprintf(stderr, "n%u last_stored %llu commit %llu conf %llu/%llu {",
                        k, (unsigned long long)r->last_stored,
                        (unsigned long long)r->commit_index,
                        (unsigned long long)r->configuration_index,
                        (unsigned long long)r->configuration_uncommitted_index);
                for (unsigned j = 0; j < r->configuration.n; j++)
                    fprintf(stderr, " %llu:%d", (unsigned long long)r->configuration.servers[j].id,
                            r->configuration.servers[j].role);
                fprintf(stderr, " } pend %zu:", s->nodes[k].n_pend);
                for (size_t j = 0; j < s->nodes[k].n_pend; j++)
                    fprintf(stderr, " %d", s->nodes[k].pend[j].kind);
                fprintf(stderr, "\n");
            }
        if (getenv("FENCE_SIM_DEBUG"))
            for (unsigned c = 0; c < s->o.clients; c++) {
                sim_client *cl = &s->clients[c];
                fprintf(stderr, "c%u node %d pipe %u done %u retry %u next %llu give %llu:", c,
                        cl->node, cl->n_pipe, cl->n_done, cl->n_retry,
                        (unsigned long long)cl->next_at, (unsigned long long)cl->give_up_at);
                for (unsigned k = 0; k < cl->n_pipe; k++)
                    fprintf(stderr, " [t%u w%llu r%d ans%d err%d]", cl->pipe[k].cmd.type,
                            (unsigned long long)cl->pipe[k].cmd.wait_ms, cl->pipe[k].is_read,
                            cl->pipe[k].ans, cl->pipe[k].err);
                fprintf(stderr, "\n");
            }
        sim_fail(s, "cluster did not settle within %d ms after faults "
                    "stopped:%s", SIM_SETTLE_MS, why);
    }
    if (!out->failed)
        final_checks(s);
    if (!out->failed) {
        out->step = s->step;
        out->time_ms = s->fx.time;
    }
    cluster_teardown(s);
    g_sim = NULL;
    free(s);
    return out->failed ? 1 : 0;
}

