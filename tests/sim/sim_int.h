/* Private header of the deterministic cluster simulation of fenced on
 * libraft's raft_fixture (sim.h is the public one: what a run checks).
 * The simulation is split into files of one concern:
 *
 *   sim_int.h     this: limits, random numbers and hashing, the run's types
 *   sim_disk.c    a crash-stop raft_io wrapper with a shadow "disk" (restarts)
 *   sim_model.c   the global history and the independent lease model
 *   sim_fsm.c     the raft_fsm of a node: fenced's leader module applying to
 *                 the real fence_fsm, plus the apply-time checks
 *   sim_server.c  the server: src/leader/ on each node (the same
 *                 module fenced runs), with the sim as its shell
 *   sim_client.c  simulated clients: connections with pipelines, reads,
 *                 waits, disconnects and REQID retries
 *   sim_fault.c   faults (partitions, pauses, restarts, disk and network
 *                 latency, disk-write failures, transfers, elect/depose)
 *   sim_member.c  membership changes (CLUSTER.ADD / CLUSTER.REMOVE) under the
 *                 voter floor of src/server/voter_floor.c
 *   sim_observe.c ELECTION.OBSERVE observers, parked in each node's
 *                 fence_obs_set (src/server/observe_set.c, as fenced's)
 *   sim_run.c     failure reporting, the run loop and the final checks
 *
 * Rule for raft callbacks (leader.h's, which the module asserts and the sim
 * checks): they only record what happened and deliver replies; every call
 * into raft (apply, barrier, transfer, close, start) is made between fixture
 * steps, by the module's step or by the driver, never from inside a callback.
 */
#ifndef FENCE_SIM_INT_H
#define FENCE_SIM_INT_H

#include "sim.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <raft.h>
#include <raft/fixture.h>

#include "base/hash.h"
#include "core/elect.h"
#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "leader/leader.h"
#include "server/observe_set.h"
#include "server/voter_floor.h"

#define SIM_MAX_NODES 8
#define SIM_MAX_CLIENTS 32
#define SIM_LOCKS 5                          /* lock names "lock0".."lock4" */
/* The semaphore of slots (core/sem.c): requests drawn for the last lock
 * (lock4) go to the semaphore "sem" of SIM_SEM_N slots instead, whose
 * slot i is the fence "sem#i"; a client's grant of slot i is recorded as
 * lock number SIM_SEM_SLOT + i. */
#define SIM_SEM_LOCK (SIM_LOCKS - 1)
#define SIM_SEM_N 2
#define SIM_SEM_SLOT 100
#define SIM_MULTI_MAX 3                      /* names of one LOCK_MULTI */
#define SIM_ELECT_BASE 10                    /* lock numbers from here are the
                                                elections "elec0".."elec4" */
#define SIM_RESULTS_MAX 256                  /* commands in one sim entry */
#define SIM_EVENTS_MAX 4096                  /* events in one applied entry */
#define SIM_CLIENT_LEASES 3                  /* leases a client keeps */
#define SIM_CLIENT_HELD 8                    /* grants a client remembers */
#define SIM_ELECTION_MS 1000                 /* fixture's election timeout */
#define SIM_HEARTBEAT_MS 100
#define SIM_SNAP_MAGIC 0x53494d534e415031ULL /* "SIMSNAP1": our framing */
#define SIM_SETTLE_MS 60000                  /* final convergence budget */

/* ------------------------------------------------------------------------
 * Random numbers and hashing (inline: every file draws from the run's one
 * generator, so the order of draws, not the file, decides a run)
 * ------------------------------------------------------------------------ */

/* Return the next value of a splitmix64 generator: small, fast, and the
 * whole run depends only on its seed. */
static inline uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Return a uniform value in [lo, hi] (inclusive). */
static inline uint64_t rng_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
    assert(lo <= hi);
    return lo + rng_next(state) % (hi - lo + 1);
}

/* Return true with probability pct/100. */
static inline bool rng_pct(uint64_t *state, unsigned pct)
{
    return rng_next(state) % 100 < pct;
}

