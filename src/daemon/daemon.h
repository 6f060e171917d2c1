/* The RESP daemon skeleton shared by fenced and fence-store: what a
 * daemon on the shared connection layer (net/conn.h) has in common with
 * the other, written once.  A daemon adds its command table, its state
 * and its own options; everything below is the same in both by
 * construction:
 *
 *   - the shared options: fields (fence_daemon_conf, one member of each
 *     daemon's config struct), option rows (FENCE_DAEMON_OPT_ROWS, a table
 *     fragment both tables include) and the checks across them
 *     (fence__daemon_conf_check: log level and format, the safe-bind rule,
 *     the TLS files);
 *   - logging: one macro family (FENCE_LOG_*, base/log.h), started by
 *     fence__daemon_log_start;
 *   - the connection-layer limits from those options and the listeners
 *     (TCP, TLS, Unix socket) with one set of log lines;
 *   - AUTH/HELLO/CLIENT: the compat context (HELLO's server name, the
 *     command table, CLIENT LIST over every connection, the AUTH and
 *     CLIENT LIST visibility callbacks) and the ACL set-up: --acl-file or
 *     the default user, the gate's command table;
 *   - SIGHUP: reopen the --log-file, read the --acl-file again, then the
 *     daemon's own keys through a hook (a bad file keeps what was in
 *     force).
 *
 * The daemon keeps its fence_compat_ctx, fence_acl_srv, fence_acl_conns
 * and fence_net in its own server struct and hands their addresses
 * (fence_daemon_parts) to a fence_daemon it also holds; the compat
 * callbacks get the fence_daemon as their argument.  Per connection the
 * skeleton does the open (compat state, default login), the ACL gate with
 * the user's maxconns, the compat commands, and the close.  One thread:
 * everything here runs on the daemon's loop thread.
 *
 * Who reaches what: nothing here parses client bytes (the gate and the
 * compat module do, as before); the options come from the operator's
 * flags and file, bounded by the option rows. */
#ifndef FENCE_COMMON_DAEMON_H
#define FENCE_COMMON_DAEMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "daemon/acl_conns.h"
#include "daemon/acl_srv.h"
#include "daemon/compat.h"
#include "net/conn.h"
#include "base/options.h"
#include "proto/resp.h"

/* Longest --bind address (an IP literal or a name). */
#define FENCE_DAEMON_BIND_MAX 64

/* The options every RESP daemon has.  Strings are NUL-terminated. */
typedef struct fence_daemon_conf {
    uint64_t port;                      /* client TCP port, 0: none */
    uint64_t metrics_port;              /* HTTP /metrics and /health, 0: off */
    char metrics_bind[FENCE_DAEMON_BIND_MAX]; /* its address (default loopback,
                                         * whatever bind is) */
    char bind[FENCE_DAEMON_BIND_MAX];   /* client address (IPv4/IPv6 literal) */
    char unix_socket[108];              /* Unix socket path, "" for none */
    uint64_t tls_port;                  /* client TLS port, 0: none */
    char tls_cert[1024];                /* TLS certificate chain file, "" none */
    char tls_key[1024];                 /* its private key file */
    char tls_ca[1024];                  /* CA file for client certificates */
    char tls_auth_clients[16];          /* yes, no, optional, "" (by tls_ca) */
    uint64_t tls_handshake_ms;          /* TLS handshake deadline */
    char config_file[1024];             /* the --config file read, "" none */
    uint64_t max_clients;               /* open client connections */
    uint64_t max_pipeline;              /* unanswered requests per connection */
    uint64_t max_obuf;                  /* unsent reply bytes per connection */
    char log_level[16];                 /* debug, info, warn, error */
    char log_file[1024];                /* "" for stderr */
    char log_format[8];                 /* text or json */
    char acl_file[1024];                /* users and permissions, "" none */
    bool insecure;                      /* serve a non-loopback bind without
                                         * users or with plain TCP */
    uint64_t max_conn_memory;           /* all connections' buffers (0: none) */
    uint64_t idle_timeout_ms;           /* close idle connections (0: never) */
    uint64_t request_timeout_ms;        /* incomplete request deadline (0: none) */
    uint64_t auth_timeout_ms;           /* login deadline with --acl-file */

    /* Derived by fence__daemon_conf_check. */
    int log_level_num;                  /* enum fence_log_level of log_level */
    int tls_auth;                       /* enum fence_tls_auth in effect */
} fence_daemon_conf;

