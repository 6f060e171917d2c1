/* fenced's client connections on the shared connection layer
 * (src/net/conn.h): the layer owns listeners, bounded reads, parsing,
 * reply order, the output bound and closing; this file is where a
 * request enters fenced (on_request hands it to the command table,
 * cmd.c), sets up fenced's part of each connection, opens the listeners,
 * and decides what happens to a closing connection's unanswered requests
 * (the leader module forgets them; cluster.c's are orphaned).  The slots
 * and their replies are reply.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/limits.h"
#include "net/tls.h"
#include "server/commands_table.h"
#include "base/log.h"
#include "server/server.h"

/* ---- Hooks ------------------------------------------------------------------- */

/* A connection was accepted: fenced's part of it. */
static void on_open(void *ctx, fence_net_conn *nc)
{
    fence_conn *c = (fence_conn *)nc;
    c->srv = ctx;
    c->id = nc->id;
    fence__leader_conn_init(&c->lconn);
    fence__daemon_conn_open(&c->srv->daemon, nc); /* compat state, default login */
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
    fence__observe_conn_closed((fence_conn *)nc);
    fence__daemon_conn_closed(&((fence_conn *)nc)->srv->daemon, nc); /* maxconns */
}

/* An unanswered slot of a closed connection: cluster.c's and those being
 * signed (signq.h) are kept (freed when they are answered); every other
 * one is freed now. */
static bool on_slot_orphan(void *ctx, fence_net_slot *ns)
{
    fence_slot *slot = (fence_slot *)ns;
    (void)ctx;
    if (slot->state != SLOT_BATCH && slot->state != SLOT_SIGNING) {
        fence__slot_drop_names(slot); /* the layer frees the slot itself */
        return false;
    }
    slot->conn = NULL;
    return true;
}

/* ---- Listeners ---------------------------------------------------------------- */

/* Set up the layer, the compat context and the ACL, and open the
 * listeners: the RESP daemon skeleton's (src/daemon/daemon.h), with
 * fenced's connection and slot sizes and parser limits. */
int fence__listen(fence_server *s)
{
    fence_net_limits lim;
    memset(&lim, 0, sizeof(lim));
    fence__daemon_net_limits(&s->cfg->daemon, &lim);
    lim.rbuf_max = FENCE_RBUF_MAX;
    lim.slot_size = sizeof(fence_slot);
    lim.conn_size = sizeof(fence_conn);
    lim.eof_flush = false; /* a client that hangs up cancels its waits */
    lim.resp = s->resp_lim;
    fence_daemon_parts parts = {"fenced", &s->cfg->daemon, &s->net, &s->compat, &s->acl,
                                &s->acl_conns, offsetof(fence_conn, compat),
                                offsetof(fence_conn, quota_mark), fence__server_commands,
                                fence__server_commands_n};
    if (fence__daemon_users_init(&s->daemon, &parts) != 0)
        return -1;
    s->acl.m_auth_failures = s->metrics.auth_failures; /* failed logins */
    fence_net_hooks hooks;
    memset(&hooks, 0, sizeof(hooks));
    hooks.ctx = s;
    hooks.on_request = on_request;
    hooks.on_open = on_open;
    hooks.on_close = on_close;
    hooks.on_slot_orphan = on_slot_orphan;
    hooks.refuse_msg = "max number of clients reached (max-clients)";
    if (fence__net_init(&s->net, s->loop, &lim, &hooks) != 0) {
        FENCE_LOG_E("out of memory at start");
        return -1;
    }
    return fence__daemon_listen(&s->daemon);
}

/* Close the listeners (shutdown). */
void fence__listen_close(fence_server *s)
{
    fence__net_close_listeners(&s->net);
}
