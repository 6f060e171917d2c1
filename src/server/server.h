/* Internal structures of the fenced daemon, shared by main.c, loop.c,
 * conn.c and cmd.c.
 *
 * Data path: conn.c reads bytes into a bounded per-connection buffer and
 * parses requests with fence_resp_parse; cmd.c validates each request and
 * either answers it at once (PING, INFO, reads in a single-voter cluster)
 * or appends it to the pending group-commit batch.  loop.c proposes the
 * pending batch as ONE raft entry whenever no entry is in flight (or the
 * batch is full), applies committed entries to the core state machine, and
 * turns the per-command results into replies.  Every request owns a reply
 * slot in its connection's queue; replies leave strictly in request order,
 * whenever the slot at the head of the queue is ready.
 *
 * Lifetimes: a slot belongs to its connection until the connection closes;
 * a slot that is inside a batch at that time is orphaned (conn = NULL) and
 * freed by the batch's completion; a slot registered as a wait is removed
 * from the wait table and its wait cancelled through the log. */
#ifndef FENCE_SERVER_H
#define FENCE_SERVER_H

#include <raft.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "proto/resp.h"
#include "server/config.h"
#include "server/node.h"

#define FENCED_VERSION "0.1.0"

typedef struct fence_server fence_server;
typedef struct fence_conn fence_conn;
typedef struct fence_slot fence_slot;
typedef struct fence_batch fence_batch;

/* What a request is; decides how its result becomes a reply. */
enum fence_op {
    OP_INTERNAL = 0,   /* proposed by the server itself (no reply) */
    OP_PING,           /* PING [msg] */
    OP_GRANT,          /* LEASE.GRANT */
    OP_KEEPALIVE,      /* LEASE.KEEPALIVE */
    OP_REVOKE,         /* LEASE.REVOKE */
    OP_LEASE_INFO,     /* LEASE.INFO (read) */
    OP_LOCK,           /* LOCK */
    OP_UNLOCK,         /* UNLOCK */
    OP_LOCK_INFO,      /* LOCK.INFO (read) */
    OP_ACQUIRE,        /* ACQUIRE */
    OP_INFO,           /* INFO (read) */
    OP_CLUSTER,        /* CLUSTER.* (cluster.c) */
};

/* Where a slot is in its life. */
enum fence_slot_state {
    SLOT_NEW = 0,   /* just created */
    SLOT_BATCH,     /* its command is in a batch (pending or in flight) */
    SLOT_WAIT,      /* registered in the wait table under wait_id */
    SLOT_READY,     /* reply bytes are final */
};

/* One request's place in its connection's reply order. */
struct fence_slot {
    fence_slot *next;      /* next slot of the connection (request order) */
    fence_conn *conn;      /* owner; NULL once the connection closed */
    fence_slot *wnext;     /* next slot in the same wait-table bucket */
    uint64_t wait_id;      /* SLOT_WAIT: the core's wait id */
    uint8_t op;            /* enum fence_op of the request */
    uint8_t state;         /* enum fence_slot_state */
    char *out;             /* SLOT_READY: reply bytes (malloc) */
    size_t len;            /* SLOT_READY: bytes in out */
};

/* One client connection (TCP or Unix socket). */
struct fence_conn {
    union {
        uv_handle_t handle; /* for uv_close */
        uv_stream_t stream; /* for reads and writes */
        uv_tcp_t tcp;       /* TCP client */
        uv_pipe_t pipe;     /* Unix socket client */
    } h;                    /* the libuv handle (data = this conn) */
    fence_server *srv;      /* the server */
    fence_conn *prev;       /* list of open connections */
    fence_conn *next;       /* list of open connections */
    fence_conn *dirty_next; /* list of connections with replies to flush */
    uint64_t id;            /* for logs */
    char *rbuf;             /* unparsed input */
    size_t rlen;            /* bytes in rbuf */
    size_t rcap;            /* capacity of rbuf (<= FENCE_RBUF_MAX) */
    fence_slot *head;       /* oldest unanswered (or unflushed) request */
    fence_slot *tail;       /* newest request */
    uint32_t n_slots;       /* slots in the queue (pipeline depth) */
    uint32_t unapplied;     /* slots whose commands sit in a batch */
    uint64_t read_seq;      /* seq of the last batch a read of ours rode */
    uint64_t obuf;          /* reply bytes in uv_write requests not completed */
    bool reading;           /* uv_read_start is active */
    bool dirty;             /* on the dirty list */
    bool closing;           /* uv_close was called */
    bool close_after_flush; /* close once every reply is sent (QUIT, errors) */
};

/* One request inside a batch. */
typedef struct fence_item {
    fence_cmd cmd;      /* the command (name filled in at encode time) */
    uint32_t name_off;  /* offset of the name in the batch's name bytes */
    uint8_t op;         /* enum fence_op */
    bool is_read;       /* evaluated when the entry applies; no fence_cmd */
    fence_slot *slot;   /* the reply slot; NULL for internal commands */
} fence_item;

/* One group-commit batch: ONE raft entry once proposed. */
struct fence_batch {
    struct raft_apply req;  /* raft request (data = this batch) */
    fence_server *srv;      /* the server */
    fence_batch *next;      /* next in-flight batch (commit order) */
    fence_item *items;      /* requests in arrival order */
    uint32_t n_items;       /* items used */
    uint32_t cap_items;     /* items allocated */
    uint32_t n_cmds;        /* items that are commands (not reads) */
    uint8_t *names;         /* lock names of the items, back to back */
    size_t names_len;       /* bytes used in names */
    size_t names_cap;       /* bytes allocated in names */
    size_t entry_len;       /* encoded entry size (stats) */
    uint64_t seq;           /* from 1, one per batch (fence_conn.read_seq) */
};

