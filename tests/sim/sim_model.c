/* ------------------------------------------------------------------------
 * sim_model.c: the global history and the independent lease model
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* Allocator for fence_fsm. */
static void *sim_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

/* Free for fence_fsm. */
static void sim_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

/* Create a fresh fence_fsm for a node. */
fence_fsm *sim_node_fsm_new(sim_node *n)
{
    fence_fsm_opts fo;
    memset(&fo, 0, sizeof fo);
    fo.alloc.alloc = sim_alloc;
    fo.alloc.free = sim_free;
    (void)n;
    fence_fsm *f = NULL;
    int rv = fence_fsm_create(&fo, &f);
    assert(rv == 0 && f != NULL);
    (void)rv;
    return f;
}

/* Hash the fsm's snapshot (reusing the node's scratch buffer). */
uint64_t sim_node_snap_hash(sim_node *n)
{
    size_t need = fence_fsm_snapshot_size(n->fsm);
    n->snapbuf = sim_grow(n->snapbuf, &n->snapcap, need, 1);
    size_t len = fence_fsm_snapshot(n->fsm, n->snapbuf, n->snapcap);
    return fnv(FNV_INIT, n->snapbuf, len);
}

/* Return the model lease with this id, growing the table (ids are small
 * and dense: the fsm numbers leases from 1). */
static sim_mlease *mlease(sim *s, uint64_t id)
{
    if (id > 10000000)
        return NULL;
    s->mleases = sim_grow(s->mleases, &s->cap_mleases, (size_t)id + 1,
                      sizeof *s->mleases);
    return &s->mleases[id];
}

/* See sim_int.h. */
void sim_model_promise(sim *s, uint64_t lease, uint64_t sent_at, uint64_t ttl_ms,
                       bool local)
{
    sim_mlease *l = mlease(s, lease);
    if (l != NULL && sent_at + ttl_ms > l->promised) {
        l->promised = sent_at + ttl_ms;
        l->promised_local = local;
    }
}

/* A lease is found expired at sim time now: not before the last renewal
 * its client was answered for ran out (docs/leases.md). */
static void promise_check(sim *s, size_t id, const sim_mlease *l)
{
    s->res->promise_checks++;
    if (s->fx.time < l->promised)
        sim_fail(s, "index %" PRIu64 ": lease %zu expired at sim time %" PRIu64
                    ", %" PRIu64 " ms before the TTL of its last answered "
                    "renewal (answered %s) ran out (sim time %" PRIu64 ")",
                 s->model_index, id, (uint64_t)s->fx.time,
                 l->promised - (uint64_t)s->fx.time,
                 l->promised_local ? "without an entry" : "through the log", l->promised);
}

/* Find (or make room for) a request id in the model's table. */
static sim_reqid *reqid_slot(sim *s, uint64_t req_id)
{
    if (s->cap_reqids == 0) {
        s->cap_reqids = 1 << 16;
        s->reqids = calloc(s->cap_reqids, sizeof *s->reqids);
        assert(s->reqids != NULL);
    }
    size_t mask = s->cap_reqids - 1;
    size_t k = (size_t)(fnv_u64(FNV_INIT, req_id) & mask);
    for (size_t probe = 0; probe < s->cap_reqids; probe++) {
        sim_reqid *r = &s->reqids[(k + probe) & mask];
        if (r->req_id == req_id || r->req_id == 0)
            return r;
    }
    fprintf(stderr, "sim: request id table full\n");
    abort();
}

/* Look up a grant by token (grants are stored in token order). */
sim_grant *sim_grant_find(sim *s, uint64_t token)
{
    size_t lo = 0, hi = s->n_grants;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->grants[mid].token < token)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < s->n_grants && s->grants[lo].token == token)
        return &s->grants[lo];
    return NULL;
}

