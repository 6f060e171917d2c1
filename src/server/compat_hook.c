/* fenced's hook into the Redis-client compatibility module
 * (src/daemon/compat.h): every parsed request goes through
 * fence_compat_handle before fenced's own command table (cmd.c).  The
 * context itself (HELLO's server name, the command table, CLIENT LIST,
 * AUTH) is the skeleton's: fence__daemon_users_init (src/daemon/daemon.h). */
#include <stddef.h>

#include "daemon/daemon.h"
#include "server/server.h"

/* Offer request m of c to the compat module; true when it answered (the
 * reply is queued in order and m must not run). */
bool fence__server_compat(fence_conn *c, const fence_resp_msg *m)
{
    return fence__daemon_compat(&c->srv->daemon, &c->base, m);
}
