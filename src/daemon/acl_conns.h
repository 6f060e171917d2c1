/* Per-user connection limits (the ACL rule maxconns=N, src/auth/acl.h),
 * counted by each daemon over its open connections.
 *
 * A connection is admitted as its user at its first request after it
 * logged in (AUTH, HELLO AUTH, a TLS client certificate, or the automatic
 * "default" login), when fewer than N other connections are admitted as
 * that user; otherwise that request gets "-LIMIT user 'u' has its N
 * connections open (maxconns); closing" and the connection is closed.
 * The first N connections keep their place; one that closes (or logs in
 * as someone else) makes room.
 *
 * Admission is remembered in a per-connection mark (a uint64_t in the
 * daemon's connection struct, 0 at accept: not admitted), and the number
 * of connections admitted per user in a fixed table (fence_acl_conns,
 * zero-initialized = empty), so a login costs O(1).  Nothing runs when no
 * user of the ACL has maxconns.  The table holds one entry per user name
 * with maxconns ever seen (entries are never removed; FENCE_ACL_USERS_MAX
 * per file); should it ever fill, after many reloads with new names, a
 * user missing from it is counted by a walk over the connections. */
#ifndef FENCE_COMMON_ACL_CONNS_H
#define FENCE_COMMON_ACL_CONNS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/acl_srv.h"
#include "base/limits.h"

struct fence_net;
struct fence_net_conn;

/* Slots of the table (a power of two, twice the users of one file). */
#define FENCE_ACL_CONNS_SLOTS (2 * FENCE_ACL_USERS_MAX)
_Static_assert((FENCE_ACL_CONNS_SLOTS & (FENCE_ACL_CONNS_SLOTS - 1)) == 0,
               "a power of two");

/* Connections admitted per user (by mark).  Zero-initialized: empty. */
typedef struct fence_acl_conns {
    uint32_t n_keys; /* slots in use */
    struct {
        uint64_t mark;  /* the user's mark, 0: free slot */
        uint32_t count; /* connections admitted with it */
    } slot[FENCE_ACL_CONNS_SLOTS];
} fence_acl_conns;

/* For a request of connection c (after the gate let it through): true
 * when c was refused (the -LIMIT reply is queued and c closes after it;
 * the request must not run).  compat_off and mark_off are the offsets of
 * the connection's fence_compat_conn and of its uint64_t mark inside the
 * daemon's connection struct (which starts with the fence_net_conn). */
bool fence__acl_conns_refused(const fence_acl_srv *s, fence_acl_conns *t,
                              struct fence_net *net, size_t compat_off, size_t mark_off,
                              struct fence_net_conn *c);

/* Connection c with mark *mark is closing: it leaves its user's count. */
void fence__acl_conns_closed(fence_acl_conns *t, uint64_t *mark);

#endif /* FENCE_COMMON_ACL_CONNS_H */