/* Feed bytes into a 64-bit FNV-1a hash (base/hash.h); used to compare
 * entries, results and snapshots across nodes without keeping copies. */
static inline uint64_t fnv(uint64_t h, const void *data, size_t len)
{
    return fence__fnv1a64_add(h, data, len);
}

#define FNV_INIT FENCE_FNV64_INIT

/* Feed one integer into a hash, independent of padding and endianness. */
static inline uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    return fence__fnv1a64_add_u64(h, v);
}

struct sim;

/* A lease as the independent model sees it (driven only by applied commands
 * and their results, never by the fsm's internals). */
typedef struct sim_mlease {
    bool known;        /* created by an applied LEASE_GRANT/ACQUIRE */
    bool live;         /* neither expired nor revoked */
    uint64_t ttl_ms;   /* from the creating command */
    uint64_t deadline; /* fsm time */
    bool live_at_entry; /* live when the current entry started */
    bool acq_waiting;   /* an ACQUIRE lease whose wait is queued: it lives
                           at least as long as the wait (fsm.c) */
    uint64_t acq_wait_id; /* that wait */
    uint64_t acq_wait_ms; /* its length (for LEADER_START rebases) */
    uint64_t acq_wait_deadline; /* its deadline */
    bool created_now;   /* created by the current entry */
    bool dedicated;     /* made by ACQUIRE: UNLOCK of its lock revokes it */
    uint64_t shared_tok[SIM_LOCKS]; /* token of its latest shared grant of
                                       each lock (sim_shared.c) */
    uint64_t promised;  /* sim time until which a KEEPALIVE answered OK
                           promised the lease lives (sent + reply) */
    bool promised_local; /* that answer came without an entry */
} sim_mlease;

/* One applied index as first seen by any node. */
typedef struct sim_hist {
    bool set;            /* some node applied a command entry here */
    uint64_t entry_hash; /* hash of the entry bytes */
    uint64_t result_hash; /* hash of every result and event */
    uint64_t snap_hash;  /* hash of the fsm snapshot after the entry */
    uint64_t last_token; /* fence_fsm_last_token after the entry */
} sim_hist;

/* One grant (a token handed out), in token order. */
typedef struct sim_grant {
    uint64_t token;    /* the fencing token */
    uint64_t index;    /* raft index of the entry that granted it */
    uint64_t lease;    /* lease that received it */
    uint8_t name[16];  /* lock name (the sim's names are short) */
    uint16_t name_len; /* its length */
    bool shared;       /* a shared phase's token (other leases join it) */
} sim_grant;

/* A grant some client was told about (an acknowledged grant). */
typedef struct sim_ack {
    uint64_t token;   /* token the client saw */
    uint64_t lease;   /* lease it saw it for */
    unsigned lock;    /* lock number */
    uint64_t time_ms; /* when it was acknowledged */
} sim_ack;

/* A request id the model has seen applied, with the result it got. */
typedef struct sim_reqid {
    uint64_t req_id;     /* 0: empty slot */
    bool forgotten;      /* the core forgot it (its wait was cancelled) */
    fence_result result; /* result of the first application */
} sim_reqid;

/* A request answered QUEUED, as the model sees it: the command that
 * queued the wait (with or without a request id), or a later LOCK with a
 * request id that joined it (same lease, same lock).  When the wait ends,
 * the core resolves the records of every one of them to the wait's
 * outcome; when a CANCEL fails it, it forgets all of their request ids
 * (apply.c cmd_cancel), so a retry with any of them queues afresh. */
typedef struct sim_mwait {
    uint64_t wait_id;  /* from the QUEUED result */
    uint64_t req_id;   /* the command's request id; 0: none */
    uint64_t wait_ms;  /* its length (for LEADER_START rebases) */
    uint64_t deadline; /* fsm time it times out */
    bool cancelled;    /* a CANCEL failed it (its request id is forgotten) */
} sim_mwait;