/* The shared option rows, for a daemon's config struct type T whose
 * fence_daemon_conf member is called "daemon".  The daemon's parameters
 * are the intended differences (tests/integration/test_fenced_store_help.py):
 *   port_def            its default client port (each daemon its own);
 *   clients_max, clients_def   --max-clients bound and default;
 *   obuf_min, obuf_max  --max-obuf bounds (fence-store's must hold a
 *                       value of --max-value);
 *   level_flags         0, or FENCE_OPT_F_LOGDIGIT where the old digit
 *                       levels are still accepted (deprecated);
 *   insecure_risk       what anyone who reaches an open port may do. */
#define FENCE_DAEMON_OPT_ROWS(T, port_def, clients_max, clients_def, obuf_min, obuf_max,      \
                              level_flags, insecure_risk)                                    \
    FENCE_OPT_U64_ROW(T, "port", daemon.port, 0, 65535, (port_def), "<port>",                 \
                      "client TCP port (0: none; then tls-port or unix-socket)"),             \
    FENCE_OPT_U64_ROW(T, "metrics-port", daemon.metrics_port, 0, 65535, 0, "<port>",          \
                      "serve /metrics and /health over HTTP on --metrics-bind (0: off)"),     \
    FENCE_OPT_STR_REQ_ROW(T, "metrics-bind", daemon.metrics_bind, "127.0.0.1", "<addr>",       \
                          "address of the metrics port (an IPv4 or IPv6 literal; loopback "  \
                          "by default, whatever --bind is)"),                                \
    FENCE_OPT_STR_REQ_ROW(T, "bind", daemon.bind, "127.0.0.1", "<addr>",                      \
                          "client address (an IPv4 or IPv6 literal)"),                        \
    FENCE_OPT_STR_ROW(T, "unix-socket", daemon.unix_socket, "", "<path>",                     \
                      "also listen on this Unix socket (\"\" for none)"),                     \
    FENCE_OPT_U64_ROW(T, "tls-port", daemon.tls_port, 0, 65535, 0, "<port>",                  \
                      "client TLS port beside the plain one (0: no TLS listener)"),           \
    FENCE_OPT_STR_ROW(T, "tls-cert", daemon.tls_cert, "", "<file>",                           \
                      "TLS: this server's certificate chain (PEM)"),                          \
    FENCE_OPT_STR_ROW(T, "tls-key", daemon.tls_key, "", "<file>",                             \
                      "TLS: its private key (PEM, unencrypted; never logged)"),               \
    FENCE_OPT_STR_ROW(T, "tls-ca", daemon.tls_ca, "", "<file>",                               \
                      "TLS: CA for client certificates; given, clients must present one "     \
                      "(mTLS)"),                                                              \
    FENCE_OPT_STR_ROW(T, "tls-auth-clients", daemon.tls_auth_clients, "",                     \
                      "<yes|no|optional>",                                                    \
                      "TLS client certificates (default: yes with tls-ca, else no)"),         \
    FENCE_OPT_U64_ROW(T, "tls-handshake-timeout-ms", daemon.tls_handshake_ms,                 \
                      FENCE_TLS_HANDSHAKE_MS_MIN, FENCE_TLS_HANDSHAKE_MS_MAX,                 \
                      FENCE_TLS_HANDSHAKE_MS_DEFAULT, "<ms>",                                 \
                      "TLS: a client that has not finished the handshake by then is "         \
                      "closed"),                                                              \
    FENCE_OPT_STR_ROW(T, "config", daemon.config_file, "", "<file>",                          \
                      "read directives (\"name value\" a line, # comments) before the "       \
                      "flags"),                                                               \
    FENCE_OPT_U64_ROW(T, "max-clients", daemon.max_clients, 1, (clients_max), (clients_def),  \
                      "<n>", "open client connections (one more is refused with -LIMIT)"),    \
    FENCE_OPT_U64_ROW(T, "max-pipeline", daemon.max_pipeline, 1, 1000000,                     \
                      FENCE_PIPELINE_DEFAULT, "<n>",                                          \
                      "unanswered requests per connection (reading pauses when full)"),       \
    FENCE_OPT_SIZE_ROW(T, "max-obuf", daemon.max_obuf, (obuf_min), (obuf_max),                \
                       FENCE_OBUF_DEFAULT, "<bytes>",                                         \
                       "unsent reply bytes per connection before it is disconnected as a "    \
                       "slow reader"),                                                        \
    FENCE_OPT_ALIAS_ROW("obuf-max", "max-obuf"),                                              \
    FENCE_OPT_LEVEL_ROW(T, "log-level", daemon.log_level, "info", "<level>",                  \
                        "debug, info, warn or error", (level_flags)),                         \
    FENCE_OPT_STR_ROW(T, "log-file", daemon.log_file, "", "<file>",                           \
                      "append logs here instead of stderr (reopened on SIGHUP)"),             \
    FENCE_OPT_STR_ROW(T, "log-format", daemon.log_format, "text", "<text|json>",              \
                      "log lines as text, or one JSON object a line"),                        \
    FENCE_OPT_STR_ROW(T, "acl-file", daemon.acl_file, "", "<file>",                           \
                      "users, passwords and permissions (Redis users.acl subset; "            \
                      "docs/security.md; reloaded by ACL LOAD and SIGHUP)"),                  \
    FENCE_OPT_BOOL_ROW(T, "insecure", daemon.insecure, 0,                                     \
                       "allow a non-loopback --bind without --acl-file, or with plain TCP "   \
                       "clients (not --tls-port with --port 0): anyone who reaches the port " \
                       insecure_risk ", or read passwords"),                                  \
    FENCE_OPT_U64_ROW(T, "max-conn-memory", daemon.max_conn_memory, 0, (1ULL << 40),          \
                      FENCE_CONN_MEMORY_DEFAULT, "<bytes>",                                   \
                      "read buffers and unsent replies of all connections together "          \
                      "(0: no bound)"),                                                       \
    FENCE_OPT_U64_ROW(T, "idle-timeout-ms", daemon.idle_timeout_ms, 0, (1ULL << 40), 0,       \
                      "<ms>",                                                                 \
                      "close a connection idle this long (nothing owed, no request; "         \
                      "0: never)"),                                                           \
    FENCE_OPT_U64_ROW(T, "request-timeout-ms", daemon.request_timeout_ms, 0, (1ULL << 40),    \
                      FENCE_REQUEST_TIMEOUT_MS_DEFAULT, "<ms>",                               \
                      "close a connection whose incomplete request takes longer "             \
                      "(0: never)"),                                                          \
    FENCE_OPT_U64_ROW(T, "auth-timeout-ms", daemon.auth_timeout_ms, 0, (1ULL << 40),          \
                      FENCE_AUTH_TIMEOUT_MS_DEFAULT, "<ms>",                                  \
                      "with --acl-file: close a connection not logged in after this long "    \
                      "(0: never)")

