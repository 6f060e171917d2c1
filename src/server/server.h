/* Internal structures of the fenced daemon, shared by its files.
 *
 * Data path: client_conn.c puts fenced on the shared connection layer
 * (src/net/conn.h), which reads bytes into a bounded per-connection
 * buffer and parses requests with fence_resp_parse; cmd.c validates each
 * request and either answers it at once (PING, INFO, reads in a
 * single-voter cluster) or submits it to the leader module (src/leader:
 * group commit, leadership phases, waits), which proposes batches as ONE
 * raft entry each through raft_ops.c (its requests to raft and their
 * callbacks), applies them as raft's state machine through raft_fsm.c,
 * and answers each request through the reply sink in reply.c.
 * loop.c only owns the libuv handles (loop check, timer, signals) and is
 * on no request's path.  Every request owns a reply slot in its
 * connection's queue; replies leave strictly in request order, whenever
 * the slot at the head of the queue is ready.
 *
 * Lifetimes: a slot belongs to its connection until the connection closes.
 * A slot handed to the leader module (SLOT_LEADER) is the module's handle:
 * on close the module forgets it first (client_conn.c calls
 * fence__leader_conn_close, which also cancels the connection's waits
 * through the log), then it is freed.
 * A slot held by cluster.c (SLOT_BATCH) is orphaned (conn = NULL) and freed
 * when cluster.c replies to it. */
#ifndef FENCE_SERVER_H
#define FENCE_SERVER_H

#include <raft.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "server/lag.h"
#include "server/observe_set.h"

#include "core/entry.h"
#include "daemon/acl_conns.h"
#include "daemon/acl_srv.h"
#include "daemon/compat.h"
#include "net/conn.h"
#include "daemon/daemon.h"
#include "base/limits.h"
#include "token/signtok.h"
#include "core/elect.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "proto/resp.h"
#include "server/config.h"
#include "leader/leader.h"
#include "server/metrics.h"
#include "server/node.h"
#include "server/signq.h"
#include "server/snapfork.h"

#define FENCED_VERSION "0.1.0"

typedef struct fence_server fence_server;
typedef struct fence_conn fence_conn;
typedef struct fence_slot fence_slot;
typedef struct fence_owner_tag fence_owner_tag;

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
    OP_HEALTH,         /* HEALTH: can this node serve writes */
    OP_SEM_ACQUIRE,    /* SEM.ACQUIRE name n lease (cmd_sem.c) */
    OP_SEM_ACQUIRE_TTL, /* SEM.ACQUIRE name n TTL ms: a dedicated lease
                           (the slot's op once parsed; replies the lease) */
    OP_SEM_RELEASE,    /* SEM.RELEASE */
    OP_SEM_INFO,       /* SEM.INFO (read) */
    OP_LIST,           /* LOCK.LIST, LEASE.LIST (cmd_list.c) */
    OP_LOCK_MULTI,     /* LOCK.MULTI (cmd_multi.c) */
    OP_ACQUIRE_MULTI,  /* ACQUIRE.MULTI (cmd_multi.c) */
    OP_CAMPAIGN,       /* ELECTION.CAMPAIGN */
    OP_PROCLAIM,       /* ELECTION.PROCLAIM */
    OP_RESIGN,         /* ELECTION.RESIGN */
    OP_ELECT_LEADER,   /* ELECTION.LEADER (read) */
    OP_OBSERVE,        /* ELECTION.OBSERVE (observe.c: served from applied
                          state on any node, parked server-side) */
};

/* Where a slot is in its life. */
enum fence_slot_state {
    SLOT_NEW = 0,   /* just created */
    SLOT_BATCH,     /* held by cluster.c: orphaned (conn = NULL) on close */
    SLOT_LEADER,    /* handed to the leader module (its handle) */
    SLOT_SIGNING,   /* its grant is being signed (signq.h): orphaned
                       (conn = NULL) on close, freed when signed */
    SLOT_READY,     /* reply bytes are final */
    SLOT_OBSERVE,   /* a parked ELECTION.OBSERVE (observe.c) */
};