/* Pending asynchronous I/O the wrapper forwarded to the fixture. */
enum { PEND_APPEND = 1, PEND_SEND, PEND_SNAP_PUT, PEND_SNAP_GET };

typedef struct sim_pending {
    int kind;   /* PEND_* */
    void *req;  /* raft's request object */
    union {
        raft_io_append_cb append;        /* PEND_APPEND */
        raft_io_send_cb send;            /* PEND_SEND */
        raft_io_snapshot_put_cb snap_put; /* PEND_SNAP_PUT */
        raft_io_snapshot_get_cb snap_get; /* PEND_SNAP_GET */
    } cb;       /* raft's callback, called when the fixture completes */
    struct sim_diskop *op;            /* APPEND, SNAP_PUT: its disk op */
} sim_pending;

/* One operation on a node's shadow disk.  Ops take effect in submission
 * order, as on a real disk (libraft's uv backend serializes them), even
 * when the fixture completes them out of order (latency changes). */
enum { OP_APPEND = 1, OP_TRUNCATE, OP_SNAPSHOT };

typedef struct sim_diskop {
    int kind;                         /* OP_* */
    bool done;                        /* completed: may take effect */
    struct sim_diskop *next;          /* next in submission order */
    const struct raft_entry *rentries; /* APPEND: raft's, until completion */
    struct raft_entry *entries;       /* APPEND: our copies once done */
    unsigned n;                       /* APPEND: how many */
    raft_index first;                 /* APPEND: index of entries[0] */
    raft_index index;                 /* TRUNCATE: from here on */
    unsigned trailing;                /* SNAPSHOT: entries to keep */
    const struct raft_snapshot *rsnap; /* SNAPSHOT: raft's, until done */
    struct raft_snapshot *snap;       /* SNAPSHOT: our copy once done */
} sim_diskop;

/* A raft request the leader module made through its ops (a proposal or a
 * barrier).  A node that restarts marks its requests stale: their
 * callbacks, if raft still fires them, no longer reach the new process. */
typedef struct sim_req_raft {
    union {
        struct raft_apply apply;     /* ops->propose */
        struct raft_barrier barrier; /* ops->barrier */
    } u;                             /* raft's request (data = this) */
    struct sim_node *node;           /* node whose module made it */
    void *tag;                       /* the module's batch (propose) */
    bool stale;                      /* the node restarted since */
    struct sim_req_raft *prev;       /* list of requests in flight */
    struct sim_req_raft *next;       /* list of requests in flight */
} sim_req_raft;

/* One cluster node: raft (inside the fixture), its fsm, its disk shadow and
 * the server-side procedure state. */
typedef struct sim_node {
    struct sim *sim;           /* owning run */
    unsigned i;                /* fixture index (raft id is i + 1) */
    struct raft_fsm rfsm;      /* what raft calls */
    fence_fsm *fsm;            /* the real state machine */
    struct raft_io wio;        /* our wrapper, what raft uses */
    struct raft_io *inner;     /* the fixture's in-memory io */
    raft_io_recv_cb recv;      /* raft's receive callback (wio_recv wraps it) */

    /* Shadow of what this node's disk holds, maintained from successful
     * I/O completions; a restart loads from it. */
    raft_term d_term;          /* persisted term */
    raft_id d_vote;            /* persisted vote */
    struct raft_snapshot *d_snap; /* persisted snapshot or NULL */
    raft_index d_start;        /* index of d_ent[0] */
    struct raft_entry *d_ent;  /* persisted entries, each buf owned */
    size_t d_n;                /* entries in d_ent */
    size_t d_cap;              /* capacity of d_ent */
    raft_index submit_last;    /* last index submitted for append */
    sim_pending *pend;         /* I/O in flight in the fixture */
    size_t n_pend;             /* entries in pend */
    size_t cap_pend;           /* capacity of pend */
    sim_diskop *ops_head;      /* disk ops not yet in effect, oldest first */
    sim_diskop *ops_tail;      /* newest */

    int disk_fault;            /* disk writes until one fails; -1: none */
    bool crashed;              /* a disk write failed: crash-stop */
    bool down;                 /* killed (paused or crashed) */
    bool restart_wanted;       /* restart (reload from disk) when quiet */
    uint64_t up_at;            /* when to revive or restart it */
    int64_t clock_offset;      /* this node's monotonic clock - fixture */

    /* Applied-state tracking. */
    uint64_t last_cmd_index;   /* index of the last command entry applied */
    uint64_t last_token;       /* fence_fsm_last_token after it */
    uint8_t *snapbuf;          /* scratch for snapshot hashing */
    size_t snapcap;            /* its capacity */

    /* The server: the same leader module as fenced. */
    fence_leader *leader;      /* src/leader/ over fsm */
    uint64_t timer_at;         /* leader timer (node clock); UINT64_MAX: off */
    struct raft_transfer transfer; /* leadership transfer request */
    bool transfer_busy;        /* its callback pending */

    /* Membership (sim_member.c). */
    bool gone;                 /* removed (the removal committed) and its
                                  process stopped; may be added again with
                                  an empty disk */
    bool wipe_wanted;          /* restart it with an empty disk (re-add) */

    /* ELECTION.OBSERVEs parked at this server (sim_observe.c). */
    fence_obs_set obs;
} sim_node;

