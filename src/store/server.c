/* fence-store's network side (see server.h), on the shared connection
 * layer (src/common/conn.h).
 *
 * One thread, one libuv loop.  Each connection has a bounded read buffer
 * (--max-value plus FENCE_STORE_RBUF_SLACK) that the RESP parser works on;
 * complete requests are executed in order and answered at once, the
 * replies gathered and written together.  Writes run synchronously: each
 * write command is one LMDB transaction whose commit fsyncs before the
 * reply is queued, so a reply is never sent for a write that is not
 * durable.
 *
 * Hygiene (the layer's): a protocol error gets an error reply and the
 * connection is closed; a client whose queued replies exceed --max-obuf is
 * disconnected (slow reader); connections beyond --max-clients get
 * "-LIMIT" and are closed.
 *
 * Signals: SIGINT and SIGTERM stop the server; SIGHUP reopens the
 * --log-file (logrotate). */
#include "store/server.h"

#include <inttypes.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/assert.h"
#include "common/compat.h"
#include "common/compat_net.h"
#include "common/conn.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/tls.h"
#include "proto/resp.h"
#include "store/cmd.h"
#include "store/metrics.h"
#include "store/commands_table.h"

/* The server. */
typedef struct server {
    const fence_store_config *cfg; /* configuration */
    fence_store_db *db;            /* the store */
    uv_loop_t *loop;               /* the loop */
    fence_net net;                 /* listeners and connections */
    uv_signal_t sigint;            /* SIGINT: stop */
    uv_signal_t sigterm;           /* SIGTERM: stop */
    uv_signal_t sighup;            /* SIGHUP: reopen the log file */
    char refuse[128];              /* -LIMIT text for a refused client */
    fence_res_metrics metrics;     /* metric families, /metrics (metrics.c) */
    fence_compat_ctx compat;       /* Redis-client commands (compat.h) */
    fence_signtok_verifier *verifier; /* --token-verify-keys, or NULL */
} server;

/* One client connection: the layer's and its Redis-client state. */
typedef struct store_conn {
    fence_net_conn base;      /* the layer's connection (first) */
    fence_compat_conn compat; /* CLIENT SETNAME, MULTI refusal, ... */
} store_conn;

/* A connection was accepted: fresh compat state. */
static void on_open(void *ctx, fence_net_conn *c)
{
    (void)ctx;
    fence_compat_conn_init(&((store_conn *)c)->compat, c->id);
}

/* CLIENT LIST: every open connection. */
static void list_conns(void *arg, fence_compat_emit_fn emit, void *emit_arg)
{
    server *s = arg;
    fence__compat_net_list(&s->net, offsetof(store_conn, compat), emit, emit_arg);
}

/* Append an encoded reply (snprintf-style encoder), encoded in place. */
#define REPLY(c, enc, ...)                                                     \
    do {                                                                       \
        size_t need_ = enc(NULL, 0, __VA_ARGS__);                              \
        char *p_ = fence__net_reply_buf((c), need_);                           \
        if (p_ != NULL) {                                                      \
            size_t got_ = enc(p_, need_, __VA_ARGS__);                         \
            FENCE_ASSERT(got_ == need_);                                       \
        }                                                                      \
    } while (0)

/* Append "+s". */
static void reply_simple(fence_net_conn *c, const char *s)
{
    REPLY(c, fence_resp_simple, s);
}

/* Append ":v". */
static void reply_int(fence_net_conn *c, int64_t v)
{
    REPLY(c, fence_resp_int, v);
}

/* Append a bulk string, or nil if p is NULL. */
static void reply_bulk(fence_net_conn *c, const char *p, size_t n)
{
    if (p != NULL) {
        REPLY(c, fence_resp_bulk, p, n);
        return;
    }
    size_t need = fence_resp_nil(NULL, 0);
    char *out = fence__net_reply_buf(c, need);
    if (out != NULL)
        fence_resp_nil(out, need);
}

/* Append the reply for a FGET value (called inside the read txn). */
static void on_value(void *ctx, const char *p, size_t n)
{
    reply_bulk(ctx, p, n);
}