/* One request's place in its connection's reply order: the shared
 * layer's slot (src/net/conn.h: queue order, reply bytes) and fenced's
 * part. */
struct fence_slot {
    fence_net_slot base;   /* the layer's slot (first) */
    fence_conn *conn;      /* owner; NULL once the connection closed */
    uint8_t op;            /* enum fence_op of the request */
    const fence_compat_command *def; /* its row of fence__server_commands,
                              NULL for an unknown command */
    uint8_t state;         /* enum fence_slot_state */
    uint8_t resp;          /* the connection's protocol (2 or 3) when the
                              request arrived: how nil and maps are encoded */
    uint64_t t0_ns;        /* when the request was parsed (latency metric) */
    const fence_signtok_signer *signer; /* LOCK/ACQUIRE ... SIGNED: the key
                            * to sign the grant with (the server's), else NULL */
    uint16_t sign_names_count; /* LOCK.MULTI / ACQUIRE.MULTI ... SIGNED: names
                            * in sign_names */
    uint8_t *sign_names;   /* their names in request order, each a u16
                            * length (native order) and its bytes, to sign
                            * one token string per name (cmd_multi.c);
                            * malloc'd, freed when the reply is made or the
                            * slot is orphaned (fence__slot_drop_names) */
    uint64_t *sign_names_acct; /* the server's sign_names_bytes (counts
                            * sign_names' size while it is held) */
    uint32_t sign_names_size; /* bytes of sign_names */
    uint16_t sem_permits;  /* SEM.ACQUIRE: its n (WRONGTYPE's wording) */
    uint16_t sign_name_len; /* bytes in sign_name */
    char sign_name[FENCE_NAME_MAX]; /* the name a command names (the lock
                            * name to sign with signer; WRONGTYPE's message;
                            * SEM.* keep the semaphore's name: the signed
                            * slot name) */
};

/* One client connection (TCP or Unix socket): the shared layer's
 * connection (buffers, reply queue, limits) and fenced's part. */
struct fence_conn {
    fence_net_conn base;    /* the layer's connection (first) */
    fence_server *srv;      /* the server */
    uint64_t id;            /* for logs (the layer's id) */
    fence_lconn lconn;      /* the leader module's state of this connection */
    fence_compat_conn compat; /* Redis-client state (compat_hook.c) */
    fence_owner_tag *owner;   /* the tag of its last grant, or NULL (owners.c) */
    uint64_t quota_mark;      /* admitted under maxconns (daemon/acl_conns.h) */
    uint32_t observers;       /* its parked ELECTION.OBSERVEs (observe.c) */
};

/* Who a lease was granted to (owners.c): the grantee connection's client
 * name and peer address, shared by every lease granted to it under that
 * name (refcounted), so a million leases from a few connections cost a
 * record of 16 bytes each. */
struct fence_owner_tag {
    uint32_t refs;                          /* records + connections using it */
    char name[FENCE_COMPAT_NAME_MAX + 1];   /* CLIENT SETNAME of the grantee, "" */
    char addr[64];                          /* its peer "ip:port", or "unix" */
};

/* The owner of one lease (owners.c). */
typedef struct fence_owner {
    uint64_t lease;         /* lease id */
    fence_owner_tag *tag;   /* name and address (one reference) */
} fence_owner;

/* Owners in lease-id order (owners.c). */
typedef struct fence_owners {
    fence_owner *v;  /* records, ascending lease id */
    size_t n;        /* records used */
    size_t cap;      /* records allocated */
} fence_owners;

