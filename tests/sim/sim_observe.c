/* ------------------------------------------------------------------------
 * sim_observe.c: ELECTION.OBSERVE observers
 *
 * Each observer follows one election, keeps one request outstanding at a
 * time, OBSERVE elecN AFTER rev WAIT ms at some node, and re-issues it with
 * the revision it got (after a nil, with the same one).  A node answers
 * from its applied state as fenced's observe.c does, with the same rule:
 * a request whose election is not past AFTER is parked in the node's
 * fence_obs_set (src/server/observe_set.c, the code fenced runs), and each
 * loop turn of the node polls the set and expires its WAITs.  Requests
 * arrive before the node's turn in a hook, as in fenced's loop, where a
 * request can be read after an apply and before the turn's poll.
 *
 * Checks (against the model's history of every election, sim_model.c,
 * which the observers never touch):
 *   - an answer's revision is above the request's AFTER, so an observer
 *     never sees an older revision after a newer one, across nodes too;
 *   - an answer (revision, leader, token, value) is the model's state of
 *     that revision, and it is the latest revision the model had at the
 *     node's applied index: no gap with a newer state the node knew;
 *   - no wake-up is dropped: after a node's turn no request parked there
 *     has an election past its AFTER (checked from the fsm directly);
 *   - a nil answers only a request whose election had not moved.
 * The observers draw from their own random state, so a run's cluster,
 * clients and faults are those it had before they existed.
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* The node's monotonic clock, as sim_server.c's (fixture time + offset). */
static uint64_t obs_clock(sim *s, const sim_node *n)
{
    return (uint64_t)((int64_t)s->fx.time + n->clock_offset);
}

/* The name of election e. */
static void elect_name(unsigned e, uint8_t nm[5])
{
    memcpy(nm, "elec", 4);
    nm[4] = (uint8_t)('0' + e);
}

/* Set up the observers and the model's revision 0 of each election. */
void sim_observe_setup(sim *s)
{
    s->orng = s->o.seed * 0xd1342543de82ef95ULL + 11;
    for (unsigned i = 0; i < SIM_OBSERVERS; i++) {
        sim_observer *ob = &s->obs[i];
        memset(ob, 0, sizeof *ob);
        ob->id = i;
        ob->elect = i % SIM_OBS_ELECTS;
        ob->node = -1;
        ob->next_at = rng_range(&s->orng, 500, 3000);
    }
    for (unsigned e = 0; e < SIM_LOCKS; e++) {
        s->erevs[e] = sim_grow(s->erevs[e], &s->cap_erevs[e], 1, sizeof *s->erevs[e]);
        memset(&s->erevs[e][0], 0, sizeof s->erevs[e][0]);
        s->n_erevs[e] = 1;
    }
}

/* Take an observer's request off its node (its connection closed). */
static void detach(sim *s, sim_observer *ob)
{
    if (ob->parked)
        fence__obs_remove(&s->nodes[ob->node].obs, &ob->base);
    ob->parked = false;
    ob->node = -1;
}

void sim_observe_node_reset(sim *s, sim_node *n)
{
    for (unsigned i = 0; i < SIM_OBSERVERS; i++)
        if (s->obs[i].node == (int)n->i)
            detach(s, &s->obs[i]);
    memset(&n->obs, 0, sizeof n->obs);
}

/* The model's revision of election e at raft index idx: the last one whose
 * first index is <= idx. */
static const sim_erev *model_rev_at(sim *s, unsigned e, uint64_t idx)
{
    const sim_erev *r = &s->erevs[e][0];
    for (size_t k = 1; k < s->n_erevs[e] && s->erevs[e][k].index <= idx; k++)
        r = &s->erevs[e][k];
    return r;
}

/* Node k answered ob's request with its election's state st: check it and
 * take the revision for the next request. */
static void answered(sim *s, sim_observer *ob, unsigned k, const fence_fsm_elect_state *st,
                     bool woken)
{
    uint64_t vh = st->has_leader ? fnv(FNV_INIT, st->value, st->value_len) : 0;
    uint64_t applied = raft_last_applied(raft_fixture_get(&s->fx, k));
    const sim_erev *m = model_rev_at(s, ob->elect, applied);
    const sim_erev *same = NULL;
    for (size_t j = 0; j < s->n_erevs[ob->elect]; j++)
        if (s->erevs[ob->elect][j].revision == st->revision)
            same = &s->erevs[ob->elect][j];
    s->res->obs_answers++;
    s->res->obs_woken += woken;
    if (st->revision <= ob->after)
        sim_fail(s, "observer %u of elec%u: node %u answered revision %" PRIu64
                    " to OBSERVE AFTER %" PRIu64 " (an older or the same state again)",
                 ob->id, ob->elect, k, st->revision, ob->after);
    else if (same == NULL || same->has_leader != st->has_leader || same->token != st->token ||
             same->value_hash != vh)
        sim_fail(s, "observer %u of elec%u: node %u answered revision %" PRIu64
                    " (token %" PRIu64 ") that the model %s",
                 ob->id, ob->elect, k, st->revision, st->token,
                 same == NULL ? "never had" : "had with another leader or value");
    else if (m->revision != st->revision)
        sim_fail(s, "observer %u of elec%u: node %u (applied %" PRIu64 ") answered revision %"
                    PRIu64 ", but the model had revision %" PRIu64 " from index %" PRIu64,
                 ob->id, ob->elect, k, applied, st->revision, m->revision, m->index);
    sim_log(s, "observer %u: elec%u revision %" PRIu64 " (token %" PRIu64 ") from node %u%s",
            ob->id, ob->elect, st->revision, st->token, k, woken ? " (woken)" : "");
    ob->after = st->revision;
    ob->node = -1;
    ob->parked = false;
    ob->next_at = s->fx.time; /* at once: one outstanding request */
}

