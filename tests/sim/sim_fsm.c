/* ------------------------------------------------------------------------
 * sim_fsm.c: the raft_fsm of a node: fenced's leader module applies each
 * entry to the real fence_fsm, and the apply-time checks compare it with
 * the history (tokens, results, snapshots) and feed the lease model
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* The semaphore's slot fences, "sem#0".. (SIM_SEM_N of them). */
static const char *const sem_slot_names[] = {"sem#0", "sem#1"};
_Static_assert(sizeof(sem_slot_names) / sizeof(sem_slot_names[0]) == SIM_SEM_N,
               "one name per slot");

/* The slot of "sem" whose lock holds token now, or -1. */
static int sem_slot_of(sim_node *nd, uint64_t token)
{
    for (int i = 0; i < SIM_SEM_N; i++) {
        fence_fsm_lock_state li;
        if (fence_fsm_lock_info(nd->fsm, (const uint8_t *)sem_slot_names[i], 5, &li) &&
            li.token == token)
            return i;
    }
    return -1;
}

/* raft_fsm.apply: the node's leader module (src/leader/) applies
 * the entry with the real fsm and answers the waits it ends; then check it
 * against the history (or record it as the history when this node is
 * first at this index). */
int sim_rfsm_apply(struct raft_fsm *rf, const struct raft_buffer *buf,
                      void **result)
{
    sim_node *nd = rf->data;
    sim *s = nd->sim;
    struct raft *r = raft_fixture_get(&s->fx, nd->i);
    uint64_t index = raft_last_applied(r) + 1;

    size_t plen = fence__entry_unframe(buf->base, buf->len);
    if (plen == SIZE_MAX) {
        sim_fail(s, "node %u: entry at index %" PRIu64 " badly framed", nd->i,
                 index);
        return 0;
    }
    s->in_cb++;
    const fence_result *results = fence__leader_apply(nd->leader, buf->base,
                                                      buf->len);
    s->in_cb--;
    *result = (void *)results;
    size_t n_ev = 0;
    const fence_event *evs = fence_fsm_events(nd->fsm, &n_ev);
    if (n_ev > SIM_EVENTS_MAX) {
        sim_fail(s, "index %" PRIu64 ": more than %d events", index,
                 SIM_EVENTS_MAX);
        return 0;
    }
    const char *bad = fence_fsm_check(nd->fsm);
    if (bad != NULL)
        sim_fail(s, "node %u index %" PRIu64 ": fence_fsm_check: %s", nd->i,
                 index, bad);

    /* Decode our copy of the commands (names point into buf). */
    static fence_cmd cmds[SIM_RESULTS_MAX];
    fence_entry_iter it;
    int rv = fence_entry_open(&it, buf->base, plen);
    assert(rv == 0);
    (void)rv;
    if (it.count > SIM_RESULTS_MAX) {
        sim_fail(s, "index %" PRIu64 ": %u commands in one entry (the sim "
                    "checks at most %d)", index, it.count, SIM_RESULTS_MAX);
        return 0;
    }
    unsigned nc = 0;
    /* A LOCK_MULTI's names array is the iterator's, valid until the next
     * command is decoded: keep a copy of each (the sim's have at most
     * SIM_MULTI_MAX names). */
    static fence_name mnames[SIM_RESULTS_MAX][SIM_MULTI_MAX];
    while (nc < SIM_RESULTS_MAX && fence_entry_next(&it, &cmds[nc]) == 1) {
        if (cmds[nc].names_count > 0) {
            assert(cmds[nc].names_count <= SIM_MULTI_MAX);
            memcpy(mnames[nc], cmds[nc].names, cmds[nc].names_count * sizeof(fence_name));
            cmds[nc].names = mnames[nc];
        }
        nc++;
    }
    assert(nc == it.count);
    uint64_t ts = it.timestamp_ms;

    /* Every grant of this entry: new tokens must be distinct, above the
     * node's last token, and together exactly fill the range up to the
     * fsm's new last token (a token is never skipped or issued twice);
     * an old token may only be reported for the same lock and lease
     * (a reentrant LOCK or a deduplicated retry). */
    seen_grant gr[SIM_RESULTS_MAX + SIM_EVENTS_MAX];
    unsigned ng = 0;
    uint64_t before = nd->last_token;
    uint64_t after = fence_fsm_last_token(nd->fsm);
    sim_shared_mark(s, cmds, results, nc);
    for (unsigned k = 0; k < nc; k++) {
        const fence_result *res = &results[k];
        bool multi = cmds[k].type == FENCE_CMD_LOCK_MULTI;
        if ((cmds[k].type != FENCE_CMD_LOCK && cmds[k].type != FENCE_CMD_ACQUIRE && !multi &&
             cmds[k].type != FENCE_CMD_SEM_ACQUIRE && cmds[k].type != FENCE_CMD_ELECT_CAMPAIGN) ||
            res->status != FENCE_ST_OK)
            continue;
        bool sem = cmds[k].type == FENCE_CMD_SEM_ACQUIRE;
        uint64_t lid = cmds[k].type == FENCE_CMD_LOCK || cmds[k].type == FENCE_CMD_ELECT_CAMPAIGN ||
                               ((sem || multi) && cmds[k].lease != 0)
                           ? cmds[k].lease
                           : res->lease;
        bool shared = (cmds[k].flags & FENCE_CMD_F_SHARED) != 0;
        /* A multi-lock is one grant; the history names its first name.  A
         * slot's grant names the fence sem#slot the result reports. */
        const uint8_t *gname = multi ? cmds[k].names[0].name : cmds[k].name;
        uint16_t glen = multi ? cmds[k].names[0].len : cmds[k].name_len;
        if (sem) {
            if (res->slot >= SIM_SEM_N) {
                sim_fail(s, "index %" PRIu64 ": slot %u of a semaphore of %d",
                         index, res->slot, SIM_SEM_N);
                continue;
            }
            gname = (const uint8_t *)sem_slot_names[res->slot];
            glen = 5;
        }
        if (res->token <= before) {
            /* Reentrant, a retry, or (shared) joining a phase begun
             * earlier: that phase's token, of the same lock. */
            sim_grant *g = sim_grant_find(s, res->token);
            /* "?": a waiter's grant whose lock was released again in the
             * same entry, so its name was not found (below): the lease
             * is all that can be compared. */
            bool unnamed = g != NULL && g->name_len == 1 && g->name[0] == '?';
            if (g == NULL || (g->lease != lid && !(shared && g->shared)) ||
                (!unnamed && (g->name_len != glen ||
                              memcmp(g->name, gname, g->name_len) != 0)))
                sim_fail(s, "index %" PRIu64 ": old token %" PRIu64
                            " reported for lease %" PRIu64 " and %.*s"
                            " but it was granted to %s lease %" PRIu64 " and %.*s",
                         index, res->token, lid, (int)glen, gname,
                         g ? "another lock or" : "no", g ? g->lease : 0,
                         g ? (int)g->name_len : 0, g ? (const char *)g->name : "");
            continue;
        }
        gr[ng].token = res->token;
        gr[ng].lease = lid;
        gr[ng].name = gname;
        gr[ng].name_len = glen;
        gr[ng].from_event = false;
        gr[ng].slot = sem ? (int32_t)res->slot : -1;
        gr[ng].shared = shared;
        ng++;
    }
    for (unsigned k = 0; k < n_ev; k++) {
        const fence_event *ev = &evs[k];
        if (ev->result.status != FENCE_ST_OK)
            continue;
        bool shared = sim_shared_wait(s, ev->wait_id);
        if (ev->result.token <= before) {
            /* Only a shared waiter may join an earlier phase. */
            sim_grant *g = shared ? sim_grant_find(s, ev->result.token) : NULL;
            if (g == NULL || !g->shared)
                sim_fail(s, "index %" PRIu64 ": waiter %" PRIu64 " given old token %"
                            PRIu64 "%s", index, ev->wait_id, ev->result.token,
                         shared ? " of no shared phase" : "");
            continue;
        }
        gr[ng].token = ev->result.token;
        gr[ng].lease = ev->result.lease;
        gr[ng].name = NULL;
        gr[ng].name_len = 0;
        gr[ng].from_event = true;
        gr[ng].slot = (int32_t)ev->result.slot; /* checked against the fsm below */
        gr[ng].shared = shared;
        ng++;
    }
    /* Sort the new tokens (insertion sort: a handful). */
    for (unsigned a = 1; a < ng; a++) {
        seen_grant t = gr[a];
        unsigned b = a;
        while (b > 0 && gr[b - 1].token > t.token) {
            gr[b] = gr[b - 1];
            b--;
        }
        gr[b] = t;
    }
    /* The same grant may be reported twice in one entry (a waiter granted
     * by an event, then its deduplicated retry answered with that outcome):
     * one grant if the lease is the same, a double issue if not. */
    unsigned nu = 0;
    for (unsigned k = 0; k < ng; k++) {
        if (nu > 0 && gr[nu - 1].token == gr[k].token) {
            /* A new phase's token goes to every shared holder admitted
             * with it; any other token to one lease. */
            if (gr[nu - 1].lease != gr[k].lease &&
                !(gr[nu - 1].shared && gr[k].shared))
                sim_fail(s, "index %" PRIu64 ": token %" PRIu64
                            " issued to leases %" PRIu64 " and %" PRIu64,
                         index, gr[k].token, gr[nu - 1].lease, gr[k].lease);
            if (gr[nu - 1].name == NULL)
                gr[nu - 1] = gr[k];
            continue;
        }
        gr[nu++] = gr[k];
    }
    ng = nu;
    for (unsigned k = 0; k < ng; k++) {
        if (gr[k].token != before + 1 + k) {
            sim_fail(s, "node %u index %" PRIu64 ": new tokens are not %" PRIu64
                        "..%" PRIu64 " without gaps or repeats (got %" PRIu64
                        " at position %u)",
                     nd->i, index, before + 1, after, gr[k].token, k);
            break;
        }
    }
    if (after != before + ng)
        sim_fail(s, "node %u index %" PRIu64 ": last token went %" PRIu64
                    " -> %" PRIu64 " but %u grants were reported",
                 nd->i, index, before, after, ng);

    /* Compare with (or record) the history at this index. */
    uint64_t eh = fnv(FNV_INIT, buf->base, buf->len);
    uint64_t rh = FNV_INIT;
    for (unsigned k = 0; k < nc; k++) {
        const fence_result *res = &results[k];
        rh = fnv_u64(rh, res->status);
        rh = fnv_u64(rh, res->lease);
        rh = fnv_u64(rh, res->token);
        rh = fnv_u64(rh, res->wait_id);
        rh = fnv_u64(rh, res->value);
    }
    for (unsigned k = 0; k < n_ev; k++) {
        const fence_event *ev = &evs[k];
        rh = fnv_u64(rh, ev->wait_id);
        rh = fnv_u64(rh, ev->result.status);
        rh = fnv_u64(rh, ev->result.lease);
        rh = fnv_u64(rh, ev->result.token);
        rh = fnv_u64(rh, ev->result.wait_id);
        rh = fnv_u64(rh, ev->result.value);
    }
    uint64_t sh = sim_node_snap_hash(nd);
    s->hist = sim_grow(s->hist, &s->hist_cap, (size_t)index + 1, sizeof *s->hist);
    sim_hist *h = &s->hist[index];
    if (!h->set) {
        if (index <= s->model_index)
            sim_fail(s, "index %" PRIu64 " applied first after index %" PRIu64,
                     index, s->model_index);
        h->set = true;
        h->entry_hash = eh;
        h->result_hash = rh;
        h->snap_hash = sh;
        h->last_token = after;
        s->res->entries++;
        sim_multi_entry(s, nd, index, cmds, results, nc, evs, (unsigned)n_ev, before, gr, ng);
        for (unsigned k = 0; k < ng && !s->res->failed; k++) {
            const uint8_t *nm = gr[k].name;
            uint16_t nl = gr[k].name_len;
            /* Which slot lock holds the token now (if any): the slot a
             * result or an event reported must be that one, or two leases
             * believe they hold one slot. */
            int held_slot = sem_slot_of(nd, gr[k].token);
            if (held_slot >= 0 && gr[k].slot != held_slot) {
                sim_fail(s, "index %" PRIu64 ": token %" PRIu64 " reported for slot %d "
                            "of sem but the fsm has it at sem#%d (a slot granted twice)",
                         index, gr[k].token, (int)gr[k].slot, held_slot);
                break;
            }
            if (held_slot >= 0) {
                nm = (const uint8_t *)sem_slot_names[held_slot];
                nl = 5;
            }
            if (nm == NULL) {
                /* An event does not carry the name: ask the fsm which lock
                 * now holds this token. */
                static const char *names[2 * SIM_LOCKS] = {
                    "lock0", "lock1", "lock2", "lock3", "lock4",
                    "elec0", "elec1", "elec2", "elec3", "elec4"};
                for (unsigned L = 0; L < 2 * SIM_LOCKS; L++) {
                    fence_fsm_lock_state li;
                    if (fence_fsm_lock_info(nd->fsm, (const uint8_t *)names[L],
                                            5, &li) &&
                        li.token == gr[k].token) {
                        nm = (const uint8_t *)names[L];
                        nl = 5;
                    }
                }
                if (nm == NULL) {
                    nm = (const uint8_t *)"?";
                    nl = 1;
                }
            }
            sim_grant_add(s, gr[k].token, index, gr[k].lease, nm, nl);
            sim_grant *g = sim_grant_find(s, gr[k].token);
            if (g != NULL && g->index == index)
                g->shared = gr[k].shared;
        }
        for (unsigned k = 0; k < nc; k++)
            s->res->shared_grants += (cmds[k].type == FENCE_CMD_LOCK ||
                                      cmds[k].type == FENCE_CMD_ACQUIRE) &&
                                     (cmds[k].flags & FENCE_CMD_F_SHARED) &&
                                     results[k].status == FENCE_ST_OK;
        sim_model_entry(s, index, ts, cmds, results, nc, evs,
                    (unsigned)n_ev, gr, ng, nd);
        /* After the lease model, which has made room for new leases. */
        sim_shared_entry(s, nd, index, cmds, results, nc, evs, (unsigned)n_ev);
    } else {
        if (h->entry_hash != eh)
            sim_fail(s, "node %u applied a different entry at index %" PRIu64,
                     nd->i, index);
        else if (h->result_hash != rh)
            sim_fail(s, "node %u: same entry at index %" PRIu64
                        " gave different results or events",
                     nd->i, index);
        else if (h->snap_hash != sh)
            sim_fail(s, "node %u: snapshot after index %" PRIu64
                        " differs from the first node's",
                     nd->i, index);
    }
    nd->last_token = after;
    nd->last_cmd_index = index;

    return 0;
}

