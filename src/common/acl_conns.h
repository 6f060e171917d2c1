/* Per-user connection limits (the ACL rule maxconns=N, src/common/acl.h),
 * counted by each daemon over its open connections.
 *
 * A connection is admitted as its user at its first request after it
 * logged in (AUTH, HELLO AUTH, a TLS client certificate, or the automatic
 * "default" login), when fewer than N other connections are admitted as
 * that user; otherwise that request gets "-LIMIT user 'u' has its N
 * connections open (maxconns); closing" and the connection is closed.
 * The first N connections keep their place; one that closes makes room.
 * Admission is remembered in a per-connection mark (a uint64_t in the
 * daemon's connection struct, 0 at accept), so the count (one walk over
 * the connections) runs once per login, and not at all when no user of
 * the ACL has maxconns. */
#ifndef FENCE_COMMON_ACL_CONNS_H
#define FENCE_COMMON_ACL_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/acl_srv.h"

struct fence_net;
struct fence_net_conn;

/* For request of connection c (after the gate let it through): true when
 * c was refused (the -LIMIT reply is queued and c closes after it; the
 * request must not run).  compat_off and mark_off are the offsets of the
 * connection's fence_compat_conn and of its uint64_t mark inside the
 * daemon's connection struct (which starts with the fence_net_conn). */
bool fence__acl_conns_refused(const fence_acl_srv *s, struct fence_net *net, size_t compat_off,
                              size_t mark_off, struct fence_net_conn *c);

#endif /* FENCE_COMMON_ACL_CONNS_H */
