/* The leader module's insides, shared by its files (leader.h is the
 * contract).  Layers, each using only those below it:
 *   step.c     life, leadership phases, the step, the timer, shutdown
 *   outcome.c  raft's callbacks of the leader's proposals: a batch's
 *              results to its requests, the barrier
 *   replica.c  raft's state-machine callbacks (every server): apply an
 *              entry, the events of waits that ended, restore
 *   batch.c    group commit: batches, holding, proposals, intake
 *   requests.c the requests held: connection lists, the wait table, answers
 * No libuv, no raft: what the module needs comes through fence_leader_ops. */
#ifndef FENCE_LEADER_INTERNAL_H
#define FENCE_LEADER_INTERNAL_H

#include <stdarg.h>
#include <stdio.h>

#include "leader/leader.h"

/* Initial wait-table size (grows by doubling). */
#define WAIT_TAB_INITIAL 1024
/* Back-off before a TICK is retried for a deadline that is still due. */
#define TICK_RETRY_MS 100
/* Longest a batch of waits-to-be is held back for company (leader.h
 * "Holding"): long enough for a client round trip on a loaded machine,
 * short next to any wait.  The shell's timer has whole-ms resolution and
 * may fire up to 1 ms early, so the hold lasts 1-2 ms when nothing comes. */
#define HOLD_MS 2
/* Gathering (leader.h): an entry that answered fewer connections is not
 * waited for, and a gather ends once all but 1/GATHER_SLACK_DIV of them are
 * back; a gather the timer ends switches it off for GATHER_SKIP_MIN
 * entries, twice as many after each further one in a row, up to
 * GATHER_SKIP_MAX; a gather that succeeds halves the next one (a load
 * where they often time out, such as signed grants whose replies wait for
 * their signatures, keeps gathering mostly off). */
#define GATHER_MIN 8
#define GATHER_SLACK_DIV 8
#define GATHER_SKIP_MIN 8
#define GATHER_SKIP_MAX 1024
/* Most entries in flight when the pending batch is proposed behind others
 * (leader.h "Pipelining"): the leader's disk paces them, so more than two
 * are in flight only while the followers lag; this bounds what a slow
 * follower keeps in flight. */
#define PIPELINE_MAX 4
/* Renewals answered by the leader itself (renew.c, docs/leases.md): the
 * recorded renewals go out as LEASE_CHECKPOINT commands this long after
 * the first of them.  A renewal is answered without an entry only when the
 * lease's replicated deadline is more than RENEW_MARGIN(ttl) ahead, so its
 * checkpoint has at least ttl/4 to commit before that deadline. */
#define CKPT_INTERVAL_MS 100
#define RENEW_MARGIN(ttl) (2 * CKPT_INTERVAL_MS + (ttl) / 4)
/* Recorded renewals beyond which a checkpoint goes out at once. */
#define RENEW_PENDING_MAX (4u * FENCE_CHECKPOINT_IDS_MAX)

/* Leadership phases. */
enum lphase {
    PH_NONE = 0,     /* not the leader */
    PH_CATCHUP,      /* leader; barrier in flight (applying older entries) */
    PH_BARRIER_DONE, /* leader; barrier applied, LEADER_START at next step */
    PH_STARTING,     /* leader; LEADER_START in flight */
    PH_READY,        /* leader; serving writes */
};

/* Where a request is. */
enum lreq_state {
    RQ_BATCH = 1, /* its command or read is in a batch */
    RQ_WAIT,      /* registered in the wait table under wait_id */
};

/* One request the module holds, from submit until it is answered.  An
 * orphan (its connection closed) has conn == NULL and is freed silently by
 * the batch holding it. */
struct fence_lreq {
    void *handle;      /* the shell's request; NULL once orphaned */
    fence_lconn *conn; /* owner; NULL once orphaned */
    fence_lreq *cprev; /* connection's list of held requests */
    fence_lreq *cnext; /* connection's list of held requests */
    fence_lreq *wnext; /* next in the same wait-table bucket */
    uint64_t wait_id;  /* RQ_WAIT: the core's wait id */
    uint8_t state;     /* enum lreq_state */
};

/* One request inside a batch. */
typedef struct litem {
    fence_cmd cmd;     /* the command (name filled in at encode time) */
    uint32_t name_off; /* offset of the name in the batch's name bytes (a
                          LOCK_MULTI's names follow it there, each a u16
                          length and its bytes) */
    bool is_read;      /* evaluated when the entry applies; no fence_cmd */
    fence_lreq *req;   /* the request; NULL for internal commands */
} litem;