/* Build the INFO text. */
static void reply_info(server *s, fence_net_conn *c)
{
    fence_store_db_stats st;
    fence__store_db_stats_get(s->db, &st);
    char text[1024];
    int n = snprintf(text, sizeof(text),
                     "# fence-store\r\n"
                     "keys:%" PRIu64 "\r\n"
                     "fences:%" PRIu64 "\r\n"
                     "admitted:%" PRIu64 "\r\n"
                     "rejected_stale:%" PRIu64 "\r\n"
                     "rejected_wrongfence:%" PRIu64 "\r\n"
                     "ignore_tokens:%d\r\n"
                     "connected_clients:%" PRIu64 "\r\n"
                     "max_clients:%" PRIu64 "\r\n"
                     "rejected_connections:%" PRIu64 "\r\n"
                     "slow_readers_closed:%" PRIu64 "\r\n"
                     "max_value:%" PRIu64 "\r\n"
                     "map_size:%" PRIu64 "\r\n"
                     "map_used:%" PRIu64 "\r\n"
                     "tcp_port:%" PRIu64 "\r\n",
                     st.keys, st.fences, st.admitted, st.rejected_stale,
                     st.rejected_wrongfence, s->cfg->ignore_tokens ? 1 : 0,
                     s->net.n_conns, s->cfg->max_clients, s->net.stat_refused,
                     s->net.stat_slow_closed, s->cfg->max_value, st.map_size,
                     st.map_used, s->cfg->port);
    FENCE_ASSERT(n > 0);
    FENCE_ASSERT((size_t)n < sizeof(text));
    reply_bulk(c, text, (size_t)n);
}

/* The reply to a write that was refused or failed (r != FENCE_STORE_OK). */
static void reply_write_refused(server *s, fence_net_conn *c,
                                const fence_store_cmd *cmd,
                                fence_store_result r,
                                const fence_store_write_out *out)
{
    char msg[400];
    char key[64], fence[64];
    switch (r) {
    case FENCE_STORE_STALE:
        snprintf(msg, sizeof(msg),
                 "%" PRIu64 " %" PRIu64 " token %" PRIu64
                 " is older than the highest token admitted for this "
                 "fence (%" PRIu64 "); nothing was written",
                 cmd->token, out->high, cmd->token, out->high);
        fence__net_reply_error(c, "STALE", msg);
        break;
    case FENCE_STORE_WRONGFENCE:
        fence__store_printable(key, sizeof(key), cmd->key, cmd->key_len);
        fence__store_printable(fence, sizeof(fence), out->owner,
                               out->owner_len);
        snprintf(msg, sizeof(msg),
                 "key '%s' belongs to fence '%s'; a key is written only "
                 "through the fence that first wrote it; nothing was written",
                 key, fence);
        fence__net_reply_error(c, "WRONGFENCE", msg);
        break;
    case FENCE_STORE_FULL:
        snprintf(msg, sizeof(msg),
                 "the store is full (LMDB map of %" PRIu64
                 " bytes); nothing was written; restart with a larger "
                 "--map-size", s->cfg->map_size);
        fence__net_reply_error(c, "FULL", msg);
        break;
    case FENCE_STORE_NOSPACE:
        fence__net_reply_error(c, "FULL",
                               "no space left on the device holding the "
                               "store; nothing was written");
        break;
    case FENCE_STORE_NOTINT:
        fence__net_reply_error(c, "ERR", "value is not an integer; nothing "
                                         "was written");
        break;
    case FENCE_STORE_OVERFLOW:
        fence__net_reply_error(c, "ERR", "increment would overflow; nothing "
                                         "was written");
        break;
    case FENCE_STORE_OK:
        FENCE_ASSERT(!"not a refusal");
        break;
    }
}

