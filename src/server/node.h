/* The raft glue of fenced: one raft server (libraft 0.15, libuv backend).
 *
 * Small API on purpose, so cluster commands (CLUSTER.ADD/REMOVE/TRANSFER)
 * can be added next to it without touching the connection code:
 *
 *   fence__node_start()    create the data dir, init raft_uv (+ transport),
 *                          wrap the raft_io for crash-stop on disk errors,
 *                          bootstrap the --peers configuration (or a
 *                          one-voter one) on first start, raft_start.
 *   fence__node_apply()    propose one entry (buffer from raft_malloc).
 *   fence__node_leader_peer() the leader's entry in the --peers map, for
 *                          NOTLEADER replies.
 *   fence__node_close()    raft_close, then a callback.
 *
 * Transport: with --raft-port 0 (the default, a single node) raft uses a
 * no-network transport; otherwise raft_uv_tcp on host:raft-port, or with
 * --peer-tls-* the mutual-TLS transport of peer_tls.h.
 *
 * Crash-stop: the append, truncate and snapshot_put functions of the
 * raft_io that raft_uv_init fills are replaced by wrappers.  A non-zero
 * completion status (or a non-zero return of truncate) is logged and the
 * process aborts: it must never acknowledge anything on a log that may be
 * behind.  (raft_uv reports a failed asynchronous truncate by failing every
 * later append, which then aborts here.)  For tests, the environment
 * variable FENCED_TEST_FAIL_APPEND=N makes the Nth append complete with
 * RAFT_IOERR. */
#ifndef FENCE_SERVER_NODE_H
#define FENCE_SERVER_NODE_H

#include <raft.h>
#include <raft/uv.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "ops/metrics.h"
#include "server/config.h"

typedef struct fence_node fence_node;
typedef void (*fence_node_close_cb)(fence_node *n);

struct fence_node {
    struct raft raft;                   /* the raft instance */
    struct raft_io io;                  /* raft_uv, with wrapped callbacks */
    struct raft_uv_transport transport; /* raft_uv_tcp or the local one */
    bool tcp;                           /* transport is raft_uv_tcp or TLS */
    bool peer_tls;                      /* transport is peer_tls.c's (it frees
                                         * itself in close: no raft_uv_tcp_close) */
    bool started;                       /* raft_start succeeded */
    bool closing;                       /* fence__node_close was called */
    const fence_config *cfg;            /* options, incl. the peer map */
    int lock_fd;                        /* data-dir/fenced.lock, flock()ed: held
                                         * until the process exits */
    char address[96];                   /* this server's raft address */
    uint64_t appends;                   /* append requests seen (test hook) */
    fence_metric *append_latency;       /* observes each append's seconds, or NULL */
    uint64_t fail_append_at;            /* FENCED_TEST_FAIL_APPEND, 0: off */
    fence_node_close_cb close_cb;       /* after raft_close completes */
    /* The raft_uv functions the wrappers forward to. */
    int (*uv_append)(struct raft_io *io, struct raft_io_append *req,
                     const struct raft_entry entries[], unsigned n,
                     raft_io_append_cb cb);
    int (*uv_truncate)(struct raft_io *io, raft_index index);
    int (*uv_set_term)(struct raft_io *io, raft_term term);
    int (*uv_set_vote)(struct raft_io *io, raft_id server_id);
    int (*uv_snapshot_put)(struct raft_io *io, unsigned trailing,
                           struct raft_io_snapshot_put *req,
                           const struct raft_snapshot *snapshot,
                           raft_io_snapshot_put_cb cb);
};

/* Count the TLS transport's refused peer connections in m (a counter
 * family labelled by reason; see peer_tls.h).  No-op without peer TLS. */
void fence__node_set_peer_refusals(fence_node *n, fence_metric *m);

/* Entry framing (libraft 0.15's raft_uv pads entries on disk but reloads
 * them unpadded): see fence__entry_frame in core/entry.h, which every entry
 * fenced proposes goes through. */

/* Size of one raft log segment (set on raft_uv, which preallocates whole
 * segments: the one being written and a pool of up to two more). */
#define FENCE_RAFT_SEGMENT_BYTES (8u * 1024u * 1024u)
/* Below this many segments of free space, start-up warns. */
#define FENCE_RAFT_SEGMENTS_WARN 3u

/* ---- raft_storage.c: what fenced says about raft's storage ---- */

/* raft_strerror(rv), with words for the codes libraft 0.15 calls "unknown
 * error" (RAFT_NOSPACE: "no space left on device", and the other codes
 * above RAFT_IOERR).  Static strings. */
const char *fence__raft_strerror(int rv);

/* Start-up check of data_dir's free space: returns -1 (after logging why)
 * when it cannot hold one log segment, so that fenced refuses to start
 * rather than fail its first write; warns below FENCE_RAFT_SEGMENTS_WARN
 * segments.  Returns 0 otherwise. */
