/* Deterministic cluster simulation of fenced on libraft's raft_fixture.
 * See sim.h for what a run checks.  Layout of this file:
 *
 *   1. random numbers, hashing, failure reporting
 *   2. a crash-stop raft_io wrapper with a shadow "disk" (restarts)
 *   3. the raft_fsm of a node: fenced's leader module applying to the real
 *      fence_fsm, plus the apply-time checks
 *   4. the global history and the independent lease model
 *   5. the server: src/leader/ on each node (the same module fenced
 *      runs), with the sim as its shell
 *   6. simulated clients: connections with pipelines, reads, waits,
 *      disconnects and REQID retries
 *   7. faults
 *   8. the run loop and the final checks
 *
 * Rule for raft callbacks (leader.h's, which the module asserts and the sim
 * checks): they only record what happened and deliver replies; every call
 * into raft (apply, barrier, transfer, close, start) is made between fixture
 * steps, by the module's step or by the driver, never from inside a callback.
 */
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

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "leader/leader.h"

#define SIM_MAX_NODES 8
#define SIM_MAX_CLIENTS 32
#define SIM_LOCKS 5                          /* lock names "lock0".."lock4" */
#define SIM_RESULTS_MAX 256                  /* commands in one sim entry */
#define SIM_EVENTS_MAX 4096                  /* events in one applied entry */
#define SIM_CLIENT_LEASES 3                  /* leases a client keeps */
#define SIM_CLIENT_HELD 8                    /* grants a client remembers */
#define SIM_ELECTION_MS 1000                 /* fixture's election timeout */
#define SIM_HEARTBEAT_MS 100
#define SIM_SNAP_MAGIC 0x53494d534e415031ULL /* "SIMSNAP1": our framing */
#define SIM_SETTLE_MS 60000                  /* final convergence budget */

/* ------------------------------------------------------------------------
 * 1. Random numbers, hashing, failure reporting
 * ------------------------------------------------------------------------ */

/* Return the next value of a splitmix64 generator: small, fast, and the
 * whole run depends only on its seed. */
static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Return a uniform value in [lo, hi] (inclusive). */
static uint64_t rng_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
    assert(lo <= hi);
    return lo + rng_next(state) % (hi - lo + 1);
}

/* Return true with probability pct/100. */
static bool rng_pct(uint64_t *state, unsigned pct)
{
    return rng_next(state) % 100 < pct;
}

/* Feed bytes into a 64-bit FNV-1a hash; used to compare entries, results
 * and snapshots across nodes without keeping copies. */
static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

#define FNV_INIT 0xcbf29ce484222325ULL

/* Feed one integer into a hash, independent of padding and endianness. */
static uint64_t fnv_u64(uint64_t h, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    return fnv(h, b, sizeof b);
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
} sim_node;

/* What a request of a simulated client got. */
enum { ANS_NONE = 0, ANS_RESULT, ANS_READ, ANS_ERROR };

/* One request in a simulated client's pipeline. */
typedef struct sim_req {
    fence_cmd cmd;         /* the command (name -> name_buf); type 0: a read */
    uint8_t name_buf[8];   /* its lock name */
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
} sim_req;

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

    sim_hist *hist;            /* by raft index */
    size_t hist_cap;           /* capacity */
    sim_grant *grants;         /* in token order */
    size_t n_grants;           /* grants recorded */
    size_t cap_grants;         /* capacity of grants */
    sim_ack *acks;             /* acknowledged grants */
    size_t n_acks;             /* acknowledged grants recorded */
    size_t cap_acks;           /* capacity of acks */
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
    unsigned in_cb;            /* depth inside raft callbacks (the rule) */
    sim_req_raft *raft_reqs;   /* raft requests in flight */
    fence_event *events;       /* scratch: events of the entry applied */
} sim;

/* The run in progress; raft callbacks carry no user pointer of ours for
 * the fixture's internal requests, so the wrapper finds its node here. */
static sim *g_sim;

/* Record the first invariant violation of the run, with the step and time
 * where it was seen; later ones are dropped (the run stops after the step). */
static void sim_fail(sim *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sim_fail(sim *s, const char *fmt, ...)
{
    if (s->res->failed)
        return;
    s->res->failed = 1;
    s->res->step = s->step;
    s->res->time_ms = s->fx.time;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->res->msg, sizeof s->res->msg, fmt, ap);
    va_end(ap);
}

/* Print a line about the run when verbose. */
static void sim_log(sim *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sim_log(sim *s, const char *fmt, ...)
{
    if (!s->o.verbose)
        return;
    va_list ap;
    fprintf(stderr, "# t=%-7" PRIu64 " ", (uint64_t)s->fx.time);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* Grow a dynamic array to hold at least need elements (zeroing new space);
 * the sim treats running out of memory as fatal. */
static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return p;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need)
        ncap *= 2;
    uint8_t *np = realloc(p, ncap * elem);
    if (np == NULL) {
        fprintf(stderr, "sim: out of memory\n");
        abort();
    }
    memset(np + *cap * elem, 0, (ncap - *cap) * elem);
    *cap = ncap;
    return np;
}

/* ------------------------------------------------------------------------
 * 2. Crash-stop raft_io wrapper with a shadow disk
 *
 * The 0.15 fixture has no restart: its in-memory "disk" keeps entries from
 * index 1 and mis-indexes them after a snapshot.  So the wrapper forwards
 * every operation to the fixture's io, keeps its own copy of what completed
 * (term, vote, snapshot, entries by index, in the order a real disk would
 * apply them), and a restart loads from that copy.  It also counts the I/O
 * in flight (a node is closed only when none is left, since the fixture
 * would otherwise call back into freed raft memory), and it implements the
 * server's crash-stop rule: any failed disk write marks the node crashed,
 * and the driver kills it before the next step.
 * ------------------------------------------------------------------------ */

/* Find the node owning a wrapper io. */
static sim_node *io_node(struct raft_io *io)
{
    return (sim_node *)((char *)io - offsetof(sim_node, wio));
}

/* Remember one request in flight and return its record. */
static sim_pending *pend_add(sim_node *n, int kind, void *req)
{
    n->pend = grow(n->pend, &n->cap_pend, n->n_pend + 1, sizeof *n->pend);
    sim_pending *p = &n->pend[n->n_pend++];
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->req = req;
    return p;
}

/* Remove and return (by value) the record of a completed request; every
 * node is searched because the fixture's callback does not say whose. */
static sim_pending pend_take(void *req, sim_node **owner)
{
    sim *s = g_sim;
    for (unsigned k = 0; k < s->o.nodes; k++) {
        sim_node *n = &s->nodes[k];
        for (size_t j = 0; j < n->n_pend; j++) {
            if (n->pend[j].req != req)
                continue;
            sim_pending p = n->pend[j];
            n->pend[j] = n->pend[--n->n_pend];
            *owner = n;
            return p;
        }
    }
    fprintf(stderr, "sim: completion for an unknown request\n");
    abort();
}

/* Drop persisted entries from index onward. */
static void disk_truncate(sim_node *n, raft_index index)
{
    while (n->d_n > 0 && n->d_start + n->d_n - 1 >= index) {
        n->d_n--;
        raft_free(n->d_ent[n->d_n].buf.base);
    }
    if (n->d_n == 0 && index > n->d_start)
        n->d_start = index;
    if (n->d_n == 0 && index <= n->d_start)
        n->d_start = index;
}

/* Drop persisted entries up to and including index (log compaction). */
static void disk_drop_prefix(sim_node *n, raft_index index)
{
    size_t k = 0;
    while (k < n->d_n && n->d_start + k <= index) {
        raft_free(n->d_ent[k].buf.base);
        k++;
    }
    memmove(n->d_ent, n->d_ent + k, (n->d_n - k) * sizeof *n->d_ent);
    n->d_n -= k;
    n->d_start += k;
    if (n->d_n == 0 && n->d_start <= index)
        n->d_start = index + 1;
}

/* Write one entry at index (after everything before it). */
static void disk_put(sim_node *n, raft_index index, const struct raft_entry *e)
{
    if (n->d_n == 0)
        n->d_start = index;
    disk_truncate(n, index);
    assert(n->d_n == 0 || n->d_start + n->d_n == index);
    if (n->d_n == 0)
        n->d_start = index;
    n->d_ent = grow(n->d_ent, &n->d_cap, n->d_n + 1, sizeof *n->d_ent);
    struct raft_entry *d = &n->d_ent[n->d_n++];
    d->term = e->term;
    d->type = e->type;
    d->buf.len = e->buf.len;
    d->buf.base = raft_malloc(e->buf.len ? e->buf.len : 1);
    assert(d->buf.base != NULL);
    if (e->buf.len)
        memcpy(d->buf.base, e->buf.base, e->buf.len);
    d->batch = NULL;
}

/* Deep-copy a snapshot into one raft_malloc'd buffer, the layout raft's
 * load expects (n_bufs == 1). */
static struct raft_snapshot *snap_copy(const struct raft_snapshot *src)
{
    struct raft_snapshot *d = raft_calloc(1, sizeof *d);
    assert(d != NULL);
    d->index = src->index;
    d->term = src->term;
    d->configuration_index = src->configuration_index;
    raft_configuration_init(&d->configuration);
    for (unsigned k = 0; k < src->configuration.n; k++) {
        const struct raft_server *sv = &src->configuration.servers[k];
        int rv = raft_configuration_add(&d->configuration, sv->id, sv->address,
                                        sv->role);
        assert(rv == 0);
        (void)rv;
    }
    size_t len = 0;
    for (unsigned k = 0; k < src->n_bufs; k++)
        len += src->bufs[k].len;
    d->bufs = raft_malloc(sizeof *d->bufs);
    assert(d->bufs != NULL);
    d->bufs[0].base = raft_malloc(len ? len : 1);
    assert(d->bufs[0].base != NULL);
    d->bufs[0].len = len;
    uint8_t *p = d->bufs[0].base;
    for (unsigned k = 0; k < src->n_bufs; k++) {
        memcpy(p, src->bufs[k].base, src->bufs[k].len);
        p += src->bufs[k].len;
    }
    d->n_bufs = 1;
    return d;
}

