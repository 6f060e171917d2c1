/* fence-store configuration: one option table (src/common/options.h)
 * drives the flags, the --config file and --help; the whole struct is then
 * validated. */
#ifndef FENCE_STORE_CONFIG_H
#define FENCE_STORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Everything fence-store can be told. */
typedef struct fence_store_config {
    uint64_t port;           /* TCP port to listen on */
    uint64_t metrics_port;   /* HTTP /metrics and /health, 0: off */
    char metrics_bind[64];   /* its address (default loopback) */
    char bind[64];           /* address to listen on (IPv4/IPv6 literal) */
    char unix_socket[108];   /* Unix socket path, "" for none */
    uint64_t tls_port;       /* client TLS port, 0: none */
    char tls_cert[1024];     /* TLS certificate chain file, "" none */
    char tls_key[1024];      /* its private key file */
    char tls_ca[1024];       /* CA file for client certificates */
    char tls_auth_clients[16]; /* yes, no, optional, "" (by tls_ca) */
    uint64_t tls_handshake_ms; /* TLS handshake deadline */
    char data_dir[1024];     /* directory of the LMDB environment */
    char config_file[1024];  /* the --config file read, "" for none */
    char token_verify_keys[1024]; /* verify.keys: accept only signed tokens
                              * that verify (docs/security.md); "" for none */
    uint64_t max_value;      /* largest value in bytes */
    uint64_t map_size;       /* LMDB map size in bytes (database ceiling) */
    uint64_t wal_size;       /* bytes per write-ahead log file (when
                              * created) */
    uint64_t max_clients;    /* most connections at once */
    uint64_t max_pipeline;   /* unanswered requests per connection */
    uint64_t max_obuf;       /* reply bytes queued per client before it is
                              * disconnected as a slow reader */
    bool ignore_tokens;      /* control mode: admit every token */
    char log_level[16];      /* debug, info, warn, error (or 0..3, old) */
    char log_file[1024];     /* "" for stderr */
    char acl_file[1024];     /* users and permissions, "" for none */
    bool insecure;           /* serve a non-loopback bind without users */
    uint64_t max_conn_memory;    /* all connections' buffers (0: no bound) */
    uint64_t idle_timeout_ms;    /* close idle connections (0: never) */
    uint64_t request_timeout_ms; /* incomplete request deadline (0: none) */
    uint64_t auth_timeout_ms;    /* login deadline with --acl-file (0: none) */
    char log_format[8];      /* text or json */

    /* Derived by validation. */
    int log_level_num;       /* enum fence_log_level of log_level */
    int tls_auth;            /* enum fence_tls_auth in effect */
} fence_store_config;

/* fence__store_config_load's results besides 0 and -1. */
#define FENCE_STORE_CONFIG_HELP 1    /* --help: printed, exit 0 */
#define FENCE_STORE_CONFIG_VERSION 2 /* --version: printed, exit 0 */

/* Defaults, then the --config file, then the flags in argv, then
 * validation.  Returns 0, FENCE_STORE_CONFIG_HELP or _VERSION (the text
 * went to stdout), or -1 with a message ("--flag: ..." or
 * "file:line: ...") in err. */
int fence__store_config_load(fence_store_config *cfg, int argc, char **argv,
                             char *err, size_t cap);

/* The same over config text (no flags, no file): for the tests. */
int fence__store_config_load_text(fence_store_config *cfg, const char *text,
                                  size_t len, char *err, size_t cap);

#endif /* FENCE_STORE_CONFIG_H */