/* Parked ELECTION.OBSERVEs (observe.c). */
typedef struct fence_observer fence_observer;
typedef struct fence_observers {
    fence_obs_set set;      /* parked and waking (observe_set.h: the rule) */
    uv_timer_t timer;       /* the earliest WAIT deadline */
    uint64_t timer_due;     /* uv_now() the timer fires at, UINT64_MAX: stopped */
} fence_observers;

/* The daemon. */
struct fence_server {
    uv_loop_t *loop;             /* the one event loop */
    fence_config *cfg;           /* validated options */
    fence_node node;             /* raft */
    struct raft_fsm raft_fsm;    /* raft's view of the state machine */
    fence_snapfork snap;         /* snapshots encoded in a child (snapfork.h) */
    uint8_t *snap_inline;        /* in-loop snapshot's buffer until finalize */
    uint64_t snap_bytes;         /* the latest snapshot's size (taken or
                                  * restored), 0: none yet (raft_fsm.c) */
    uint64_t applied_bytes;      /* command entries' bytes applied, and */
    uint64_t applied_entries;    /* their count (halved together, raft_fsm.c) */
    fence_fsm *fsm;              /* the core state machine */
    fence_leader *leader;        /* group commit, phases, waits (leader.h) */
    fence_resp_limits resp_lim;  /* parser limits (from cfg) */
    fence_signtok_signer *signer; /* --token-signing-key, or NULL */
    uint64_t sign_names_bytes;    /* held in slots' sign_names (a signed
                                   * multi-lock's names until its reply) */
    fence_signq *signq;          /* signs grants off the loop (signq.h), started
                                  * at the first signed grant, or NULL */
    bool signq_off;              /* it could not start: sign on the loop */

    fence_net net;               /* listeners and client connections */
    fence_compat_ctx compat;     /* Redis-client commands (compat_hook.c) */
    fence_acl_srv acl;           /* users and permissions (acl_hook.c) */
    fence_acl_conns acl_conns;   /* connections per user, maxconns (acl_conns.h) */
    fence_daemon daemon;         /* the RESP daemon skeleton (daemon/daemon.h):
                                  * compat ctx, ACL set-up, listeners, SIGHUP */
    uv_signal_t sig_term;        /* SIGTERM: clean stop */
    uv_signal_t sig_int;         /* SIGINT: clean stop */
    uv_check_t check;            /* end of every loop turn: leader step, flush */
    uv_timer_t tick_timer;       /* leader: next fsm deadline */
    fence_lag lag;               /* loop-lag monitor (lag.h) */
    bool stopping;               /* shutdown started */
    int exit_code;               /* process exit status */

    uint64_t start_ms;           /* monotonic ms at start (uptime) */
    uint64_t stat_commands;      /* requests processed */
    fence_srv_metrics metrics;   /* metric families, /metrics, /health (metrics.c) */
    fence_owners owners;         /* who was granted each lease (owners.c) */
    fence_observers obs;         /* parked ELECTION.OBSERVEs (observe.c) */
};

/* ---- loop.c: the libuv handles, start and stop ---- */
int fence__server_init(fence_server *s, uv_loop_t *loop, fence_config *cfg);
void fence__server_stop(fence_server *s);
void fence__server_free(fence_server *s);

/* ---- raft_ops.c: the leader module's requests to raft ---- */
/* Fill ops' propose, barrier, is_leader, voters, term, now_ms and log. */
void fence__raft_ops(fence_leader_ops *ops);

/* ---- raft_fsm.c: the state machine raft drives ---- */
/* Create s->fsm: the core over malloc, its hash tables keyed by a random
 * seed.  0, or -1 (logged). */
int fence__raft_fsm_create(fence_server *s);
/* Set up s->raft_fsm (apply, snapshot, restore, finalize). */
void fence__raft_fsm_init(fence_server *s);
/* Encode snapshots in a forked child (after snapfork init succeeded). */
void fence__raft_fsm_async(fence_server *s);