/* Add a grant to the history; tokens must arrive in increasing order. */
void sim_grant_add(sim *s, uint64_t token, uint64_t index, uint64_t lease,
                      const uint8_t *name, uint16_t name_len)
{
    if (s->n_grants > 0 && s->grants[s->n_grants - 1].token >= token) {
        sim_fail(s, "token %" PRIu64 " at index %" PRIu64
                    " is not above the previous token %" PRIu64,
                 token, index, s->grants[s->n_grants - 1].token);
        return;
    }
    s->grants = sim_grow(s->grants, &s->cap_grants, s->n_grants + 1,
                     sizeof *s->grants);
    sim_grant *g = &s->grants[s->n_grants++];
    g->token = token;
    g->index = index;
    g->lease = lease;
    g->name_len = name_len < sizeof g->name ? name_len : sizeof g->name;
    memcpy(g->name, name, g->name_len);
    s->res->grants++;
}

/* A lease's deadline from time now: now + ttl, or the end of its ACQUIRE
 * wait if that is later. */
static uint64_t mdeadline(const sim_mlease *l, uint64_t now)
{
    uint64_t d = now + l->ttl_ms;
    if (l->acq_waiting && l->acq_wait_deadline > d)
        d = l->acq_wait_deadline;
    return d;
}

/* A CANCEL for wait_id ran (not deduplicated) at fsm time now.  The core
 * forgets the request id of the queued command when the CANCEL is what
 * failed its wait (fsm.c cmd_cancel), at once: a retry later in the same
 * entry already queues afresh.  The CANCEL failed the wait iff the entry
 * reports it ended NIL and it did not time out: timeouts are processed
 * before the commands (and only there; a LEADER_START entry fires no old
 * deadline and carries no CANCEL), and anything else that ends a wait
 * before the CANCEL (a grant, a lease's end) reports OK or NOLEASE. */
static void model_cancel(sim *s, uint64_t wait_id, uint64_t now, bool starts,
                         const fence_event *evs, unsigned n_ev)
{
    for (size_t j = 0; j < s->n_mwaits; j++) {
        sim_mwait *w = &s->mwaits[j];
        if (w->wait_id != wait_id || w->cancelled)
            continue;
        bool timed_out = !starts && w->deadline <= now;
        for (unsigned k = 0; k < n_ev; k++) {
            if (evs[k].wait_id != wait_id)
                continue;
            if (evs[k].result.status == FENCE_ST_NIL && !timed_out) {
                w->cancelled = true;
                if (w->req_id == 0)
                    break;
                sim_reqid *r = reqid_slot(s, w->req_id);
                if (r->req_id == w->req_id)
                    r->forgotten = true;
                s->res->model_forgets++;
            }
            break;
        }
    }
}

/* Stop tracking the queued waits this entry's events ended.  Every request
 * id answered QUEUED with such a wait (and not forgotten by a CANCEL) now
 * remembers the wait's outcome: a later retry must get exactly that. */
static void model_waits_end(sim *s, const fence_event *evs, unsigned n_ev)
{
    for (unsigned k = 0; k < n_ev; k++)
        for (size_t j = 0; j < s->n_mwaits;) {
            sim_mwait *w = &s->mwaits[j];
            if (w->wait_id != evs[k].wait_id) {
                j++;
                continue;
            }
            if (w->req_id != 0 && !w->cancelled) {
                sim_reqid *r = reqid_slot(s, w->req_id);
                if (r->req_id == w->req_id && !r->forgotten &&
                    r->result.status == FENCE_ST_QUEUED &&
                    r->result.wait_id == w->wait_id)
                    r->result = evs[k].result;
            }
            *w = s->mwaits[--s->n_mwaits];
        }
}

/* Track a request answered QUEUED (not a deduplicated retry): a new wait
 * (ids sim_grow), or one it joined, whose deadline it shares. */
static void model_queued(sim *s, uint64_t wait_id, uint64_t req_id,
                         uint64_t wait_ms, uint64_t now)
{
    uint64_t deadline = now + wait_ms;
    if (wait_id <= s->model_wait_max) {
        size_t j = 0;
        while (j < s->n_mwaits && s->mwaits[j].wait_id != wait_id)
            j++;
        /* A command joins only a wait that lasts, and the model tracks
         * every wait until its event. */
        if (j == s->n_mwaits) {
            sim_fail(s, "index %" PRIu64 ": request id %" PRIx64 " answered "
                        "QUEUED for wait %" PRIu64 ", which has ended",
                     s->model_index, req_id, wait_id);
            return;
        }
        if (req_id == 0) /* joined without a request id: nothing to resolve */
            return;
        wait_ms = s->mwaits[j].wait_ms;
        deadline = s->mwaits[j].deadline;
    }
    s->mwaits = sim_grow(s->mwaits, &s->cap_mwaits, s->n_mwaits + 1,
                     sizeof *s->mwaits);
    sim_mwait *w = &s->mwaits[s->n_mwaits++];
    w->wait_id = wait_id;
    w->req_id = req_id;
    w->wait_ms = wait_ms;
    w->deadline = deadline;
    w->cancelled = false;
}