#define SIM_OBSERVERS 10 /* observers; observer i follows election i % 5 */
#define SIM_OBS_ELECTS SIM_LOCKS

/* A simulated ELECTION.OBSERVE client: one request outstanding at a time,
 * OBSERVE elecN AFTER rev WAIT ms, re-issued with the revision it got. */
typedef struct sim_observer {
    fence_obs base;            /* its parked request at a node (first) */
    unsigned id;               /* index */
    unsigned elect;            /* the election it follows */
    int node;                  /* node holding its request; -1: none */
    bool parked;               /* base is in that node's set */
    uint64_t after;            /* the revision it saw last (AFTER) */
    uint64_t sent_at;          /* sim time the request went */
    uint64_t give_up_at;       /* sim time it gives up on the node */
    uint64_t next_at;          /* sim time of the next request */
} sim_observer;

/* One revision of an election in the model's history (sim_model.c). */
typedef struct sim_erev {
    uint64_t revision;         /* the election's revision */
    uint64_t index;            /* first raft index with it */
    bool has_leader;           /* its state */
    uint64_t token;
    uint64_t value_hash;
} sim_erev;

/* States of the membership driver: one change at a time, as an operator
 * running CLUSTER.ADD and CLUSTER.REMOVE would. */
enum {
    MB_IDLE = 0,  /* no change in progress */
    MB_JOIN_WAIT, /* a removed node restarts with an empty disk, then ADD */
    MB_ADDING,    /* raft_add in flight (the node joins as a spare) */
    MB_PROMOTE,   /* added: promote it to voter (raft_assign) next */
    MB_PROMOTING, /* raft_assign(RAFT_VOTER) in flight */
    MB_RECHECK,   /* REMOVE waits for trustworthy contact flags (the floor) */
    MB_REMOVING,  /* raft_remove in flight */
};

/* The membership driver's state. */
typedef struct sim_member {
    int state;                 /* MB_* */
    unsigned node;             /* fixture index the change is about */
    unsigned leader;           /* MB_RECHECK: the leader that was asked */
    bool fresh;                /* the node's disk is empty and no raft_add
                                  for it was accepted yet */
    uint64_t at;               /* MB_RECHECK: when; MB_JOIN_WAIT and
                                  MB_PROMOTE: when to give up */
    uint64_t next_at;          /* sim time of the next change */
    struct raft_change change; /* raft's request (data = the sim) */
    bool done;                 /* its callback ran */
    int status;                /* with this status */
    raft_index rm_index[SIM_MAX_NODES]; /* a removal of node k whose outcome
                                  is unknown: the index its entry got on the
                                  leader (0: none) */
    raft_term rm_term[SIM_MAX_NODES]; /* and the term it got */
} sim_member;