/* Send ob's next request to an up node: answered at once when its election
 * is past AFTER, else parked with its WAIT. */
static void send_request(sim *s, sim_observer *ob)
{
    unsigned up[SIM_MAX_NODES], n_up = 0;
    for (unsigned k = 0; k < s->n_nodes; k++)
        if (!s->nodes[k].down && !s->nodes[k].gone)
            up[n_up++] = k;
    if (n_up == 0) {
        ob->next_at = s->fx.time + 100;
        return;
    }
    unsigned k = up[rng_range(&s->orng, 0, n_up - 1)];
    sim_node *n = &s->nodes[k];
    uint64_t wait_ms = rng_range(&s->orng, 50, 3000);
    uint8_t nm[5];
    elect_name(ob->elect, nm);
    ob->sent_at = s->fx.time;
    fence_fsm_elect_state st;
    int rc = fence_fsm_elect_info(n->fsm, nm, 5, &st);
    if (rc != 0) {
        sim_fail(s, "observer %u: elec%u is not an election on node %u", ob->id, ob->elect, k);
        return;
    }
    if (fence__obs_due(rc, &st, ob->after)) {
        answered(s, ob, k, &st, false);
        return;
    }
    memset(&ob->base, 0, sizeof ob->base);
    ob->base.after = ob->after;
    ob->base.deadline_ms = obs_clock(s, n) + wait_ms;
    ob->base.name_len = 5;
    memcpy(ob->base.name, nm, 5);
    fence__obs_park(&n->obs, &ob->base);
    ob->node = (int)k;
    ob->parked = true;
    /* A paused node answers nothing: give up a while after the WAIT. */
    ob->give_up_at = s->fx.time + wait_ms + 2000;
}

void sim_observe_drive(sim *s)
{
    for (unsigned i = 0; i < SIM_OBSERVERS && !s->res->failed; i++) {
        sim_observer *ob = &s->obs[i];
        if (ob->node >= 0) {
            sim_node *n = &s->nodes[ob->node];
            if (n->down || n->gone || s->fx.time >= ob->give_up_at) {
                detach(s, ob); /* its connection went, or it gave up */
                s->res->obs_moves++;
                ob->next_at = s->fx.time;
            }
            continue;
        }
        if (s->fx.time >= ob->next_at)
            send_request(s, ob);
    }
}

/* One loop turn of node k's observers: the set's poll (what fenced's
 * fence__observe_poll runs), then its WAITs, then the answers. */
static void node_turn(sim *s, unsigned k)
{
    sim_node *n = &s->nodes[k];
    fence__obs_poll(&n->obs, n->fsm);
    fence__obs_expire(&n->obs, obs_clock(s, n));
    fence_obs *b;
    while ((b = n->obs.waking) != NULL && !s->res->failed) {
        sim_observer *ob = (sim_observer *)b;
        bool timed_out = b->timed_out;
        fence__obs_remove(&n->obs, b);
        ob->parked = false;
        fence_fsm_elect_state st;
        int rc = fence_fsm_elect_info(n->fsm, b->name, b->name_len, &st);
        if (rc != 0) {
            sim_fail(s, "observer %u: elec%u is not an election on node %u", ob->id,
                     ob->elect, k);
            return;
        }
        if (!timed_out) {
            answered(s, ob, k, &st, true);
            continue;
        }
        /* Nil: only when nothing newer than AFTER was there to answer. */
        s->res->obs_nils++;
        if (st.revision > ob->after)
            sim_fail(s, "observer %u of elec%u: node %u answered nil at its WAIT although "
                        "it had revision %" PRIu64 " > AFTER %" PRIu64,
                     ob->id, ob->elect, k, st.revision, ob->after);
        ob->node = -1;
        ob->next_at = s->fx.time;
    }
    /* No wake-up dropped: nothing parked here is past its AFTER. */
    for (const fence_obs *o = n->obs.head; o != NULL && !s->res->failed; o = o->next) {
        const sim_observer *ob = (const sim_observer *)o;
        fence_fsm_elect_state st;
        if (fence_fsm_elect_info(n->fsm, o->name, o->name_len, &st) == 0 &&
            st.revision > o->after)
            sim_fail(s, "observer %u of elec%u: parked at node %u AFTER %" PRIu64
                        " after a loop turn although the election has revision %" PRIu64
                        " (token %" PRIu64 "): a wake-up was dropped",
                     ob->id, ob->elect, k, o->after, st.revision, st.token);
    }
}

void sim_observe_turns(sim *s)
{
    for (unsigned k = 0; k < s->n_nodes && !s->res->failed; k++)
        if (!s->nodes[k].down && !s->nodes[k].gone)
            node_turn(s, k);
}
