/* ------------------------------------------------------------------------
 * sim_member.c: membership changes, as an operator's CLUSTER.ADD and
 * CLUSTER.REMOVE would make them, interleaved with the faults and the
 * workload (docs/cluster.md "Changing the membership")
 *
 * One change at a time, every 0.5-3 s of simulated time while faults run,
 * decided by the run's membership generator (s->mrng, not s->rng: a run
 * with membership off draws exactly what it drew before this file existed):
 *
 *   - ADD, as fenced's CLUSTER.ADD does it: raft_add (the node joins as a
 *     spare), then raft_assign(RAFT_VOTER) (raft catches it up first).  The
 *     node is a new fixture server (up to RAFT_FIXTURE_MAX_SERVERS), or a
 *     removed one restarted with an empty disk under its old id (the docs'
 *     "same id with an empty data dir"); a node left a non-voter by a
 *     failed ADD is promoted (CLUSTER.ADD's retry).
 *   - REMOVE of a random server of the leader's configuration (never
 *     itself: see below), only when the voter floor allows it: the same pure
 *     function as fenced's cluster.c (src/server/voter_floor.c), given the
 *     leader's configuration and libraft's check-quorum flags, with the
 *     same WAIT for fresh flags (two heartbeats) and one recheck.
 *
 * The floor guards against removals the leader can see are fatal; with 1
 * or 2 voters raft can still stall for good when a fault hits a change:
 * a leader that removes itself from 2 voters and loses leadership before
 * the other voter has the entry, or a promotion from 1 voter that the new
 * voter never received.  The only candidate then needs a vote that is
 * refused (the other has a longer log, or thinks it is a spare and
 * non-voters never vote).  Seeds 56, 144 and 184 found both; so the sim
 * skips those two shapes (counted as "skipped").  A leader removing itself
 * from 3 voters can stall too (seed 2015 of the 3-node runs, libraft
 * pitfall 7 of docs/cluster.md: it loses leadership before its removal
 * commits and, like a second server with an uncommitted removal of its
 * own, refuses every vote), so the leader never removes itself: operators
 * are told to transfer leadership first (not in the floor's control
 * run, whose fatal removals are mostly the leader's own).  The floor's control
 * (FENCE_SIM_NO_FLOOR=1) keeps that practice, so it tests the floor alone.
 *
 * A node whose removal committed (the change callback said so) is stopped:
 * it is "gone" and only ever comes back through ADD, with an empty disk.
 * A change whose outcome is unknown (leadership lost, the leader
 * restarted) leaves its node running; a later change sees what the
 * configuration holds.  Callbacks only record their status; every call into
 * raft is made between fixture steps (the rule of leader.h).
 *
 * With membership on, the leader is found by the sim (the highest-term
 * leader among the nodes that are up): the fixture's own tracking counts
 * every server it holds, removed or not yet added ones included.
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* The leader the driver, the transfer fault and the settle check use.
 * Without membership changes the fixture's own (as before they existed). */
unsigned sim_leader_index(sim *s)
{
    if (!s->o.membership)
        return raft_fixture_leader_index(&s->fx);
    unsigned best = s->n_nodes;
    raft_term bt = 0;
    for (unsigned k = 0; k < s->n_nodes; k++) {
        if (s->nodes[k].down)
            continue;
        struct raft *r = raft_fixture_get(&s->fx, k);
        if (raft_state(r) == RAFT_LEADER && r->current_term > bt) {
            best = k;
            bt = r->current_term;
        }
    }
    return best;
}

/* Position of node k in leader's configuration, or -1. */
static int conf_pos(sim *s, unsigned leader, unsigned k)
{
    const struct raft *r = raft_fixture_get(&s->fx, leader);
    for (unsigned i = 0; i < r->configuration.n; i++)
        if (r->configuration.servers[i].id == (raft_id)k + 1)
            return (int)i;
    return -1;
}

/* Whether the leader replicates its log to node k (a voter or standby of
 * its configuration: a spare gets nothing). */
