/* ------------------------------------------------------------------------
 * sim_fault.c: Faults
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* Make the fixture's links match the partition table and liveness. */
void sim_net_apply(sim *s)
{
    for (unsigned a = 0; a < s->n_nodes; a++)
        for (unsigned b = 0; b < s->n_nodes; b++) {
            if (a == b)
                continue;
            bool want = s->part[a][b] || s->nodes[a].down || s->nodes[b].down;
            if (raft_fixture_saturated(&s->fx, a, b) != want) {
                if (want)
                    raft_fixture_saturate(&s->fx, a, b);
                else
                    raft_fixture_desaturate(&s->fx, a, b);
            }
        }
}

/* Take a node down (pause or crash). */
void sim_node_down(sim *s, sim_node *n)
{
    if (n->down)
        return;
    raft_fixture_kill(&s->fx, n->i);
    n->down = true;
    sim_net_apply(s);
}

/* Restart a node that is down and has no I/O in flight: close its raft
 * (failing its pending proposals), throw away its fsm, and start again
 * from what its disk holds, as a restarted process would. */
static void node_restart(sim *s, sim_node *n)
{
    struct raft *r = raft_fixture_get(&s->fx, n->i);
    assert(n->down && n->n_pend == 0);
    /* The process died: its clients' connections are gone, and whatever
     * raft still completes of its requests reaches nobody. */
    for (unsigned c = 0; c < s->o.clients; c++)
        if (s->clients[c].node == (int)n->i)
            sim_client_disconnect(s, &s->clients[c]);
    for (sim_req_raft *q = s->raft_reqs; q != NULL; q = q->next)
        if (q->node == n)
            q->stale = true;
    raft_close(r, NULL);
    n->transfer_busy = false;
    fence__leader_destroy(n->leader);
    fence_fsm_destroy(n->fsm);
    sim_node_server_new(n);
    n->last_cmd_index = 0;
    n->last_token = 0;
    n->crashed = false;
    int rv = raft_init(r, &n->wio, &n->rfsm, n->i + 1, s->fx.servers[n->i].address);
    assert(rv == 0);
    raft_set_election_timeout(r, SIM_ELECTION_MS);
    raft_set_heartbeat_timeout(r, SIM_HEARTBEAT_MS);
    raft_set_pre_vote(r, !s->o.no_pre_vote);
    raft_set_snapshot_threshold(r, 32);
    raft_set_snapshot_trailing(r, 8);
    rv = raft_start(r);
    s->res->restarts++;
    if (rv != 0 || n->crashed) {
        /* start itself hit a disk fault: stay down, try again later */
        raft_close(r, NULL);
        rv = raft_init(r, &n->wio, &n->rfsm, n->i + 1,
                       s->fx.servers[n->i].address);
        assert(rv == 0);
        n->crashed = false;
        n->up_at = s->fx.time + 500;
        return;
    }
    sim_log(s, "node %u restarted", n->i);
    n->restart_wanted = false;
    raft_fixture_revive(&s->fx, n->i);
    n->down = false;
    sim_net_apply(s);
}

/* Transfer callback: record that it is over. */
static void transfer_cb(struct raft_transfer *req)
{
    sim_node *n = req->data;
    n->transfer_busy = false;
}

/* Whether every node's raft is a follower (the fixture's elect and depose
 * assert this of all non-leaders). */
static bool all_followers_except(sim *s, unsigned except)
{
    for (unsigned k = 0; k < s->n_nodes; k++) {
        if (k == except)
            continue;
        if (raft_state(raft_fixture_get(&s->fx, k)) != RAFT_FOLLOWER)
            return false;
    }
    return true;
}

/* Inject one random fault. */
void sim_fault_one(sim *s)
{
    uint64_t *g = &s->rng;
    unsigned nn = s->n_nodes;
    unsigned i = (unsigned)rng_range(g, 0, nn - 1);
    sim_node *n = &s->nodes[i];
    unsigned roll = (unsigned)rng_range(g, 0, 99);
    s->res->faults++;
    if (roll < 18) {
        /* partition: a random minority (or a single link) cut off */
        unsigned sz = (unsigned)rng_range(g, 1, nn / 2);
        bool side[SIM_MAX_NODES] = {false};
        for (unsigned k = 0; k < sz; k++)
            side[rng_range(g, 0, nn - 1)] = true;
        if (rng_pct(g, 30)) {
            unsigned j = (unsigned)rng_range(g, 0, nn - 1);
            if (j != i)
                s->part[i][j] = s->part[j][i] = true;
            sim_log(s, "fault: cut link %u-%u", i, j);
        } else {
            for (unsigned a = 0; a < nn; a++)
                for (unsigned b = 0; b < nn; b++)
                    if (side[a] != side[b])
                        s->part[a][b] = true;
            sim_log(s, "fault: partition of %u node(s)", sz);
        }
        sim_net_apply(s);
    } else if (roll < 30) {
        memset(s->part, 0, sizeof s->part);
        sim_net_apply(s);
        sim_log(s, "fault: heal all links");
    } else if (roll < 40) {
        if (!n->down) {
            sim_node_down(s, n);
            n->up_at = s->fx.time + rng_range(g, 200, 5000);
            sim_log(s, "fault: pause node %u", i);
        }
    } else if (roll < 48) {
        if (!n->down) {
            sim_node_down(s, n);
            n->restart_wanted = true;
            n->up_at = s->fx.time + rng_range(g, 100, 3000);
            sim_log(s, "fault: restart node %u", i);
        }
    } else if (roll < 57) {
        raft_fixture_set_disk_latency(&s->fx, i, (unsigned)rng_range(g, 1, 200));
        sim_log(s, "fault: disk latency node %u", i);
    } else if (roll < 66) {
        raft_fixture_set_network_latency(&s->fx, i,
                                         (unsigned)rng_range(g, 1, 150));
        sim_log(s, "fault: network latency node %u", i);
    } else if (roll < 73) {
        /* The fixture's own io_fault also fails sends, whose error paths
         * in libraft 0.15 double-free; network faults are partitions
         * here, and disk faults are injected by our wrapper. */
        n->disk_fault = (int)rng_range(g, 0, 20);
        sim_log(s, "fault: disk-write fault armed on node %u", i);
    } else if (roll < 80) {
        s->want_op = 1;
    } else if (roll < 85) {
        s->want_op = 2;
    } else if (roll < 93) {
        unsigned L = sim_leader_index(s);
        bool send_busy = false;
        for (size_t k = 0; L < nn && k < s->nodes[L].n_pend; k++)
            if (s->nodes[L].pend[k].req == &s->nodes[L].transfer.send)
                send_busy = true; /* its TimeoutNow is still in flight */
        if (L < nn && !s->nodes[L].down && !s->nodes[L].transfer_busy &&
            !send_busy) {
            struct raft *r = raft_fixture_get(&s->fx, L);
            s->nodes[L].transfer.data = &s->nodes[L];
            if (raft_transfer(r, &s->nodes[L].transfer, 0, transfer_cb) == 0) {
                s->nodes[L].transfer_busy = true;
                sim_log(s, "fault: leadership transfer from node %u", L);
            }
        }
    } else {
        raft_fixture_set_randomized_election_timeout(
            &s->fx, i, (unsigned)rng_range(g, SIM_ELECTION_MS,
                                           2 * SIM_ELECTION_MS));
    }
}