/* One group-commit batch: ONE raft entry once proposed. */
typedef struct lbatch {
    struct lbatch *next; /* next in its list (closed or in flight) */
    litem *items;        /* requests in arrival order */
    uint32_t n_items;    /* items used */
    uint32_t cap_items;  /* items allocated */
    uint32_t n_cmds;     /* items that are commands (not reads) */
    uint8_t *names;      /* lock names of the items, back to back */
    size_t names_len;    /* bytes used in names */
    size_t names_cap;    /* bytes allocated in names */
    uint64_t seq;        /* from 1, one per batch (fence_lconn.read_seq) */
    uint32_t n_held;     /* leading items known to queue (see fence__ld_batch_hold) */
    uint64_t held_seq;   /* fence_leader.apply_seq when they were checked */
    uint64_t ts;         /* the entry's timestamp; 0: fsm time at proposal
                            (a checkpoint's: its last renewal's, renew.c) */
    uint64_t proposed_mono; /* monotonic ms it was proposed */
} lbatch;

/* The module. */
struct fence_leader {
    fence_leader_ops ops;    /* the shell */
    fence_fsm *fsm;          /* the state machine (borrowed) */
    fence_limits limits;     /* carried by every LEADER_START */

    int phase;               /* enum lphase */
    unsigned barriers;       /* barriers outstanding (the catch-up, plus
                                re-issues while it or LEADER_START waits) */
    uint64_t nudge_mono;     /* monotonic ms of the last barrier issued */
    bool stopping;           /* fence__leader_stop was called */
    uint64_t time_offset;    /* fsm time = monotonic ms + this (leader) */
    bool tick_pending;       /* a TICK is in a batch */
    uint64_t tick_deadline;  /* the deadline the last TICK was for */
    bool rearm;              /* the shell must re-arm its timer */
    uint64_t hold_until;     /* the pending batch is held until this
                                monotonic ms (leader.h "Holding"); 0: not */
    bool hold_over;          /* the timer fired: the held batch goes now */
    /* Gathering (leader.h "Gathering"): */
    uint32_t gather_answered; /* connections the last applied entry
                                answered (leader.h "Gathering") */
    uint64_t gather_stamp;   /* entries applied (fence_lconn.gather_stamp) */
    uint32_t gather_base;    /* items pending when it applied */
    bool gathering;          /* the pending batch is held to gather */
    uint32_t gather_skip;    /* entries left to propose without gathering
                                (a gather timed out: the clients did not
                                come back at once) */
    uint32_t gather_penalty; /* the next timeout's gather_skip (0: the
                                least, GATHER_SKIP_MIN) */
    uint64_t apply_seq;      /* entries applied or restored (the fsm
                                changed: held items are checked again) */

    lbatch *pending;         /* batch being filled, or NULL */
    lbatch *closed;          /* full or cut batches, to propose at step */
    lbatch *closed_tail;     /* newest of them */
    lbatch *inflight;        /* proposed batches, oldest first */
    lbatch *inflight_tail;   /* newest proposed batch */
    uint32_t n_inflight;     /* batches in flight */
    uint64_t batch_seq;      /* seq of the newest batch */

    fence_cmd *cmds;         /* encode scratch: FENCE_BATCH_MAX commands */
    uint8_t *ebuf;           /* encode scratch: the entry bytes */
    size_t ebuf_cap;         /* its capacity */
    fence_result results[FENCE_BATCH_MAX]; /* results of the last entry */
    int n_results;           /* commands in the last applied entry */
    const fence_event *events; /* events of the last entry (the fsm's) */
    size_t n_events;         /* how many */

    fence_lreq **wait_tab;   /* wait_id -> requests (chained) */
    size_t wait_nb;          /* buckets (power of two) */
    uint64_t n_waits;        /* registered requests */

