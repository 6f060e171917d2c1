/* fence-proxy's server: H2O (libuv flavour) for the client side and for
 * the upstream client, libfence-guard for the durable marks, and the
 * per-fence ordering rule described in proxy.h.  This file starts it (the
 * guard, the bindings log, H2O, the listener, the signals) and runs the
 * loop; proxy_int.h says which file holds the rest. */
#include "proxy/proxy.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/assert.h"
#include "base/fs.h"
#include "base/log.h"
#include "daemon/startup_warn.h"
#include "net/tls.h"
#include "proxy/proxy_int.h"

_Static_assert(FENCE_PROXY_HEADER_MAX < H2O_MAX_REQLEN,
               "the header limit must be below H2O's own request-head limit");

/* SIGTERM / SIGINT: stop (every acknowledged mark is already durable). */
static void on_stop(uv_signal_t *h, int signum)
{
    (void)h;
    FENCE_LOG_I("signal %d: stopping", signum);
    uv_stop(&srv.loop);
}

/* SIGHUP: reopen the log file (logrotate) and read --token-verify-keys
 * again (key rotation; fence__proxy_on_req verifies on this loop thread only, so the
 * swap is atomic for every request; a bad file keeps the old keys). */
static void on_hup(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    fence__log_reopen();
    FENCE_LOG_I("log reopened");
    if (srv.cfg->token_verify_keys[0] == '\0')
        return;
    char kerr[1300];
    if (fence_signtok_verifier_reload(srv.cfg->token_verify_keys, 0, &srv.verifier, kerr,
                                      sizeof(kerr)) != 0)
        FENCE_LOG_E("SIGHUP: token-verify-keys not reloaded, the old %zu keys stay: %s",
                    fence_signtok_verifier_nkeys(srv.verifier), kerr);
    else
        FENCE_LOG_I("SIGHUP: token-verify-keys reloaded (%zu verify keys from %s)",
                    fence_signtok_verifier_nkeys(srv.verifier), srv.cfg->token_verify_keys);
}

/* Resolve the upstream and set up the socket pool. */
static int setup_upstream(const fence_proxy_config *cfg)
{
    struct addrinfo hints, *res = NULL;
    char port[8];
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof(port), "%u", (unsigned)cfg->up_port);
    int rc = getaddrinfo(cfg->up_host, port, &hints, &res);
    if (rc != 0) {
        FENCE_LOG_E("--upstream %s: %s", cfg->upstream, gai_strerror(rc));
        return -1;
    }
    h2o_socketpool_init_by_address(&srv.pool, res->ai_addr, res->ai_addrlen, 0,
                                   (size_t)cfg->max_inflight);
    freeaddrinfo(res);
    h2o_socketpool_set_timeout(&srv.pool, &srv.loop, 2000);
    char auth[300];
    int n = snprintf(auth, sizeof(auth), "%s:%u", cfg->up_host, (unsigned)cfg->up_port);
    srv.up_authority = h2o_strdup(NULL, auth, (size_t)n);
    h2o_timeout_init(&srv.loop, &srv.io_timeout, cfg->upstream_timeout_ms);
    srv.client_ctx.loop = &srv.loop;
    srv.client_ctx.io_timeout = &srv.io_timeout;
    return 0;
}

/* Bind and listen on --listen. */
static int setup_listener(const fence_proxy_config *cfg)
{
    struct sockaddr_storage ss;
    if (uv_ip4_addr(cfg->listen_host, cfg->listen_port, (struct sockaddr_in *)&ss) != 0 &&
        uv_ip6_addr(cfg->listen_host, cfg->listen_port, (struct sockaddr_in6 *)&ss) != 0) {
        FENCE_LOG_E("--listen %s: not a numeric address", cfg->listen);
        return -1;
    }
    uv_tcp_init(&srv.loop, &srv.listener);
    int rc = uv_tcp_bind(&srv.listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv.listener, 1024, fence__proxy_on_accept);
    if (rc != 0) {
        FENCE_LOG_E("--listen %s: %s", cfg->listen, uv_strerror(rc));
        return -1;
    }
    return 0;
}