/* raft_fsm.snapshot: our frame (magic, last command index) + the fsm's
 * snapshot, in buffers from raft_malloc (raft frees them, fsm version 1). */
int sim_rfsm_snapshot(struct raft_fsm *rf, struct raft_buffer *bufs[],
                         unsigned *n_bufs)
{
    sim_node *nd = rf->data;
    /* libraft 0.15 stores the current configuration in a snapshot with the
     * index of the last committed one (replication.c takeSnapshot): taken
     * while a change is uncommitted, the snapshot pairs a configuration that
     * may be rolled back with an index it never had, and nodes restoring it
     * disagree on the membership (seed 212: a leader that takes a voter for
     * a spare).  So no snapshot while a change is uncommitted: RAFT_BUSY
     * makes raft try again later.  (Never the case without membership
     * changes.) */
    if (raft_fixture_get(&nd->sim->fx, nd->i)->configuration_uncommitted_index != 0)
        return RAFT_BUSY;
    size_t len = fence_fsm_snapshot_size(nd->fsm);
    struct raft_buffer *b = raft_malloc(sizeof *b);
    if (b == NULL)
        return RAFT_NOMEM;
    b->base = raft_malloc(16 + len);
    if (b->base == NULL) {
        raft_free(b);
        return RAFT_NOMEM;
    }
    uint8_t *p = b->base;
    for (int k = 0; k < 8; k++) {
        p[k] = (uint8_t)(SIM_SNAP_MAGIC >> (8 * k));
        p[8 + k] = (uint8_t)(nd->last_cmd_index >> (8 * k));
    }
    size_t w = fence_fsm_snapshot(nd->fsm, p + 16, len);
    assert(w == len);
    b->len = 16 + w;
    *bufs = b;
    *n_bufs = 1;
    nd->sim->res->snapshots_taken++;
    return 0;
}