bool sim_replicates(sim *s, unsigned leader, unsigned k)
{
    int p = conf_pos(s, leader, k);
    if (p < 0)
        return false;
    int role = raft_fixture_get(&s->fx, leader)->configuration.servers[p].role;
    return role == RAFT_VOTER || role == RAFT_STANDBY;
}

/* Whether every fixture server is a voter in every server's configuration
 * (always true without membership changes). */
bool sim_all_voters(sim *s)
{
    if (!s->o.membership)
        return true;
    for (unsigned k = 0; k < s->n_nodes; k++) {
        const struct raft *r = raft_fixture_get(&s->fx, k);
        if (r->configuration.n != s->n_nodes)
            return false;
        for (unsigned i = 0; i < r->configuration.n; i++)
            if (r->configuration.servers[i].role != RAFT_VOTER)
                return false;
    }
    return true;
}

/* raft's change callback: record the outcome (no raft calls here). */
static void change_cb(struct raft_change *req, int status)
{
    sim *s = req->data;
    s->mb.done = true;
    s->mb.status = status;
}

/* Stop node k for good (until an ADD brings it back with an empty disk). */
static void node_gone(sim *s, unsigned k)
{
    sim_node *n = &s->nodes[k];
    sim_node_down(s, n);
    n->gone = true;
    n->restart_wanted = false;
    n->wipe_wanted = false;
}

/* A new fixture server, set up as cluster_setup sets up the first ones,
 * started with an empty disk (no configuration: it waits for a leader). */
static unsigned node_grow(sim *s)
{
    unsigned k = s->n_nodes;
    sim_node *n = &s->nodes[k];
    n->sim = s;
    n->i = k;
    n->disk_fault = -1;
    n->d_start = 1;
    sim_node_server_new(n);
    n->rfsm.version = 1;
    n->rfsm.data = n;
    n->rfsm.apply = sim_rfsm_apply;
    n->rfsm.snapshot = sim_rfsm_snapshot;
    n->rfsm.restore = sim_rfsm_restore;
    int rv = raft_fixture_grow(&s->fx, &n->rfsm);
    assert(rv == 0);
    struct raft *r = raft_fixture_get(&s->fx, k);
    sim_wio_setup(n, r->io);
    n->wio.data = r;
    r->io = &n->wio;
    raft_set_pre_vote(r, !s->o.no_pre_vote);
    raft_set_snapshot_threshold(r, 32);
    raft_set_snapshot_trailing(r, 8);
    n->clock_offset = (int64_t)rng_range(&s->mrng, 0, 3000);
    raft_fixture_set_randomized_election_timeout(
        &s->fx, k,
        (unsigned)rng_range(&s->mrng, SIM_ELECTION_MS, 2 * SIM_ELECTION_MS));
    s->n_nodes++;
    rv = raft_start(r);
    assert(rv == 0);
    (void)rv;
    sim_net_apply(s);
    return k;
}

/* A change raft refused or did not finish. */
static void change_failed(sim *s, const char *what, unsigned k, int rv)
{
    s->res->member_failures++;
    sim_log(s, "member: %s node %u failed: %s", what, k, raft_strerror(rv));
    s->mb.state = MB_IDLE;
}

/* Whether leader L's next disk write is armed to fail.  A change appends
 * its configuration entry at once, and when that write fails libraft 0.15
 * double-frees the new configuration in its error path (client.c,
 * clientChangeConfiguration: the configuration is installed before
 * replicationTrigger fails).  fenced never gets there: its raft_io aborts on
 * a failed write (crash-stop).  So the sim crash-stops the leader before
 * the call, as that write would have, and the change fails. */
static bool change_write_fails(sim *s, unsigned L, const char *what, unsigned k)
{
    sim_node *n = &s->nodes[L];
    if (n->disk_fault != 0)
        return false;
    n->disk_fault = -1;
    n->crashed = true;
    change_failed(s, what, k, RAFT_IOERR);
    return true;
}