/* The checks across the shared options, after the option engine filled
 * them: the derived fields, the log format, the safe-bind rule
 * (daemon/acl_srv.h fence__acl_srv_check_bind) and the TLS files
 * (net/tls.h fence__tls_conf_check).  0, or -1 with "name: message"
 * in err. */
int fence__daemon_conf_check(fence_daemon_conf *c, char *err, size_t cap);

/* Whether the clients reach the daemon by TLS only (acl_srv.h). */
bool fence__daemon_tls_only(const fence_daemon_conf *c);

/* Start logging as the options say (format, level, --log-file).  0, or
 * -1 after printing "PROG: log-file F: cannot open: reason" to stderr. */
int fence__daemon_log_start(const fence_daemon_conf *c, const char *prog);

/* Before anything listens: the loud start-up lines about what is exposed
 * (daemon/startup_warn.h). */
void fence__daemon_startup_warn(const fence_daemon_conf *c, const char *prog);

/* Fill lim's client count, pipeline and output bounds and the guards'
 * limits (memory, idle, request and login deadlines) from the options;
 * the daemon sets the rest (read buffer, slot and connection sizes, EOF
 * flush, parser limits). */
void fence__daemon_net_limits(const fence_daemon_conf *c, fence_net_limits *lim);

/* A daemon's hook on SIGHUP after the log and the ACL: read its own keys
 * again (a bad file keeps the old ones, logged). */
