/* ------------------------------------------------------------------------
 * sim_shared.c: shared phases in the model (issue 21 section 2)
 *
 * The token rule: the shared holders admitted together (one phase) carry
 * one token, and every grant after the phase a higher one.  The grant
 * checks in sim_fsm.c let a shared request join an earlier token (of a
 * shared phase of the same lock) and let several leases share one new
 * token when they are all shared; this file records, for every lease, the
 * token of its latest shared grant of each lock, and after every entry
 * checks that each shared holder of each lock still carries the phase's
 * token, which a holder given a new token inside its phase (or a phase
 * retokened under its holders) breaks.
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

static const char *const lock_names[SIM_LOCKS] = {"lock0", "lock1", "lock2", "lock3",
                                                  "lock4"};

/* Remember which waits of this entry's QUEUED answers are shared (every
 * node marks the same ones; joins of a wait have its mode). */
void sim_shared_mark(sim *s, const fence_cmd *cmds, const fence_result *res, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        if (res[k].status != FENCE_ST_QUEUED || !(cmds[k].flags & FENCE_CMD_F_SHARED))
            continue;
        uint64_t id = res[k].wait_id;
        if (id > 10000000)
            continue;
        size_t old = s->cap_wshared;
        s->wshared = sim_grow(s->wshared, &s->cap_wshared, (size_t)id + 1, 1);
        if (s->cap_wshared > old)
            memset(s->wshared + old, 0, s->cap_wshared - old);
        s->wshared[id] = 1;
    }
}

/* Whether wait wait_id was a shared request. */
bool sim_shared_wait(const sim *s, uint64_t wait_id)
{
    return wait_id < s->cap_wshared && s->wshared[wait_id] != 0;
}

/* The lock number of a sim lock name, or -1. */
static int lock_no(const uint8_t *name, uint16_t len)
{
    if (len != 5 || memcmp(name, "lock", 4) != 0 || name[4] < '0' ||
        name[4] >= '0' + SIM_LOCKS)
        return -1;
    return name[4] - '0';
}

/* The model lease with this id (NULL past the table: nothing to check). */
static sim_mlease *ml(sim *s, uint64_t id)
{
    return id < s->cap_mleases ? &s->mleases[id] : NULL;
}

/* Once per index (the first node to apply it): record its shared grants,
 * then check every shared holder's token against its phase's. */
void sim_shared_entry(sim *s, sim_node *nd, uint64_t index, const fence_cmd *cmds,
                      const fence_result *res, unsigned n, const fence_event *evs,
                      unsigned n_ev)
{
    for (unsigned k = 0; k < n; k++) {
        const fence_cmd *c = &cmds[k];
        if ((c->type != FENCE_CMD_LOCK && c->type != FENCE_CMD_ACQUIRE) ||
            !(c->flags & FENCE_CMD_F_SHARED) || res[k].status != FENCE_ST_OK)
            continue;
        int L = lock_no(c->name, c->name_len);
        sim_mlease *m = ml(s, c->type == FENCE_CMD_LOCK ? c->lease : res[k].lease);
        if (L >= 0 && m != NULL)
            m->shared_tok[L] = res[k].token;
    }
    for (unsigned k = 0; k < n_ev; k++) {
        if (evs[k].result.status != FENCE_ST_OK || !sim_shared_wait(s, evs[k].wait_id))
            continue;
        sim_mlease *m = ml(s, evs[k].result.lease);
        /* The event names no lock: the one whose phase has this token (if
         * the phase already ended in this entry, nothing is left to check). */
        for (int L = 0; L < SIM_LOCKS && m != NULL; L++) {
            fence_fsm_lock_state li;
            if (fence_fsm_lock_info(nd->fsm, (const uint8_t *)lock_names[L], 5, &li) &&
                li.token == evs[k].result.token)
                m->shared_tok[L] = evs[k].result.token;
        }
    }
    for (int L = 0; L < SIM_LOCKS && !s->res->failed; L++) {
        fence_fsm_lock_state li;
        if (!fence_fsm_lock_info(nd->fsm, (const uint8_t *)lock_names[L], 5, &li))
            continue;
        fence_fsm_holder h[64];
        size_t nh = fence_fsm_lock_holders(nd->fsm, (const uint8_t *)lock_names[L], 5, h, 64);
        if (!li.shared) {
            if (nh != 1)
                sim_fail(s, "index %" PRIu64 ": exclusive %s has %zu holders", index,
                         lock_names[L], nh);
            continue;
        }
        s->res->shared_checks++;
        for (size_t j = 0; j < nh && j < 64; j++) {
            sim_mlease *m = ml(s, h[j].lease);
            uint64_t t = m != NULL ? m->shared_tok[L] : 0;
            if (t != li.token)
                sim_fail(s, "index %" PRIu64 ": lease %" PRIu64 " holds %s shared with "
                            "token %" PRIu64 ", but its phase's token is %" PRIu64
                            " (a shared holder given a new token inside its phase?)",
                         index, h[j].lease, lock_names[L], t, li.token);
        }
    }
}
