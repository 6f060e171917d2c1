/* The voter floor of CLUSTER.REMOVE (docs/cluster.md, "The voter floor") as
 * a pure function: no raft, no libuv, no clock.  cluster.c feeds it what
 * libraft says on the leader; a test (or a simulation) can feed it any
 * view it likes and get the same verdict. */
#ifndef FENCE_SERVER_VOTER_FLOOR_H
#define FENCE_SERVER_VOTER_FLOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Verdicts of fence__voter_floor(). */
enum fence_vf_verdict {
    FENCE_VF_OK = 0,  /* the removal may go ahead */
    FENCE_VF_WAIT,    /* the contact flags are too fresh to trust: ask again later */
    FENCE_VF_REFUSED, /* refused; the reason is in msg */
};

/* What the rule looks at, on the leader. */
typedef struct fence_vf_view {
    uint64_t id;             /* the node to remove */
    bool is_voter;           /* it is in the configuration as a voter */
    unsigned voters;         /* voters in the configuration (it included) */
    unsigned live_others;    /* voters other than it that the leader heard from
                                within the last election timeout (the leader
                                itself counts when it is not the one removed) */
    uint64_t since_clear_ms; /* ms since the contact flags were last cleared */
    uint64_t settle_ms;      /* how long a live follower may take to set its
                                flag again after a clear (two heartbeats) */
    bool rechecked;          /* asked again after a WAIT: take the flags as
                                they are */
} fence_vf_view;

/* Removing a non-voter is always allowed.  Removing a voter is refused when
 * it would leave no voter at all, or when the voters that would remain and
 * answer the leader are fewer than a majority of the voters that would
 * remain (raft uses a new configuration as soon as it is in the log, so
 * such a change could never commit).  Within settle_ms of a clear the
 * answer is WAIT with *wait_ms to go, unless rechecked.  msg (cap bytes,
 * cap > 0) gets the reason of a refusal. */
int fence__voter_floor(const fence_vf_view *v, char *msg, size_t cap, uint64_t *wait_ms);

#endif /* FENCE_SERVER_VOTER_FLOOR_H */
