/* The leader's logic of fenced, without libuv and without raft: group
 * commit, the leadership phases, fsm time, TICKs, the wait table, batch
 * failure and shutdown.  fenced (the "shell": src/server) and the
 * deterministic simulation (tests/sim) both drive this same module; each
 * supplies an ops table (propose, barrier, is-leader, voters, term, a
 * monotonic clock, a log line, and a reply sink) and forwards raft's
 * callbacks to it.  In fenced, cmd.c submits requests, client_conn.c closes
 * connections, raft_fsm.c fills the raft half of the ops and forwards
 * raft's callbacks, reply.c is the reply sink, and loop.c runs the step at
 * its loop check and owns the one timer.
 *
 * Requests.  The shell hands in every request that needs the leader
 * (commands, and reads that must be linearizable) with an opaque handle of
 * its own and the module-owned per-connection struct fence_lconn that the
 * shell embeds in its connection.  The module answers each handle exactly
 * once through the sink (reply_result, reply_read or reply_error), unless
 * fence__leader_conn_close() was called for its connection first: from
 * then on the module never mentions that connection's handles again.
 *
 * Group commit.  Requests accumulate in the pending batch; the batch goes
 * out as ONE raft entry when no entry is in flight, or at once (behind the
 * entries in flight) when it is full (FENCE_BATCH_MAX items) or when a
 * write follows a read of the same connection (reads are answered once the
 * whole entry is applied, so a later write of the same pipeline must not be
 * in it, or the read would see it).  A batch of reads only carries a TICK,
 * so its entry is not empty.
 *
 * Pipelining (clusters only).  In a cluster an entry is in flight for
 * the leader's write, then for a follower's acknowledgement, which comes a
 * round trip and a follower's write later.  Once every entry in flight is
 * on the leader's own disk (ops->stored) and at most PIPELINE_MAX - 1 are
 * in flight, a ready leader proposes the pending batch behind them rather
 * than waiting for their commit: its write overlaps their replication,
 * and the leader's disk, not the round trip, paces the entries.  A batch
 * whose every item would only queue is not proposed so: it waits for the
 * entries in flight and then for its hold ("Holding"), as it would
 * without pipelining.  A cluster of one (or a shell without
 * ops->stored) never pipelines: there an entry stored is an entry
 * committed.  Nothing is answered earlier: every reply still waits for
 * its own entry's commit and apply, entries apply in log order.
 *
 * Holding.  With no entry in flight, a pending batch whose every item
 * would only queue (a LOCK or ACQUIRE that may wait, on a lock another
 * live lease holds: its client hears nothing when the entry applies) is
 * held back for at most HOLD_MS (2 ms, through the shell's one timer; see
 * fence__leader_timer_take).  The first item in a hurry ends the hold and
 * the whole batch goes as one entry, in arrival order.  In a contended
 * handoff that item is the new holder's UNLOCK, sent while the old
 * holder's next ACQUIRE is already here: proposed alone, that ACQUIRE
 * would make the UNLOCK wait a whole disk write (raft_uv writes one batch
 * at a time).  Holding answers nothing earlier, changes no token and no
 * FIFO order (arrival order is kept); it only delays the registration of
 * waits by at most HOLD_MS.
 *
 * Gathering.  With no entry in flight, a pending batch also waits, for at
 * most HOLD_MS, while fewer than all but 1/8 of the connections the last
 * applied entry answered (at least 8 of them; a queued wait is not
 * answered) have sent a request since, on top of what was pending when it
 * applied.  Without it, 64 clients each cycling a lock of its own split
 * into two cohorts of about 32: the first few requests after an entry's
 * replies go out alone in the next entry, the rest wait a whole disk write
 * behind it, and each cycle costs two writes where one would do.  A gather
 * that the timer ends (the clients did not come back at once: think time
 * between requests, or a client that lost its core) turns gathering off for
 * the next 8 entries, twice as many after each further one in a row, up to
 * 1,024 (a gather that succeeds halves the next count): a load with think
 * time soon pays at most 2 ms on one entry in a thousand.  Like holding, it
 * answers nothing earlier and changes no order or token.
 *
 * Reads.  In a cluster a read rides the next entry and is answered from the
 * state right after that entry is applied (never before the writes ahead of
 * it in its connection's pipeline, never after a later one).  In a cluster
 * of one a read is answered at once from applied state unless a write of
 * the same connection is still unapplied (then it rides like in a cluster).
 *
 * Leadership phases: not leader -> barrier in flight (catch-up: every entry
 * of earlier terms gets applied) -> barrier applied -> LEADER_START in
 * flight (it goes ALONE in its entry; it carries our limits and rebases
 * every deadline onto our clock) -> ready (writes are served).  Losing
 * leadership at any point answers NOTLEADER/TRYAGAIN (reply_error
 * UNAVAILABLE) to requests not yet proposed; proposed ones complete with
 * their outcome or, when raft cannot say, UNKNOWN (retry with the REQID).
 * While the barrier or LEADER_START has waited a second, one more barrier
 * goes out each second (libraft 0.15 may leave a 2-voter leader that does
 * not count itself until it appends again; docs/cluster.md pitfalls).
 *
 * Time.  fsm time on the leader = monotonic ms + an offset fixed when the
 * barrier is applied, so it never goes back across leaders; off the leader
 * it is the time of the last applied entry.  The shell arms one timer for
 * the core's next deadline (fence__leader_timer_take) and calls
 * fence__leader_timer() when it fires: the module proposes a TICK.  A TICK
 * whose proposal failed re-arms the timer (with a 100 ms back-off when the
 * deadline is already due), so expiries never stop on a ready leader.
 * The same timer ends a hold (see "Holding"); a firing that only ends a
 * hold proposes no TICK.
 *
 * Waits.  A LOCK/ACQUIRE answered QUEUED is registered in the wait table
 * under its wait id; the event that ends the wait (granted, timed out,
 * lease gone, cancelled) answers every request registered for it.  An
 * event of the same entry that queued the wait (it was queued and granted
 * in one entry) is taken from that entry's events.  A connection that
 * closes cancels its waits through the log (CANCEL, proposed by a ready
 * leader only) unless another request still waits for the same wait.
 * After a snapshot restore, a registered wait that no longer exists ended
 * inside the entries the snapshot replaced: it is answered RESTORED
 * (TRYAGAIN; the leader knows the outcome).
 *
 * Renewals (docs/leases.md).  A LEASE_KEEPALIVE is answered by a ready
 * leader itself, with no entry, when the lease is live in the applied
 * state with its deadline more than RENEW_MARGIN (2 checkpoint intervals +
 * ttl/4) ahead of fsm time, raft says this server leads, the command is the
 * owner's (or an admin's), carries no REQID, and its connection has
 * nothing but KEEPALIVEs still unapplied (pipeline order: it may not
 * overtake a REVOKE, say; overtaking a renewal changes no answer).  The renewal is recorded; the
 * recorded ids go out as LEASE_CHECKPOINT commands: in the next batch the
 * leader proposes within CKPT_INTERVAL_MS of the first of them (they ride
 * it, stamped when it goes), else in an entry of their own then (at most
 * one per interval, only when something was renewed); apply restarts each
 * live lease's TTL at that entry's time, which is after the answer.
 * Otherwise the KEEPALIVE goes through the log as before.  The reply is the TTL, minus the renew window in a cluster
 * (the most a leader change can take from it).  Recorded renewals are
 * forgotten when leadership is lost: the next leader's LEADER_START
 * restarts every lease's TTL.
 *
 * THE RULE FOR CALLING RAFT.  Callbacks from raft into this module
 * (fence__leader_apply, _restored, _applied, _barrier_done) only record
 * what happened and deliver replies; they never call into raft.  Every
 * call into raft (ops->propose, ops->barrier) is made from
 * fence__leader_step(), which the shell calls from its loop check and the
 * simulation from its driver between fixture steps, never from inside a
 * raft callback.  Work that arises inside a callback (a batch that filled
 * up, a CANCEL for a client that went away, LEADER_START once the barrier
 * is applied) waits for the next step.  The module counts how deep it is
 * inside raft callbacks and asserts the count is zero in step and in
 * every proposal; the simulation also checks from the outside that its
 * raft is never entered from a callback.
 *
 * libraft 0.15 behaviour this relies on (read in its v0.15.0 source):
 *   - replication.c applyCommand(): fsm->apply runs on every server; on
 *     the leader the raft_apply callback of that entry fires right after,
 *     with the result pointer apply returned and before the next entry is
 *     applied.  So the results (and the fsm's borrowed events of the last
 *     apply) are still those of that entry when fence__leader_applied()
 *     runs; nobody frees result, so it points into this module.
 *   - convert.c convertFailApply(): when leadership is lost, pending
 *     requests complete with RAFT_LEADERSHIPLOST: the outcome is unknown
 *     (FENCE_LST_UNKNOWN), and clients retry with REQID.
 *   - raft_barrier() appends a log entry; its callback fires once every
 *     earlier entry is applied: the new leader's catch-up.
 *   - uv_encoding.c / uv_segment.c: raft_uv pads entries to 8 bytes when
 *     written but reloads them unpadded, so every entry is framed
 *     (fence__entry_frame, core/entry.h) and apply strips the frame.
 */