/* Leadership phases of this server. */
enum fence_lstate {
    LS_NONE = 0,  /* not the leader */
    LS_CATCHUP,   /* leader; barrier in flight (applying older entries) */
    LS_STARTING,  /* leader; LEADER_START in flight */
    LS_READY,     /* leader; serving writes */
};

/* The daemon. */
struct fence_server {
    uv_loop_t *loop;             /* the one event loop */
    fence_config *cfg;           /* validated options */
    fence_node node;             /* raft */
    struct raft_fsm raft_fsm;    /* raft's view of the state machine */
    fence_fsm *fsm;              /* the core state machine */
    fence_resp_limits resp_lim;  /* parser limits (from cfg) */
    fence_resp_msg *msg;         /* parse scratch (one, single-threaded) */

    uv_tcp_t tcp;                /* client TCP listener */
    bool tcp_open;               /* tcp initialized */
    uv_pipe_t pipe;              /* client Unix-socket listener */
    bool pipe_open;              /* pipe initialized */
    uv_signal_t sig_term;        /* SIGTERM: clean stop */
    uv_signal_t sig_int;         /* SIGINT: clean stop */
    uv_check_t check;            /* end of every loop turn: propose, flush */
    uv_timer_t tick_timer;       /* leader: next fsm deadline */
    bool stopping;               /* shutdown started */
    int exit_code;               /* process exit status */

    fence_conn *conns;           /* open connections */
    uint64_t n_conns;            /* entries in conns */
    uint64_t next_conn_id;       /* for logs */
    fence_conn *dirty;           /* connections with replies to flush */

    int lstate;                  /* enum fence_lstate */
    bool barrier_inflight;       /* barrier (catch-up) outstanding */
    struct raft_barrier barrier; /* the catch-up barrier */
    uint64_t time_offset;        /* fsm time = monotonic ms + this */
    bool tick_pending;           /* a TICK is in a batch */
    uint64_t tick_deadline;      /* the deadline the last TICK was for */
    bool rearm;                  /* re-arm the tick timer at the check */

    fence_batch *pending;        /* batch being filled, or NULL */
    fence_batch *inflight;       /* proposed batches, oldest first */
    fence_batch *inflight_tail;  /* newest proposed batch */
    uint32_t n_inflight;         /* batches in flight */
    uint64_t batch_seq;          /* seq of the newest batch */

    fence_result results[FENCE_BATCH_MAX]; /* results of the last entry */
    int n_results;               /* commands in the last applied entry */
    fence_event *early;          /* events of the last entry with no wait yet */
    size_t n_early;              /* entries in early */
    size_t cap_early;            /* capacity of early */

    fence_slot **wait_tab;       /* wait_id -> slot (chained) */
    size_t wait_nb;              /* buckets (power of two) */
    uint64_t n_waits;            /* registered waits */

    uint64_t start_ms;           /* monotonic ms at start (uptime) */
    uint64_t stat_commands;      /* requests processed */
    uint64_t stat_batches;       /* raft entries proposed */
    uint64_t stat_batch_cmds;    /* commands in those entries */
    uint64_t stat_entry_bytes;   /* bytes of those entries */
    uint64_t stat_rejected_conns; /* connections refused (max-clients) */
    uint64_t stat_slow_closed;   /* slow readers disconnected */
};

/* ---- loop.c ---- */
int fence__server_init(fence_server *s, uv_loop_t *loop, fence_config *cfg);
void fence__server_stop(fence_server *s);
void fence__server_free(fence_server *s);
uint64_t fence__server_now(fence_server *s); /* fsm time on this leader */
/* Append a command (or a read when is_read) to the pending batch, taking a
 * copy of name.  slot may be NULL (internal).  Returns the item, or NULL if
 * memory ran out (the caller replies with an error). */
fence_item *fence__batch_add(fence_server *s, const fence_cmd *cmd, uint8_t op,
                             bool is_read, fence_slot *slot);
/* Propose CANCEL for a wait whose client went away (leader only). */
void fence__cancel_wait(fence_server *s, uint64_t wait_id);
/* Remove a slot from the wait table; true when no other slot waits for
 * the same wait (then the caller cancels it). */
bool fence__wait_remove(fence_server *s, fence_slot *slot);

/* ---- conn.c ---- */
int fence__listen(fence_server *s);
void fence__listen_close(fence_server *s);
fence_slot *fence__slot_new(fence_conn *c, uint8_t op);
/* Make a slot's reply final (copies bytes; frees an orphaned slot). */
void fence__slot_reply(fence_slot *slot, const char *bytes, size_t len);
void fence__slot_error(fence_slot *slot, const char *code, const char *msg);
void fence__slot_free(fence_slot *slot);
void fence__conn_close(fence_conn *c);
void fence__conns_flush(fence_server *s);
void fence__conns_close_all(fence_server *s);

/* ---- cmd.c ---- */
/* Handle one parsed request from c. */
void fence__cmd_dispatch(fence_conn *c, const fence_resp_msg *msg);
/* Turn a command's result (or a wait's event) into the slot's reply. */
void fence__cmd_reply_result(fence_slot *slot, const fence_result *r);
/* Answer a read (LEASE.INFO, LOCK.INFO) from applied state. */
void fence__cmd_reply_read(fence_server *s, fence_slot *slot,
                           const fence_cmd *cmd);
/* Reply for a write that cannot be served now (not leader / not ready). */
void fence__cmd_reply_unavailable(fence_server *s, fence_slot *slot);

#endif /* FENCE_SERVER_H */