    uint8_t *renew_ids;      /* renewals answered here since the last
                                checkpoint: little-endian u64 lease ids */
    uint32_t renew_n;        /* how many */
    uint32_t renew_cap;      /* ids allocated */
    uint64_t ckpt_due;       /* monotonic ms they go out; 0: none recorded */
    uint64_t renew_last;     /* fsm time of the last renewal recorded */
    uint64_t proof_mono;     /* monotonic ms an entry of ours was proposed
                                that has since been applied: a majority
                                still followed us then (renew.c) */
    uint64_t refused_mono;   /* monotonic ms raft last refused a proposal
                                while we led (a leadership transfer):
                                no renewal is answered here until an
                                entry proposed after it is applied */
    bool ckpt_owed;          /* a checkpoint's proposal failed: its ids go
                                out ahead of any other batch (renew.c) */
    uint64_t renew_window_ms; /* how much a renewal answered here may be
                                shortened by a leader change (cluster):
                                fence__leader_renew_window */

    unsigned in_raft_cb;     /* depth inside raft callbacks (the rule) */
    bool in_step;            /* inside fence__leader_step */
    fence_leader_stats stats; /* for INFO */
};

/* Write one log line through the shell. */
static inline void llog(fence_leader *l, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void llog(fence_leader *l, int level, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    l->ops.log(l->ops.ctx, level, msg);
}

/* fsm time at monotonic ms mono (leader.h "Time"). */
static inline uint64_t ld_now_at(const fence_leader *l, uint64_t mono)
{
    uint64_t applied = fence_fsm_now(l->fsm);
    if (l->phase == PH_NONE)
        return applied;
    uint64_t t = mono + l->time_offset;
    return t > applied ? t : applied;
}

/* fsm time now (fence__leader_now). */
static inline uint64_t ld_now(const fence_leader *l)
{
    return l->phase == PH_NONE ? fence_fsm_now(l->fsm) : ld_now_at(l, l->ops.now_ms(l->ops.ctx));
}

/* ---- requests.c ---- */
void fence__ld_conn_link(fence_lconn *c, fence_lreq *r);
void fence__ld_conn_unlink(fence_lreq *r);
/* Take r out of the module; the shell's handle, or NULL for an orphan. */
void *fence__ld_req_release(fence_lreq *r);
void fence__ld_answer_error(fence_leader *l, void *h, int err);
void fence__ld_answer_result(fence_leader *l, void *h, const fence_result *r,
                             bool from_wait);
void fence__ld_answer_read(fence_leader *l, void *h, const fence_cmd *cmd);
void fence__ld_wait_insert(fence_leader *l, fence_lreq *r, uint64_t wait_id);
fence_lreq *fence__ld_wait_take(fence_leader *l, uint64_t wait_id);
bool fence__ld_wait_has(const fence_leader *l, uint64_t wait_id);
bool fence__ld_wait_remove(fence_leader *l, fence_lreq *r);
void fence__ld_batch_free(lbatch *b);

/* ---- pending.c: the pending batch ---- */
void fence__ld_batch_close(fence_leader *l);
bool fence__ld_batch_add_internal(fence_leader *l, const fence_cmd *cmd);
/* Append a command or read (is_read) of request r on connection c (both
 * NULL for an internal command) to the pending batch; NULL out of memory. */
litem *fence__ld_batch_add(fence_leader *l, const fence_cmd *cmd, bool is_read,
                           fence_lreq *r, fence_lconn *c);

/* ---- batch.c ---- */
void fence__ld_cancel_wait(fence_leader *l, uint64_t wait_id);
void fence__ld_batch_fail(fence_leader *l, lbatch *b, int status);
void fence__ld_fail_unproposed(fence_leader *l, int status);
void fence__ld_propose_closed(fence_leader *l);
bool fence__ld_batch_hold(fence_leader *l);
bool fence__ld_batch_waits_only(fence_leader *l);

/* ---- renew.c ---- */
/* Answer a LEASE_KEEPALIVE without an entry when it is safe (renew.c);
 * false: it goes through the log as before. */
bool fence__ld_renew_local(fence_leader *l, fence_lconn *c, void *req,
                           const fence_cmd *cmd);
/* Queue the recorded renewals as LEASE_CHECKPOINT commands when they are
 * due (force: now); true when any were queued. */
bool fence__ld_ckpt_maybe(fence_leader *l, bool force);
/* Just before the pending batch is proposed: the recorded renewals ride it
 * when they are not yet due (renew.c). */
void fence__ld_ckpt_ride(fence_leader *l);
/* Record lease ids again (a checkpoint that was not applied while this
 * server still leads). */
void fence__ld_renew_record(fence_leader *l, const uint8_t *ids, uint32_t n);
/* Forget the recorded renewals (leadership lost or shutdown). */
void fence__ld_renew_reset(fence_leader *l);

#endif /* FENCE_LEADER_INTERNAL_H */