#ifndef FENCE_LEADER_LEADER_H
#define FENCE_LEADER_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/fsm.h"

typedef struct fence_leader fence_leader;
typedef struct fence_lconn fence_lconn;
typedef struct fence_lreq fence_lreq;

/* Status of a proposal or a barrier, mapped by the shell from raft's. */
enum fence_lstatus {
    FENCE_LST_OK = 0,    /* proposed / applied */
    FENCE_LST_NOTLEADER, /* not the leader: never entered the log */
    FENCE_LST_SHUTDOWN,  /* raft is closing */
    FENCE_LST_UNKNOWN,   /* leadership lost, or another failure: outcome unknown */
};

/* Why a request is answered with an error (the shell words it). */
enum fence_lerr {
    FENCE_LERR_UNAVAILABLE = 1, /* not the leader, not ready, or stopping:
                                   NOTLEADER with the leader, or TRYAGAIN */
    FENCE_LERR_UNKNOWN,         /* a write's outcome is unknown (TRYAGAIN,
                                   retry with the same REQID) */
    FENCE_LERR_READ_RETRY,      /* leadership changed under a read */
    FENCE_LERR_NOMEM,           /* out of memory before it was proposed */
    FENCE_LERR_RESTORED,        /* its wait ended inside a restored snapshot */
};