/* The elections after an entry (core/elect.h): a revision never goes
 * backwards, every change of leader or value takes a new one, no revision
 * is above the counter, and a leader's lease is live in the lease model. */
static void model_elections(sim *s, uint64_t index, uint64_t now, sim_node *nd)
{
    uint64_t counter = fence_fsm_elect_revision(nd->fsm);
    for (unsigned e = 0; e < SIM_LOCKS && !s->res->failed; e++) {
        char nm[6] = "elec0";
        nm[4] = (char)('0' + e);
        fence_fsm_elect_state st;
        if (fence_fsm_elect_info(nd->fsm, (const uint8_t *)nm, 5, &st) != 0) {
            sim_fail(s, "index %" PRIu64 ": %s is not an election", index, nm);
            return;
        }
        uint64_t vh = st.has_leader ? fnv(FNV_INIT, st.value, st.value_len) : 0;
        bool changed = st.has_leader != s->melect[e].has_leader ||
                       st.token != s->melect[e].token || vh != s->melect[e].value_hash;
        if (st.revision < s->melect[e].revision || st.revision > counter ||
            (changed && st.revision == s->melect[e].revision))
            sim_fail(s, "index %" PRIu64 ": election %s went from revision %" PRIu64
                        " (token %" PRIu64 ") to %" PRIu64 " (token %" PRIu64
                        ", counter %" PRIu64 ")%s",
                     index, nm, s->melect[e].revision, s->melect[e].token, st.revision,
                     st.token, counter, changed ? " although it changed" : "");
        if (st.has_leader) {
            sim_mlease *l = mlease(s, st.lease);
            if (l == NULL || !l->known || !l->live || l->deadline <= now)
                sim_fail(s, "index %" PRIu64 ": election %s is led by lease %" PRIu64
                            " (token %" PRIu64 "), which is not live in the model",
                         index, nm, st.lease, st.token);
        }
        /* The history the observers are checked against (sim_observe.c):
         * each revision with its state and the first index that had it. */
        if (s->n_erevs[e] == 0 || s->erevs[e][s->n_erevs[e] - 1].revision != st.revision) {
            s->erevs[e] = sim_grow(s->erevs[e], &s->cap_erevs[e], s->n_erevs[e] + 1,
                                   sizeof *s->erevs[e]);
            sim_erev *r = &s->erevs[e][s->n_erevs[e]++];
            r->revision = st.revision;
            r->index = index;
            r->has_leader = st.has_leader;
            r->token = st.token;
            r->value_hash = vh;
        }
        s->melect[e].has_leader = st.has_leader;
        s->melect[e].token = st.token;
        s->melect[e].revision = st.revision;
        s->melect[e].value_hash = vh;
    }
}

/* The lease model, run once per index (by the first node applying it):
 * check every new grant went to a live lease and keep lease deadlines from
 * the applied commands alone.  Rules (fsm.h "Time"): now = max(previous
 * now, entry timestamp); everything with deadline <= now is expired before
 * the commands run; a grant needs deadline > now; LEADER_START sets every
 * live lease's deadline to now + ttl; KEEPALIVE sets now + ttl. */