/* What a request of a simulated client got. */
enum { ANS_NONE = 0, ANS_RESULT, ANS_READ, ANS_ERROR };

/* One request in a simulated client's pipeline. */
typedef struct sim_req {
    fence_cmd cmd;         /* the command (name -> name_buf); type 0: a read */
    uint8_t name_buf[8];   /* its lock name */
    uint8_t value_buf[8];  /* ELECT_CAMPAIGN / PROCLAIM: its value */
    unsigned lock;         /* lock number (LOCK/UNLOCK/ACQUIRE/LOCK.INFO) */
    bool is_read;          /* LEASE.INFO (cmd.lease) or LOCK.INFO (name) */
    bool sent;             /* handed to a node's leader module */
    int ans;               /* ANS_* once answered */
    bool from_wait;        /* ANS_RESULT: a wait's outcome */
    fence_result r;        /* ANS_RESULT */
    int err;               /* ANS_ERROR: FENCE_LERR_* */
    bool read_ok;          /* ANS_READ: the lease / lock existed */
    uint64_t state_index;  /* index of the node's state when answered */
    uint64_t floor_index;  /* highest index acknowledged anywhere at send */
    fence_name mnames[SIM_MULTI_MAX]; /* LOCK_MULTI: its names (cmd.names ->
                                         here; each points at a constant) */
    uint64_t sent_at;      /* sim time it was sent */
    bool local;            /* a KEEPALIVE answered at once, without an entry */
} sim_req;

/* A LOCK_MULTI answered QUEUED, until its wait ends: the grant event must
 * hand its lease every one of the names with the event's token. */
typedef struct sim_mmulti {
    uint64_t wait_id;              /* the wait */
    uint64_t lease;                /* the lease that waits */
    uint16_t n;                    /* names */
    unsigned locks[SIM_MULTI_MAX]; /* their lock numbers, request order */
} sim_mmulti;

#define SIM_PIPE_MAX 4  /* requests a client pipelines at once */

/* A simulated client: one connection at a time to a node, a pipeline of
 * up to SIM_PIPE_MAX requests answered in order, a few leases, the grants
 * it was told about. */
typedef struct sim_client {
    unsigned id;               /* index */
    int node;                  /* node connected to; -1: none */
    fence_lconn lconn;         /* the leader module's state of the conn */
    sim_req pipes[2][SIM_PIPE_MAX]; /* pipelines; they alternate, so a
                                  late answer for an old one is caught */
    sim_req *pipe;             /* the current one, in send order */
    unsigned n_pipe;           /* requests in it */
    unsigned n_done;           /* of them, processed in order */
    sim_req retry[SIM_PIPE_MAX]; /* to resend (same REQID) */
    unsigned n_retry;          /* how many */
    uint64_t seq;              /* request id counter */
    uint64_t leases[SIM_CLIENT_LEASES]; /* leases it believes it has */
    unsigned n_leases;         /* how many */
    struct {
        unsigned lock;         /* lock number */
        uint64_t token;        /* token granted */
        uint64_t lease;        /* lease it was granted for */
        bool shared;           /* a shared hold: release names the lease */
    } held[SIM_CLIENT_HELD];   /* grants it believes it holds */
    unsigned n_held;           /* how many */
    uint64_t give_up_at;       /* disconnect if still waiting then */
    uint64_t next_at;          /* next action (sim time) */
} sim_client;