/* ---- owners.c ---- */
void fence__owner_record(fence_conn *c, uint64_t lease);
const fence_owner *fence__owner_find(fence_server *s, uint64_t lease);
void fence__owner_conn_closed(fence_conn *c);
void fence__owners_free(fence_server *s);

/* ---- observe.c: ELECTION.OBSERVE ---- */
void fence__observe_init(fence_server *s);
void fence__observe_close(fence_server *s); /* closes the timer handle */
/* ELECTION.OBSERVE name [AFTER revision] [WAIT ms]: answer or park. */
void fence__observe_cmd(fence_server *s, fence_conn *c, fence_slot *slot,
                        const fence_resp_msg *m);
/* Once per loop turn: wake the observers whose election changed. */
void fence__observe_poll(fence_server *s);
/* c is closing: forget its observers (their slots go with it). */
void fence__observe_conn_closed(fence_conn *c);

/* ---- reply_elect.c ---- */
/* Reply to slot with an election's state ([value|nil, token, lease,
 * revision]); nil_if_none: plain nil when it has no leader (LEADER). */
void fence__elect_reply_state(fence_slot *slot, const fence_fsm_elect_state *st,
                              bool nil_if_none);

/* ---- cmd_list.c ---- */
/* LOCK.LIST [pattern] [COUNT n] [CURSOR c] and LEASE.LIST [COUNT n]
 * [CURSOR c], answered from applied state. */
void fence__list_locks(fence_server *s, fence_slot *slot, const fence_resp_msg *m);
void fence__list_leases(fence_server *s, fence_slot *slot, const fence_resp_msg *m);

/* ---- metrics.c (the server side of metrics.h) ---- */
/* Once per loop turn: publish the core's, raft's and the connection
 * layer's numbers and the health state. */
void fence__server_metrics_publish(fence_server *s);
/* A slot's reply is final: its command's latency; an error reply's code. */
void fence__server_metrics_slot(fence_slot *slot, const char *code);
/* A LOCK/ACQUIRE was granted (r): the acquire-wait metric for a grant
 * that ended a wait, and the audit line. */
void fence__server_metrics_grant(fence_slot *slot, const fence_result *r);
/* An entry of n commands (its results, as apply decoded them) was applied
 * on this leader: its batch size. */
void fence__server_metrics_batch(fence_server *s, size_t n);

/* ---- client_conn.c: fenced on the shared connection layer ---- */
int fence__listen(fence_server *s);
void fence__listen_close(fence_server *s);

/* ---- conns.c: fenced's connections as a whole ---- */
void fence__conn_close(fence_conn *c);
/* Send every reply c is owed, then close it (QUIT). */
void fence__conn_close_after_flush(fence_conn *c);
void fence__conns_flush(fence_server *s);
void fence__conns_close_all(fence_server *s);

/* ---- acl_hook.c ---- */
void fence__server_acl_free(fence_server *s);
/* true: answered by the gate (NOAUTH, NOPERM, ACL ...): do not dispatch m. */
bool fence__server_acl_gate(fence_conn *c, const fence_resp_msg *m);
void fence__server_acl_stamp(fence_conn *c, fence_cmd *cmd);
bool fence__server_acl_admin(fence_conn *c);
/* SEM.ACQUIRE: the user's key patterns allow every slot fence name#i. */
bool fence__server_acl_slots_ok(fence_conn *c, const uint8_t *name, uint16_t len, uint32_t n);

/* ---- compat_hook.c ---- */
/* true: answered by the compat module (do not dispatch m). */
bool fence__server_compat(fence_conn *c, const fence_resp_msg *m);

/* ---- cmd.c: the command table ---- */
/* Handle one parsed request from c: answer it, or submit it to the leader
 * module (whose answer comes through the reply sink). */
void fence__cmd_dispatch(fence_conn *c, const fence_resp_msg *msg);