/* raft_fsm.restore: decode our frame, restore the fsm, check it re-encodes
 * to the bytes every node had at that index; on success the buffer is ours
 * to free. */
int sim_rfsm_restore(struct raft_fsm *rf, struct raft_buffer *buf)
{
    sim_node *nd = rf->data;
    sim *s = nd->sim;
    const uint8_t *p = buf->base;
    if (buf->len < 16) {
        sim_fail(s, "node %u: snapshot too short", nd->i);
        return RAFT_CORRUPT;
    }
    uint64_t magic = 0, idx = 0;
    for (int k = 0; k < 8; k++) {
        magic |= (uint64_t)p[k] << (8 * k);
        idx |= (uint64_t)p[8 + k] << (8 * k);
    }
    if (magic != SIM_SNAP_MAGIC) {
        sim_fail(s, "node %u: snapshot frame corrupt", nd->i);
        return RAFT_CORRUPT;
    }
    int rv = fence_fsm_restore(nd->fsm, p + 16, buf->len - 16);
    if (rv != 0) {
        sim_fail(s, "node %u: fence_fsm_restore failed (%d)", nd->i, rv);
        return RAFT_CORRUPT;
    }
    s->in_cb++;
    fence__leader_restored(nd->leader);
    s->in_cb--;
    const char *bad = fence_fsm_check(nd->fsm);
    if (bad != NULL)
        sim_fail(s, "node %u: after restore: %s", nd->i, bad);
    uint64_t sh = sim_node_snap_hash(nd);
    if (fnv(FNV_INIT, p + 16, buf->len - 16) != sh)
        sim_fail(s, "node %u: restored snapshot re-encodes differently", nd->i);
    if (idx > 0 && (idx >= s->hist_cap || !s->hist[idx].set))
        sim_fail(s, "node %u: snapshot at index %" PRIu64 " never applied",
                 nd->i, idx);
    else if (idx > 0 && s->hist[idx].snap_hash != sh)
        sim_fail(s, "node %u: snapshot at index %" PRIu64
                    " differs from the state every node had there",
                 nd->i, idx);
    nd->last_cmd_index = idx;
    nd->last_token = fence_fsm_last_token(nd->fsm);
    if (idx > 0 && idx < s->hist_cap && s->hist[idx].set &&
        s->hist[idx].last_token != nd->last_token)
        sim_fail(s, "node %u: restored last token %" PRIu64 " != %" PRIu64,
                 nd->i, nd->last_token, s->hist[idx].last_token);
    s->res->snapshots_restored++;
    raft_free(buf->base);
    return 0;
}