/* One simulation run. */
typedef struct sim {
    fence_sim_opts o;          /* options */
    fence_sim_result *res;     /* where results go */
    uint64_t rng;              /* random state */
    struct raft_fixture fx;    /* the cluster */
    sim_node nodes[SIM_MAX_NODES]; /* per node */
    sim_client clients[SIM_MAX_CLIENTS]; /* per client */
    bool part[SIM_MAX_NODES][SIM_MAX_NODES]; /* partitioned pairs */
    bool in_fixture_op;        /* inside raft_fixture_elect/depose */
    bool traffic;              /* clients may start new commands */
    bool faults;               /* faults may be injected */
    uint64_t next_fault_at;    /* sim time of the next fault */
    int want_op;               /* 1 depose, 2 elect, 0 none (main loop) */
    uint64_t step;             /* fixture steps */
    unsigned n_nodes;          /* fixture servers (o.nodes, more after
                                  membership changes added nodes) */
    uint64_t mrng;             /* random state of membership changes (its
                                  own, so a run without them draws exactly
                                  what it drew before they existed) */
    sim_member mb;             /* the membership driver */

    sim_hist *hist;            /* by raft index */
    size_t hist_cap;           /* capacity */
    sim_grant *grants;         /* in token order */
    size_t n_grants;           /* grants recorded */
    size_t cap_grants;         /* capacity of grants */
    sim_ack *acks;             /* acknowledged grants */
    size_t n_acks;             /* acknowledged grants recorded */
    size_t cap_acks;           /* capacity of acks */
    uint8_t *wshared;          /* by wait id: 1 if a shared request (sim_shared.c) */
    size_t cap_wshared;        /* capacity of wshared */
    sim_mlease *mleases;       /* model leases by id */
    size_t cap_mleases;        /* capacity of mleases (ids below it) */
    sim_reqid *reqids;         /* open-addressing table */
    size_t cap_reqids;         /* slots in reqids (a power of two) */
    sim_mwait *mwaits;         /* requests answered QUEUED, by wait */
    uint64_t model_wait_max;   /* highest wait id seen queued */
    size_t n_mwaits;           /* entries in mwaits */
    size_t cap_mwaits;         /* capacity of mwaits */
    uint64_t model_now;        /* model's fsm time */
    uint64_t model_index;      /* last index the model processed */
    uint64_t model_token;      /* highest token in the history */
    uint64_t acked_index;      /* highest index of a write acknowledged */
    struct {
        bool has_leader;       /* the elections as the model saw them */
        uint64_t token;        /* after the last entry (sim_model.c) */
        uint64_t revision;
        uint64_t value_hash;
    } melect[SIM_LOCKS];
    sim_erev *erevs[SIM_LOCKS]; /* each election's revisions, in order */
    size_t n_erevs[SIM_LOCKS];  /* how many */
    size_t cap_erevs[SIM_LOCKS]; /* capacity */
    sim_observer obs[SIM_OBSERVERS]; /* the observers (sim_observe.c) */
    uint64_t orng;             /* their random state (their own: the rest
                                  of a run draws what it drew before) */
    unsigned in_cb;            /* depth inside raft callbacks (the rule) */
    sim_req_raft *raft_reqs;   /* raft requests in flight */
    fence_event *events;       /* scratch: events of the entry applied */
    sim_mmulti *mmulti;        /* multi-locks waiting (by wait id) */
    size_t n_mmulti;           /* entries in mmulti */
    size_t cap_mmulti;         /* capacity of mmulti */
} sim;

/* One grant seen while applying an entry (from a result or an event). */
typedef struct seen_grant {
    uint64_t token;      /* token */
    uint64_t lease;      /* lease */
    const uint8_t *name; /* lock name (NULL for an event: name unknown) */
    uint16_t name_len;   /* its length */
    bool from_event;     /* granted to a waiter */
    int32_t slot;        /* a semaphore's slot as the result said, else -1
                            (events: filled in from the fsm) */
    bool shared;         /* a shared hold (its phase's token) */
} seen_grant;

/* The run in progress; raft callbacks carry no user pointer of ours for
 * the fixture's internal requests, so the wrapper finds its node here. */
extern sim *g_sim;