/* ---- cmd_args.c: the command table's argument parsers ---- */
/* Argument a as an integer in [min, max] (else an ERR reply naming what,
 * and -1); the options WAIT and REQID (and LOCKDELAY when lockdelay) in
 * argv[first..end) (else an ERR reply and -1); the options allowed
 * (OPTF_*: each at most once, and only where the command takes it). */
enum { OPTF_WAIT = 1, OPTF_LOCKDELAY = 2, OPTF_REQID = 4,
       OPTF_SHARED = 8 /* the word SHARED (LOCK, ACQUIRE: a shared hold) */ };
int fence__cmd_arg_u64(fence_slot *slot, const fence_resp_arg *a, const char *what,
                       uint64_t min, uint64_t max, uint64_t *out);
int fence__cmd_lock_options(fence_slot *slot, const fence_resp_msg *m, uint32_t first,
                            uint32_t end, bool lockdelay, fence_cmd *cmd);
int fence__cmd_parse_options(fence_slot *slot, const fence_resp_msg *m, uint32_t first,
                             uint32_t end, unsigned allowed, fence_cmd *cmd);

/* ---- cmd_multi.c ---- */
/* Parse LOCK.MULTI / ACQUIRE.MULTI (slot->def) into cmd, its names into
 * names[FENCE_MULTI_NAMES_MAX] (borrowed from m); 0, or -1 after an error
 * reply. */
int fence__cmd_multi_parse(fence_server *s, fence_slot *slot, const fence_resp_msg *m,
                           fence_cmd *cmd, fence_name *names);

/* ---- slot.c ---- */
/* Make a slot's reply final (copies bytes; frees an orphaned slot). */
void fence__slot_reply(fence_slot *slot, const char *bytes, size_t len);
void fence__slot_error(fence_slot *slot, const char *code, const char *msg);

/* ---- reply.c: the reply sink, results as RESP ---- */
/* Fill ops' reply_result, reply_read and reply_error (ctx: the server). */
void fence__reply_sink(fence_leader_ops *ops);
/* Turn a command's result (or a wait's event) into the slot's reply. */
void fence__cmd_reply_result(fence_slot *slot, const fence_result *r);
/* cmd_sem.c: the semaphore commands' replies, and WRONGTYPE. */
void fence__cmd_sem_keep_name(fence_slot *slot, const fence_cmd *cmd);
void fence__cmd_sem_keep_multi_name(fence_server *s, fence_slot *slot, const fence_cmd *cmd);
void fence__cmd_reply_wrongtype(fence_slot *slot, const fence_result *r);
/* LOCK.MULTI ... SIGNED: [signed token per name] in request order;
 * ACQUIRE.MULTI ... SIGNED: [[signed token per name], lease] (cmd_multi.c). */
void fence__cmd_multi_signed_reply(fence_slot *slot, const fence_result *r);
/* Free a slot's sign_names (slot.c; NULL is fine). */
void fence__slot_drop_names(fence_slot *slot);
/* "<name> is <its kind>" (a semaphore, a slot, an election, a lock) from the
 * state now into out: the wording of every WRONGTYPE (cmd_sem.c). */
void fence__cmd_kind_words(fence_fsm *fsm, const uint8_t *name, uint16_t name_len, char *out,
                           size_t cap);
void fence__cmd_sem_reply(fence_slot *slot, const fence_result *r);
void fence__cmd_sem_info(fence_server *s, fence_slot *slot, const fence_cmd *cmd);
/* Answer a read (LEASE.INFO, LOCK.INFO) from applied state. */
void fence__cmd_reply_read(fence_server *s, fence_slot *slot,
                           const fence_cmd *cmd);
/* Reply for a write that cannot be served now (not leader / not ready). */
void fence__cmd_reply_unavailable(fence_server *s, fence_slot *slot);
/* Reply for the leader module's error err (FENCE_LERR_*). */
void fence__cmd_reply_error(fence_server *s, fence_slot *slot, int err);

#endif /* FENCE_SERVER_H */