/* Free a snapshot made by snap_copy. */
static void snap_free(struct raft_snapshot *sn)
{
    if (sn == NULL)
        return;
    raft_configuration_close(&sn->configuration);
    for (unsigned k = 0; k < sn->n_bufs; k++)
        raft_free(sn->bufs[k].base);
    raft_free(sn->bufs);
    raft_free(sn);
}

/* Count a disk write against the armed fault; true when this one fails
 * (the node then crash-stops, as the server's raft_io wrapper aborts). */
static bool disk_fault_hit(sim_node *n)
{
    if (n->disk_fault < 0)
        return false;
    if (n->disk_fault > 0) {
        n->disk_fault--;
        return false;
    }
    n->disk_fault = -1;
    n->crashed = true;
    return true;
}

/* Forward init. */
static int wio_init(struct raft_io *io, raft_id id, const char *address)
{
    sim_node *n = io_node(io);
    n->inner->data = io->data;
    return n->inner->init(n->inner, id, address);
}

/* Forward close; the fixture calls back at once. */
static void wio_close(struct raft_io *io, raft_io_close_cb cb)
{
    sim_node *n = io_node(io);
    n->inner->close(n->inner, cb);
}

/* Load from the shadow disk, in the shape raft_start expects: a snapshot
 * with one buffer, and entries from start_index, each its own batch. */
static int wio_load(struct raft_io *io, raft_term *term, raft_id *voted_for,
                    struct raft_snapshot **snapshot, raft_index *start_index,
                    struct raft_entry *entries[], size_t *n_entries)
{
    sim_node *n = io_node(io);
    *term = n->d_term;
    *voted_for = n->d_vote;
    *snapshot = n->d_snap ? snap_copy(n->d_snap) : NULL;
    *start_index = n->d_n ? n->d_start : (n->d_snap ? n->d_snap->index + 1 : 1);
    *n_entries = n->d_n;
    *entries = NULL;
    if (n->d_n) {
        *entries = raft_calloc(n->d_n, sizeof **entries);
        assert(*entries != NULL);
        for (size_t k = 0; k < n->d_n; k++) {
            struct raft_entry *e = &(*entries)[k];
            e->term = n->d_ent[k].term;
            e->type = n->d_ent[k].type;
            e->buf.len = n->d_ent[k].buf.len;
            e->buf.base = raft_malloc(e->buf.len ? e->buf.len : 1);
            assert(e->buf.base != NULL);
            memcpy(e->buf.base, n->d_ent[k].buf.base, e->buf.len);
            e->batch = e->buf.base;
        }
    }
    n->submit_last = n->d_n ? n->d_start + n->d_n - 1
                            : (n->d_snap ? n->d_snap->index : 0);
    return 0;
}

/* Forward start. */
static int wio_start(struct raft_io *io, unsigned msecs, raft_io_tick_cb tick,
                     raft_io_recv_cb recv)
{
    sim_node *n = io_node(io);
    int rv = n->inner->start(n->inner, msecs, tick, recv);
    if (rv != 0)
        n->crashed = true;
    return rv;
}

/* Bootstrap: forward, and persist the first configuration entry. */
static int wio_bootstrap(struct raft_io *io,
                         const struct raft_configuration *conf)
{
    sim_node *n = io_node(io);
    int rv = n->inner->bootstrap(n->inner, conf);
    if (rv != 0)
        return rv;
    struct raft_entry e;
    memset(&e, 0, sizeof e);
    e.term = 1;
    e.type = RAFT_CHANGE;
    rv = raft_configuration_encode(conf, &e.buf);
    assert(rv == 0);
    disk_put(n, 1, &e);
    raft_free(e.buf.base);
    n->d_term = 1;
    n->d_vote = 0;
    n->submit_last = 1;
    return 0;
}

/* Recover is not used by the sim. */
static int wio_recover(struct raft_io *io,
                       const struct raft_configuration *conf)
{
    (void)io;
    (void)conf;
    return RAFT_IOERR;
}

/* Persist the term; a failure is a failed disk write (crash-stop). */
static int wio_set_term(struct raft_io *io, raft_term term)
{
    sim_node *n = io_node(io);
    /* Off by default: with these faults libraft 0.15 crashes in its own
     * error path (bad free, seeds 10140 and 10399); see docs/testing.md. */
    if (n->sim->o.vote_faults && disk_fault_hit(n))
        return RAFT_IOERR;
    int rv = n->inner->set_term(n->inner, term);
    if (rv != 0) {
        n->crashed = true;
        return rv;
    }
    n->d_term = term;
    n->d_vote = 0;
    return 0;
}

/* Persist the vote; a failure is a failed disk write (crash-stop). */
static int wio_set_vote(struct raft_io *io, raft_id id)
{
    sim_node *n = io_node(io);
    /* Off by default: with these faults libraft 0.15 crashes in its own
     * error path (bad free, seeds 10140 and 10399); see docs/testing.md. */
    if (n->sim->o.vote_faults && disk_fault_hit(n))
        return RAFT_IOERR;
    int rv = n->inner->set_vote(n->inner, id);
    if (rv != 0) {
        n->crashed = true;
        return rv;
    }
    n->d_vote = id;
    return 0;
}

/* Queue a disk op behind the ones submitted earlier. */
static sim_diskop *op_push(sim_node *n, int kind)
{
    sim_diskop *op = calloc(1, sizeof *op);
    assert(op != NULL);
    op->kind = kind;
    if (n->ops_tail)
        n->ops_tail->next = op;
    else
        n->ops_head = op;
    n->ops_tail = op;
    return op;
}

/* Let completed ops take effect on the shadow disk, oldest first, stopping
 * at the first one still in flight. */
static void ops_drain(sim_node *n)
{
    while (n->ops_head && n->ops_head->done) {
        sim_diskop *op = n->ops_head;
        n->ops_head = op->next;
        if (n->ops_head == NULL)
            n->ops_tail = NULL;
        if (op->kind == OP_APPEND) {
            for (unsigned k = 0; k < op->n; k++) {
                disk_put(n, op->first + k, &op->entries[k]);
                raft_free(op->entries[k].buf.base);
            }
            free(op->entries);
        } else if (op->kind == OP_TRUNCATE) {
            disk_truncate(n, op->index);
        } else if (op->snap != NULL) {
            raft_index idx = op->snap->index;
            snap_free(n->d_snap);
            n->d_snap = op->snap;
            if (op->trailing == 0) {
                /* an installed snapshot replaces the whole log */
                disk_truncate(n, 0);
                n->d_start = idx + 1;
            } else if (idx > op->trailing) {
                disk_drop_prefix(n, idx - op->trailing);
            }
        }
        free(op);
    }
}

/* Append completion: take a copy of the entries (raft may free them once
 * called back), let them land in order, then call raft. */
static void wio_append_cb(struct raft_io_append *req, int status)
{
    sim_node *n;
    sim_pending p = pend_take(req, &n);
    sim_diskop *op = p.op;
    if (status != 0) {
        n->crashed = true;
        op->n = 0; /* nothing written */
    } else if (op->n) {
        op->entries = calloc(op->n, sizeof *op->entries);
        assert(op->entries != NULL);
        for (unsigned k = 0; k < op->n; k++) {
            const struct raft_entry *e = &op->rentries[k];
            op->entries[k].term = e->term;
            op->entries[k].type = e->type;
            op->entries[k].buf.len = e->buf.len;
            op->entries[k].buf.base = raft_malloc(e->buf.len ? e->buf.len : 1);
            assert(op->entries[k].buf.base != NULL);
            if (e->buf.len)
                memcpy(op->entries[k].buf.base, e->buf.base, e->buf.len);
        }
    }
    op->done = true;
    ops_drain(n);
    if (p.cb.append != NULL)
        p.cb.append(req, status);
}

/* Append: forward, remembering at which index the entries go. */
static int wio_append(struct raft_io *io, struct raft_io_append *req,
                      const struct raft_entry entries[], unsigned n_entries,
                      raft_io_append_cb cb)
{
    sim_node *n = io_node(io);
    if (disk_fault_hit(n))
        return RAFT_IOERR;
    int rv = n->inner->append(n->inner, req, entries, n_entries, wio_append_cb);
    if (rv != 0) {
        n->crashed = true;
        return rv;
    }
    sim_pending *p = pend_add(n, PEND_APPEND, req);
    p->cb.append = cb;
    p->op = op_push(n, OP_APPEND);
    p->op->rentries = entries;
    p->op->n = n_entries;
    p->op->first = n->submit_last + 1;
    n->submit_last += n_entries;
    return 0;
}

/* Truncate: an op on the shadow only (the fixture's own truncate
 * mis-indexes after a snapshot), in order behind earlier appends. */
static int wio_truncate(struct raft_io *io, raft_index index)
{
    sim_node *n = io_node(io);
    sim_diskop *op = op_push(n, OP_TRUNCATE);
    op->index = index;
    op->done = true;
    ops_drain(n);
    n->submit_last = index - 1;
    return 0;
}

/* Forward send completion. */
static void wio_send_cb(struct raft_io_send *req, int status)
{
    sim_node *n;
    sim_pending p = pend_take(req, &n);
    if (p.cb.send != NULL)
        p.cb.send(req, status);
}

