/* fence-proxy's entry point: the option table (flags, --config file and
 * --help from one table, src/base/options.h), the cross-field checks,
 * the log, then the server loop (proxy.c). */
#include <h2o.h>
#include <h2o/url.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/log.h"
#include "base/num.h"
#include "base/options.h"
#include "base/version.h"
#include "proxy/proxy.h"

#define C fence_proxy_config
static const fence_opt proxy_opts[] = {
    FENCE_OPT_STR_ROW(C, "config", config, "", "<file>",
                      "read directives (\"name value\" lines) from file; flags win"),
    FENCE_OPT_STR_ROW(C, "listen", listen, "127.0.0.1:8080", "<host:port>",
                      "address to serve HTTP/1.1 on"),
    FENCE_OPT_STR_ROW(C, "tls-cert", tls_cert, "", "<file>",
                      "serve HTTPS on --listen with this certificate chain (PEM)"),
    FENCE_OPT_STR_ROW(C, "tls-key", tls_key, "", "<file>",
                      "the private key of --tls-cert (PEM, unencrypted)"),
    FENCE_OPT_STR_ROW(C, "upstream", upstream, "", "<http://host:port>",
                      "the resource the proxy protects (required)"),
    FENCE_OPT_STR_ROW(C, "data-dir", data_dir, "", "<dir>",
                      "where the durable fence marks live (required; created)"),
    FENCE_OPT_LEVEL_ROW(C, "log-level", log_level, "info", "<level>",
                        "debug, info, warn or error", 0),
    FENCE_OPT_STR_ROW(C, "log-file", log_file, "", "<file>",
                      "append the log here (reopened on SIGHUP); default stderr"),
    FENCE_OPT_STR_ROW(C, "log-format", log_format, "text", "<text|json>",
                      "log lines as text or as one JSON object each"),
    FENCE_OPT_STR_ROW(C, "token-verify-keys", token_verify_keys, "", "<file>",
                      "verify.keys file: accept only signed tokens fenced signed for the "
                      "Fencing-Lock (403 BADTOKEN otherwise; read again on SIGHUP); "
                      "default plain tokens"),
    FENCE_OPT_STR_ROW(C, "route", route, "", "<routes>",
                      "'PREFIX METHODS [FENCE]; ...': methods that need a token under a path "
                      "prefix ('*' all, '-' none) and the fence that guards it ('{name}': the "
                      "first segment after the prefix); default '/ " FENCE_PROXY_DEFAULT_METHODS "'"),
    FENCE_OPT_STR_ROW(C, "read-methods", read_methods, FENCE_PROXY_READS_DEFAULT, "<list>",
                      "the methods that are reads (from GET, HEAD, OPTIONS, PROPFIND); every "
                      "other method needs a token on a route with a method list"),
    FENCE_OPT_BOOL_ROW(C, "keep-fencing-headers", keep_fencing_headers, 0,
                       "forward Fencing-Lock and Fencing-Token to the upstream"),
    FENCE_OPT_U64_ROW(C, "drain-timeout-ms", drain_timeout_ms, 1, 3600000, 5000, "<ms>",
                      "longest wait for older in-flight requests of a fence"),
    FENCE_OPT_U64_ROW(C, "restart-hold-ms", restart_hold_ms, 0, 3600000, 5000, "<ms>",
                      "after a start, hold fenced requests on fences with a mark this long "
                      "(the last run's requests may still be at the upstream)"),
    FENCE_OPT_STR_ROW(C, "drain-action", drain_action_str, "fail", "<fail|proceed>",
                      "after a drain timeout (older ones aborted): refuse (503) or forward"),
    FENCE_OPT_U64_ROW(C, "max-connections", max_connections, 1, FENCE_PROXY_CONNECTIONS_MAX,
                      FENCE_PROXY_CONNECTIONS_DEFAULT, "<n>", "client connections open at once"),
    FENCE_OPT_U64_ROW(C, "max-inflight", max_inflight, 1, FENCE_PROXY_INFLIGHT_MAX,
                      FENCE_PROXY_INFLIGHT_DEFAULT, "<n>",
                      "requests queued or at the upstream at once (more: 503)"),
    FENCE_OPT_SIZE_ROW(C, "max-header-bytes", max_header_bytes, 1024, FENCE_PROXY_HEADER_MAX,
                       FENCE_PROXY_HEADER_DEFAULT, "<bytes>",
                       "request header names and values, summed (more: 431)"),
    FENCE_OPT_SIZE_ROW(C, "max-body-bytes", max_body_bytes, 0, FENCE_PROXY_BODY_MAX,
                       FENCE_PROXY_BODY_DEFAULT, "<bytes>", "request body (more: 413)"),
    FENCE_OPT_SIZE_ROW(C, "max-response-bytes", max_response_bytes, 0, FENCE_PROXY_RESPONSE_MAX,
                       FENCE_PROXY_RESPONSE_DEFAULT, "<bytes>",
                       "upstream response body, buffered (more: 502)"),
    FENCE_OPT_SIZE_ROW(C, "max-conn-memory", max_conn_memory, 0, FENCE_PROXY_CONN_MEMORY_MAX,
                       FENCE_PROXY_CONN_MEMORY_DEFAULT, "<bytes>",
                       "read buffers of all connections plus the request and response copies "
                       "the proxy holds (over it: the biggest unfinished request is closed, "
                       "new requests get 503; 0: no bound)"),
    FENCE_OPT_U64_ROW(C, "max-fences", max_fences, 1, FENCE_GUARD_FENCES_MAX,
                      FENCE_PROXY_FENCES_DEFAULT, "<n>", "distinct fences (more: 503)"),
    FENCE_OPT_U64_ROW(C, "max-bindings", max_bindings, 1, FENCE_PROXY_BINDINGS_MAX,
                      FENCE_PROXY_BINDINGS_DEFAULT, "<n>",
                      "paths bound to the first fence that wrote them, where no route names "
                      "a fence (more: 503)"),
    FENCE_OPT_U64_ROW(C, "upstream-timeout-ms", upstream_timeout_ms, 10, 3600000, 30000,
                      "<ms>", "upstream I/O timeout (then 502)"),
    FENCE_OPT_U64_ROW(C, "request-timeout-ms", request_timeout_ms, 10, 3600000, 10000,
                      "<ms>", "client must send a request head and body within this"),
    FENCE_OPT_U64_ROW(C, "guard-threads", guard_threads, 1, FENCE_PROXY_GUARD_THREADS_MAX,
                      FENCE_PROXY_GUARD_THREADS_DEFAULT, "<n>",
                      "threads making marks durable (their fsyncs are shared)"),
    FENCE_OPT_U64_ROW(C, "metrics-port", metrics_port, 0, 65535, 0, "<port>",
                      "serve /metrics and /health over HTTP on the --listen host (0: off)"),
};
#undef C