/* CLUSTER.ADD's first half on leader L: node k joins as a spare. */
static void start_add(sim *s, unsigned L, unsigned k)
{
    sim_member *m = &s->mb;
    m->node = k;
    if (change_write_fails(s, L, "add", k)) {
        if (m->fresh)
            node_gone(s, k); /* never in any configuration: stop it again */
        return;
    }
    m->done = false;
    m->change.data = s;
    int rv = raft_add(raft_fixture_get(&s->fx, L), &m->change, (raft_id)k + 1,
                      s->fx.servers[k].address, change_cb);
    if (rv != 0) {
        bool fresh = m->fresh;
        change_failed(s, "add", k, rv);
        if (fresh)
            node_gone(s, k); /* never in any configuration: stop it again */
        return;
    }
    m->fresh = false;
    m->state = MB_ADDING;
    sim_log(s, "member: adding node %u (leader %u)", k, L);
}

/* CLUSTER.ADD's second half (or its retry for a non-voter): promote. */
static void start_promote(sim *s, unsigned L, unsigned k)
{
    sim_member *m = &s->mb;
    m->node = k;
    const struct raft *r = raft_fixture_get(&s->fx, L);
    unsigned voters = 0;
    for (unsigned i = 0; i < r->configuration.n; i++)
        voters += r->configuration.servers[i].role == RAFT_VOTER;
    if (voters == 1) {
        s->res->member_skips++;
        sim_log(s, "member: promotion of node %u skipped: 1 voter", k);
        m->state = MB_IDLE;
        return;
    }
    if (change_write_fails(s, L, "promote", k))
        return;
    m->done = false;
    m->change.data = s;
    int rv = raft_assign(raft_fixture_get(&s->fx, L), &m->change,
                         (raft_id)k + 1, RAFT_VOTER, change_cb);
    if (rv != 0) {
        change_failed(s, "promote", k, rv);
        return;
    }
    m->state = MB_PROMOTING;
    sim_log(s, "member: promoting node %u (leader %u)", k, L);
}

/* Whether id is a voter in sv[0..n). */
static bool sv_is_voter(const fence_vf_server *sv, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (sv[i].id == id)
            return sv[i].voter;
    return false;
}

/* CLUSTER.REMOVE on leader L: the voter floor first (as cluster.c asks
 * it), then raft_remove. */
