/* CLIENT LIST for a daemon on the shared connection layer: walks the open
 * connections of a fence_net (src/net/conn.h) and describes each one to
 * the compat module (src/daemon/compat.h). */
#ifndef FENCE_COMMON_COMPAT_NET_H
#define FENCE_COMMON_COMPAT_NET_H

#include <stdbool.h>
#include <stddef.h>

#include "daemon/compat.h"
#include "net/conn.h"

/* Call emit(emit_arg, &info) once per open connection of net.  Each
 * daemon connection struct embeds a fence_compat_conn at byte offset
 * compat_off from its fence_net_conn (offsetof of the daemon's struct). */
void fence__compat_net_list(fence_net *net, size_t compat_off,
                            fence_compat_emit_fn emit, void *emit_arg);

/* Wall-clock microseconds since the epoch (compat TIME); arg unused. */
uint64_t fence__compat_wall_us(void *arg);

/* Fill ctx for daemon server ("fenced", "fence-store"): FENCE_VERSION,
 * its command table, list for CLIENT LIST, the wall clock, no AUTH
 * callback (the daemon's ACL set-up adds one, acl_srv.h); arg goes to
 * list. */
void fence__compat_ctx_init(fence_compat_ctx *ctx, const char *server,
                            const fence_compat_command *commands,
                            size_t n_commands,
                            void (*list)(void *, fence_compat_emit_fn, void *),
                            void *arg);

/* Offer request m of connection c (compat state cc) to the compat module;
 * true when it answered (the reply is queued in order on c, and m must not
 * run), false when the daemon dispatches m itself. */
bool fence__compat_net_handle(const fence_compat_ctx *ctx, fence_compat_conn *cc,
                              fence_net_conn *c, const fence_resp_msg *m);

#endif /* FENCE_COMMON_COMPAT_NET_H */
