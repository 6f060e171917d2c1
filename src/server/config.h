/* fenced configuration: one table of options (src/base/options.h)
 * drives the command-line flags, the config file (one "name value"
 * directive a line, '#' comments; at most FENCE_OPTS_FILE_MAX bytes and
 * FENCE_OPTS_LINE_MAX a line) and --help/--version.  Everything is parsed
 * into a fence_config, the whole struct is validated, and only then does
 * the daemon use it. */
#ifndef FENCE_SERVER_CONFIG_H
#define FENCE_SERVER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/daemon.h"

/* Most servers in a --peers list (raft voters). */
#define FENCE_PEERS_MAX 16
/* Longest host part of a peer address. */
#define FENCE_HOST_MAX FENCE_DAEMON_BIND_MAX

/* One cluster member as --peers names it: id=host:client-port/raft-port. */
typedef struct fence_peer {
    uint64_t id;                 /* raft server id, >= 1 */
    char host[FENCE_HOST_MAX];   /* IPv4 address (raft_uv_tcp needs one) */
    uint16_t client_port;        /* where its clients connect (NOTLEADER) */
    uint16_t raft_port;          /* where its raft transport listens */
} fence_peer;

/* Everything the daemon can be told.  Strings are NUL-terminated. */
typedef struct fence_config {
    fence_daemon_conf daemon;      /* the options every RESP daemon has
                                    * (daemon/daemon.h) */
    char data_dir[1024];           /* raft log and snapshots */
    uint64_t lock_delay_ms;        /* default lock-delay for grants */
    uint64_t node_id;              /* this server's raft id */
    uint64_t raft_port;            /* raft transport port, 0: single node */
    char peers[2048];              /* --peers text as given */
    uint64_t election_timeout_ms;  /* raft election timeout */
    uint64_t heartbeat_ms;         /* raft heartbeat, 0: election / 10 */
    uint64_t snapshot_threshold;   /* entries between snapshots */
    uint64_t snapshot_trailing;    /* entries kept after a snapshot */
    uint64_t snapshot_log_ratio;   /* log bytes between snapshots, in
                                    * snapshots (raft_fsm.c), 0: off */
    uint64_t snapshot_fork;        /* 1: encode snapshots in a forked child */
    uint64_t join;                 /* 1: joining a running cluster, no bootstrap */
    uint64_t max_leases;           /* live leases (state machine) */
    uint64_t max_locks;            /* locks held or waited on */
    uint64_t max_waiters;          /* waiters queued on one lock */
    uint64_t max_waits;            /* waits queued across all locks */
    uint64_t max_dedup;            /* request ids remembered */
    uint64_t max_bulk;             /* longest bulk string in a request */
    char token_signing_key[1024];  /* signing.key for LOCK/ACQUIRE ... SIGNED,
                                    * "" for none (docs/security.md) */
    char peer_tls_cert[1024];      /* raft mTLS: this node's certificate, "" off */
    char peer_tls_key[1024];       /* raft mTLS: its private key */
    char peer_tls_ca[1024];        /* raft mTLS: the cluster CA */
    uint64_t peer_tls_check_id;    /* 1: peer certificate CN must be node-<id> */

    /* Derived by validation (not options themselves). */
    unsigned n_peers;                   /* entries in peer[] */
    fence_peer peer[FENCE_PEERS_MAX];   /* parsed --peers, or just this node */
} fence_config;

/* Fill cfg from defaults, then the --config file (if any), then the
 * remaining flags, then validate.  Returns 0 on success; 1 if --help or
 * --version was printed (the caller exits 0); -1 on error with a "file:line: message" or
 * "--flag: message" text in err. */
int fence__config_load(fence_config *cfg, int argc, char **argv, char *err,
                       size_t err_cap);

/* The same without a file: defaults, the directives in text[0..len), then
 * validation.  0 or -1 with a "text:line: message" in err. */
int fence__config_load_text(fence_config *cfg, const char *text, size_t len,
                            char *err, size_t err_cap);

/* Print the option table (every option, its bounds and default). */
void fence__config_help(const char *prog);

/* The peer entry with this id, or NULL. */
const fence_peer *fence__config_peer(const fence_config *cfg, uint64_t id);

#endif /* FENCE_SERVER_CONFIG_H */