int fence__node_check_space(const char *data_dir);

/* Start raft for cfg on loop with the given state machine.  Returns 0, or
 * -1 after logging why (the daemon exits non-zero). */
int fence__node_start(fence_node *n, uv_loop_t *loop, const fence_config *cfg,
                      struct raft_fsm *fsm);

/* Propose one command entry.  buf must come from raft_malloc; on 0 raft owns
 * it, on error the caller still does (raft_apply's contract).  Returns 0 or
 * a RAFT_* code (RAFT_NOTLEADER when not the leader). */
int fence__node_apply(fence_node *n, struct raft_apply *req, void *buf,
                      size_t len, raft_apply_cb cb);

/* Propose a barrier (applied once every earlier entry is applied). */
int fence__node_barrier(fence_node *n, struct raft_barrier *req,
                        raft_barrier_cb cb);

/* true when this server is the raft leader right now. */
bool fence__node_is_leader(fence_node *n);

/* "leader", "follower", "candidate" or "unavailable". */
const char *fence__node_role(fence_node *n);

/* Number of voters in the current configuration. */
unsigned fence__node_voters(fence_node *n);

/* raft's current term, commit index and last applied index (INFO). */
uint64_t fence__node_term(const fence_node *n);
uint64_t fence__node_commit_index(const fence_node *n);
uint64_t fence__node_applied_index(const fence_node *n);

/* true while a leadership transfer started here is under way. */
bool fence__node_transferring(const fence_node *n);

/* true when raft's own state is leader.  Unlike fence__node_is_leader it
 * stays true while the node closes (for a completion that must tell "still
 * leading" from "leadership moved"). */
bool fence__node_raft_leads(fence_node *n);

/* The id of the leader raft knows of, or 0 (none known, or not started);
 * *address (may be NULL) receives its configuration address, borrowed. */
uint64_t fence__node_leader_id(fence_node *n, const char **address);

/* raft's last log index (0 before start), snapshot index and the index of
 * the configuration in force (CLUSTER.INFO). */
uint64_t fence__node_last_index(fence_node *n);
uint64_t fence__node_snapshot_index(const fence_node *n);
uint64_t fence__node_configuration_index(const fence_node *n);

/* One server of raft's current configuration, copied out so that callers
 * never read libraft's structs.  address is borrowed from raft: valid only
 * until the configuration changes (do not keep it across a callback). */
typedef struct fence_node_server {
    uint64_t id;         /* raft server id */
    const char *address; /* configuration address (may be NULL) */
    int role;            /* RAFT_VOTER, RAFT_STANDBY or RAFT_SPARE */
    bool contact;        /* this server itself, or (on a leader) a server
                          * that answered since raft last cleared its
                          * check-quorum flags (struct raft_progress
                          * recent_recv) */
} fence_node_server;

/* Number of servers in raft's current configuration. */
unsigned fence__node_servers(const fence_node *n);
/* Server i (< fence__node_servers) of the current configuration. */
void fence__node_server_at(const fence_node *n, unsigned i,
                           fence_node_server *out);
/* The server with this id: true and *out filled, or false. */
bool fence__node_server_find(const fence_node *n, uint64_t id,
                             fence_node_server *out);
/* Milliseconds since raft last cleared its check-quorum contact flags
 * (election_timer_start; every election timeout on a leader). */
uint64_t fence__node_contact_age_ms(const fence_node *n);

/* Membership and leadership changes (raft_add, raft_assign to voter,
 * raft_remove, raft_transfer; id 0 for transfer: raft picks).  Return 0 or
 * raft's code, as the libraft calls do. */
int fence__node_add(fence_node *n, struct raft_change *req, uint64_t id,
                    const char *address, raft_change_cb cb);
int fence__node_promote(fence_node *n, struct raft_change *req, uint64_t id,
                        raft_change_cb cb);
int fence__node_remove(fence_node *n, struct raft_change *req, uint64_t id,
                       raft_change_cb cb);
int fence__node_transfer(fence_node *n, struct raft_transfer *req, uint64_t id,
                         raft_transfer_cb cb);

/* The --peers entry of the current leader, or NULL when no leader is known
 * or the leader is not in the map. */
const fence_peer *fence__node_leader_peer(fence_node *n);

/* raft_close, then cb (safe to free n after it). */
void fence__node_close(fence_node *n, fence_node_close_cb cb);

/* The peer (client host and port, raft port) of server id: from raft's
 * current configuration when its address carries a client part, else from
 * the --peers map.  Returns NULL when id is unknown.  The result points to
 * static storage valid until the next call (the daemon is single-threaded). */
const fence_peer *fence__node_peer(fence_node *n, uint64_t id);


#endif /* FENCE_SERVER_NODE_H */
