/* fenced's hook into the Redis-client compatibility module
 * (src/common/compat.h): every parsed request goes through
 * fence_compat_handle before fenced's own command table (cmd.c). */
#include <stddef.h>

#include "common/compat_net.h"
#include "common/version.h"
#include "server/commands_table.h"
#include "server/server.h"

/* CLIENT LIST: every open client connection of the server. */
static void list_conns(void *arg, fence_compat_emit_fn emit, void *emit_arg)
{
    fence_server *s = arg;
    fence__compat_net_list(&s->net, offsetof(fence_conn, compat), emit, emit_arg);
}

/* Fill s->compat (once, before the listeners open).  AUTH stays without a
 * callback: fenced has no users (yet). */
void fence__server_compat_init(fence_server *s)
{
    s->compat.server = "fenced";
    s->compat.version = FENCE_VERSION;
    s->compat.commands = fence__server_commands;
    s->compat.n_commands = fence__server_commands_n;
    s->compat.list = list_conns;
    s->compat.wall_us = fence__compat_wall_us;
    s->compat.auth = NULL;
    s->compat.arg = s;
}

/* Offer request m of c to the compat module; true when it answered (the
 * reply is queued in order and m must not run). */
bool fence__server_compat(fence_conn *c, const fence_resp_msg *m)
{
    fence_compat_reply out;
    fence_compat_reply_init(&out);
    int rc = fence_compat_handle(&c->srv->compat, &c->compat, m, &out);
    if (rc == FENCE_COMPAT_REPLIED)
        fence__net_reply(&c->base, out.ptr, out.len);
    fence_compat_reply_free(&out);
    return rc == FENCE_COMPAT_REPLIED;
}
