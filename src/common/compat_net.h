/* CLIENT LIST for a daemon on the shared connection layer: walks the open
 * connections of a fence_net (src/common/conn.h) and describes each one to
 * the compat module (src/common/compat.h). */
#ifndef FENCE_COMMON_COMPAT_NET_H
#define FENCE_COMMON_COMPAT_NET_H

#include <stddef.h>

#include "common/compat.h"
#include "common/conn.h"

/* Call emit(emit_arg, &info) once per open connection of net.  Each
 * daemon connection struct embeds a fence_compat_conn at byte offset
 * compat_off from its fence_net_conn (offsetof of the daemon's struct). */
void fence__compat_net_list(fence_net *net, size_t compat_off,
                            fence_compat_emit_fn emit, void *emit_arg);

/* Wall-clock microseconds since the epoch (compat TIME); arg unused. */
uint64_t fence__compat_wall_us(void *arg);

#endif /* FENCE_COMMON_COMPAT_NET_H */