void sim_model_entry(sim *s, uint64_t index, uint64_t ts,
                        const fence_cmd *cmds, const fence_result *res,
                        unsigned n, const fence_event *evs, unsigned n_ev,
                        const seen_grant *gr, unsigned n_gr, sim_node *nd)
{
    uint64_t prev_now = s->model_now;
    uint64_t now = ts > prev_now ? ts : prev_now;
    s->model_now = now;
    s->model_index = index;
    /* A LEADER_START entry only moves the clock: the old leader's deadlines
     * are not fired first, they are rebased (fsm.h). */
    bool starts = n > 0 && cmds[0].type == FENCE_CMD_LEADER_START &&
                  res[0].status == FENCE_ST_OK;
    for (size_t id = 1; id < s->cap_mleases; id++) {
        sim_mlease *l = &s->mleases[id];
        if (l->live && l->deadline <= now && !starts) {
            l->live = false;
            promise_check(s, id, l);
        }
        l->live_at_entry = l->live;
        l->created_now = false;
    }
    for (unsigned k = 0; k < n && !s->res->failed; k++) {
        const fence_cmd *c = &cmds[k];
        const fence_result *r = &res[k];
        bool dup = false;
        if (c->flags & FENCE_CMD_F_REQID) {
            sim_reqid *slot = reqid_slot(s, c->req_id);
            if (slot->req_id == c->req_id && !slot->forgotten) {
                dup = true;
                /* A queued wait's stored result becomes its outcome. */
                if (slot->result.status != FENCE_ST_QUEUED &&
                    memcmp(&slot->result, r, sizeof *r) != 0 &&
                    (slot->result.status != r->status ||
                     slot->result.lease != r->lease ||
                     slot->result.token != r->token ||
                     slot->result.wait_id != r->wait_id ||
                     slot->result.value != r->value))
                    sim_fail(s, "index %" PRIu64 ": retried request id %"
                                PRIx64 " got status %u token %" PRIu64
                                ", first time status %u token %" PRIu64,
                             index, c->req_id, r->status, r->token,
                             slot->result.status, slot->result.token);
                slot->result = *r;
            } else {
                slot->req_id = c->req_id;
                slot->forgotten = false;
                slot->result = *r;
            }
        }
        if (r->status == FENCE_ST_QUEUED && !dup)
            model_queued(s, r->wait_id,
                         (c->flags & FENCE_CMD_F_REQID) ? c->req_id : 0,
                         c->wait_ms, now);
        if (r->status == FENCE_ST_QUEUED && r->wait_id > s->model_wait_max)
            s->model_wait_max = r->wait_id;
        if (c->type == FENCE_CMD_CANCEL && !dup)
            model_cancel(s, c->wait_id, now, starts, evs, n_ev);
        if (s->o.verbose > 1)
            sim_log(s, "apply %" PRIu64 "/%u now %" PRIu64 ": type %u lease %"
                       PRIu64 " ttl %" PRIu64 " wait %" PRIu64 " token %" PRIu64
                       "%s -> st %u lease %" PRIu64 " token %" PRIu64
                       " wait_id %" PRIu64,
                    index, k, now, c->type, c->type == FENCE_CMD_CANCEL ? c->wait_id : c->lease, c->ttl_ms, c->wait_ms,
                    c->token, dup ? " (dup)" : "", r->status, r->lease,
                    r->token, r->wait_id);
        if (dup)
            continue;
        sim_mlease *l;
        switch (c->type) {
        case FENCE_CMD_LEADER_START:
            if (r->status != FENCE_ST_OK)
                break;
            for (size_t k2 = 0; k2 < s->n_mwaits; k2++)
                s->mwaits[k2].deadline = now + s->mwaits[k2].wait_ms;
            for (size_t id = 1; id < s->cap_mleases; id++) {
                sim_mlease *m = &s->mleases[id];
                if (m->acq_waiting)
                    m->acq_wait_deadline = now + m->acq_wait_ms;
                if (m->live)
                    m->deadline = mdeadline(m, now);
            }
            break;
        case FENCE_CMD_LOCK_MULTI:
            /* On an existing lease: as LOCK; lease 0: the ACQUIRE form. */
            if (c->lease != 0)
                break;
            /* fall through */
        case FENCE_CMD_LEASE_GRANT:
        case FENCE_CMD_ACQUIRE:
        case FENCE_CMD_SEM_ACQUIRE:
            /* SEM_ACQUIRE makes a lease in its TTL form (lease 0) only. */
            if (c->type == FENCE_CMD_SEM_ACQUIRE && c->lease != 0)
                break;
            if ((r->status == FENCE_ST_OK || r->status == FENCE_ST_QUEUED) &&
                r->lease != 0) {
                l = mlease(s, r->lease);
                if (l == NULL || l->known) {
                    sim_fail(s, "index %" PRIu64 ": lease id %" PRIu64
                                " handed out twice",
                             index, r->lease);
                    break;
                }
                l->known = true;
                l->live = true;
                l->created_now = true;
                l->ttl_ms = c->ttl_ms;
                l->dedicated = c->type != FENCE_CMD_LEASE_GRANT;
                if (c->type != FENCE_CMD_LEASE_GRANT &&
                    r->status == FENCE_ST_QUEUED) {
                    l->acq_waiting = true;
                    l->acq_wait_id = r->wait_id;
                    l->acq_wait_ms = c->wait_ms;
                    l->acq_wait_deadline = now + c->wait_ms;
                }
                l->deadline = mdeadline(l, now);
            }
            break;
        case FENCE_CMD_LEASE_KEEPALIVE:
            if (r->status == FENCE_ST_OK) {
                l = mlease(s, c->lease);
                if (l == NULL || !l->live) {
                    sim_fail(s, "index %" PRIu64 ": KEEPALIVE renewed lease %"
                                PRIu64 ", which had expired or was revoked "
                                "(now %" PRIu64 ", deadline %" PRIu64 ")",
                             index, c->lease, now, l ? l->deadline : 0);
                    break;
                }
                l->deadline = mdeadline(l, now);
            }
            break;
        case FENCE_CMD_LEASE_CHECKPOINT: {
            /* Renewals the leader answered itself: each live lease
             * restarts its TTL now; unknown or dead ones stay dead. */
            uint64_t renewed = 0;
            s->res->checkpoints++;
            for (uint32_t j = 0; j < c->ids_count; j++) {
                uint64_t id = 0;
                for (int b = 7; b >= 0; b--)
                    id = (id << 8) | c->ids[8 * j + (unsigned)b];
                l = mlease(s, id);
                if (l != NULL && l->known && l->live) {
                    l->deadline = mdeadline(l, now);
                    renewed++;
                }
            }
            if (r->status != FENCE_ST_OK || r->value != renewed)
                sim_fail(s, "index %" PRIu64 ": a checkpoint of %u ids renewed %"
                            PRIu64 " leases (status %u), the model %" PRIu64,
                         index, c->ids_count, r->value, r->status, renewed);
            break;
        }
        case FENCE_CMD_UNLOCK:
        case FENCE_CMD_SEM_RELEASE:
            /* Unlocking a dedicated (ACQUIRE) lease's lock revokes it; so
             * does releasing a slot taken with SEM_ACQUIRE's TTL form. */
            if (r->status == FENCE_ST_OK && r->value == 1) {
                sim_grant *g = sim_grant_find(s, c->token);
                l = g ? mlease(s, g->lease) : NULL;
                if (l != NULL && l->dedicated)
                    l->live = false;
            }
            break;
        case FENCE_CMD_UNLOCK_SHARED:
            /* Releasing a dedicated lease's hold revokes it too. */
            if (r->status == FENCE_ST_OK && r->value == 1) {
                l = mlease(s, c->lease);
                if (l != NULL && l->dedicated)
                    l->live = false;
            }
            break;
        case FENCE_CMD_LEASE_REVOKE:
            if (r->status == FENCE_ST_OK) {
                l = mlease(s, c->lease);
                if (l != NULL)
                    l->live = false;
            }
            break;
        default:
            break;
        }
        /* A grant from this command: its lease must be live right now. */
        if ((c->type == FENCE_CMD_LOCK || c->type == FENCE_CMD_ACQUIRE ||
             c->type == FENCE_CMD_SEM_ACQUIRE || c->type == FENCE_CMD_LOCK_MULTI ||
             c->type == FENCE_CMD_ELECT_CAMPAIGN) &&
            r->status == FENCE_ST_OK && r->token > nd->last_token) {
            uint64_t lid = c->type == FENCE_CMD_LOCK || c->type == FENCE_CMD_ELECT_CAMPAIGN ||
                                   ((c->type == FENCE_CMD_SEM_ACQUIRE ||
                                     c->type == FENCE_CMD_LOCK_MULTI) &&
                                    c->lease != 0)
                               ? c->lease
                               : r->lease;
            l = mlease(s, lid);
            if (l == NULL || !l->known || !l->live || l->deadline <= now)
                sim_fail(s, "index %" PRIu64 ": token %" PRIu64 " granted to "
                            "lease %" PRIu64 " which is %s (now %" PRIu64
                            ", deadline %" PRIu64 ")",
                         index, r->token, lid,
                         l == NULL || !l->known ? "unknown"
                         : !l->live            ? "expired or revoked"
                                               : "past its deadline",
                         now, l ? l->deadline : 0);
        }
    }
    /* Grants to waiters: the lease must have been live in this entry (at
     * its start, after expiry, or created by it); the event does not say
     * where among the commands it happened. */
    for (unsigned k = 0; k < n_gr && !s->res->failed; k++) {
        if (!gr[k].from_event)
            continue;
        sim_mlease *l = mlease(s, gr[k].lease);
        if (l == NULL || !l->known || !(l->live_at_entry || l->created_now))
            sim_fail(s, "index %" PRIu64 ": token %" PRIu64 " handed to waiting "
                        "lease %" PRIu64 ", which was %s at the entry's time %"
                        PRIu64 " (deadline %" PRIu64 ")",
                     index, gr[k].token, gr[k].lease,
                     l == NULL || !l->known ? "unknown" : "expired or revoked",
                     now, l ? l->deadline : 0);
    }
    /* An event ends the ACQUIRE wait it is about: granted, the dedicated
     * lease's TTL starts at the grant; failed, the lease is revoked. */
    for (unsigned k = 0; k < n_ev; k++)
        for (size_t id = 1; id < s->cap_mleases; id++) {
            sim_mlease *m = &s->mleases[id];
            if (!m->acq_waiting || m->acq_wait_id != evs[k].wait_id)
                continue;
            m->acq_waiting = false;
            if (evs[k].result.status == FENCE_ST_OK)
                m->deadline = now + m->ttl_ms;
            else
                m->live = false;
        }
    model_waits_end(s, evs, n_ev);
    model_elections(s, index, now, nd);
    if (fence_fsm_now(nd->fsm) != now)
        sim_fail(s, "index %" PRIu64 ": fsm time %" PRIu64 " after the entry, "
                    "expected max(previous %" PRIu64 ", timestamp %" PRIu64 ")",
                 index, fence_fsm_now(nd->fsm), prev_now, ts);
    /* Cross-check every lease with the fsm.  The fsm may never keep a
     * lease alive longer than the applied commands justify (that is how a
     * lock would outlive its lease).  Where the fsm ends a lease earlier
     * than this model computes (a rule the model lacks), the model follows
     * it, the safe direction, and counts a "model adjust". */
    for (size_t id = 1; id < s->cap_mleases && !s->res->failed; id++) {
        sim_mlease *l = &s->mleases[id];
        fence_fsm_lease_state li;
        int rv = fence_fsm_lease_info(nd->fsm, id, now, &li);
        if (rv == 0) {
            if (li.deadline_ms <= now || !l->known || !l->live ||
                li.deadline_ms > l->deadline) {
                sim_fail(s, "index %" PRIu64 ": fsm has lease %zu live until %"
                            PRIu64 ", but the applied commands give %s %"
                            PRIu64 " (now %" PRIu64 ")",
                         index, id, li.deadline_ms,
                         !l->known ? "no such lease"
                         : !l->live ? "a dead lease (deadline"
                                    : "deadline",
                         l->deadline, now);
            } else if (li.deadline_ms < l->deadline) {
                s->res->model_adjusts++;
                sim_log(s, "model: index %" PRIu64 " lease %zu: fsm until %"
                           PRIu64 " < model %" PRIu64, index, id,
                        li.deadline_ms, l->deadline);
                l->deadline = li.deadline_ms;
            }
        } else if (l->live) {
            s->res->model_adjusts++;
            sim_log(s, "model: index %" PRIu64 " lease %zu: fsm has it dead, "
                       "model until %" PRIu64, index, id, l->deadline);
            l->live = false;
        }
    }
}
