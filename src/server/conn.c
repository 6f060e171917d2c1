/* fenced's client connections on the shared connection layer
 * (src/common/conn.h): the layer owns listeners, bounded reads, parsing,
 * reply order, the output bound and closing; this file is where a
 * request enters fenced (on_request hands it to the command table,
 * cmd.c), sets up fenced's part of each connection, opens the listeners,
 * and decides what happens to a closing connection's unanswered requests
 * (the leader module forgets them; cluster.c's are orphaned).  The slots
 * and their replies are reply.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "common/limits.h"
#include "common/tls.h"
#include "server/log.h"
#include "server/server.h"

/* ---- Connections ---------------------------------------------------------- */

/* Close c (idempotent); its requests are forgotten or orphaned through the
 * hooks below. */
void fence__conn_close(fence_conn *c)
{
    fence__net_conn_close(&c->base);
}

/* QUIT: answer what is owed, then close. */
void fence__conn_close_after_flush(fence_conn *c)
{
    fence__net_close_after_flush(&c->base);
}

/* Send the replies that became ready during this loop turn. */
void fence__conns_flush(fence_server *s)
{
    fence__net_flush(&s->net);
}

/* Close every connection (shutdown).  No request is parsed after this, so
 * the parse scratch goes too. */
void fence__conns_close_all(fence_server *s)
{
    fence__net_stop(&s->net);
    fence__net_free(&s->net);
}

/* ---- Hooks ------------------------------------------------------------------- */

/* A connection was accepted: fenced's part of it. */
static void on_open(void *ctx, fence_net_conn *nc)
{
    fence_conn *c = (fence_conn *)nc;
    c->srv = ctx;
    c->id = nc->id;
    fence__leader_conn_init(&c->lconn);
    fence_compat_conn_init(&c->compat, nc->id);
    fence__server_acl_open(c);
}

/* A request was parsed: count it and dispatch it (cmd.c). */
static void on_request(void *ctx, fence_net_conn *nc, const fence_resp_msg *m)
{
    fence_server *s = ctx;
    s->stat_commands++;
    fence__cmd_dispatch((fence_conn *)nc, m);
}

/* A connection is closing: the leader module forgets its requests first
 * (and cancels its waits through the log). */
static void on_close(void *ctx, fence_net_conn *nc)
{
    fence_server *s = ctx;
    fence__leader_conn_close(s->leader, &((fence_conn *)nc)->lconn);
    fence__owner_conn_closed((fence_conn *)nc);
}

/* An unanswered slot of a closed connection: cluster.c's are kept (freed
 * when it replies); every other one is freed now. */
static bool on_slot_orphan(void *ctx, fence_net_slot *ns)
{
    fence_slot *slot = (fence_slot *)ns;
    (void)ctx;
    if (slot->state != SLOT_BATCH)
        return false;
    slot->conn = NULL;
    return true;
}

/* ---- Listeners ---------------------------------------------------------------- */

/* Open the TLS listener (src/common/tls.c) from the tls-* options. */
static int listen_tls(fence_server *s)
{
    char err[1400];
    const fence_config *cfg = s->cfg;
    fence_tls_opts o = {cfg->tls_cert, cfg->tls_key, cfg->tls_ca,
                        cfg->tls_auth, cfg->tls_handshake_ms};
    if (fence__tls_listen(&s->net, &o, cfg->bind, (unsigned)cfg->tls_port,
                          err, sizeof(err)) != 0) {
        LOG_ERROR("%s", err);
        return -1;
    }
    LOG_INFO("listening for TLS on %s:%llu (client certificates: %s)",
             cfg->bind, (unsigned long long)cfg->tls_port,
             fence__tls_auth_name(cfg->tls_auth));
    return 0;
}

/* Set up the layer and open the TCP listener and, if configured, the
 * Unix-socket listener. */
int fence__listen(fence_server *s)
{
    char err[256];
    fence_net_limits lim;
    memset(&lim, 0, sizeof(lim));
    lim.max_clients = s->cfg->max_clients;
    lim.rbuf_max = FENCE_RBUF_MAX;
    lim.max_pipeline = (uint32_t)s->cfg->max_pipeline;
    lim.max_obuf = s->cfg->max_obuf;
    lim.slot_size = sizeof(fence_slot);
    lim.conn_size = sizeof(fence_conn);
    lim.eof_flush = false; /* a client that hangs up cancels its waits */
    lim.resp = s->resp_lim;
    fence__net_guard_limits(&lim, s->cfg->max_conn_memory, s->cfg->idle_timeout_ms,
                            s->cfg->request_timeout_ms, s->cfg->auth_timeout_ms,
                            s->cfg->acl_file[0] != '\0');
    fence__server_compat_init(s);
    if (fence__server_acl_init(s) != 0)
        return -1;
    fence_net_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.ctx = s;
    hooks.on_request = on_request;
    hooks.on_open = on_open;
    hooks.on_close = on_close;
    hooks.on_slot_orphan = on_slot_orphan;
    hooks.refuse_msg = "max number of clients reached (max-clients)";
    if (fence__net_init(&s->net, s->loop, &lim, &hooks) != 0) {
        LOG_ERROR("out of memory at start");
        return -1;
    }
    if (s->cfg->port != 0) {
        if (fence__net_listen_tcp(&s->net, s->cfg->bind, (unsigned)s->cfg->port,
                                  err, sizeof(err)) != 0) {
            LOG_ERROR("%s", err);
            return -1;
        }
        LOG_INFO("listening on %s:%llu", s->cfg->bind,
                 (unsigned long long)s->cfg->port);
    }
    if (s->cfg->tls_port != 0 && listen_tls(s) != 0)
        return -1;
    if (s->cfg->unix_socket[0] != '\0') {
        if (fence__net_listen_unix(&s->net, s->cfg->unix_socket, err, sizeof(err)) != 0) {
            LOG_ERROR("%s", err);
            return -1;
        }
        LOG_INFO("listening on unix socket %s", s->cfg->unix_socket);
    }
    return 0;
}

/* Close the listeners (shutdown). */
void fence__listen_close(fence_server *s)
{
    fence__net_close_listeners(&s->net);
}
