/* The voter floor of CLUSTER.REMOVE; see voter_floor.h. */
#include "server/voter_floor.h"

#include <inttypes.h>
#include <stdio.h>

#include "common/assert.h"

/* The rule; see voter_floor.h. */
int fence__voter_floor(const fence_vf_view *v, char *msg, size_t cap, uint64_t *wait_ms)
{
    FENCE_ASSERT(cap > 0);
    if (!v->is_voter)
        return FENCE_VF_OK;
    FENCE_ASSERT(v->voters >= 1);
    unsigned remaining = v->voters - 1;
    if (remaining == 0) {
        snprintf(msg, cap, "refused: node %" PRIu64 " is the last voter; without a voter "
                 "the cluster can never elect a leader again (add a node first)", v->id);
        return FENCE_VF_REFUSED;
    }
    if (!v->rechecked && v->since_clear_ms < v->settle_ms) {
        *wait_ms = v->settle_ms - v->since_clear_ms + 1;
        return FENCE_VF_WAIT;
    }
    unsigned quorum = remaining / 2 + 1;
    if (v->live_others < quorum) {
        snprintf(msg, cap, "refused: without node %" PRIu64 " the cluster would have %u "
                 "voter(s), of which only %u answer the leader; a quorum needs %u (bring "
                 "the missing voters back, or remove a dead one first)",
                 v->id, remaining, v->live_others, quorum);
        return FENCE_VF_REFUSED;
    }
    return FENCE_VF_OK;
}