/* Send: forward (a send failure is a network error, not a crash). */
static int wio_send(struct raft_io *io, struct raft_io_send *req,
                    const struct raft_message *message, raft_io_send_cb cb)
{
    sim_node *n = io_node(io);
    int rv = n->inner->send(n->inner, req, message, wio_send_cb);
    if (rv != 0)
        return rv;
    sim_pending *p = pend_add(n, PEND_SEND, req);
    p->cb.send = cb;
    return 0;
}

/* Snapshot-put completion: copy the snapshot (raft frees its own after
 * the callback) and let it take effect in order: keep `trailing` entries
 * before it, none for an installed snapshot (trailing 0). */
static void wio_snap_put_cb(struct raft_io_snapshot_put *req, int status)
{
    sim_node *n;
    sim_pending p = pend_take(req, &n);
    if (status != 0)
        n->crashed = true;
    else
        p.op->snap = snap_copy(p.op->rsnap);
    p.op->done = true;
    ops_drain(n);
    if (p.cb.snap_put != NULL)
        p.cb.snap_put(req, status);
}

/* Snapshot put: forward. */
static int wio_snap_put(struct raft_io *io, unsigned trailing,
                        struct raft_io_snapshot_put *req,
                        const struct raft_snapshot *snapshot,
                        raft_io_snapshot_put_cb cb)
{
    sim_node *n = io_node(io);
    int rv = n->inner->snapshot_put(n->inner, trailing, req, snapshot,
                                    wio_snap_put_cb);
    if (rv != 0) {
        n->crashed = true;
        return rv;
    }
    sim_pending *p = pend_add(n, PEND_SNAP_PUT, req);
    p->cb.snap_put = cb;
    p->op = op_push(n, OP_SNAPSHOT);
    p->op->trailing = trailing;
    p->op->rsnap = snapshot;
    if (trailing == 0)
        n->submit_last = snapshot->index;
    return 0;
}

/* Snapshot-get completion: forward (the fixture's copy holds the same
 * bytes as our shadow). */
static void wio_snap_get_cb(struct raft_io_snapshot_get *req,
                            struct raft_snapshot *snapshot, int status)
{
    sim_node *n;
    sim_pending p = pend_take(req, &n);
    if (p.cb.snap_get != NULL)
        p.cb.snap_get(req, snapshot, status);
}

/* Snapshot get: forward. */
static int wio_snap_get(struct raft_io *io, struct raft_io_snapshot_get *req,
                        raft_io_snapshot_get_cb cb)
{
    sim_node *n = io_node(io);
    int rv = n->inner->snapshot_get(n->inner, req, wio_snap_get_cb);
    if (rv != 0)
        return rv;
    sim_pending *p = pend_add(n, PEND_SNAP_GET, req);
    p->cb.snap_get = cb;
    return 0;
}

/* Forward time: the node's clock is the fixture's (raft's timers). */
static raft_time wio_time(struct raft_io *io)
{
    sim_node *n = io_node(io);
    return n->inner->time(n->inner);
}

/* Forward random (the fixture returns its configured election timeout). */
static int wio_random(struct raft_io *io, int min, int max)
{
    sim_node *n = io_node(io);
    return n->inner->random(n->inner, min, max);
}

/* Forward async work (unused: our fsm takes snapshots synchronously). */
static int wio_async_work(struct raft_io *io, struct raft_io_async_work *req,
                          raft_io_async_work_cb cb)
{
    sim_node *n = io_node(io);
    return n->inner->async_work(n->inner, req, cb);
}

/* Set up the wrapper of a node around the fixture's io. */
static void wio_setup(sim_node *n, struct raft_io *inner)
{
    memset(&n->wio, 0, sizeof n->wio);
    n->inner = inner;
    n->wio.version = 2;
    n->wio.impl = n;
    n->wio.init = wio_init;
    n->wio.close = wio_close;
    n->wio.load = wio_load;
    n->wio.start = wio_start;
    n->wio.bootstrap = wio_bootstrap;
    n->wio.recover = wio_recover;
    n->wio.set_term = wio_set_term;
    n->wio.set_vote = wio_set_vote;
    n->wio.append = wio_append;
    n->wio.truncate = wio_truncate;
    n->wio.send = wio_send;
    n->wio.snapshot_put = wio_snap_put;
    n->wio.snapshot_get = wio_snap_get;
    n->wio.time = wio_time;
    n->wio.random = wio_random;
    n->wio.async_work = wio_async_work;
}

/* ------------------------------------------------------------------------
 * 3/4. The fsm of a node, the global history and the lease model
 * ------------------------------------------------------------------------ */

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
static fence_fsm *node_fsm_new(sim_node *n)
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
static uint64_t node_snap_hash(sim_node *n)
{
    size_t need = fence_fsm_snapshot_size(n->fsm);
    n->snapbuf = grow(n->snapbuf, &n->snapcap, need, 1);
    size_t len = fence_fsm_snapshot(n->fsm, n->snapbuf, n->snapcap);
    return fnv(FNV_INIT, n->snapbuf, len);
}

/* Return the model lease with this id, growing the table (ids are small
 * and dense: the fsm numbers leases from 1). */
static sim_mlease *mlease(sim *s, uint64_t id)
{
    if (id > 10000000)
        return NULL;
    s->mleases = grow(s->mleases, &s->cap_mleases, (size_t)id + 1,
                      sizeof *s->mleases);
    return &s->mleases[id];
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
static sim_grant *grant_find(sim *s, uint64_t token)
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
static void grant_add(sim *s, uint64_t token, uint64_t index, uint64_t lease,
                      const uint8_t *name, uint16_t name_len)
{
    if (s->n_grants > 0 && s->grants[s->n_grants - 1].token >= token) {
        sim_fail(s, "token %" PRIu64 " at index %" PRIu64
                    " is not above the previous token %" PRIu64,
                 token, index, s->grants[s->n_grants - 1].token);
        return;
    }
    s->grants = grow(s->grants, &s->cap_grants, s->n_grants + 1,
                     sizeof *s->grants);
    sim_grant *g = &s->grants[s->n_grants++];
    g->token = token;
    g->index = index;
    g->lease = lease;
    g->name_len = name_len < sizeof g->name ? name_len : sizeof g->name;
    memcpy(g->name, name, g->name_len);
    s->res->grants++;
}

/* One grant seen while applying an entry (from a result or an event). */
typedef struct seen_grant {
    uint64_t token;      /* token */
    uint64_t lease;      /* lease */
    const uint8_t *name; /* lock name (NULL for an event: name unknown) */
    uint16_t name_len;   /* its length */
    bool from_event;     /* granted to a waiter */
} seen_grant;

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
 * (ids grow), or one it joined, whose deadline it shares. */
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
    s->mwaits = grow(s->mwaits, &s->cap_mwaits, s->n_mwaits + 1,
                     sizeof *s->mwaits);
    sim_mwait *w = &s->mwaits[s->n_mwaits++];
    w->wait_id = wait_id;
    w->req_id = req_id;
    w->wait_ms = wait_ms;
    w->deadline = deadline;
    w->cancelled = false;
}

/* The lease model, run once per index (by the first node applying it):
 * check every new grant went to a live lease and keep lease deadlines from
 * the applied commands alone.  Rules (fsm.h "Time"): now = max(previous
 * now, entry timestamp); everything with deadline <= now is expired before
 * the commands run; a grant needs deadline > now; LEADER_START sets every
 * live lease's deadline to now + ttl; KEEPALIVE sets now + ttl. */