/* Log levels of ops->log (the values of base/log.h). */
enum { FENCE_LLOG_INFO = 1, FENCE_LLOG_WARN = 2, FENCE_LLOG_ERROR = 3 };

/* What the module needs from its shell.  Every function gets ctx. */
typedef struct fence_leader_ops {
    void *ctx; /* the shell's state */
    /* Propose one entry (len bytes, copied by the shell before it returns).
     * Returns FENCE_LST_OK, after which the shell calls
     * fence__leader_applied(l, tag, ...) exactly once, or another
     * FENCE_LST_* (no callback).  Called from fence__leader_step only. */
    int (*propose)(void *ctx, void *tag, const uint8_t *entry, size_t len);
    /* Propose a barrier; FENCE_LST_OK, after which the shell calls
     * fence__leader_barrier_done exactly once for it.  Several may be
     * outstanding (a barrier or LEADER_START that waits 1 s gets one more:
     * a libraft 0.15 workaround, step.c).  From step only. */
    int (*barrier)(void *ctx);
    bool (*is_leader)(void *ctx);   /* raft is the leader right now */
    unsigned (*voters)(void *ctx);  /* voters in the configuration */
    uint64_t (*term)(void *ctx);    /* raft's current term (for logs) */
    uint64_t (*now_ms)(void *ctx);  /* monotonic milliseconds */
    /* Optional (NULL: never): every entry raft has in its log is on this
     * server's disk, none still being written ("Pipelining"). */
    bool (*stored)(void *ctx);
    /* One log line (no newline), level FENCE_LLOG_*. */
    void (*log)(void *ctx, int level, const char *msg);
    /* The reply sink.  r / cmd are borrowed for the call.  from_wait: the
     * result is a wait's outcome (an event), not its command's result. */
    void (*reply_result)(void *ctx, void *req, const fence_result *r,
                         bool from_wait);
    /* Answer a read (LEASE.INFO, LOCK.INFO) from the fsm's state now. */
    void (*reply_read)(void *ctx, void *req, const fence_cmd *cmd);
    /* Answer an error, err one of FENCE_LERR_*. */
    void (*reply_error)(void *ctx, void *req, int err);
} fence_leader_ops;

/* Per connection; embedded by the shell in its connection, owned by the
 * module (the shell only initializes it and passes it in).  Lives until
 * fence__leader_conn_close() returns. */
struct fence_lconn {
    fence_lreq *reqs;   /* requests of ours the module holds (batch or wait) */
    uint32_t unapplied; /* of them, those in a batch not yet applied */
    uint32_t unapplied_ka; /* of those, LEASE_KEEPALIVEs ("Renewals": a
                              renewal may overtake only these) */
    uint64_t read_seq;  /* seq of the last batch a read of ours rode */
    uint64_t gather_stamp; /* the last applied entry that answered one of
                              ours ("Gathering": connections, not requests,
                              are counted) */
};

