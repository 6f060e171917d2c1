/* Cluster membership of fenced: the CLUSTER.* commands and the two pieces
 * of raft glue they need (see docs/cluster.md).
 *
 * Client addresses of nodes.  Nodes named by --peers at bootstrap are in
 * raft's configuration under their raft address "host:raft-port"; their
 * client address comes from the --peers map.  A node added at run time with
 * CLUSTER.ADD is stored in raft's configuration (so it is replicated,
 * persisted and snapshotted by raft itself) under the address
 * "raft-host:raft-port|client-host:client-port".  Every node can therefore
 * name the client address of any leader, including added ones, for
 * NOTLEADER redirects.  The raft transport only ever sees the part before
 * '|': node.c's wrapper of raft_uv_tcp's connect strips the suffix before
 * raft_uv_tcp parses the address (both are in node.c, node.h).
 *
 * Joining: a node started with --join 1 does not bootstrap a configuration
 * of its own; it waits, empty, until a leader adds it and raft brings it the
 * log (or a snapshot) including the configuration. */
#ifndef FENCE_SERVER_CLUSTER_H
#define FENCE_SERVER_CLUSTER_H

#include <raft.h>
#include <raft/uv.h>
#include <stdint.h>

#include "server/config.h"
#include "server/node.h"

struct fence_conn;
struct fence_slot;
struct fence_resp_msg;

/* Longest raft configuration address fenced writes ("h:p|h:p"). */
#define FENCE_CLUSTER_ADDR_MAX 160

/* Handle CLUSTER.INFO, CLUSTER.ADD, CLUSTER.REMOVE and CLUSTER.TRANSFER
 * received on connection c; slot is the request's reply slot, m the parsed
 * request (its arity already checked against the command table).  Every
 * path replies on slot, possibly later (membership changes reply when raft
 * has committed them). */
void fence__cluster_dispatch(struct fence_conn *c, struct fence_slot *slot,
                             const struct fence_resp_msg *m);

#endif /* FENCE_SERVER_CLUSTER_H */