/* Execute one checked command and append its reply. */
static void execute(server *s, fence_net_conn *c, const fence_store_cmd *cmd)
{
    switch (cmd->op) {
    case FENCE_STORE_OP_FSET:
    case FENCE_STORE_OP_FDEL:
    case FENCE_STORE_OP_FINCR:
    case FENCE_STORE_OP_FENCE_ADMIT: {
        fence_store_write_out out;
        uint64_t t0 = uv_hrtime();
        fence_store_result r = fence__store_db_write(s->db, cmd, &out);
        fence__store_metrics_write(&s->metrics, cmd, r, &out,
                                   (double)(uv_hrtime() - t0) * 1e-9);
        if (r != FENCE_STORE_OK)
            reply_write_refused(s, c, cmd, r, &out);
        else if (cmd->op == FENCE_STORE_OP_FDEL ||
                 cmd->op == FENCE_STORE_OP_FINCR)
            reply_int(c, out.number);
        else
            reply_simple(c, "OK");
        break;
    }
    case FENCE_STORE_OP_FGET:
        fence__store_db_get(s->db, cmd->key, cmd->key_len, on_value, c);
        break;
    case FENCE_STORE_OP_FENCE_HIGH: {
        uint64_t h = fence__store_db_high(s->db, cmd->fence, cmd->fence_len);
        FENCE_ASSERT(h <= FENCE_STORE_TOKEN_MAX);
        reply_int(c, (int64_t)h);
        break;
    }
    case FENCE_STORE_OP_PING:
        if (cmd->value)
            reply_bulk(c, cmd->value, cmd->value_len);
        else
            reply_simple(c, "PONG");
        break;
    case FENCE_STORE_OP_INFO:
        reply_info(s, c);
        break;
    case FENCE_STORE_OP_QUIT:
        reply_simple(c, "OK");
        fence__net_close_after_flush(c);
        break;
    case FENCE_STORE_OP_COMMAND:
        REPLY(c, fence_resp_array, 0);
        break;
    }
}

/* The layer parsed a request: check it, run it, answer it. */
static void on_request(void *ctx, fence_net_conn *c, const fence_resp_msg *msg)
{
    server *s = ctx;
    fence_store_cmd cmd;
    const char *code;
    char err[256];
    if (s->metrics.reg != NULL)
        fence_metric_set(s->metrics.connections, (int64_t)s->net.n_conns);
    if (fence__compat_net_handle(&s->compat, &((store_conn *)c)->compat, c, msg))
        return;
    if (fence__store_cmd_parse(msg, s->cfg->max_value, s->verifier, &cmd, &code, err,
                               sizeof(err)) != 0)
        fence__net_reply_error(c, code, err);
    else
        execute(s, c, &cmd);
}

/* The error reply for a request the parser refused. */
static void on_proto_error(void *ctx, fence_net_conn *c, int status,
                           const char *detail, const char **code, char *msg,
                           size_t cap)
{
    server *s = ctx;
    (void)c;
    if (status == FENCE_NET_EREQ_TOOBIG) {
        *code = "LIMIT";
        snprintf(msg, cap,
                 "request exceeds %zu bytes (--max-value %" PRIu64
                 " plus room for the other arguments); closing",
                 s->net.lim.rbuf_max, s->cfg->max_value);
    } else if (status == FENCE_RESP_ETOOBIG) {
        *code = "LIMIT";
        snprintf(msg, cap,
                 "%s (this fence-store accepts values up to %" PRIu64
                 " bytes, --max-value); nothing was written; closing",
                 detail ? detail : "too big", s->cfg->max_value);
    } else {
        *code = "ERR";
        snprintf(msg, cap, "Protocol error: %s; closing",
                 detail ? detail : "bad request");
    }
}

/* Close the signal handles (they keep the loop alive otherwise). */
static void close_signals(server *s)
{
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sighup, NULL);
}

/* SIGINT/SIGTERM: stop accepting, close everything, let the loop end. */
static void on_stop_signal(uv_signal_t *sig, int signum)
{
    server *s = sig->data;
    FENCE_LOG_I("signal %d: stopping", signum);
    close_signals(s);
    fence__net_stop(&s->net);
}

/* SIGHUP: logrotate moved the log file; write to a new one. */
static void on_sighup(uv_signal_t *sig, int signum)
{
    (void)sig;
    (void)signum;
    if (fence__log_reopen() == 0)
        FENCE_LOG_I("SIGHUP: log file reopened");
}