int fence__proxy_run(const fence_proxy_config *cfg)
{
    char nthreads[16];
    memset(&srv, 0, sizeof(srv));
    srv.cfg = cfg;
    srv.pump = fence__proxy_pump; /* proxy_upstream.c's way back to the queue */
    signal(SIGPIPE, SIG_IGN);
    /* Large buffers (request bodies) are mapped and given back to the
     * system when freed, rather than kept in the heap (glibc would raise
     * its threshold after the first free and keep them). */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024);
    /* libuv reads this when its pool first starts: the guard admits run
     * there, and the more run at once, the more share one fsync. */
    snprintf(nthreads, sizeof(nthreads), "%" PRIu64, cfg->guard_threads);
    setenv("UV_THREADPOOL_SIZE", nthreads, 1);

    if (cfg->token_verify_keys[0] != '\0') {
        char kerr[1300];
        if (fence_signtok_verifier_load(cfg->token_verify_keys, 0, &srv.verifier, kerr,
                                        sizeof(kerr)) != 0) {
            FENCE_LOG_E("token-verify-keys: %s", kerr);
            return 1;
        }
        FENCE_LOG_I("accepting only signed tokens (%zu verify keys from %s)",
                    fence_signtok_verifier_nkeys(srv.verifier), cfg->token_verify_keys);
    }
    int rc = fence__fs_mkdir_p(cfg->data_dir, 0755);
    if (rc != 0) {
        FENCE_LOG_E("--data-dir %s: %s", cfg->data_dir, strerror(rc > 0 ? rc : -rc));
        fence_signtok_verifier_free(srv.verifier);
        return 1;
    }
    /* One proxy per data directory (its marks), before the guard opens it. */
    char lerr[FENCE_FS_PATH_MAX + 200];
    int lock_fd = fence__fs_lock_dir_msg(cfg->data_dir, "fence-proxy.lock", lerr, sizeof(lerr));
    if (lock_fd < 0) {
        FENCE_LOG_E("%s", lerr);
        fence_signtok_verifier_free(srv.verifier);
        return 1;
    }
    fence_guard_opts gopts;
    fence_guard_opts_default(&gopts);
    gopts.fences_max = (uint32_t)cfg->max_fences;
    rc = fence_guard_open(cfg->data_dir, &gopts, &srv.guard);
    if (rc != 0) {
        FENCE_LOG_E("guard %s: %s: %s", cfg->data_dir, fence_guard_strerror(rc),
                    fence_guard_errmsg(srv.guard));
        fence_guard_close(srv.guard);
        fence_signtok_verifier_free(srv.verifier);
        return 1;
    }
    srv.nbuckets = 1024;
    while (srv.nbuckets < cfg->max_fences / 4 && srv.nbuckets < (1u << 22))
        srv.nbuckets *= 2;
    srv.buckets = calloc(srv.nbuckets, sizeof(*srv.buckets));
    if (srv.buckets == NULL) {
        FENCE_LOG_E("out of memory");
        goto out_close_guard;
    }
    srv.nbbuckets = 1024;
    while (srv.nbbuckets < cfg->max_bindings / 4 && srv.nbbuckets < (1u << 22))
        srv.nbbuckets *= 2;
    srv.bbuckets = calloc(srv.nbbuckets, sizeof(*srv.bbuckets));
    srv.bbuf = malloc(FENCE_PROXY_BINDLOG_BATCH_HDR + FENCE_PROXY_BINDLOG_BATCH_MAX);
    srv.bpending_tail = &srv.bpending;
    if (srv.bbuckets == NULL || srv.bbuf == NULL) {
        FENCE_LOG_E("out of memory");
        goto out_free_buckets;
    }
    {
        char berr[1400];
        if (fence__proxy_bindlog_open(cfg->data_dir, fence__proxy_bind_load_one, NULL, &srv.bindlog, berr,
                                      sizeof(berr)) != 0) {
            FENCE_LOG_E("%s", berr);
            goto out_free_buckets;
        }
        if (fence__proxy_bindlog_torn(srv.bindlog) > 0)
            FENCE_LOG_W("bindings: cut off a torn tail of %" PRIu64
                        " bytes (never acknowledged)",
                        fence__proxy_bindlog_torn(srv.bindlog));
        if (srv.nbindings > 0)
            FENCE_LOG_I("bindings: %" PRIu64 " paths belong to the first fence that wrote them",
                        srv.nbindings);
    }

    uv_loop_init(&srv.loop);
    h2o_config_init(&srv.h2o_config);
    srv.h2o_config.server_name = h2o_iovec_init(H2O_STRLIT("fence-proxy"));
    srv.h2o_config.max_request_entity_size = (size_t)cfg->max_body_bytes;
    srv.h2o_config.http1.req_timeout = cfg->request_timeout_ms;
    srv.h2o_config.http1.upgrade_to_http2 = 0;
    h2o_hostconf_t *host =
        h2o_config_register_host(&srv.h2o_config, h2o_iovec_init(H2O_STRLIT("default")), 65535);
    h2o_pathconf_t *path = h2o_config_register_path(host, "/", 0);
    h2o_handler_t *handler = h2o_create_handler(path, sizeof(*handler));
    handler->on_req = fence__proxy_on_req;
    h2o_context_init(&srv.h2o_ctx, &srv.loop, &srv.h2o_config);
    h2o_timeout_init(&srv.loop, &srv.drain_timeout, cfg->drain_timeout_ms);
    srv.accept_ctx.ctx = &srv.h2o_ctx;
    srv.accept_ctx.hosts = srv.h2o_config.hosts;
    if (cfg->tls_cert[0] != '\0') {
        char err[1400];
        fence_tls_opts o = {cfg->tls_cert, cfg->tls_key, NULL, FENCE_TLS_AUTH_NO,
                            FENCE_TLS_HANDSHAKE_MS_DEFAULT};
        srv.accept_ctx.ssl_ctx = fence__tls_server_ctx(&o, err, sizeof(err));
        if (srv.accept_ctx.ssl_ctx == NULL) {
            FENCE_LOG_E("%s", err);
            goto out_free_buckets;
        }
        FENCE_LOG_I("serving HTTPS (TLS 1.2+) with %s", cfg->tls_cert);
    }
    if (setup_upstream(cfg) != 0 || setup_listener(cfg) != 0)
        goto out_free_ssl;
    char merr[300];
    if (fence__proxy_metrics_start(&srv.metrics, &srv.pm, cfg->listen_host,
                                   (int)cfg->metrics_port, merr, sizeof(merr)) != 0) {
        FENCE_LOG_E("metrics-port: %s", merr);
        goto out_free_ssl;
    }
    fence_metric_set(srv.pm.bindings, (int64_t)srv.nbindings);

    uv_check_init(&srv.loop, &srv.sweep);
    uv_check_start(&srv.sweep, fence__proxy_on_sweep);
    uv_signal_init(&srv.loop, &srv.sig_term);
    uv_signal_start(&srv.sig_term, on_stop, SIGTERM);
    uv_signal_init(&srv.loop, &srv.sig_int);
    uv_signal_start(&srv.sig_int, on_stop, SIGINT);
    uv_signal_init(&srv.loop, &srv.sig_hup);
    uv_signal_start(&srv.sig_hup, on_hup, SIGHUP);

    fence_guard_stats gs;
    fence_guard_stats_get(srv.guard, &gs);
    if (gs.fences > 0 && cfg->restart_hold_ms > 0) {
        /* The last run may have left requests at the upstream that the
         * ordering rule can no longer see. */
        srv.holding = true;
        uv_timer_init(&srv.loop, &srv.hold_timer);
        uv_timer_start(&srv.hold_timer, fence__proxy_on_hold_end, cfg->restart_hold_ms, 0);
        FENCE_LOG_I("restart: %" PRIu64 " fences have marks; their fenced requests wait %" PRIu64
                    " ms (--restart-hold-ms) for what the last run may have left in flight",
                    gs.fences, cfg->restart_hold_ms);
    }
    fence__startup_warn_proxy(cfg->listen_host, cfg->tls_cert[0] != '\0', srv.verifier != NULL);
    FENCE_LOG_I("fence-proxy listening on %s, upstream %s, data dir %s, drain %" PRIu64
                " ms (%s)",
                cfg->listen, cfg->upstream, cfg->data_dir, cfg->drain_timeout_ms,
                cfg->drain_action_str);
    uv_run(&srv.loop, UV_RUN_DEFAULT);
    /* Stopped by a signal.  Guard admits may still run on pool threads, so
     * the guard is not closed (closing must not race them); everything it
     * acknowledged is already on disk. */
    FENCE_LOG_I("stopped");
    return 0;

out_free_ssl:
    SSL_CTX_free(srv.accept_ctx.ssl_ctx);
out_free_buckets:
    fence__proxy_bindlog_close(srv.bindlog);
    free(srv.bbuckets);
    free(srv.bbuf);
    free(srv.buckets);
out_close_guard:
    fence_guard_close(srv.guard);
    fence_signtok_verifier_free(srv.verifier);
    return 1;
}