/* sim_run.c: failure reporting and memory. */
void sim_fail(sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim_log(sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *sim_grow(void *p, size_t *cap, size_t need, size_t elem);

/* sim_disk.c: the raft_io wrapper. */
void sim_wio_setup(sim_node *n, struct raft_io *inner);
void sim_snap_free(struct raft_snapshot *sn);

/* sim_model.c: the history and the lease model. */
fence_fsm *sim_node_fsm_new(sim_node *n);
uint64_t sim_node_snap_hash(sim_node *n);
sim_grant *sim_grant_find(sim *s, uint64_t token);
/* sim_multi.c: check the multi-locks of an entry the first node applied
 * (all or none) and name their event grants in gr. */
void sim_multi_entry(sim *s, sim_node *nd, uint64_t index, const fence_cmd *cmds,
                     const fence_result *res, unsigned nc, const fence_event *evs,
                     unsigned n_ev, uint64_t before, seen_grant *gr, unsigned ng);
void sim_grant_add(sim *s, uint64_t token, uint64_t index, uint64_t lease,
                   const uint8_t *name, uint16_t name_len);
/* sim_shared.c: shared phases.  Whether a LOCK/ACQUIRE of this entry (or
 * the wait of an event) asked for a shared hold; and, once per index,
 * record the entry's shared grants and check that every shared holder of
 * every lock carries the phase's token. */
void sim_shared_mark(sim *s, const fence_cmd *cmds, const fence_result *res, unsigned n);
bool sim_shared_wait(const sim *s, uint64_t wait_id);
void sim_shared_entry(sim *s, sim_node *nd, uint64_t index, const fence_cmd *cmds,
                      const fence_result *res, unsigned n, const fence_event *evs,
                      unsigned n_ev);
/* A KEEPALIVE sent at sent_at was answered OK with ttl_ms: the lease must
 * not expire before sent_at + ttl_ms (sim time). */
void sim_model_promise(sim *s, uint64_t lease, uint64_t sent_at, uint64_t ttl_ms,
                       bool local);
void sim_model_entry(sim *s, uint64_t index, uint64_t ts,
                     const fence_cmd *cmds, const fence_result *res,
                     unsigned n, const fence_event *evs, unsigned n_ev,
                     const seen_grant *gr, unsigned n_gr, sim_node *nd);

/* sim_fsm.c: the raft_fsm of a node. */
int sim_rfsm_apply(struct raft_fsm *rf, const struct raft_buffer *buf,
                   void **result);
int sim_rfsm_snapshot(struct raft_fsm *rf, struct raft_buffer *bufs[],
                      unsigned *n_bufs);
int sim_rfsm_restore(struct raft_fsm *rf, struct raft_buffer *buf);

/* sim_server.c: the leader module on each node. */
void sim_raft_req_free(sim *s, sim_req_raft *q);
void sim_node_server_new(sim_node *n);
void sim_node_drive(sim *s, sim_node *n);

/* sim_client.c: the simulated clients. */
void sim_client_disconnect(sim *s, sim_client *cl);
void sim_client_drive(sim *s, sim_client *cl);

/* sim_disk.c: forget everything on a node's disk (it must have no I/O in
 * flight): the empty data dir of a node added again. */
void sim_disk_wipe(sim_node *n);
/* The term of index in raft's in-memory log (0: not there). */
raft_term sim_rlog_term(const struct raft_log *l, raft_index index);

/* sim_member.c: membership changes under the voter floor. */
unsigned sim_leader_index(sim *s);
bool sim_replicates(sim *s, unsigned leader, unsigned k);
bool sim_all_voters(sim *s);
void sim_member_drive(sim *s);

/* sim_observe.c: the observers.  Their requests before the nodes' loop
 * turns (as fenced reads requests and applies entries in one turn), then
 * every up node's turn: poll its set, expire WAITs, answer, check. */
void sim_observe_setup(sim *s);
void sim_observe_drive(sim *s);
void sim_observe_turns(sim *s);
/* A node's process is replaced (restart): its observers' connections go. */
void sim_observe_node_reset(sim *s, sim_node *n);

/* sim_fault.c: faults. */
void sim_node_down(sim *s, sim_node *n);
void sim_net_apply(sim *s);
void sim_fault_one(sim *s);
void sim_nodes_updown(sim *s);
void sim_fixture_op(sim *s);

#endif /* FENCE_SIM_INT_H */
