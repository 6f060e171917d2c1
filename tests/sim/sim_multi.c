/* ------------------------------------------------------------------------
 * sim_multi.c: the model's view of atomic multi-locks (core/multi.c)
 *
 * A LOCK_MULTI is all or none: when its grant is reported (a command's OK
 * or a waiter's event), the lease must hold every one of its names with
 * that one token, or (released again later in the same entry) none of
 * them; holding some of them is a multi-lock granted partly.  The model
 * remembers the names of each multi-lock answered QUEUED until its wait
 * ends, since an event carries only the wait id.
 * ------------------------------------------------------------------------ */
#include "sim_int.h"

/* The lock number of a "lockN" name, or SIM_LOCKS. */
static unsigned lock_no(const fence_name *n)
{
    if (n->len != 5 || memcmp(n->name, "lock", 4) != 0 || n->name[4] < '0' ||
        n->name[4] >= '0' + SIM_LOCKS)
        return SIM_LOCKS;
    return (unsigned)(n->name[4] - '0');
}

/* Check that lease holds all or none of locks[0..n) with token. */
static void check_all_or_none(sim *s, sim_node *nd, uint64_t index, uint64_t token,
                              uint64_t lease, const unsigned *locks, uint16_t n)
{
    unsigned have = 0;
    for (uint16_t i = 0; i < n; i++) {
        char nm[6] = "lock0";
        nm[4] = (char)('0' + locks[i]);
        fence_fsm_lock_state li;
        if (fence_fsm_lock_info(nd->fsm, (const uint8_t *)nm, 5, &li) && li.token == token &&
            li.lease == lease)
            have++;
    }
    if (have != 0 && have != n)
        sim_fail(s, "index %" PRIu64 ": multi-lock token %" PRIu64 " of lease %" PRIu64
                    " holds %u of its %u names (granted partly)",
                 index, token, lease, have, (unsigned)n);
}

void sim_multi_entry(sim *s, sim_node *nd, uint64_t index, const fence_cmd *cmds,
                     const fence_result *res, unsigned nc, const fence_event *evs,
                     unsigned n_ev, uint64_t before, seen_grant *gr, unsigned ng)
{
    for (unsigned k = 0; k < nc; k++) {
        const fence_cmd *c = &cmds[k];
        const fence_result *r = &res[k];
        if (c->type != FENCE_CMD_LOCK_MULTI)
            continue;
        unsigned locks[SIM_MULTI_MAX];
        uint16_t n = c->names_count <= SIM_MULTI_MAX ? c->names_count : SIM_MULTI_MAX;
        for (uint16_t i = 0; i < n; i++)
            locks[i] = lock_no(&c->names[i]);
        uint64_t lease = c->lease != 0 ? c->lease : r->lease;
        if (r->status == FENCE_ST_OK && r->token > before)
            check_all_or_none(s, nd, index, r->token, lease, locks, n);
        if (r->status != FENCE_ST_QUEUED)
            continue;
        bool known = false;
        for (size_t j = 0; j < s->n_mmulti && !known; j++)
            known = s->mmulti[j].wait_id == r->wait_id;
        if (known)
            continue;
        s->mmulti = sim_grow(s->mmulti, &s->cap_mmulti, s->n_mmulti + 1, sizeof *s->mmulti);
        sim_mmulti *m = &s->mmulti[s->n_mmulti++];
        m->wait_id = r->wait_id;
        m->lease = lease;
        m->n = n;
        memcpy(m->locks, locks, sizeof(locks[0]) * n);
    }
    static const char *const names[SIM_LOCKS] = {"lock0", "lock1", "lock2", "lock3", "lock4"};
    for (unsigned k = 0; k < n_ev; k++) {
        for (size_t j = 0; j < s->n_mmulti; j++) {
            sim_mmulti *m = &s->mmulti[j];
            if (m->wait_id != evs[k].wait_id)
                continue;
            const fence_result *r = &evs[k].result;
            if (r->status == FENCE_ST_OK) {
                if (r->lease != m->lease)
                    sim_fail(s, "index %" PRIu64 ": multi-lock wait %" PRIu64
                                " granted to lease %" PRIu64 ", queued by %" PRIu64,
                             index, m->wait_id, r->lease, m->lease);
                check_all_or_none(s, nd, index, r->token, m->lease, m->locks, m->n);
                /* The history names a multi-lock by its first name. */
                for (unsigned g = 0; g < ng; g++)
                    if (gr[g].token == r->token && gr[g].name == NULL &&
                        m->locks[0] < SIM_LOCKS) {
                        gr[g].name = (const uint8_t *)names[m->locks[0]];
                        gr[g].name_len = 5;
                    }
            }
            *m = s->mmulti[--s->n_mmulti];
            break;
        }
    }
}
