/* fenced configuration: one table of options (src/common/options.h)
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

/* Most servers in a --peers list (raft voters). */
#define FENCE_PEERS_MAX 16
/* Longest host part of a peer address. */
#define FENCE_HOST_MAX 64

/* One cluster member as --peers names it: id=host:client-port/raft-port. */
typedef struct fence_peer {
    uint64_t id;                 /* raft server id, >= 1 */
    char host[FENCE_HOST_MAX];   /* IPv4 address (raft_uv_tcp needs one) */
    uint16_t client_port;        /* where its clients connect (NOTLEADER) */
    uint16_t raft_port;          /* where its raft transport listens */
} fence_peer;

/* Everything the daemon can be told.  Strings are NUL-terminated. */
typedef struct fence_config {
    uint64_t port;                 /* client TCP port */
    uint64_t metrics_port;         /* HTTP /metrics and /health, 0: off */
    char metrics_bind[FENCE_HOST_MAX]; /* its address (default loopback) */
    char bind[FENCE_HOST_MAX];     /* client TCP address */
    char unix_socket[108];         /* Unix socket path, "" for none */
    uint64_t tls_port;             /* client TLS port, 0: none */
    char tls_cert[1024];           /* TLS certificate chain file, "" none */
    char tls_key[1024];            /* its private key file */
    char tls_ca[1024];             /* CA file for client certificates */
    char tls_auth_clients[16];     /* yes, no, optional, "" (by tls_ca) */
    uint64_t tls_handshake_ms;     /* TLS handshake deadline */
    char data_dir[1024];           /* raft log and snapshots */
    char config_file[1024];        /* the file read, "" for none */
    uint64_t lock_delay_ms;        /* default lock-delay for grants */
    uint64_t node_id;              /* this server's raft id */
    uint64_t raft_port;            /* raft transport port, 0: single node */
    char peers[2048];              /* --peers text as given */
    uint64_t election_timeout_ms;  /* raft election timeout */
    uint64_t heartbeat_ms;         /* raft heartbeat, 0: election / 10 */
    uint64_t snapshot_threshold;   /* entries between snapshots */
    uint64_t snapshot_trailing;    /* entries kept after a snapshot */
    uint64_t snapshot_fork;        /* 1: encode snapshots in a forked child */
    uint64_t join;                 /* 1: joining a running cluster, no bootstrap */
    uint64_t max_clients;          /* open client connections */
    uint64_t max_leases;           /* live leases (state machine) */
    uint64_t max_locks;            /* locks held or waited on */
    uint64_t max_waiters;          /* waiters queued on one lock */
    uint64_t max_waits;            /* waits queued across all locks */
    uint64_t max_dedup;            /* request ids remembered */
    uint64_t max_bulk;             /* longest bulk string in a request */
    uint64_t max_pipeline;         /* unanswered requests per connection */
    uint64_t max_obuf;             /* unsent reply bytes per connection */
    char log_level[16];            /* debug, info, warn, error */
    char log_file[1024];           /* "" for stderr */
    char acl_file[1024];           /* users and permissions, "" for none */
    bool insecure;                 /* serve a non-loopback bind without users */
    uint64_t max_conn_memory;      /* all connections' buffers, bytes (0: no bound) */
    uint64_t idle_timeout_ms;      /* close idle connections (0: never) */
    uint64_t request_timeout_ms;   /* incomplete request deadline (0: none) */
    uint64_t auth_timeout_ms;      /* login deadline with --acl-file (0: none) */
    char log_format[8];            /* text or json */
    char token_signing_key[1024];  /* signing.key for LOCK/ACQUIRE ... SIGNED,
                                    * "" for none (docs/security.md) */
    char peer_tls_cert[1024];      /* raft mTLS: this node's certificate, "" off */
    char peer_tls_key[1024];       /* raft mTLS: its private key */
    char peer_tls_ca[1024];        /* raft mTLS: the cluster CA */
    uint64_t peer_tls_check_id;    /* 1: peer certificate CN must be node-<id> */

    /* Derived by validation (not options themselves). */
    unsigned n_peers;                   /* entries in peer[] */
    fence_peer peer[FENCE_PEERS_MAX];   /* parsed --peers, or just this node */
    int log_level_num;                  /* parsed log_level */
    int tls_auth;                       /* enum fence_tls_auth in effect */
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
