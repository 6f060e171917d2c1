/* fenced's hook into the Redis-client compatibility module
 * (src/common/compat.h): every parsed request goes through
 * fence_compat_handle before fenced's own command table (cmd.c). */
#include <stddef.h>

#include "common/compat_net.h"
#include "server/commands_table.h"
#include "server/server.h"

/* CLIENT LIST: every open client connection of the server. */
static void list_conns(void *arg, fence_compat_emit_fn emit, void *emit_arg)
{
    fence_server *s = arg;
    fence__compat_net_list(&s->net, offsetof(fence_conn, compat), emit, emit_arg);
}

/* Fill s->compat (once, before the listeners open), without an AUTH
 * callback: fence__server_acl_init (acl_hook.c) sets one when an
 * --acl-file names users; until then AUTH gets Redis' answer for a server
 * without a password. */
void fence__server_compat_init(fence_server *s)
{
    fence__compat_ctx_init(&s->compat, "fenced", fence__server_commands,
                           fence__server_commands_n, list_conns, s);
}

/* Offer request m of c to the compat module; true when it answered (the
 * reply is queued in order and m must not run). */
bool fence__server_compat(fence_conn *c, const fence_resp_msg *m)
{
    return fence__compat_net_handle(&c->srv->compat, &c->compat, &c->base, m);
}