static const fence_opts_spec proxy_spec = {
    .prog = "fence-proxy",
    .version = FENCE_VERSION,
    .summary = "HTTP/1.1 reverse proxy that enforces fencing tokens (Fencing-Lock,\n"
               "Fencing-Token headers) for an upstream that checks none.  See docs/proxy.md.",
    .footer = "Example:\n  fence-proxy --listen 127.0.0.1:8080 --upstream http://127.0.0.1:8000 "
              "--data-dir /var/lib/fence-proxy\n",
    .opts = proxy_opts,
    .n_opts = sizeof(proxy_opts) / sizeof(proxy_opts[0]),
};

/* Split "HOST:PORT" (host may be empty: 127.0.0.1) into host and port. */
static int parse_hostport(const char *s, char *host, size_t cap, uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    uint64_t p;
    if (colon == NULL || (size_t)(colon - s) >= cap)
        return -1;
    if (fence__num_u64(colon + 1, strlen(colon + 1), 65535, &p) != 0 || p == 0)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    if (host[0] == '\0')
        snprintf(host, cap, "127.0.0.1");
    *port = (uint16_t)p;
    return 0;
}

int fence__proxy_config_check(fence_proxy_config *cfg, char *err, size_t cap)
{
    if (cfg->upstream[0] == '\0') {
        snprintf(err, cap, "--upstream is required (http://HOST:PORT)");
        return -1;
    }
    if (cfg->data_dir[0] == '\0') {
        snprintf(err, cap, "--data-dir is required");
        return -1;
    }
    if ((cfg->tls_cert[0] != '\0') != (cfg->tls_key[0] != '\0')) {
        snprintf(err, cap, "--tls-cert and --tls-key go together");
        return -1;
    }
    /* The log-level row checked the word when it was set (the shared
     * parser, base/options.h FENCE_OPT_F_LOGLEVEL). */
    FENCE_ASSERT(fence__log_level_parse(cfg->log_level) >= 0);
    if (fence__log_format_parse(cfg->log_format) < 0) {
        snprintf(err, cap, "--log-format: '%s' is not text or json", cfg->log_format);
        return -1;
    }
    if (strcmp(cfg->drain_action_str, "fail") == 0)
        cfg->drain_action = FENCE_PROXY_DRAIN_FAIL;
    else if (strcmp(cfg->drain_action_str, "proceed") == 0)
        cfg->drain_action = FENCE_PROXY_DRAIN_PROCEED;
    else {
        snprintf(err, cap, "--drain-action: '%s' is not fail or proceed", cfg->drain_action_str);
        return -1;
    }
    if (parse_hostport(cfg->listen, cfg->listen_host, sizeof(cfg->listen_host),
                       &cfg->listen_port) != 0) {
        snprintf(err, cap, "--listen: '%s' is not HOST:PORT", cfg->listen);
        return -1;
    }
    h2o_url_t url;
    if (h2o_url_parse(cfg->upstream, strlen(cfg->upstream), &url) != 0 ||
        url.scheme != &H2O_URL_SCHEME_HTTP || url.host.len == 0 ||
        url.host.len >= sizeof(cfg->up_host) || h2o_url_host_is_unix_path(url.host)) {
        snprintf(err, cap, "--upstream: '%s' is not http://HOST:PORT (plain HTTP only)",
                 cfg->upstream);
        return -1;
    }
    if (!(url.path.len == 0 || (url.path.len == 1 && url.path.base[0] == '/'))) {
        snprintf(err, cap, "--upstream: '%s': a path is not supported", cfg->upstream);
        return -1;
    }
    memcpy(cfg->up_host, url.host.base, url.host.len);
    cfg->up_host[url.host.len] = '\0';
    cfg->up_port = h2o_url_get_port(&url);
    if (cfg->max_conn_memory > 0 &&
        (cfg->max_conn_memory < 2 * cfg->max_body_bytes + 65536 ||
         cfg->max_conn_memory < cfg->max_response_bytes)) {
        snprintf(err, cap,
                 "--max-conn-memory (%" PRIu64 ") must hold two copies of --max-body-bytes (%" PRIu64
                 ") plus 64k, and --max-response-bytes (%" PRIu64 ")",
                 cfg->max_conn_memory, cfg->max_body_bytes, cfg->max_response_bytes);
        return -1;
    }
    fence__proxy_routes_default(&cfg->routes);
    if (fence__proxy_routes_parse(&cfg->routes, cfg->route, strlen(cfg->route), err, cap) != 0)
        return -1;
    if (fence__proxy_reads_parse(&cfg->routes, cfg->read_methods, strlen(cfg->read_methods), err,
                                 cap) != 0)
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    static fence_proxy_config cfg;
    char err[512];

    int rc = fence__opts_load(&proxy_spec, &cfg, argc, argv, err, sizeof(err));
    if (rc == FENCE_OPTS_HELP) {
        fence__opts_help(&proxy_spec, stdout);
        return 0;
    }
    if (rc == FENCE_OPTS_VERSION) {
        fence__opts_version(&proxy_spec, stdout);
        return 0;
    }
    if (rc != 0 || fence__proxy_config_check(&cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "fence-proxy: %s\n", err);
        return 2;
    }
    fence__log_format_set(cfg.log_format);
    rc = fence__log_open(fence__log_level_parse(cfg.log_level), cfg.log_file);
    if (rc != 0) {
        fprintf(stderr, "fence-proxy: --log-file %s: %s\n", cfg.log_file, strerror(rc));
        return 2;
    }
    rc = fence__proxy_run(&cfg);
    fence__log_close();
    return rc;
}