/* Set up and run the loop; see server.h. */
int fence__store_server_run(const fence_store_config *cfg, fence_store_db *db)
{
    static server srv;
    server *s = &srv;
    char err[1300];
    s->cfg = cfg;
    s->db = db;
    s->loop = uv_default_loop();
    if (cfg->token_verify_keys[0] != '\0') {
        char kerr[1300];
        if (fence_signtok_verifier_load(cfg->token_verify_keys, 0, &s->verifier,
                                        kerr, sizeof(kerr)) != 0) {
            FENCE_LOG_E("token-verify-keys: %s", kerr);
            return 1;
        }
        FENCE_LOG_I("accepting only signed tokens (%zu verify keys from %s)",
                    fence_signtok_verifier_nkeys(s->verifier), cfg->token_verify_keys);
    }
    fence__compat_ctx_init(&s->compat, "fence-store", fence__store_commands,
                           fence__store_commands_n, list_conns, s);
    snprintf(s->refuse, sizeof(s->refuse), "max clients (%" PRIu64
             ") reached", cfg->max_clients);

    fence_net_limits lim;
    memset(&lim, 0, sizeof(lim));
    lim.max_clients = cfg->max_clients;
    lim.rbuf_max = (size_t)cfg->max_value + FENCE_STORE_RBUF_SLACK;
    lim.max_pipeline = (uint32_t)cfg->max_pipeline;
    lim.max_obuf = cfg->max_obuf;
    lim.slot_size = sizeof(fence_net_slot);
    lim.conn_size = sizeof(store_conn);
    lim.eof_flush = true;
    fence_resp_limits_default(&lim.resp);
    lim.resp.args_max = 16;
    lim.resp.bulk_max = cfg->max_value;
    fence_net_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.ctx = s;
    hooks.on_request = on_request;
    hooks.on_open = on_open;
    hooks.proto_error = on_proto_error;
    hooks.refuse_msg = s->refuse;
    if (fence__net_init(&s->net, s->loop, &lim, &hooks) != 0) {
        FENCE_LOG_E("out of memory");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    int rc = 0;
    if (cfg->port != 0 &&
        fence__net_listen_tcp(&s->net, cfg->bind, (unsigned)cfg->port, err,
                              sizeof(err)) != 0)
        rc = 1;
    if (rc == 0 && cfg->tls_port != 0) {
        fence_tls_opts o = {cfg->tls_cert, cfg->tls_key, cfg->tls_ca,
                            cfg->tls_auth, cfg->tls_handshake_ms};
        if (fence__tls_listen(&s->net, &o, cfg->bind, (unsigned)cfg->tls_port,
                              err, sizeof(err)) != 0)
            rc = 1;
    }
    if (rc == 0 && cfg->unix_socket[0] != '\0' &&
        fence__net_listen_unix(&s->net, cfg->unix_socket, err,
                               sizeof(err)) != 0)
        rc = 1;
    if (rc != 0) {
        FENCE_LOG_E("%s", err);
        fence__net_stop(&s->net);
        uv_run(s->loop, UV_RUN_DEFAULT);
        fence__net_free(&s->net);
        fence_signtok_verifier_free(s->verifier);
        return 1;
    }
    if (fence__store_metrics_start(&s->metrics, cfg->bind, (int)cfg->metrics_port, err,
                                   sizeof(err)) != 0) {
        FENCE_LOG_E("metrics-port: %s", err);
        fence__net_stop(&s->net);
        uv_run(s->loop, UV_RUN_DEFAULT);
        fence__net_free(&s->net);
        return 1;
    }
    if (cfg->metrics_port != 0)
        FENCE_LOG_I("metrics on http://%s:%" PRIu64 "/metrics", cfg->bind, cfg->metrics_port);
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    uv_signal_init(s->loop, &s->sighup);
    s->sigint.data = s->sigterm.data = s->sighup.data = s;
    uv_signal_start(&s->sigint, on_stop_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_stop_signal, SIGTERM);
    uv_signal_start(&s->sighup, on_sighup, SIGHUP);
    if (cfg->port != 0)
        FENCE_LOG_I("fence-store listening on %s:%" PRIu64, cfg->bind,
                    cfg->port);
    if (cfg->tls_port != 0)
        FENCE_LOG_I("fence-store listening for TLS on %s:%" PRIu64
                    " (client certificates: %s)", cfg->bind, cfg->tls_port,
                    fence__tls_auth_name(cfg->tls_auth));
    if (cfg->unix_socket[0] != '\0')
        FENCE_LOG_I("listening on unix socket %s", cfg->unix_socket);
    uv_run(s->loop, UV_RUN_DEFAULT);
    uv_loop_close(s->loop);
    fence__net_free(&s->net);
    fence_res_metrics_free(&s->metrics);
    fence_signtok_verifier_free(s->verifier);
    FENCE_LOG_I("fence-store stopped");
    return 0;
}