static void start_remove(sim *s, unsigned L, unsigned k, bool rechecked)
{
    sim_member *m = &s->mb;
    struct raft *r = raft_fixture_get(&s->fx, L);
    fence_vf_server sv[RAFT_FIXTURE_MAX_SERVERS];
    size_t n = 0;
    for (unsigned i = 0; i < r->configuration.n && n < RAFT_FIXTURE_MAX_SERVERS; i++) {
        const struct raft_server *rs = &r->configuration.servers[i];
        sv[n].id = rs->id;
        sv[n].voter = rs->role == RAFT_VOTER;
        sv[n].contact = rs->id == r->id || (r->leader_state.progress != NULL &&
                                            r->leader_state.progress[i].recent_recv);
        n++;
    }
    fence_vf_query q = {
        .servers = sv,
        .n = n,
        .victim = (uint64_t)k + 1,
        .rechecked = rechecked,
        .since_clear_ms = (uint64_t)(r->io->time(r->io) - r->election_timer_start),
        .settle_ms = 2 * SIM_HEARTBEAT_MS,
    };
    fence_vf_result fr;
    int verdict = fence_voter_floor(&q, &fr);
    if (s->o.no_floor)
        verdict = FENCE_VF_OK; /* the control: no floor */
    if (verdict == FENCE_VF_WAIT) {
        s->res->floor_waits++;
        m->state = MB_RECHECK;
        m->node = k;
        m->leader = L;
        m->at = s->fx.time + fr.wait_ms;
        return;
    }
    if (verdict != FENCE_VF_OK) {
        char msg[300];
        fence_voter_floor_msg(&fr, k, msg, sizeof msg); /* the sim's numbering */
        s->res->floor_refusals++;
        sim_log(s, "member: removal of node %u %s", k, msg);
        m->state = MB_IDLE;
        return;
    }
    /* The sim's own practice on top of the floor (see sim_member_drive's
     * comment on stalls): a leader does not remove itself (what
     * docs/cluster.md tells operators: transfer leadership first; libraft
     * pitfall 7: a leader that loses leadership before its own removal
     * commits keeps that configuration and refuses every vote, and with a
     * second uncommitted removal no leader is ever elected: seed 2015 of
     * the 3-node runs), and only one removal in four goes from 2 voters to
     * 1 (a cluster at 1 voter stays there: promotions from 1 voter are
     * skipped). */
    unsigned voters = 0;
    for (size_t i = 0; i < n; i++)
        voters += sv[i].voter;
    bool self_2 = k == L && voters == 2; /* the older rule, kept by the control */
    if ((k == L && (!s->o.no_floor || self_2)) ||
        (sv_is_voter(sv, n, (uint64_t)k + 1) && voters == 2 && !rng_pct(&s->mrng, 25))) {
        s->res->member_skips++;
        sim_log(s, "member: removal of node %u skipped: %s", k,
                k == L ? "it leads" : "2 voters");
        m->state = MB_IDLE;
        return;
    }
    m->node = k;
    if (change_write_fails(s, L, "remove", k))
        return;
    m->done = false;
    m->change.data = s;
    int rv = raft_remove(r, &m->change, (raft_id)k + 1, change_cb);
    if (rv != 0) {
        change_failed(s, "remove", k, rv);
        return;
    }
    m->state = MB_REMOVING;
    m->rm_index[k] = raft_last_index(r);
    m->rm_term[k] = r->current_term;
    sim_log(s, "member: removing node %u (leader %u)", k, L);
}

/* Start one change on the current leader. */
static void member_one(sim *s)
{
    unsigned L = sim_leader_index(s);
    if (L >= s->n_nodes)
        return;
    const struct raft *r = raft_fixture_get(&s->fx, L);
    unsigned voters = 0;
    int spare = -1;
    for (unsigned i = 0; i < r->configuration.n; i++) {
        const struct raft_server *rs = &r->configuration.servers[i];
        if (rs->role == RAFT_VOTER)
            voters++;
        else if (!s->nodes[rs->id - 1].down)
            spare = (int)rs->id - 1;
    }
    unsigned roll = (unsigned)rng_range(&s->mrng, 0, 99);
    if (roll >= 50 || voters >= s->o.nodes + 2) {
        if (r->configuration.n == 0)
            return;
        unsigned i = (unsigned)rng_range(&s->mrng, 0, r->configuration.n - 1);
        start_remove(s, L, (unsigned)r->configuration.servers[i].id - 1, false);
        return;
    }
    if (spare >= 0) {
        start_promote(s, L, (unsigned)spare);
        return;
    }
    /* A removed node again (empty disk, same id), or a new one. */
    unsigned gone[SIM_MAX_NODES];
    unsigned n_gone = 0;
    for (unsigned k = 0; k < s->n_nodes; k++)
        if (s->nodes[k].gone)
            gone[n_gone++] = k;
    bool can_grow = s->n_nodes < SIM_MAX_NODES && s->n_nodes < RAFT_FIXTURE_MAX_SERVERS;
    if (n_gone > 0 && (!can_grow || rng_pct(&s->mrng, 70))) {
        unsigned k = gone[rng_range(&s->mrng, 0, n_gone - 1)];
        sim_node *n = &s->nodes[k];
        n->gone = false;
        n->wipe_wanted = true;
        n->restart_wanted = true;
        n->up_at = s->fx.time;
        s->mb.state = MB_JOIN_WAIT;
        s->mb.node = k;
        s->mb.fresh = true;
        s->mb.at = s->fx.time + 5000;
        sim_log(s, "member: node %u restarts with an empty disk to join again", k);
        return;
    }
    if (!can_grow)
        return;
    unsigned k = node_grow(s);
    sim_log(s, "member: new node %u", k);
    s->mb.fresh = true;
    start_add(s, L, k);
}

