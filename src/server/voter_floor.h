/* The voter floor for CLUSTER.REMOVE (docs/cluster.md, "The voter floor"),
 * as a pure function of plain data: the configuration as the leader sees it
 * (each server's id, whether it votes, whether the leader heard from it
 * since raft last cleared its check-quorum flags), the id to remove, and the
 * age of those flags.  No raft, no libuv, no allocation: fenced's cluster.c
 * fills the array from raft's configuration, the simulation (tests/sim) from
 * the fixture's, and both decide with the same code.
 *
 * The rule: removing a non-voter (or an id not in the list) is always
 * allowed; removing a voter is refused when it would leave no voter at all,
 * or when the voters that would remain and that answer the leader (the
 * leader itself included, when it stays) are fewer than a majority of the
 * voters that would remain.  Within settle_ms of a clear of the contact
 * flags a live follower's flag may still be false, so the verdict is WAIT
 * (check again after wait_ms) unless rechecked is set (then the flags are
 * read as they are). */
#ifndef FENCE_SERVER_VOTER_FLOOR_H
#define FENCE_SERVER_VOTER_FLOOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One server of the configuration, as plain data. */
typedef struct fence_vf_server {
    uint64_t id;  /* raft server id */
    bool voter;   /* its role is RAFT_VOTER */
    bool contact; /* the leader itself, or a server that answered it since
                     the last clear of the check-quorum flags */
} fence_vf_server;

/* Verdicts of fence_voter_floor(). */
enum fence_vf_verdict {
    FENCE_VF_OK = 0,        /* the removal may go ahead */
    FENCE_VF_WAIT,          /* flags too fresh to trust: check again later */
    FENCE_VF_LAST_VOTER,    /* refused: it is the last voter */
    FENCE_VF_NO_QUORUM,     /* refused: the rest would lack a live quorum */
};

/* What the rule was asked about. */
typedef struct fence_vf_query {
    const fence_vf_server *servers; /* the configuration (n entries) */
    size_t n;                       /* how many */
    uint64_t victim;                /* id to remove */
    bool rechecked;                 /* true: never WAIT, read flags as they are */
    uint64_t since_clear_ms;        /* time since the flags were last cleared */
    uint64_t settle_ms;             /* how long after a clear they are untrusted
                                       (fenced: two heartbeats) */
} fence_vf_query;

/* What it decided, with the numbers for the refusal's message. */
typedef struct fence_vf_result {
    int verdict;        /* enum fence_vf_verdict */
    unsigned remaining; /* voters left after the removal */
    unsigned live;      /* of them, those with contact */
    unsigned quorum;    /* majority of remaining (0 when remaining is 0) */
    uint64_t wait_ms;   /* FENCE_VF_WAIT: when to check again */
} fence_vf_result;

/* Apply the rule to q; returns out->verdict.  q->servers may be NULL only
 * when q->n is 0. */
int fence_voter_floor(const fence_vf_query *q, fence_vf_result *out);

/* Write the refusal's reason for r (a REFUSED verdict) about node id into
 * msg (cap bytes, always terminated; cap > 0).  For any other verdict msg
 * becomes "". */
void fence_voter_floor_msg(const fence_vf_result *r, uint64_t id, char *msg,
                           size_t cap);

#endif /* FENCE_SERVER_VOTER_FLOOR_H */
