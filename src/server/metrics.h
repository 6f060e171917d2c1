/* fenced's metrics: the families it exports (docs/metrics.md lists them)
 * and the small hooks the rest of the daemon calls.  Everything here runs
 * on the event loop except fence__srv_health, which the HTTP thread calls
 * and which only reads atomics.
 *
 * The registry exists whether or not --metrics-port is set (updates are
 * relaxed atomic adds); the HTTP endpoint starts only with the option. */
#ifndef FENCE_SERVER_METRICS_H
#define FENCE_SERVER_METRICS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/log.h"
#include "ops/metrics.h"

/* Audit lines of one kind per second at most (the rest are counted). */
#define FENCE_AUDIT_BURST 20

/* Commands the latency histogram labels (cap on its "command" label). */
#define FENCE_SRV_METRIC_COMMANDS 32
/* Error codes and limit names counted apart (caps on their labels). */
#define FENCE_SRV_METRIC_CODES 16
#define FENCE_SRV_METRIC_LIMITS 16

/* The counts the core keeps for metrics (from fence_fsm_stats), passed in
 * by value so this file does not depend on the core's struct layout. */
typedef struct fence_srv_core_counts {
    uint64_t leases;                 /* live leases */
    uint64_t locks;                  /* held locks */
    uint64_t waiters;                /* queued waiters */
    uint64_t grants;                 /* grants so far (this process) */
    uint64_t handoffs;               /* grants to a queued waiter */
    uint64_t expirations;            /* leases that ran out */
    uint64_t expirations_with_locks; /* ... while holding locks */
    uint64_t revocations;            /* LEASE.REVOKE applied */
} fence_srv_core_counts;

/* fenced's families and the health state /health reads. */
typedef struct fence_srv_metrics {
    fence_metrics *reg;              /* the registry */
    fence_metrics_http *http;        /* the endpoint, NULL without --metrics-port */
    fence_metric *grants;            /* fenced_grants_total */
    fence_metric *handoffs;          /* fenced_handoffs_total */
    fence_metric *expirations;       /* fenced_lease_expirations_total */
    fence_metric *expirations_locks; /* fenced_lease_expirations_with_locks_total */
    fence_metric *revocations;       /* fenced_revocations_total */
    fence_metric *leases;            /* fenced_leases */
    fence_metric *locks_held;        /* fenced_locks_held */
    fence_metric *waiters;           /* fenced_lock_waiters */
    fence_metric *acquire_wait;      /* fenced_acquire_wait_seconds */
    fence_metric *cmd_latency;       /* fenced_command_duration_seconds{command} */
    fence_metric *term;              /* fenced_raft_term */
    fence_metric *commit_index;      /* fenced_raft_commit_index */
    fence_metric *applied_index;     /* fenced_raft_applied_index */
    fence_metric *is_leader;         /* fenced_is_leader */
    fence_metric *healthy;           /* fenced_healthy */
    fence_metric *leader_changes;    /* fenced_leader_changes_total */
    fence_metric *append_latency;    /* fenced_log_append_duration_seconds */
    fence_metric *batch_size;        /* fenced_batch_commands */
    fence_metric *connections;       /* fenced_connections */
    fence_metric *rejections;        /* fenced_rejections_total{limit} */
    fence_metric *errors;            /* fenced_error_replies_total{code} */
    fence_metric *peer_refusals;     /* fenced_raft_peer_refusals_total{reason} */
    fence_metric *auth_failures;     /* fenced_auth_failures_total */
    fence_metric_series *cmd_series[FENCE_SRV_METRIC_COMMANDS]; /* latency series by
                                      * enum fence_op, found on first use */
    uint64_t leader_id;              /* last leader id seen (leader changes) */
    uint64_t expired_held_seen;      /* expirations_with_locks already audited */
    fence_log_limit audit_grant;     /* rate limit of grant audit lines */
    fence_log_limit audit_expiry;    /* rate limit of expiry audit lines */
    _Atomic int health;              /* 1: can serve writes (read by /health) */
    _Atomic int health_why;          /* enum fence_srv_health_why */
} fence_srv_metrics;

/* Why this node can or cannot serve writes. */
enum fence_srv_health_why {
    FENCE_HEALTH_STARTING = 0,  /* not yet known */
    FENCE_HEALTH_LEADER,        /* ready leader */
    FENCE_HEALTH_FOLLOWER,      /* follower of a known ready leader */
    FENCE_HEALTH_CATCHUP,       /* leader, LEADER_START not applied yet */
    FENCE_HEALTH_NO_LEADER,     /* candidate or follower without a leader */
    FENCE_HEALTH_STOPPING,      /* shutting down */
};

/* Register every family.  Returns 0, or -1 with the reason in errbuf. */
int fence__srv_metrics_init(fence_srv_metrics *m, char *errbuf, size_t errcap);

/* Start the endpoint on bind:port (port > 0).  Returns 0, or -1 with the
 * reason in errbuf. */
int fence__srv_metrics_listen(fence_srv_metrics *m, const char *bind, int port,
                              char *errbuf, size_t errcap);

/* Stop the endpoint (joins its thread) and free the registry. */
void fence__srv_metrics_free(fence_srv_metrics *m);

/* After an entry applied: publish the core's counts. */
void fence__srv_metrics_core(fence_srv_metrics *m, const fence_srv_core_counts *c);

/* Raft state: term, commit and applied index, and the leader this node
 * knows (0: none; a change counts one leader change). */
void fence__srv_metrics_raft(fence_srv_metrics *m, uint64_t term, uint64_t commit,
                             uint64_t applied, uint64_t leader_id, bool is_leader);

/* Publish whether this node can serve writes, and why. */
void fence__srv_metrics_health_set(fence_srv_metrics *m, int why);

/* The health answer (also of the HEALTH command): true when writes can be
 * served; reason receives a short sentence.  Safe on any thread. */
bool fence__srv_health(void *arg, char *reason, size_t cap);

/* An error reply with this code ("ERR", "LIMIT", ...) went out; a LIMIT
 * reply also names its limit ("leases", "locks", ...), else NULL. */
void fence__srv_metrics_error(fence_srv_metrics *m, const char *code, const char *limit);

/* A request was refused by a limit outside the command path (a
 * connection over max-clients, a slow reader, a full pipeline). */
void fence__srv_metrics_reject(fence_srv_metrics *m, const char *limit);

/* A request of this command (upper-case name) was answered after secs. */
void fence__srv_metrics_command(fence_srv_metrics *m, const char *command, double secs);

/* Monotonic seconds (for the latency hooks). */
double fence__srv_metrics_now(void);

#endif /* FENCE_SERVER_METRICS_H */