/* A change's callback ran: take in its outcome. */
static void member_finish(sim *s)
{
    sim_member *m = &s->mb;
    unsigned k = m->node;
    if (m->status != 0) {
        change_failed(s, m->state == MB_ADDING     ? "add"
                         : m->state == MB_PROMOTING ? "promote"
                                                    : "remove",
                      k, m->status);
        return;
    }
    if (m->state == MB_ADDING) {
        m->state = MB_PROMOTE;
        m->at = s->fx.time + 5000;
    } else if (m->state == MB_PROMOTING) {
        s->res->member_adds++;
        sim_log(s, "member: node %u is a voter", k);
        m->state = MB_IDLE;
    } else {
        s->res->member_removes++;
        sim_log(s, "member: node %u removed; its process stops", k);
        node_gone(s, k);
        m->state = MB_IDLE;
    }
}

/* A removal whose outcome was unknown: once some node has applied past the
 * removal's index, the entry there tells (same index and term: the removal
 * committed; another term: it was lost).  Committed, the operator stops the
 * node: left running, it campaigns with its old configuration and drives
 * the others' terms up (seed 136).  (A node's own configuration cannot tell:
 * after a restart libraft 0.15 takes the last configuration entry of its log
 * as committed, seed 15.) */
static void member_settle_unknown(sim *s)
{
    sim_member *m = &s->mb;
    for (unsigned k = 0; k < s->n_nodes; k++) {
        if (m->rm_index[k] == 0 || (m->state == MB_REMOVING && m->node == k))
            continue;
        if (s->nodes[k].gone) {
            m->rm_index[k] = 0;
            continue;
        }
        for (unsigned j = 0; j < s->n_nodes; j++) {
            const struct raft *r = raft_fixture_get(&s->fx, j);
            if (raft_last_applied((struct raft *)r) < m->rm_index[k])
                continue;
            raft_term t = sim_rlog_term(&r->log, m->rm_index[k]);
            if (t == 0)
                continue; /* compacted here */
            if (t == m->rm_term[k]) {
                s->res->member_removes++;
                sim_log(s, "member: node %u turns out removed; its process stops", k);
                node_gone(s, k);
            }
            m->rm_index[k] = 0;
            break;
        }
    }
}

/* One turn of the membership driver (between fixture steps). */
void sim_member_drive(sim *s)
{
    if (!s->o.membership || s->in_fixture_op)
        return;
    sim_member *m = &s->mb;
    unsigned L;
    member_settle_unknown(s);
    switch (m->state) {
    case MB_ADDING:
    case MB_PROMOTING:
    case MB_REMOVING:
        if (m->done)
            member_finish(s);
        return;
    case MB_PROMOTE:
        L = sim_leader_index(s);
        if (L < s->n_nodes && conf_pos(s, L, m->node) >= 0)
            start_promote(s, L, m->node);
        else if (s->fx.time >= m->at)
            change_failed(s, "promote", m->node, RAFT_NOTLEADER);
        return;
    case MB_JOIN_WAIT:
        L = sim_leader_index(s);
        if (!s->nodes[m->node].down && L < s->n_nodes) {
            start_add(s, L, m->node);
        } else if (s->fx.time >= m->at) {
            change_failed(s, "add", m->node, RAFT_NOTLEADER);
            node_gone(s, m->node); /* never added: stop it again */
        }
        return;
    case MB_RECHECK:
        if (s->fx.time < m->at)
            return;
        L = sim_leader_index(s);
        if (L != m->leader) {
            change_failed(s, "remove", m->node, RAFT_NOTLEADER);
            return;
        }
        start_remove(s, L, m->node, true);
        return;
    default:
        break;
    }
    if (!s->faults || s->fx.time < m->next_at)
        return;
    m->next_at = s->fx.time + rng_range(&s->mrng, 500, 3000);
    member_one(s);
}