static void model_entry(sim *s, uint64_t index, uint64_t ts,
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
        if (l->live && l->deadline <= now && !starts)
            l->live = false;
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
        case FENCE_CMD_LEASE_GRANT:
        case FENCE_CMD_ACQUIRE:
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
                l->dedicated = c->type == FENCE_CMD_ACQUIRE;
                if (c->type == FENCE_CMD_ACQUIRE &&
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
        case FENCE_CMD_UNLOCK:
            /* Unlocking a dedicated (ACQUIRE) lease's lock revokes it. */
            if (r->status == FENCE_ST_OK && r->value == 1) {
                sim_grant *g = grant_find(s, c->token);
                l = g ? mlease(s, g->lease) : NULL;
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
        if ((c->type == FENCE_CMD_LOCK || c->type == FENCE_CMD_ACQUIRE) &&
            r->status == FENCE_ST_OK && r->token > nd->last_token) {
            uint64_t lid = c->type == FENCE_CMD_LOCK ? c->lease : r->lease;
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

/* raft_fsm.apply: the node's leader module (src/leader/) applies
 * the entry with the real fsm and answers the waits it ends; then check it
 * against the history (or record it as the history when this node is
 * first at this index). */
static int rfsm_apply(struct raft_fsm *rf, const struct raft_buffer *buf,
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
    while (nc < SIM_RESULTS_MAX && fence_entry_next(&it, &cmds[nc]) == 1)
        nc++;
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
    for (unsigned k = 0; k < nc; k++) {
        const fence_result *res = &results[k];
        if ((cmds[k].type != FENCE_CMD_LOCK &&
             cmds[k].type != FENCE_CMD_ACQUIRE) || res->status != FENCE_ST_OK)
            continue;
        uint64_t lid = cmds[k].type == FENCE_CMD_LOCK ? cmds[k].lease
                                                       : res->lease;
        if (res->token <= before) {
            sim_grant *g = grant_find(s, res->token);
            if (g == NULL || g->lease != lid || g->name_len != cmds[k].name_len ||
                memcmp(g->name, cmds[k].name, g->name_len) != 0)
                sim_fail(s, "index %" PRIu64 ": old token %" PRIu64
                            " reported for lease %" PRIu64
                            " but it was granted to %s lease %" PRIu64,
                         index, res->token, lid, g ? "another lock or" : "no",
                         g ? g->lease : 0);
            continue;
        }
        gr[ng].token = res->token;
        gr[ng].lease = lid;
        gr[ng].name = cmds[k].name;
        gr[ng].name_len = cmds[k].name_len;
        gr[ng].from_event = false;
        ng++;
    }
    for (unsigned k = 0; k < n_ev; k++) {
        const fence_event *ev = &evs[k];
        if (ev->result.status != FENCE_ST_OK)
            continue;
        if (ev->result.token <= before) {
            sim_fail(s, "index %" PRIu64 ": waiter %" PRIu64 " given old token %"
                        PRIu64, index, ev->wait_id, ev->result.token);
            continue;
        }
        gr[ng].token = ev->result.token;
        gr[ng].lease = ev->result.lease;
        gr[ng].name = NULL;
        gr[ng].name_len = 0;
        gr[ng].from_event = true;
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
            if (gr[nu - 1].lease != gr[k].lease)
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
    uint64_t sh = node_snap_hash(nd);
    s->hist = grow(s->hist, &s->hist_cap, (size_t)index + 1, sizeof *s->hist);
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
        for (unsigned k = 0; k < ng && !s->res->failed; k++) {
            const uint8_t *nm = gr[k].name;
            uint16_t nl = gr[k].name_len;
            if (nm == NULL) {
                /* An event does not carry the name: ask the fsm which lock
                 * now holds this token. */
                static const char *names[SIM_LOCKS] = {"lock0", "lock1",
                                                       "lock2", "lock3",
                                                       "lock4"};
                for (unsigned L = 0; L < SIM_LOCKS; L++) {
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
            grant_add(s, gr[k].token, index, gr[k].lease, nm, nl);
        }
        model_entry(s, index, ts, cmds, results, nc, evs,
                    (unsigned)n_ev, gr, ng, nd);
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
static int rfsm_snapshot(struct raft_fsm *rf, struct raft_buffer *bufs[],
                         unsigned *n_bufs)
{
    sim_node *nd = rf->data;
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
static int rfsm_restore(struct raft_fsm *rf, struct raft_buffer *buf)
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
    uint64_t sh = node_snap_hash(nd);
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

/* ------------------------------------------------------------------------
 * 5. The server: src/leader/ on each node, through its ops
 *
 * The sim links the same leader module as fenced and is its shell here,
 * as loop.c is in the daemon: ops->propose is raft_apply on the fixture,
 * ops->now_ms the node's monotonic clock, and the reply sink hands answers
 * to the simulated clients' pipelines.  The rule for calling raft
 * (leader.h) is checked from the outside too: s->in_cb counts raft
 * callbacks in progress, and the ops that call raft fail the run when it
 * is not zero.
 * ------------------------------------------------------------------------ */

/* The node's monotonic clock: fixture time plus a fixed per-node offset
 * (clocks of different machines do not agree). */
static uint64_t node_clock(sim *s, sim_node *n)
{
    return (uint64_t)((int64_t)s->fx.time + n->clock_offset);
}

/* raft's status as the leader module's (as loop.c maps it). */
static int sim_lstatus(int rv)
{
    if (rv == 0)
        return FENCE_LST_OK;
    if (rv == RAFT_NOTLEADER)
        return FENCE_LST_NOTLEADER;
    if (rv == RAFT_SHUTDOWN)
        return FENCE_LST_SHUTDOWN;
    return FENCE_LST_UNKNOWN;
}

/* Track a raft request made for a node's module. */
static sim_req_raft *raft_req_new(sim *s, sim_node *n, void *tag)
{
    sim_req_raft *q = calloc(1, sizeof *q);
    assert(q != NULL);
    q->node = n;
    q->tag = tag;
    q->next = s->raft_reqs;
    if (s->raft_reqs != NULL)
        s->raft_reqs->prev = q;
    s->raft_reqs = q;
    return q;
}

/* Forget a tracked raft request. */
static void raft_req_free(sim *s, sim_req_raft *q)
{
    if (q->prev != NULL)
        q->prev->next = q->next;
    else
        s->raft_reqs = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    free(q);
}

/* The rule: nothing calls raft from inside a raft callback. */
static void check_rule(sim *s, const char *what)
{
    if (s->in_cb != 0)
        sim_fail(s, "the leader module called raft (%s) from inside a raft "
                    "callback", what);
}

/* raft_apply callback: forward to the module (unless the node restarted
 * since: the process that proposed it is gone). */
static void apply_cb(struct raft_apply *req, int status, void *result)
{
    sim_req_raft *q = req->data;
    sim *s = g_sim;
    sim_node *n = q->node;
    void *tag = q->tag;
    bool stale = q->stale;
    raft_req_free(s, q);
    if (stale)
        return;
    if (status != 0)
        s->res->unknown_batches++;
    s->in_cb++;
    fence__leader_applied(n->leader, tag, sim_lstatus(status), result);
    s->in_cb--;
}

/* ops->propose: the entry into a raft buffer, raft_apply on the fixture. */
static int op_propose(void *ctx, void *tag, const uint8_t *entry, size_t len)
{
    sim_node *n = ctx;
    sim *s = n->sim;
    check_rule(s, "propose");
    struct raft *r = raft_fixture_get(&s->fx, n->i);
    struct raft_buffer buf;
    buf.base = raft_malloc(len);
    assert(buf.base != NULL);
    memcpy(buf.base, entry, len);
    buf.len = len;
    sim_req_raft *q = raft_req_new(s, n, tag);
    q->u.apply.data = q;
    int rv = raft_apply(r, &q->u.apply, &buf, 1, apply_cb);
    if (rv != 0) {
        raft_free(buf.base);
        raft_req_free(s, q);
    }
    return sim_lstatus(rv);
}

/* raft_barrier callback: forward to the module (unless stale). */
static void barrier_cb(struct raft_barrier *req, int status)
{
    sim_req_raft *q = req->data;
    sim *s = g_sim;
    sim_node *n = q->node;
    bool stale = q->stale;
    raft_req_free(s, q);
    if (stale)
        return;
    s->in_cb++;
    fence__leader_barrier_done(n->leader, sim_lstatus(status));
    s->in_cb--;
}

/* ops->barrier. */
static int op_barrier(void *ctx)
{
    sim_node *n = ctx;
    sim *s = n->sim;
    check_rule(s, "barrier");
    sim_req_raft *q = raft_req_new(s, n, NULL);
    q->u.barrier.data = q;
    int rv = raft_barrier(raft_fixture_get(&s->fx, n->i), &q->u.barrier,
                          barrier_cb);
    if (rv != 0) {
        raft_req_free(s, q);
        if (s->o.verbose > 1)
            sim_log(s, "node %u: barrier refused: %s", n->i, raft_strerror(rv));
    }
    return sim_lstatus(rv);
}

/* ops->is_leader: raft's state (a node that is down is not stepped at
 * all, but raft on it may still complete what was in flight). */
static bool op_is_leader(void *ctx)
{
    sim_node *n = ctx;
    return raft_state(raft_fixture_get(&n->sim->fx, n->i)) == RAFT_LEADER;
}

/* ops->voters. */
static unsigned op_voters(void *ctx)
{
    sim_node *n = ctx;
    struct raft *r = raft_fixture_get(&n->sim->fx, n->i);
    unsigned v = 0;
    for (unsigned k = 0; k < r->configuration.n; k++)
        if (r->configuration.servers[k].role == RAFT_VOTER)
            v++;
    return v;
}

/* ops->term. */
static uint64_t op_term(void *ctx)
{
    sim_node *n = ctx;
    return raft_fixture_get(&n->sim->fx, n->i)->current_term;
}

/* ops->now_ms. */
static uint64_t op_now_ms(void *ctx)
{
    sim_node *n = ctx;
    return node_clock(n->sim, n);
}

/* ops->log: the module's lines, when verbose. */
static void op_log(void *ctx, int level, const char *msg)
{
    sim_node *n = ctx;
    (void)level;
    sim_log(n->sim, "node %u: %s", n->i, msg);
    if (strncmp(msg, "leader ready", 12) == 0)
        n->sim->res->leader_terms++;
}

/* The client owning a request handle. */
static sim_client *req_client(sim *s, sim_req *q)
{
    for (unsigned c = 0; c < s->o.clients; c++) {
        sim_client *cl = &s->clients[c];
        if (q >= &cl->pipes[0][0] && q < &cl->pipes[0][0] + 2 * SIM_PIPE_MAX)
            return cl;
    }
    return NULL;
}

/* Record an answer (the client processes answers in order later).  Every
 * handle is answered at most once, and only while its client is still
 * connected to this node. */
static sim_req *answer(sim_node *n, void *req, int kind)
{
    sim *s = n->sim;
    sim_req *q = req;
    sim_client *cl = req_client(s, q);
    if (cl == NULL || cl->node != (int)n->i || !q->sent || q->ans != ANS_NONE) {
        sim_fail(s, "node %u answered a request that is %s", n->i,
                 cl == NULL         ? "not a client's"
                 : cl->node != (int)n->i ? "of a connection closed or elsewhere"
                 : !q->sent         ? "not sent"
                                    : "already answered");
        return NULL;
    }
    q->ans = kind;
    q->state_index = n->last_cmd_index;
    return q;
}

/* Sink: a command's result or a wait's outcome. */
static void op_reply_result(void *ctx, void *req, const fence_result *r,
                            bool from_wait)
{
    sim_req *q = answer(ctx, req, ANS_RESULT);
    if (q == NULL)
        return;
    q->r = *r;
    q->from_wait = from_wait;
}

/* Sink: a read, evaluated now (as cmd.c does) from the node's state. */
static void op_reply_read(void *ctx, void *req, const fence_cmd *cmd)
{
    sim_node *n = ctx;
    sim_req *q = answer(n, req, ANS_READ);
    if (q == NULL)
        return;
    if (cmd->name_len == 0) {
        fence_fsm_lease_state li;
        q->read_ok = fence_fsm_lease_info(n->fsm, cmd->lease,
                                          fence__leader_now(n->leader), &li) == 0;
    } else {
        fence_fsm_lock_state ki;
        q->read_ok = fence_fsm_lock_info(n->fsm, cmd->name, cmd->name_len, &ki);
    }
}

/* Sink: an error. */
static void op_reply_error(void *ctx, void *req, int err)
{
    sim_req *q = answer(ctx, req, ANS_ERROR);
    if (q == NULL)
        return;
    q->err = err;
}

/* The limits every LEADER_START carries (small, so the sim reaches them). */
static void sim_limits(fence_limits *l)
{
    fence_limits_default(l);
    l->leases_max = 40;
    l->locks_max = 4;
    l->waiters_max = 6;
    l->dedup_max = 4096;
}

/* A fresh server process on node n: a new fsm and leader module. */
static void node_server_new(sim_node *n)
{
    fence_leader_ops ops = {
        .ctx = n,
        .propose = op_propose,
        .barrier = op_barrier,
        .is_leader = op_is_leader,
        .voters = op_voters,
        .term = op_term,
        .now_ms = op_now_ms,
        .log = op_log,
        .reply_result = op_reply_result,
        .reply_read = op_reply_read,
        .reply_error = op_reply_error,
    };
    fence_limits lim;
    sim_limits(&lim);
    n->fsm = node_fsm_new(n);
    int rv = fence__leader_create(&ops, n->fsm, &lim, &n->leader);
    assert(rv == 0);
    (void)rv;
    n->timer_at = UINT64_MAX;
}

/* One turn of a node's server loop, as loop.c's check does: fire the
 * leader timer when due, the module's step, re-arm the timer. */
static void node_drive(sim *s, sim_node *n)
{
    if (n->down)
        return; /* a paused or dead process runs nothing */
    assert(s->in_cb == 0);
    if (n->timer_at != UINT64_MAX && node_clock(s, n) >= n->timer_at) {
        n->timer_at = UINT64_MAX;
        fence__leader_timer(n->leader);
    }
    fence__leader_step(n->leader);
    uint64_t delay;
    if (fence__leader_timer_take(n->leader, &delay))
        n->timer_at = delay == UINT64_MAX ? UINT64_MAX : node_clock(s, n) + delay;
}

/* ------------------------------------------------------------------------
 * 6. Simulated clients
 *
 * A client connects to a node that says it is a ready leader (sometimes
 * to any live node), sends a pipeline of 1..SIM_PIPE_MAX requests (writes
 * and reads mixed), and processes the answers strictly in order, as a
 * connection's reply queue delivers them.  It may disconnect at any time
 * (orphaned requests; its waits are cancelled through the log), gives up
 * a wait that takes too long by disconnecting, and retries what had an
 * unknown outcome with the same REQID, on whatever node leads then.
 *
 * Pipeline checks, from the state index each answer came from (the index
 * of the last entry the node had applied): a read sees every earlier
 * write of its pipeline (index >= theirs) and no later one (index <
 * theirs), and every write acknowledged anywhere before it was sent.
 * ------------------------------------------------------------------------ */

/* Pick a node a client can send to: any live node whose module is a ready
 * leader (a stale leader in a minority partition included); now and then
 * any live node, to see the refusals. */
static int pick_node(sim *s)
{
    int cand[SIM_MAX_NODES];
    int nc = 0;
    bool any = rng_pct(&s->rng, 3);
    for (unsigned k = 0; k < s->o.nodes; k++)
        if (!s->nodes[k].down &&
            (any || fence__leader_ready(s->nodes[k].leader)))
            cand[nc++] = (int)k;
    if (nc == 0)
        return -1;
    return cand[rng_range(&s->rng, 0, (uint64_t)nc - 1)];
}

/* Set a request's lock name. */
static void set_name(sim_req *q, unsigned lock)
{
    q->lock = lock;
    memcpy(q->name_buf, "lock", 4);
    q->name_buf[4] = (uint8_t)('0' + lock);
    q->cmd.name = q->name_buf;
    q->cmd.name_len = 5;
}

/* Choose a random new request for a client. */
static void client_new_req(sim *s, sim_client *cl, sim_req *q)
{
    uint64_t *g = &s->rng;
    memset(q, 0, sizeof *q);
    fence_cmd *c = &q->cmd;
    unsigned roll = (unsigned)rng_range(g, 0, 109);
    if (cl->n_leases == 0 && roll < 70)
        roll = 0; /* mostly get a lease first */
    uint64_t some_lease = cl->n_leases
                              ? cl->leases[rng_range(g, 0, cl->n_leases - 1)]
                              : rng_range(g, 1, 40);
    if (roll < 12) {
        c->type = FENCE_CMD_LEASE_GRANT;
        c->ttl_ms = rng_range(g, 300, 4000);
        c->lock_delay_ms = rng_pct(g, 70) ? 0 : rng_range(g, 10, 400);
        if (rng_pct(g, 3))
            c->ttl_ms = 1; /* invalid */
    } else if (roll < 40) {
        c->type = FENCE_CMD_LEASE_KEEPALIVE;
        c->lease = some_lease;
    } else if (roll < 44) {
        c->type = FENCE_CMD_LEASE_REVOKE;
        c->lease = some_lease;
    } else if (roll < 70) {
        c->type = FENCE_CMD_LOCK;
        c->lease = some_lease;
        set_name(q, (unsigned)rng_range(g, 0, SIM_LOCKS - 1));
        c->wait_ms = rng_pct(g, 50) ? 0 : rng_range(g, 50, 3000);
    } else if (roll < 86) {
        c->type = FENCE_CMD_UNLOCK;
        if (cl->n_held && rng_pct(g, 85)) {
            unsigned k = (unsigned)rng_range(g, 0, cl->n_held - 1);
            set_name(q, cl->held[k].lock);
            c->token = cl->held[k].token;
        } else {
            set_name(q, (unsigned)rng_range(g, 0, SIM_LOCKS - 1));
            c->token = rng_range(g, 1, s->model_token + 2);
        }
    } else if (roll < 96) {
        c->type = FENCE_CMD_ACQUIRE;
        set_name(q, (unsigned)rng_range(g, 0, SIM_LOCKS - 1));
        c->ttl_ms = rng_range(g, 300, 4000);
        c->lock_delay_ms = rng_pct(g, 70) ? 0 : rng_range(g, 10, 400);
        c->wait_ms = rng_pct(g, 50) ? 0 : rng_range(g, 50, 3000);
    } else if (roll < 99) {
        c->type = FENCE_CMD_CANCEL;
        c->wait_id = rng_range(g, 1, 50); /* probably not ours */
    } else {
        /* A read: LEASE.INFO or LOCK.INFO. */
        q->is_read = true;
        if (rng_pct(g, 50))
            c->lease = some_lease;
        else
            set_name(q, (unsigned)rng_range(g, 0, SIM_LOCKS - 1));
        return;
    }
    if (rng_pct(g, 50)) {
        c->flags |= FENCE_CMD_F_REQID;
        c->req_id = ((uint64_t)(cl->id + 1) << 40) | ++cl->seq;
    }
}

/* Record a grant a client was told about. */
static void client_ack_grant(sim *s, sim_client *cl, unsigned lock,
                             uint64_t token, uint64_t lease)
{
    s->acks = grow(s->acks, &s->cap_acks, s->n_acks + 1, sizeof *s->acks);
    s->acks[s->n_acks].token = token;
    s->acks[s->n_acks].lease = lease;
    s->acks[s->n_acks].lock = lock;
    s->acks[s->n_acks].time_ms = s->fx.time;
    s->n_acks++;
    s->res->acked_grants++;
    if (cl->n_held < SIM_CLIENT_HELD) {
        cl->held[cl->n_held].lock = lock;
        cl->held[cl->n_held].token = token;
        cl->held[cl->n_held].lease = lease;
        cl->n_held++;
    }
}

/* What a client learns from the result of its command. */
static void client_result(sim *s, sim_client *cl, const sim_req *q)
{
    const fence_cmd *c = &q->cmd;
    const fence_result *r = &q->r;
    s->res->acked_cmds++;
    if (q->from_wait)
        s->res->wait_answers++;
    switch (c->type) {
    case FENCE_CMD_LEASE_GRANT:
        if (r->status == FENCE_ST_OK && cl->n_leases < SIM_CLIENT_LEASES)
            cl->leases[cl->n_leases++] = r->lease;
        break;
    case FENCE_CMD_LEASE_KEEPALIVE:
    case FENCE_CMD_LEASE_REVOKE:
        if (r->status == FENCE_ST_NOLEASE ||
            c->type == FENCE_CMD_LEASE_REVOKE) {
            for (unsigned k = 0; k < cl->n_leases; k++)
                if (cl->leases[k] == c->lease)
                    cl->leases[k] = cl->leases[--cl->n_leases];
            for (unsigned k = 0; k < cl->n_held;)
                if (cl->held[k].lease == c->lease)
                    cl->held[k] = cl->held[--cl->n_held];
                else
                    k++;
        }
        break;
    case FENCE_CMD_LOCK:
    case FENCE_CMD_ACQUIRE:
        if (r->status == FENCE_ST_OK)
            client_ack_grant(s, cl, q->lock, r->token,
                             c->type == FENCE_CMD_LOCK ? c->lease : r->lease);
        break;
    case FENCE_CMD_UNLOCK:
        for (unsigned k = 0; k < cl->n_held; k++)
            if (cl->held[k].token == c->token) {
                cl->held[k] = cl->held[--cl->n_held];
                break;
            }
        break;
    default:
        break;
    }
}

/* Queue a request to be sent again (same command, same REQID). */
static void client_retry(sim_client *cl, const sim_req *q)
{
    if (cl->n_retry >= SIM_PIPE_MAX)
        return;
    sim_req *d = &cl->retry[cl->n_retry++];
    *d = *q;
    if (d->cmd.name_len)
        d->cmd.name = d->name_buf;
    d->sent = false;
    d->ans = ANS_NONE;
}

/* An answer's state index against the rest of its pipeline: a read sees
 * its pipeline's earlier writes and no later one, and every write that was
 * acknowledged anywhere before it was sent.  Writes answered by a wait's
 * outcome are left out (their command applied at an earlier index). */
static void check_pipeline(sim *s, sim_client *cl, unsigned k)
{
    const sim_req *q = &cl->pipe[k];
    if (q->ans == ANS_READ) {
        if (q->state_index < q->floor_index)
            sim_fail(s, "client %u: a read was answered from index %" PRIu64
                        " but index %" PRIu64 " was acknowledged before it "
                        "was sent", cl->id, q->state_index, q->floor_index);
        for (unsigned j = 0; j < cl->n_pipe; j++) {
            const sim_req *w = &cl->pipe[j];
            if (j == k || w->ans != ANS_RESULT || w->from_wait)
                continue;
            if (j < k && w->state_index > q->state_index)
                sim_fail(s, "client %u: a read was answered from index %" PRIu64
                            ", before the write ahead of it in its pipeline "
                            "(applied at index %" PRIu64 ")",
                         cl->id, q->state_index, w->state_index);
            if (j > k && w->state_index <= q->state_index)
                sim_fail(s, "client %u: a read answered from index %" PRIu64
                            " saw the write behind it in its pipeline "
                            "(applied at index %" PRIu64 ")",
                         cl->id, q->state_index, w->state_index);
        }
        s->res->reads++;
    }
}

/* The current pipeline is over: nothing of it may be answered any more;
 * the next one uses the other half. */
static void pipe_end(sim_client *cl)
{
    for (unsigned k = 0; k < SIM_PIPE_MAX; k++)
        cl->pipe[k].sent = false;
    cl->n_pipe = cl->n_done = 0;
    cl->pipe = cl->pipe == cl->pipes[0] ? cl->pipes[1] : cl->pipes[0];
}

/* Process the answers at the head of the pipeline, in order. */
static void client_process(sim *s, sim_client *cl)
{
    if (cl->n_pipe == 0)
        return;
    while (cl->n_done < cl->n_pipe && cl->pipe[cl->n_done].ans != ANS_NONE) {
        sim_req *q = &cl->pipe[cl->n_done];
        if (q->ans == ANS_RESULT) {
            assert(q->r.status != FENCE_ST_QUEUED);
            client_result(s, cl, q);
            if (!q->from_wait && q->state_index > s->acked_index)
                s->acked_index = q->state_index;
        } else if (q->ans == ANS_ERROR) {
            if (q->err == FENCE_LERR_UNKNOWN || q->err == FENCE_LERR_RESTORED) {
                s->res->unknown_outcomes++;
                /* Retry only what is idempotent by request id. */
                if (q->cmd.flags & FENCE_CMD_F_REQID)
                    client_retry(cl, q);
            } else if (q->err == FENCE_LERR_UNAVAILABLE && !q->is_read &&
                       q->cmd.type != FENCE_CMD_CANCEL) {
                client_retry(cl, q); /* never applied: resend as it is */
            }
        }
        cl->n_done++;
    }
    if (cl->n_done < cl->n_pipe)
        return;
    /* Every answer is in: check the pipeline as a whole. */
    for (unsigned k = 0; k < cl->n_pipe; k++)
        check_pipeline(s, cl, k);
    pipe_end(cl);
    cl->next_at = s->fx.time + rng_range(&s->rng, 0, 300);
}

/* Close the client's connection: the node's module forgets its requests
 * (and cancels their waits through the log); those unanswered have an
 * unknown outcome, and the client retries the ones with a REQID. */
static void client_disconnect(sim *s, sim_client *cl)
{
    if (cl->node < 0)
        return;
    sim_node *n = &s->nodes[cl->node];
    fence__leader_conn_close(n->leader, &cl->lconn);
    for (unsigned k = cl->n_done; k < cl->n_pipe; k++) {
        sim_req *q = &cl->pipe[k];
        if (q->ans == ANS_NONE && !q->is_read &&
            (q->cmd.flags & FENCE_CMD_F_REQID) && rng_pct(&s->rng, 70))
            client_retry(cl, q);
    }
    if (cl->n_pipe > cl->n_done)
        s->res->disconnects++;
    cl->node = -1;
    pipe_end(cl);
    fence__leader_conn_init(&cl->lconn);
    cl->next_at = s->fx.time + rng_range(&s->rng, 10, 300);
}

/* Let a client act: process answers, give up a wait, disconnect at
 * random, or send its next pipeline (retries first). */
static void client_drive(sim *s, sim_client *cl)
{
    client_process(s, cl);
    if (cl->n_pipe > 0) {
        /* Outstanding requests: maybe go away (orphans, CANCEL). */
        if (s->fx.time >= cl->give_up_at ||
            (s->traffic && rng_pct(&s->rng, 1) && rng_pct(&s->rng, 20)))
            client_disconnect(s, cl);
        return;
    }
    if (s->fx.time < cl->next_at)
        return;
    if (cl->n_retry == 0 && !s->traffic)
        return;
    int node = pick_node(s);
    if (node < 0) {
        cl->next_at = s->fx.time + 50;
        return;
    }
    if (cl->node != node) {
        client_disconnect(s, cl);
        cl->node = node;
    }
    sim_node *n = &s->nodes[node];
    /* The pipeline: the retries, or 1..SIM_PIPE_MAX new requests. */
    if (cl->n_retry > 0) {
        for (unsigned k = 0; k < cl->n_retry; k++) {
            cl->pipe[k] = cl->retry[k];
            if (cl->pipe[k].cmd.name_len)
                cl->pipe[k].cmd.name = cl->pipe[k].name_buf;
        }
        cl->n_pipe = cl->n_retry;
        cl->n_retry = 0;
    } else {
        unsigned len = (unsigned)rng_range(&s->rng, 1, SIM_PIPE_MAX);
        for (unsigned k = 0; k < len; k++)
            client_new_req(s, cl, &cl->pipe[k]);
        cl->n_pipe = len;
    }
    cl->n_done = 0;
    uint64_t wait_max = 0;
    for (unsigned k = 0; k < cl->n_pipe; k++)
        if (cl->pipe[k].cmd.wait_ms > wait_max)
            wait_max = cl->pipe[k].cmd.wait_ms;
    cl->give_up_at = s->fx.time + wait_max + 3000;
    /* Sent one by one: an answer may come back at once (refusals), and a
     * disconnect cannot happen in between (only this function does it). */
    for (unsigned k = 0; k < cl->n_pipe; k++) {
        sim_req *q = &cl->pipe[k];
        q->sent = true;
        q->ans = ANS_NONE;
        q->floor_index = s->acked_index;
        fence__leader_submit(n->leader, &cl->lconn, q, &q->cmd, q->is_read);
    }
    client_process(s, cl);
}

/* ------------------------------------------------------------------------
 * 7. Faults
 * ------------------------------------------------------------------------ */

/* Make the fixture's links match the partition table and liveness. */
static void net_apply(sim *s)
{
    for (unsigned a = 0; a < s->o.nodes; a++)
        for (unsigned b = 0; b < s->o.nodes; b++) {
            if (a == b)
                continue;
            bool want = s->part[a][b] || s->nodes[a].down || s->nodes[b].down;
            if (raft_fixture_saturated(&s->fx, a, b) != want) {
                if (want)
                    raft_fixture_saturate(&s->fx, a, b);
                else
                    raft_fixture_desaturate(&s->fx, a, b);
            }
        }
}

/* Take a node down (pause or crash). */
static void node_down(sim *s, sim_node *n)
{
    if (n->down)
        return;
    raft_fixture_kill(&s->fx, n->i);
    n->down = true;
    net_apply(s);
}

/* Restart a node that is down and has no I/O in flight: close its raft
 * (failing its pending proposals), throw away its fsm, and start again
 * from what its disk holds, as a restarted process would. */
static void node_restart(sim *s, sim_node *n)
{
    struct raft *r = raft_fixture_get(&s->fx, n->i);
    assert(n->down && n->n_pend == 0);
    /* The process died: its clients' connections are gone, and whatever
     * raft still completes of its requests reaches nobody. */
    for (unsigned c = 0; c < s->o.clients; c++)
        if (s->clients[c].node == (int)n->i)
            client_disconnect(s, &s->clients[c]);
    for (sim_req_raft *q = s->raft_reqs; q != NULL; q = q->next)
        if (q->node == n)
            q->stale = true;
    raft_close(r, NULL);
    n->transfer_busy = false;
    fence__leader_destroy(n->leader);
    fence_fsm_destroy(n->fsm);
    node_server_new(n);
    n->last_cmd_index = 0;
    n->last_token = 0;
    n->crashed = false;
    int rv = raft_init(r, &n->wio, &n->rfsm, n->i + 1, s->fx.servers[n->i].address);
    assert(rv == 0);
    raft_set_election_timeout(r, SIM_ELECTION_MS);
    raft_set_heartbeat_timeout(r, SIM_HEARTBEAT_MS);
    raft_set_pre_vote(r, !s->o.no_pre_vote);
    raft_set_snapshot_threshold(r, 32);
    raft_set_snapshot_trailing(r, 8);
    rv = raft_start(r);
    s->res->restarts++;
    if (rv != 0 || n->crashed) {
        /* start itself hit a disk fault: stay down, try again later */
        raft_close(r, NULL);
        rv = raft_init(r, &n->wio, &n->rfsm, n->i + 1,
                       s->fx.servers[n->i].address);
        assert(rv == 0);
        n->crashed = false;
        n->up_at = s->fx.time + 500;
        return;
    }
    sim_log(s, "node %u restarted", n->i);
    n->restart_wanted = false;
    raft_fixture_revive(&s->fx, n->i);
    n->down = false;
    net_apply(s);
}

/* Transfer callback: record that it is over. */
static void transfer_cb(struct raft_transfer *req)
{
    sim_node *n = req->data;
    n->transfer_busy = false;
}

/* Whether every node's raft is a follower (the fixture's elect and depose
 * assert this of all non-leaders). */
static bool all_followers_except(sim *s, unsigned except)
{
    for (unsigned k = 0; k < s->o.nodes; k++) {
        if (k == except)
            continue;
        if (raft_state(raft_fixture_get(&s->fx, k)) != RAFT_FOLLOWER)
            return false;
    }
    return true;
}

/* Inject one random fault. */
static void fault_one(sim *s)
{
    uint64_t *g = &s->rng;
    unsigned nn = s->o.nodes;
    unsigned i = (unsigned)rng_range(g, 0, nn - 1);
    sim_node *n = &s->nodes[i];
    unsigned roll = (unsigned)rng_range(g, 0, 99);
    s->res->faults++;
    if (roll < 18) {
        /* partition: a random minority (or a single link) cut off */
        unsigned sz = (unsigned)rng_range(g, 1, nn / 2);
        bool side[SIM_MAX_NODES] = {false};
        for (unsigned k = 0; k < sz; k++)
            side[rng_range(g, 0, nn - 1)] = true;
        if (rng_pct(g, 30)) {
            unsigned j = (unsigned)rng_range(g, 0, nn - 1);
            if (j != i)
                s->part[i][j] = s->part[j][i] = true;
            sim_log(s, "fault: cut link %u-%u", i, j);
        } else {
            for (unsigned a = 0; a < nn; a++)
                for (unsigned b = 0; b < nn; b++)
                    if (side[a] != side[b])
                        s->part[a][b] = true;
            sim_log(s, "fault: partition of %u node(s)", sz);
        }
        net_apply(s);
    } else if (roll < 30) {
        memset(s->part, 0, sizeof s->part);
        net_apply(s);
        sim_log(s, "fault: heal all links");
    } else if (roll < 40) {
        if (!n->down) {
            node_down(s, n);
            n->up_at = s->fx.time + rng_range(g, 200, 5000);
            sim_log(s, "fault: pause node %u", i);
        }
    } else if (roll < 48) {
        if (!n->down) {
            node_down(s, n);
            n->restart_wanted = true;
            n->up_at = s->fx.time + rng_range(g, 100, 3000);
            sim_log(s, "fault: restart node %u", i);
        }
    } else if (roll < 57) {
        raft_fixture_set_disk_latency(&s->fx, i, (unsigned)rng_range(g, 1, 200));
        sim_log(s, "fault: disk latency node %u", i);
    } else if (roll < 66) {
        raft_fixture_set_network_latency(&s->fx, i,
                                         (unsigned)rng_range(g, 1, 150));
        sim_log(s, "fault: network latency node %u", i);
    } else if (roll < 73) {
        /* The fixture's own io_fault also fails sends, whose error paths
         * in libraft 0.15 double-free; network faults are partitions
         * here, and disk faults are injected by our wrapper. */
        n->disk_fault = (int)rng_range(g, 0, 20);
        sim_log(s, "fault: disk-write fault armed on node %u", i);
    } else if (roll < 80) {
        s->want_op = 1;
    } else if (roll < 85) {
        s->want_op = 2;
    } else if (roll < 93) {
        unsigned L = raft_fixture_leader_index(&s->fx);
        bool send_busy = false;
        for (size_t k = 0; L < nn && k < s->nodes[L].n_pend; k++)
            if (s->nodes[L].pend[k].req == &s->nodes[L].transfer.send)
                send_busy = true; /* its TimeoutNow is still in flight */
        if (L < nn && !s->nodes[L].down && !s->nodes[L].transfer_busy &&
            !send_busy) {
            struct raft *r = raft_fixture_get(&s->fx, L);
            s->nodes[L].transfer.data = &s->nodes[L];
            if (raft_transfer(r, &s->nodes[L].transfer, 0, transfer_cb) == 0) {
                s->nodes[L].transfer_busy = true;
                sim_log(s, "fault: leadership transfer from node %u", L);
            }
        }
    } else {
        raft_fixture_set_randomized_election_timeout(
            &s->fx, i, (unsigned)rng_range(g, SIM_ELECTION_MS,
                                           2 * SIM_ELECTION_MS));
    }
}

/* Bring nodes back whose time has come (revive a paused node; restart a
 * crashed or restarting one once its I/O has drained), and take down
 * nodes whose disk write failed. */
static void nodes_updown(sim *s)
{
    for (unsigned k = 0; k < s->o.nodes; k++) {
        sim_node *n = &s->nodes[k];
        /* raft gives up (RAFT_UNAVAILABLE) after some I/O errors, e.g. a
         * failed send while answering; the server then exits and is
         * restarted, which is what the sim does too. */
        if (!n->down &&
            raft_state(raft_fixture_get(&s->fx, k)) == RAFT_UNAVAILABLE)
            n->crashed = true;
        if (n->crashed && !n->down && !s->in_fixture_op) {
            sim_log(s, "node %u crash-stops: a disk write failed", k);
            s->res->crashes++;
            node_down(s, n);
            n->restart_wanted = true;
            n->up_at = s->fx.time + rng_range(&s->rng, 100, 2000);
        }
        if (!n->down || s->fx.time < n->up_at || s->in_fixture_op)
            continue;
        if (n->restart_wanted) {
            if (n->n_pend == 0)
                node_restart(s, n);
        } else {
            raft_fixture_revive(&s->fx, k);
            n->down = false;
            net_apply(s);
            sim_log(s, "node %u revived", k);
        }
    }
}

/* ------------------------------------------------------------------------
 * 8. The run
 * ------------------------------------------------------------------------ */

/* Everything between two fixture steps (also runs inside the fixture's own
 * elect/depose loops, with faults off). */
static void hook(struct raft_fixture *fx, struct raft_fixture_event *ev)
{
    (void)fx;
    (void)ev;
    sim *s = g_sim;
    s->step++;
    nodes_updown(s);
    for (unsigned k = 0; k < s->o.nodes; k++)
        node_drive(s, &s->nodes[k]);
    for (unsigned c = 0; c < s->o.clients; c++)
        client_drive(s, &s->clients[c]);
    if (s->faults && !s->in_fixture_op && s->fx.time >= s->next_fault_at) {
        fault_one(s);
        s->next_fault_at = s->fx.time + rng_range(&s->rng, 100, 1500);
    }
    for (unsigned k = 0; k < s->o.nodes && !s->res->failed; k++) {
        const char *bad = fence_fsm_check(s->nodes[k].fsm);
        if (bad != NULL)
            sim_fail(s, "node %u: fence_fsm_check: %s", k, bad);
    }
}

/* Run the fixture's depose or elect when their preconditions hold (they
 * assert them). */
static void fixture_op(sim *s)
{
    int op = s->want_op;
    s->want_op = 0;
    unsigned nn = s->o.nodes;
    for (unsigned k = 0; k < nn; k++)
        if (s->nodes[k].down || s->nodes[k].restart_wanted)
            return;
    for (unsigned a = 0; a < nn; a++)
        for (unsigned b = 0; b < nn; b++)
            if (s->part[a][b])
                return;
    unsigned L = raft_fixture_leader_index(&s->fx);
    if (op == 1) {
        if (L >= nn || raft_state(raft_fixture_get(&s->fx, L)) != RAFT_LEADER ||
            !all_followers_except(s, L))
            return;
        for (unsigned k = 0; k < nn; k++)
            s->nodes[k].disk_fault = -1;
        sim_log(s, "fault: depose leader %u", L);
        s->in_fixture_op = true;
        raft_fixture_depose(&s->fx);
        s->in_fixture_op = false;
    } else if (op == 2) {
        if (L < nn || !all_followers_except(s, nn))
            return;
        /* Elect the most up-to-date node: it wins every vote. */
        unsigned best = 0;
        raft_term bt = 0;
        raft_index bi = 0;
        for (unsigned k = 0; k < nn; k++) {
            struct raft *r = raft_fixture_get(&s->fx, k);
            const struct raft_log *lg = &r->log;
            raft_index li = raft_last_index(r);
            raft_term lt = lg->front != lg->back
                               ? lg->entries[(lg->back + lg->size - 1) %
                                             lg->size].term
                               : lg->snapshot.last_term;
            if (r->follower_state.current_leader.id != 0)
                return; /* pre-vote would be refused while a leader is known */
            if (lt > bt || (lt == bt && li > bi)) {
                best = k;
                bt = lt;
                bi = li;
            }
        }
        for (unsigned k = 0; k < nn; k++)
            s->nodes[k].disk_fault = -1;
        sim_log(s, "fault: elect node %u", best);
        s->in_fixture_op = true;
        raft_fixture_elect(&s->fx, best);
        s->in_fixture_op = false;
    }
}

/* Whether the cluster has settled: a ready leader, every node up, no
 * client request in the pipeline, and every node applied the leader's
 * whole log. */
static bool settled(sim *s)
{
    unsigned L = raft_fixture_leader_index(&s->fx);
    if (L >= s->o.nodes || !fence__leader_ready(s->nodes[L].leader))
        return false;
    struct raft *lr = raft_fixture_get(&s->fx, L);
    raft_index last = raft_last_index(lr);
    for (unsigned k = 0; k < s->o.nodes; k++) {
        if (s->nodes[k].down)
            return false;
        if (raft_last_applied(raft_fixture_get(&s->fx, k)) != last)
            return false;
    }
    for (unsigned c = 0; c < s->o.clients; c++)
        if (s->clients[c].n_pipe > 0 || s->clients[c].n_retry > 0)
            return false;
    return true;
}

/* Final checks: every acknowledged grant is in the history with the same
 * lock and lease; every node holds the same state. */
static void final_checks(sim *s)
{
    for (size_t k = 0; k < s->n_acks && !s->res->failed; k++) {
        const sim_ack *a = &s->acks[k];
        sim_grant *g = grant_find(s, a->token);
        char nm[8] = "lock0";
        nm[4] = (char)('0' + a->lock);
        if (g == NULL)
            sim_fail(s, "acknowledged token %" PRIu64 " (lock%u, lease %" PRIu64
                        ", acked at t=%" PRIu64 ") is not in the history",
                     a->token, a->lock, a->lease, a->time_ms);
        else if (g->lease != a->lease ||
                 (g->name_len == 5 && memcmp(g->name, nm, 5) != 0))
            sim_fail(s, "acknowledged token %" PRIu64 " was lock%u/lease %"
                        PRIu64 " for the client but %.*s/lease %" PRIu64
                        " in the history",
                     a->token, a->lock, a->lease, (int)g->name_len, g->name,
                     g->lease);
    }
    uint64_t h0 = node_snap_hash(&s->nodes[0]);
    for (unsigned k = 1; k < s->o.nodes && !s->res->failed; k++)
        if (node_snap_hash(&s->nodes[k]) != h0)
            sim_fail(s, "final state of node %u differs from node 0", k);
}

/* Set up the cluster: N nodes on the fixture, each with the wrapper io and
 * a fresh fsm, bootstrapped with all as voters, started. */
static void cluster_setup(sim *s)
{
    int rv = raft_fixture_initialize(&s->fx);
    assert(rv == 0);
    for (unsigned k = 0; k < s->o.nodes; k++) {
        sim_node *n = &s->nodes[k];
        n->sim = s;
        n->i = k;
        n->disk_fault = -1;
        node_server_new(n);
        n->rfsm.version = 1;
        n->rfsm.data = n;
        n->rfsm.apply = rfsm_apply;
        n->rfsm.snapshot = rfsm_snapshot;
        n->rfsm.restore = rfsm_restore;
        rv = raft_fixture_grow(&s->fx, &n->rfsm);
        assert(rv == 0);
        /* Route raft through the wrapper (raft_init already ran the
         * fixture's init; ours forwards everything else). */
        struct raft *r = raft_fixture_get(&s->fx, k);
        wio_setup(n, r->io);
        n->wio.data = r;
        r->io = &n->wio;
        raft_set_pre_vote(r, !s->o.no_pre_vote);
        raft_set_snapshot_threshold(r, 32);
        raft_set_snapshot_trailing(r, 8);
        n->clock_offset = k == 0 ? 0 : (int64_t)rng_range(&s->rng, 0, 3000);
        raft_fixture_set_randomized_election_timeout(
            &s->fx, k,
            (unsigned)rng_range(&s->rng, SIM_ELECTION_MS, 2 * SIM_ELECTION_MS));
    }
    struct raft_configuration conf;
    rv = raft_fixture_configuration(&s->fx, s->o.nodes, &conf);
    assert(rv == 0);
    rv = raft_fixture_bootstrap(&s->fx, &conf);
    assert(rv == 0);
    raft_configuration_close(&conf);
    rv = raft_fixture_start(&s->fx);
    assert(rv == 0);
    (void)rv;
    raft_fixture_hook(&s->fx, hook);
}

/* Release everything of a run. */
static void cluster_teardown(sim *s)
{
    for (unsigned k = 0; k < s->o.nodes; k++)
        if (s->nodes[k].down)
            raft_fixture_revive(&s->fx, k);
    for (sim_req_raft *q = s->raft_reqs; q != NULL; q = q->next)
        q->stale = true;
    raft_fixture_close(&s->fx);
    while (s->raft_reqs != NULL)
        raft_req_free(s, s->raft_reqs);
    for (unsigned k = 0; k < s->o.nodes; k++) {
        sim_node *n = &s->nodes[k];
        fence__leader_destroy(n->leader);
        fence_fsm_destroy(n->fsm);
        free(n->snapbuf);
        free(n->pend);
        while (n->ops_head) {
            sim_diskop *op = n->ops_head;
            n->ops_head = op->next;
            free(op);
        }
        for (size_t j = 0; j < n->d_n; j++)
            raft_free(n->d_ent[j].buf.base);
        free(n->d_ent);
        snap_free(n->d_snap);
    }
    free(s->hist);
    free(s->grants);
    free(s->acks);
    free(s->mleases);
    free(s->reqids);
    free(s->mwaits);
}

/* Run one seeded simulation (see sim.h): set up the cluster, step it with
 * traffic and faults for the run's duration, heal everything and let it
 * settle, then run the final checks. */
int fence_sim_run(const fence_sim_opts *opts, fence_sim_result *out)
{
    sim *s = calloc(1, sizeof *s);
    assert(s != NULL);
    memset(out, 0, sizeof *out);
    s->o = *opts;
    if (s->o.nodes < 1 || s->o.nodes > SIM_MAX_NODES)
        s->o.nodes = 3;
    if (s->o.clients > SIM_MAX_CLIENTS)
        s->o.clients = SIM_MAX_CLIENTS;
    s->res = out;
    s->rng = opts->seed * 0x2545f4914f6cdd1dULL + 1;
    g_sim = s;
    for (unsigned c = 0; c < s->o.clients; c++) {
        s->clients[c].id = c;
        s->clients[c].node = -1;
        s->clients[c].pipe = s->clients[c].pipes[0];
    }
    cluster_setup(s);

    /* Traffic and faults for the run's duration. */
    s->traffic = true;
    s->faults = true;
    s->next_fault_at = 2000;
    while (s->fx.time < s->o.duration_ms && !out->failed) {
        if (s->want_op)
            fixture_op(s);
        raft_fixture_step(&s->fx);
    }

    /* Heal everything, stop new traffic, and let the cluster settle. */
    s->faults = false;
    s->traffic = false;
    memset(s->part, 0, sizeof s->part);
    for (unsigned k = 0; k < s->o.nodes; k++) {
        raft_fixture_set_disk_latency(&s->fx, k, 10);
        raft_fixture_set_network_latency(&s->fx, k, 15);
        s->nodes[k].disk_fault = -1;
        if (s->nodes[k].down)
            s->nodes[k].up_at = s->fx.time;
    }
    net_apply(s);
    uint64_t settle_end = s->fx.time + SIM_SETTLE_MS;
    while (!out->failed && !settled(s) && s->fx.time < settle_end)
        raft_fixture_step(&s->fx);
    if (!out->failed && !settled(s)) {
        char why[320];
        size_t w = 0;
        for (unsigned k = 0; k < s->o.nodes && w < sizeof why; k++) {
            struct raft *r = raft_fixture_get(&s->fx, k);
            int m = snprintf(why + w, sizeof why - w,
                             " [n%u st%d t%" PRIu64 " last%" PRIu64 " app%" PRIu64
                             " ready%d%s%s]",
                             k, raft_state(r), (uint64_t)r->current_term,
                             (uint64_t)raft_last_index(r),
                             (uint64_t)raft_last_applied(r),
                             (int)fence__leader_ready(s->nodes[k].leader),
                             s->nodes[k].down ? " down" : "",
                             s->nodes[k].n_pend ? " io" : "");
            if (m < 0)
                break;
            w += (size_t)m;
        }
        if (getenv("FENCE_SIM_DEBUG"))
            for (unsigned k = 0; k < s->o.nodes; k++) {
                struct raft *r = raft_fixture_get(&s->fx, k);
                fprintf(stderr, "n%u last_stored %llu commit %llu pend %zu:", k,
                        (unsigned long long)r->last_stored,
                        (unsigned long long)r->commit_index, s->nodes[k].n_pend);
                for (size_t j = 0; j < s->nodes[k].n_pend; j++)
                    fprintf(stderr, " %d", s->nodes[k].pend[j].kind);
                fprintf(stderr, "\n");
            }
        if (getenv("FENCE_SIM_DEBUG"))
            for (unsigned c = 0; c < s->o.clients; c++) {
                sim_client *cl = &s->clients[c];
                fprintf(stderr, "c%u node %d pipe %u done %u retry %u next %llu give %llu:", c,
                        cl->node, cl->n_pipe, cl->n_done, cl->n_retry,
                        (unsigned long long)cl->next_at, (unsigned long long)cl->give_up_at);
                for (unsigned k = 0; k < cl->n_pipe; k++)
                    fprintf(stderr, " [t%u w%llu r%d ans%d err%d]", cl->pipe[k].cmd.type,
                            (unsigned long long)cl->pipe[k].cmd.wait_ms, cl->pipe[k].is_read,
                            cl->pipe[k].ans, cl->pipe[k].err);
                fprintf(stderr, "\n");
            }
        sim_fail(s, "cluster did not settle within %d ms after faults "
                    "stopped:%s", SIM_SETTLE_MS, why);
    }
    if (!out->failed)
        final_checks(s);
    if (!out->failed) {
        out->step = s->step;
        out->time_ms = s->fx.time;
    }
    cluster_teardown(s);
    g_sim = NULL;
    free(s);
    return out->failed ? 1 : 0;
}
