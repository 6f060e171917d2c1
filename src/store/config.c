/* fence-store's option table and the checks across fields (see config.h). */
#include "store/config.h"

#include <stdio.h>
#include <string.h>

#include "common/acl_srv.h"
#include "common/assert.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/options.h"
#include "common/tls.h"
#include "common/version.h"

#define T fence_store_config

static const fence_opt opts[] = {
    FENCE_OPT_U64_ROW(T, "port", port, 0, 65535, 7710, "<port>",
                      "TCP port to listen on (0: none; then tls-port or "
                      "unix-socket)"),
    FENCE_OPT_U64_ROW(T, "metrics-port", metrics_port, 0, 65535, 0, "<port>",
                      "serve /metrics and /health over HTTP on --metrics-bind (0: off)"),
    FENCE_OPT_STR_REQ_ROW(T, "metrics-bind", metrics_bind, "127.0.0.1", "<addr>",
                          "address of the metrics port (an IPv4 or IPv6 literal; loopback "
                          "by default, whatever --bind is)"),
    FENCE_OPT_STR_REQ_ROW(T, "bind", bind, "127.0.0.1", "<addr>",
                          "address to listen on (an IPv4 or IPv6 literal)"),
    FENCE_OPT_STR_ROW(T, "unix-socket", unix_socket, "", "<path>",
                      "also listen on this Unix socket (\"\" for none)"),
    FENCE_OPT_U64_ROW(T, "tls-port", tls_port, 0, 65535, 0, "<port>",
        "client TLS port beside the plain one (0: no TLS listener)"),
    FENCE_OPT_STR_ROW(T, "tls-cert", tls_cert, "", "<file>",
        "TLS: this server's certificate chain (PEM)"),
    FENCE_OPT_STR_ROW(T, "tls-key", tls_key, "", "<file>",
        "TLS: its private key (PEM, unencrypted; never logged)"),
    FENCE_OPT_STR_ROW(T, "tls-ca", tls_ca, "", "<file>",
        "TLS: CA for client certificates; given, clients must present one (mTLS)"),
    FENCE_OPT_STR_ROW(T, "tls-auth-clients", tls_auth_clients, "", "<yes|no|optional>",
        "TLS client certificates (default: yes with tls-ca, else no)"),
    FENCE_OPT_U64_ROW(T, "tls-handshake-timeout-ms", tls_handshake_ms, FENCE_TLS_HANDSHAKE_MS_MIN,
        FENCE_TLS_HANDSHAKE_MS_MAX, FENCE_TLS_HANDSHAKE_MS_DEFAULT, "<ms>",
        "TLS: a client that has not finished the handshake by then is closed"),
    FENCE_OPT_STR_REQ_ROW(T, "data-dir", data_dir, "var/fence-store", "<dir>",
                          "directory for the LMDB files (created if missing)"),
    FENCE_OPT_STR_ROW(T, "config", config_file, "", "<file>",
                      "read directives (\"name value\" a line, # comments) "
                      "before the flags"),
    FENCE_OPT_STR_ROW(T, "token-verify-keys", token_verify_keys, "", "<file>",
                      "verify.keys file: accept only signed tokens fenced "
                      "signed for the fence (-BADTOKEN otherwise; read "
                      "again on SIGHUP); \"\" for plain tokens"),
    FENCE_OPT_SIZE_ROW(T, "max-value", max_value, 1, FENCE_STORE_VALUE_MAX,
                       FENCE_STORE_VALUE_DEFAULT, "<bytes>",
                       "largest value FSET accepts"),
    FENCE_OPT_SIZE_ROW(T, "map-size", map_size, 1024 * 1024,
                       1024ull * 1024 * 1024 * 1024, 1024ull * 1024 * 1024,
                       "<bytes>",
                       "LMDB map size: the most data the store can hold; "
                       "writes beyond it get -FULL"),
    FENCE_OPT_SIZE_ROW(T, "wal-size", wal_size, FENCE_STORE_WAL_FILE_MIN,
                       1024ull * 1024 * 1024, FENCE_STORE_WAL_FILE_DEFAULT,
                       "<bytes>",
                       "bytes per write-ahead log file (two, created "
                       "zero-filled in the data dir; at most an eighth of "
                       "the free space); a full file starts a checkpoint"),
    FENCE_OPT_U64_ROW(T, "max-clients", max_clients, 1,
                      FENCE_STORE_CLIENTS_MAX, FENCE_STORE_CLIENTS_DEFAULT,
                      "<n>", "most client connections at once"),
    FENCE_OPT_U64_ROW(T, "max-pipeline", max_pipeline, 1, 1000000,
                      FENCE_PIPELINE_DEFAULT, "<n>",
                      "unanswered requests per connection (reading pauses "
                      "when full)"),
    FENCE_OPT_SIZE_ROW(T, "max-obuf", max_obuf, 64 * 1024,
                       1024ull * 1024 * 1024, FENCE_OBUF_DEFAULT, "<bytes>",
                       "reply bytes queued for one client before it is "
                       "disconnected as a slow reader (must exceed "
                       "--max-value)"),
    FENCE_OPT_ALIAS_ROW("obuf-max", "max-obuf"),
    FENCE_OPT_LEVEL_ROW(T, "log-level", log_level, "info", "<level>",
                        "debug, info, warn or error (0..3, the old digits, "
                        "are deprecated)", FENCE_OPT_F_LOGDIGIT),
    FENCE_OPT_STR_ROW(T, "log-file", log_file, "", "<file>",
                      "append logs here instead of stderr (reopened on "
                      "SIGHUP)"),
    FENCE_OPT_STR_ROW(T, "acl-file", acl_file, "", "<file>",
                      "users, passwords and per-fence permissions (Redis "
                      "users.acl subset; docs/security.md; reloaded by ACL "
                      "LOAD and SIGHUP)"),
    FENCE_OPT_U64_ROW(T, "max-conn-memory", max_conn_memory, 0, (1ULL << 40),
                      FENCE_CONN_MEMORY_DEFAULT, "<bytes>",
                      "read buffers and unsent replies of all connections "
                      "together (0: no bound)"),
    FENCE_OPT_U64_ROW(T, "idle-timeout-ms", idle_timeout_ms, 0, (1ULL << 40), 0,
                      "<ms>", "close a connection idle this long (0: never)"),
    FENCE_OPT_U64_ROW(T, "request-timeout-ms", request_timeout_ms, 0, (1ULL << 40),
                      FENCE_REQUEST_TIMEOUT_MS_DEFAULT, "<ms>",
                      "close a connection whose incomplete request takes "
                      "longer (0: never)"),
    FENCE_OPT_U64_ROW(T, "auth-timeout-ms", auth_timeout_ms, 0, (1ULL << 40),
                      FENCE_AUTH_TIMEOUT_MS_DEFAULT, "<ms>",
                      "with --acl-file: close a connection not logged in "
                      "after this long (0: never)"),
    FENCE_OPT_BOOL_ROW(T, "insecure", insecure, 0,
                       "allow a non-loopback --bind without --acl-file, or with plain "
                       "TCP clients (not --tls-port with --port 0): anyone who reaches "
                       "the port may admit any token, or read passwords"),
    FENCE_OPT_STR_ROW(T, "log-format", log_format, "text", "<text|json>",
                      "log lines as text, or one JSON object a line"),
    FENCE_OPT_BOOL_ROW(T, "ignore-tokens", ignore_tokens, 0,
                       "CONTROL MODE, UNSAFE: admit every token (lease "
                       "only, no fencing); for demos and the torture "
                       "harness's control run"),
};