typedef void (*fence_daemon_reload_fn)(void *arg);

/* What a daemon hands the skeleton: its own parts (they live in its server
 * struct, where its request path uses them) and its command table. */
typedef struct fence_daemon_parts {
    const char *prog;              /* "fenced" or "fence-store" (HELLO, logs) */
    const fence_daemon_conf *conf; /* the shared options (the daemon's) */
    fence_net *net;                /* the daemon's connection layer */
    fence_compat_ctx *compat;      /* the daemon's compat context */
    fence_acl_srv *acl;            /* the daemon's users */
    fence_acl_conns *acl_conns;    /* its connections per user (maxconns) */
    size_t compat_off;             /* offsetof(its connection, fence_compat_conn) */
    size_t quota_off;              /* offsetof(its connection, uint64_t maxconns mark) */
    const fence_compat_command *commands; /* its command table */
    size_t n_commands;             /* rows in commands */
} fence_daemon_parts;

/* The skeleton's state inside a daemon's server struct. */
typedef struct fence_daemon {
    fence_daemon_parts p;          /* as given to fence__daemon_users_init */
} fence_daemon;

/* The skeleton's signal handling: a struct of its own, so that a daemon
 * can start it before its server struct is set up (fenced zeroes its
 * fence_server, and the fence_daemon in it, at init; a SIGHUP that comes
 * before fence__daemon_users_init reopens the log and reloads no ACL). */
typedef struct fence_daemon_signals {
    fence_daemon *d;               /* the skeleton it acts on */
    uv_signal_t sighup;            /* SIGHUP (unreferenced) */
    bool on;                       /* sighup is initialized */
    fence_daemon_reload_fn reload; /* the daemon's keys, or NULL */
    void *reload_arg;              /* reload's argument */
} fence_daemon_signals;

/* Fill d from parts, set up the compat context (HELLO names prog; the
 * command table; CLIENT LIST walks net's connections; CLIENT LIST's
 * visibility and, with --acl-file, AUTH are the skeleton's callbacks) and
 * load the ACL (--acl-file, or the default user) with the gate checking
 * the command table.  The daemon's connection struct embeds
 * fence_net_conn first.  Before the listeners open.  0, or -1 after
 * logging why. */
int fence__daemon_users_init(fence_daemon *d, const fence_daemon_parts *parts);

/* A connection was accepted (the layer's on_open): fresh compat state,
 * logged in as "default" when that user is nopass, trusted then. */
void fence__daemon_conn_open(fence_daemon *d, fence_net_conn *c);

/* The ACL gate and the user's maxconns for request m of c, before
 * anything else: true when one of them answered (m must not run). */
bool fence__daemon_acl_gate(fence_daemon *d, fence_net_conn *c, const fence_resp_msg *m);

/* The Redis-client commands (HELLO, CLIENT, AUTH, ...) for m, after the
 * gate: true when the compat module answered (m must not run). */
bool fence__daemon_compat(fence_daemon *d, fence_net_conn *c, const fence_resp_msg *m);

/* A connection is closing (the layer's on_close): it leaves its user's
 * maxconns count. */
void fence__daemon_conn_closed(fence_daemon *d, fence_net_conn *c);

/* Open the listeners the options name, on net (after fence__net_init):
 * TCP on bind:port, TLS on bind:tls-port, the Unix socket; each one is
 * logged ("listening on ...").  0, or -1 after logging why (the caller
 * stops net). */
int fence__daemon_listen(fence_daemon *d);

/* Start the SIGHUP handler of d on loop (unreferenced: it never keeps the
 * loop up): reopen the log, reload d's ACL, then reload(arg) when not
 * NULL.  sg must stay put while the loop runs. */
void fence__daemon_signals_start(fence_daemon_signals *sg, fence_daemon *d, uv_loop_t *loop,
                                 fence_daemon_reload_fn reload, void *arg);

/* What SIGHUP does. */
void fence__daemon_sighup(fence_daemon_signals *sg);

/* Close the SIGHUP handle (shutdown; the loop then frees it). */
void fence__daemon_signals_close(fence_daemon_signals *sg);

#endif /* FENCE_COMMON_DAEMON_H */