/* Bring nodes back whose time has come (revive a paused node; restart a
 * crashed or restarting one once its I/O has drained), and take down
 * nodes whose disk write failed. */
void sim_nodes_updown(sim *s)
{
    for (unsigned k = 0; k < s->n_nodes; k++) {
        sim_node *n = &s->nodes[k];
        if (n->gone)
            continue; /* removed and stopped (sim_member.c) */
        /* raft gives up (RAFT_UNAVAILABLE) after some I/O errors, e.g. a
         * failed send while answering; the server then exits and is
         * restarted, which is what the sim does too. */
        if (!n->down &&
            raft_state(raft_fixture_get(&s->fx, k)) == RAFT_UNAVAILABLE)
            n->crashed = true;
        if (n->crashed && !n->down && !s->in_fixture_op) {
            sim_log(s, "node %u crash-stops: a disk write failed", k);
            s->res->crashes++;
            sim_node_down(s, n);
            n->restart_wanted = true;
            n->up_at = s->fx.time + rng_range(&s->rng, 100, 2000);
        }
        if (!n->down || s->fx.time < n->up_at || s->in_fixture_op)
            continue;
        if (n->restart_wanted) {
            if (n->n_pend == 0 && n->wipe_wanted) {
                sim_disk_wipe(n); /* added again: an empty data dir */
                n->wipe_wanted = false;
            }
            if (n->n_pend == 0)
                node_restart(s, n);
        } else {
            raft_fixture_revive(&s->fx, k);
            n->down = false;
            sim_net_apply(s);
            sim_log(s, "node %u revived", k);
        }
    }
}

/* Run the fixture's depose or elect when their preconditions hold (they
 * assert them). */
void sim_fixture_op(sim *s)
{
    int op = s->want_op;
    s->want_op = 0;
    unsigned nn = s->n_nodes;
    for (unsigned k = 0; k < nn; k++)
        if (s->nodes[k].down || s->nodes[k].restart_wanted)
            return;
    for (unsigned a = 0; a < nn; a++)
        for (unsigned b = 0; b < nn; b++)
            if (s->part[a][b])
                return;
    /* The fixture's own leader tracking counts every server it holds, so
     * its elect and depose only work while all of them are voters. */
    if (!sim_all_voters(s))
        return;
    unsigned L = raft_fixture_leader_index(&s->fx);
    if (op == 1) {
        if (L >= nn || raft_state(raft_fixture_get(&s->fx, L)) != RAFT_LEADER ||
            !all_followers_except(s, L))
            return;
        for (unsigned k = 0; k < nn; k++)
            s->nodes[k].disk_fault = -1;
        sim_log(s, "fault: depose leader %u", L);
        s->in_fixture_op = true;
        raft_fixture_depose(&s->fx);
        s->in_fixture_op = false;
    } else if (op == 2) {
        if (L < nn || !all_followers_except(s, nn))
            return;
        /* Elect the most up-to-date node: it wins every vote. */
        unsigned best = 0;
        raft_term bt = 0;
        raft_index bi = 0;
        for (unsigned k = 0; k < nn; k++) {
            struct raft *r = raft_fixture_get(&s->fx, k);
            const struct raft_log *lg = &r->log;
            raft_index li = raft_last_index(r);
            raft_term lt = lg->front != lg->back
                               ? lg->entries[(lg->back + lg->size - 1) %
                                             lg->size].term
                               : lg->snapshot.last_term;
            if (r->follower_state.current_leader.id != 0)
                return; /* pre-vote would be refused while a leader is known */
            if (lt > bt || (lt == bt && li > bi)) {
                best = k;
                bt = lt;
                bi = li;
            }
        }
        for (unsigned k = 0; k < nn; k++)
            s->nodes[k].disk_fault = -1;
        sim_log(s, "fault: elect node %u", best);
        s->in_fixture_op = true;
        raft_fixture_elect(&s->fx, best);
        s->in_fixture_op = false;
    }
}