/* Counters for INFO. */
typedef struct fence_leader_stats {
    uint64_t batches;     /* entries proposed */
    uint64_t batch_cmds;  /* commands in those entries */
    uint64_t entry_bytes; /* bytes of those entries (framed) */
    uint64_t waits;       /* requests registered in the wait table */
    uint64_t holds;       /* times the pending batch was held ("Holding") */
    uint64_t gathers;     /* times it waited to gather ("Gathering") */
    uint64_t gathers_timed_out; /* of them, ended by the timer */
    uint64_t pipelined;   /* entries proposed behind others in flight
                             ("Pipelining") */
    uint64_t renewals_local; /* LEASE.KEEPALIVEs answered without an entry
                                ("Renewals") */
    uint64_t checkpoints; /* LEASE_CHECKPOINT commands proposed */
    uint64_t checkpoint_ids; /* lease ids they carried */
    uint64_t checkpoints_rode; /* of those, the ones that rode a batch of
                                  other commands ("Renewals") */
} fence_leader_stats;

/* Create the module over fsm (borrowed; it must outlive the module).
 * limits travel in every LEADER_START.  Returns 0, or -1 out of memory. */
int fence__leader_create(const fence_leader_ops *ops, fence_fsm *fsm,
                         const fence_limits *limits, fence_leader **out);
/* Free everything left (after raft is closed).  NULL is a no-op. */
void fence__leader_destroy(fence_leader *l);

/* ---- From the shell's loop (never from inside a raft callback) ---- */

/* Follow raft's leadership (start the catch-up, or refuse what is not
 * yet proposed), propose LEADER_START, full batches, and the pending
 * batch when no entry is in flight.  THE place where raft is called. */
void fence__leader_step(fence_leader *l);
/* The shell's timer fired: propose a TICK (at the next step). */
void fence__leader_timer(fence_leader *l);
/* true when the shell must (re)arm or stop its timer; then *delay_ms is
 * the delay, or UINT64_MAX to stop it. */
bool fence__leader_timer_take(fence_leader *l, uint64_t *delay_ms);
/* Shutdown: refuse new requests; answer those not yet proposed. */
void fence__leader_stop(fence_leader *l);

/* Take a request: a command (is_read false) or a read of LEASE.INFO /
 * LOCK.INFO (is_read true; cmd->lease or cmd->name says what).  cmd's
 * name is copied.  Every path answers req through the sink, possibly
 * before this returns. */
void fence__leader_submit(fence_leader *l, fence_lconn *c, void *req,
                          const fence_cmd *cmd, bool is_read);
void fence__leader_conn_init(fence_lconn *c);
/* The connection closed: forget its requests (their batches complete
 * without them) and cancel its waits through the log. */
void fence__leader_conn_close(fence_leader *l, fence_lconn *c);

/* ---- From raft's callbacks (record and reply only) ---- */

/* raft fsm->apply: strip the frame, apply the entry, deliver the events of
 * waits that ended.  Returns the results array for raft's result pointer.
 * A malformed entry is a bug: the process stops. */
const fence_result *fence__leader_apply(fence_leader *l, const uint8_t *buf,
                                        size_t len);
/* After raft fsm->restore replaced the state: answer stale waits. */
void fence__leader_restored(fence_leader *l);
/* raft_apply callback of a proposal (tag from ops->propose); result is the
 * pointer raft passed (the array fence__leader_apply returned). */
void fence__leader_applied(fence_leader *l, void *tag, int status,
                           const void *result);
/* raft_barrier callback. */
void fence__leader_barrier_done(fence_leader *l, int status);

/* How much a renewal answered without an entry may be shortened by a
 * leader change (the election timeout, docs/leases.md); its reply says
 * ttl minus this in a cluster of several voters.  Default 0. */
void fence__leader_renew_window(fence_leader *l, uint64_t window_ms);

/* ---- Queries ---- */

bool fence__leader_ready(const fence_leader *l); /* LEADER_START applied */
uint64_t fence__leader_now(const fence_leader *l); /* fsm time, see above */
void fence__leader_stats_get(const fence_leader *l, fence_leader_stats *out);
/* Commands in the entry applied last (its results; a batch of reads
 * counts its TICK): for the shell's batch-size metric, read in the
 * raft_apply callback of that entry, before fence__leader_applied. */
size_t fence__leader_results(const fence_leader *l);

#endif /* FENCE_LEADER_LEADER_H */