#undef T

static const fence_opts_spec spec = {
    "fence-store",
    FENCE_VERSION,
    "A key/value server that enforces fencing tokens: a write with token T "
    "for\nfence F is admitted iff T >= the highest token admitted for F, and "
    "a key\nbelongs to the fence that first wrote it.  Speaks RESP "
    "(redis-cli works).\nCommands: FSET FDEL FINCR FGET FENCE.HIGH "
    "FENCE.ADMIT PING INFO.\nEvery option can also be a directive in the "
    "--config file; flags win.\n",
    NULL,
    opts,
    sizeof(opts) / sizeof(opts[0]),
};

/* Check relationships between fields; fill the derived ones. */
static int validate(fence_store_config *cfg, char *err, size_t cap)
{
    /* The table's flags checked these when they were set. */
    cfg->log_level_num = fence__log_level_parse(cfg->log_level);
    FENCE_ASSERT(cfg->log_level_num >= 0);
    FENCE_ASSERT(cfg->data_dir[0] != '\0');
    FENCE_ASSERT(cfg->bind[0] != '\0');
    bool tls_only = fence__acl_srv_tls_only(cfg->port, cfg->tls_port, cfg->tls_cert,
                                            cfg->tls_key);
    if (fence__acl_srv_check_bind(cfg->bind, cfg->acl_file[0] != '\0', tls_only,
                                  cfg->insecure, err, cap) != 0)
        return -1;
    fence_tls_conf tc = {cfg->tls_cert, cfg->tls_key, cfg->tls_ca,
                         cfg->tls_auth_clients, cfg->port, cfg->tls_port,
                         cfg->unix_socket[0] != '\0'};
    if (fence__tls_conf_check(&tc, &cfg->tls_auth, err, cap) != 0)
        return -1;
    if (fence__log_format_parse(cfg->log_format) < 0) {
        snprintf(err, cap, "log-format: '%s' is not text or json", cfg->log_format);
        return -1;
    }
    if (cfg->max_obuf < cfg->max_value + 4096) {
        snprintf(err, cap,
                 "max-obuf: %llu must exceed max-value %llu by at least 4096, "
                 "or a client could never read its largest value",
                 (unsigned long long)cfg->max_obuf,
                 (unsigned long long)cfg->max_value);
        return -1;
    }
    if (cfg->map_size < cfg->max_value * 4) {
        snprintf(err, cap,
                 "map-size: %llu must be at least four times max-value %llu",
                 (unsigned long long)cfg->map_size,
                 (unsigned long long)cfg->max_value);
        return -1;
    }
    return 0;
}

/* Defaults, file, flags, validation. */
int fence__store_config_load(fence_store_config *cfg, int argc, char **argv,
                             char *err, size_t cap)
{
    int rc = fence__opts_load(&spec, cfg, argc, argv, err, cap);
    if (rc == FENCE_OPTS_HELP) {
        fence__opts_help(&spec, stdout);
        return FENCE_STORE_CONFIG_HELP;
    }
    if (rc == FENCE_OPTS_VERSION) {
        fence__opts_version(&spec, stdout);
        return FENCE_STORE_CONFIG_VERSION;
    }
    if (rc != 0)
        return -1;
    return validate(cfg, err, cap);
}

/* Defaults, text, validation. */
int fence__store_config_load_text(fence_store_config *cfg, const char *text,
                                  size_t len, char *err, size_t cap)
{
    fence__opts_defaults(&spec, cfg);
    if (fence__opts_parse_text(&spec, cfg, text, len, "text", err, cap) != 0)
        return -1;
    return validate(cfg, err, cap);
}
