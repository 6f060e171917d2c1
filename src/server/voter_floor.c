/* The voter floor for CLUSTER.REMOVE as a pure function; see voter_floor.h
 * and docs/cluster.md ("The voter floor"). */
#include "server/voter_floor.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int fence_voter_floor(const fence_vf_query *q, fence_vf_result *out)
{
    memset(out, 0, sizeof *out);
    bool victim_votes = false;
    unsigned voters = 0;
    for (size_t i = 0; i < q->n; i++) {
        if (!q->servers[i].voter)
            continue;
        voters++;
        if (q->servers[i].id == q->victim)
            victim_votes = true;
    }
    if (!victim_votes) {
        out->verdict = FENCE_VF_OK; /* a non-voter, or not there at all */
        return out->verdict;
    }
    out->remaining = voters - 1;
    if (out->remaining == 0) {
        out->verdict = FENCE_VF_LAST_VOTER;
        return out->verdict;
    }
    out->quorum = out->remaining / 2 + 1;
    if (!q->rechecked && q->since_clear_ms < q->settle_ms) {
        out->wait_ms = q->settle_ms - q->since_clear_ms + 1;
        out->verdict = FENCE_VF_WAIT;
        return out->verdict;
    }
    for (size_t i = 0; i < q->n; i++)
        if (q->servers[i].voter && q->servers[i].id != q->victim &&
            q->servers[i].contact)
            out->live++;
    out->verdict = out->live < out->quorum ? FENCE_VF_NO_QUORUM : FENCE_VF_OK;
    return out->verdict;
}

void fence_voter_floor_msg(const fence_vf_result *r, uint64_t id, char *msg,
                           size_t cap)
{
    if (cap == 0)
        return;
    msg[0] = '\0';
    if (r->verdict == FENCE_VF_LAST_VOTER)
        snprintf(msg, cap, "refused: node %" PRIu64 " is the last voter; without a voter "
                 "the cluster can never elect a leader again (add a node first)", id);
    else if (r->verdict == FENCE_VF_NO_QUORUM)
        snprintf(msg, cap, "refused: without node %" PRIu64 " the cluster would have %u "
                 "voter(s), of which only %u answer the leader; a quorum needs %u (bring "
                 "the missing voters back, or remove a dead one first)",
                 id, r->remaining, r->live, r->quorum);
}
