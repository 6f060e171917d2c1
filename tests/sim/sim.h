/* Deterministic cluster simulation of fenced on raft_fixture.
 *
 * One run builds an N-node raft cluster (libraft's in-memory fixture: fake
 * clock, fake network, fake disk), gives every node a real fence_fsm behind
 * its raft_fsm, runs fenced's own leader module (src/leader/:
 * barrier, LEADER_START, group commit, TICKs, the wait table) on every node,
 * lets simulated clients pipeline random commands and reads over
 * connections that come and go, injects faults on a schedule drawn from one
 * seed, adds and removes nodes as CLUSTER.ADD and CLUSTER.REMOVE do (under
 * the voter floor of src/server/voter_floor.c; opts.membership), and checks
 * the safety invariants after every step:
 *
 *   - tokens strictly increase and no token is issued twice; every node
 *     applies the same entry with the same results at the same index, so all
 *     nodes' grant sequences are prefixes of one sequence;
 *   - fence_fsm_check() holds on every node after every applied entry;
 *   - every grant a client saw acknowledged is in the final history;
 *   - a read sees exactly the writes ahead of it in its pipeline and every
 *     write acknowledged before it was sent; each request is answered once,
 *     and only while its connection is open;
 *   - raft is never called from inside a raft callback;
 *   - no grant goes to a lease that an independent model says was expired,
 *     revoked or unknown at the grant's entry time;
 *   - no lease expires before a renewal its client was answered OK for ran
 *     out: sent + the reply's TTL (which a leader answering without an
 *     entry shortens by the renew window, docs/leases.md), in sim time;
 *   - snapshots are byte-identical across nodes at equal applied index, and
 *     a restored snapshot re-encodes to the same bytes.
 *
 * Everything depends only on the seed: a failing run prints its seed and
 * step, and running the same seed again repeats it exactly.
 */
#ifndef FENCE_SIM_H
#define FENCE_SIM_H

#include <stdint.h>

/* What one run does. */
typedef struct fence_sim_opts {
    uint64_t seed;        /* drives every random choice of the run */
    unsigned nodes;       /* cluster size: 3 or 5 (at most 8) */
    uint64_t duration_ms; /* simulated time with traffic and faults */
    unsigned clients;     /* simulated clients (at most 32) */
    int verbose;          /* 1: print faults and leader changes to stderr */
    int vote_faults;      /* 1: disk faults also fail set_term/set_vote */
    int no_pre_vote;      /* 1: raft pre-vote off (the server turns it on) */
    int membership;       /* 1: add and remove nodes (CLUSTER.ADD/REMOVE)
                             during the run, under the voter floor */
    int no_floor;         /* 1: control: remove without the voter floor */
} fence_sim_opts;

/* What one run found.  msg is empty unless failed. */
typedef struct fence_sim_result {
    int failed;                  /* 1 if an invariant was violated */
    uint64_t step;               /* fixture steps taken (at failure) */
    uint64_t time_ms;            /* simulated time (at failure) */
    char msg[512];               /* the violated invariant, with details */
    uint64_t entries;            /* command entries applied (first time) */
    uint64_t grants;             /* distinct tokens granted */
    uint64_t acked_grants;       /* grants a client saw acknowledged */
    uint64_t acked_cmds;         /* commands acknowledged with a result */
    uint64_t unknown_outcomes;   /* commands whose outcome was unknown */
    uint64_t leader_terms;       /* leaderships that reached LEADER_START */
    uint64_t faults;             /* faults injected */
    uint64_t restarts;           /* node restarts (incl. after disk faults) */
    uint64_t crashes;            /* crash-stops on a failed disk write */
    uint64_t snapshots_taken;    /* fsm snapshots encoded for raft */
    uint64_t snapshots_restored; /* fsm restores (install or restart) */
    uint64_t model_adjusts;      /* lease deadlines the model took from the
                                    fsm (rules it does not model) */
    uint64_t local_renewals;     /* KEEPALIVEs answered without an entry
                                    (docs/leases.md) */
    uint64_t checkpoints;        /* LEASE_CHECKPOINT commands applied */
    uint64_t promise_checks;     /* lease expiries checked against the
                                    renewals their clients were answered */
    uint64_t model_forgets;      /* request ids forgotten by a CANCEL */
    uint64_t reads;              /* reads answered and checked */
    uint64_t wait_answers;       /* answers that were a wait's outcome */
    uint64_t disconnects;        /* connections closed with requests out */
    uint64_t unknown_batches;    /* proposals completed without an outcome */
    uint64_t member_adds;        /* nodes added and promoted to voter */
    uint64_t member_removes;     /* removals committed */
    uint64_t floor_refusals;     /* removals the voter floor refused */
    uint64_t floor_waits;        /* removals that waited for fresh contact */
    uint64_t member_failures;    /* changes raft refused or did not finish */
    uint64_t member_skips;       /* changes the sim skipped (1-2 voters) */
    uint64_t conf_crashes;       /* nodes crash-stopped where libraft 0.15
                                    would leave a configuration entry out
                                    (sim_disk.c, change_left_out) */
    uint64_t rollback_crashes;   /* nodes crash-stopped where libraft 0.15
                                    would crash rolling back a configuration
                                    (sim_disk.c, wio_recv) */
    uint64_t shared_checks;      /* shared-held locks whose holders' tokens
                                    were checked (sim_shared.c) */
    uint64_t shared_grants;      /* grants of shared holds (phase begun or
                                    joined) */
    uint64_t obs_answers;        /* ELECTION.OBSERVE answers with a state
                                    (sim_observe.c), checked */
    uint64_t obs_woken;          /* of them, parked and woken by a change */
    uint64_t obs_nils;           /* answered nil (WAIT ran out), checked */
    uint64_t obs_moves;          /* observers that gave up on a node and
                                    asked another */
} fence_sim_result;

/* Run one simulation.  Returns 0 when every invariant held, 1 when one was
 * violated (out->msg says which; the run stops at the first violation).
 * Asserts inside libraft or the core abort the process, so callers that run
 * many seeds fork one child per seed. */
int fence_sim_run(const fence_sim_opts *opts, fence_sim_result *out);

#endif /* FENCE_SIM_H */
