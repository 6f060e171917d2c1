/* The mutual-TLS raft transport (--peer-tls-cert/--peer-tls-key/--peer-tls-ca).
 *
 * libraft 0.15's raft_uv talks to its peers through a struct
 * raft_uv_transport that hands it plain uv_stream_t handles.  This
 * transport gives raft one end of a Unix socketpair per peer connection and
 * pumps the other end through OpenSSL (memory BIOs, net/tls_pump.h, so
 * libuv keeps owning the TCP socket) to the real TCP connection.
 *
 * Connection setup, in order, before raft ever sees a byte:
 *   1. TCP connect / accept on the raft address;
 *   2. a TLS 1.3 handshake in which BOTH sides present a certificate signed
 *      by the cluster CA (--peer-tls-ca);
 *   3. with peer-tls-check-id 1 (the default), the peer certificate's
 *      common name must be "node-<id>" for the id it claims (accept side) or
 *      the id raft asked to reach (connect side);
 *   4. the connecting side sends a hello inside TLS: magic "FNCR", version,
 *      its raft id and raft address (this replaces raft_uv_tcp's plaintext
 *      handshake, which a stranger could forge);
 *   5. accept side: the hello's id must be a member of raft's current
 *      configuration (fence__peer_tls_set_members), the hello's address
 *      must be that member's configured raft address, and the TCP source
 *      address must be that address's host (the connecting side binds its
 *      socket to its own raft host, so it is).  A certificate of the CA
 *      alone admits nobody.
 * Only then does raft get its stream.  Anything else (plaintext, garbage,
 * no certificate, a certificate from another CA, a wrong name, a stranger
 * id, a wrong address, a silent peer past its deadline) is closed and
 * logged as "raft peer ... refused: why" (rate-limited).
 *
 * Handshake slots: at most FENCE_PEER_TLS_PENDING_MAX incoming connections
 * wait in steps 2-5.  When they are full, a new one evicts the oldest one
 * from an address that is no member's host, else (if it comes from a
 * member's host itself) the oldest one; a newcomer from a stranger's
 * address finds no stranger to evict and is refused.  A stranger's address
 * holds at most FENCE_PEER_TLS_PENDING_PER_IP of the slots, and a silent
 * connection is dropped after FENCE_PEER_TLS_FIRST_BYTE_MS.  So a flood of
 * connects cannot keep a member out: a member's handshake, a few round
 * trips, finishes long before 32 newer connections could evict it.
 * See docs/cluster.md and docs/security.md "Cluster transport". */
#ifndef FENCE_SERVER_PEER_TLS_H
#define FENCE_SERVER_PEER_TLS_H

#include <raft/uv.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "ops/metrics.h"

/* Fill t with the TLS transport: load the certificate, key and CA, and
 * prepare the OpenSSL context.  check_id: require CN "node-<id>".
 * Returns 0, or -1 after logging what is wrong with the files.  The
 * transport is released by its own close function (raft_uv calls it).
 * Until fence__peer_tls_set_members() is called, every incoming peer is
 * refused ("membership unknown"). */
int fence__peer_tls_init(struct raft_uv_transport *t, uv_loop_t *loop,
                         const char *cert, const char *key, const char *ca,
                         bool check_id);

/* The membership the transport admits by (the node installs it, see
 * node.c): write the i-th member's raft id to *id and its raft address
 * ("a.b.c.d:port", without a "|client" part) to addr (cap bytes), and
 * return true; return false when there is no i-th member.  Members are
 * the servers of raft's current configuration (voters, standbys and spares,
 * the uncommitted configuration of a membership change included: so the
 * node a CLUSTER.ADD is adding is a member of the leader as soon as raft
 * takes the change).  Called on the loop at each accept and hello, never
 * kept. */
typedef bool (*fence_peer_tls_member_fn)(void *arg, unsigned i, uint64_t *id,
                                         char *addr, size_t cap);

/* Install the membership lookup (arg is passed back to fn). */
void fence__peer_tls_set_members(struct raft_uv_transport *t,
                                 fence_peer_tls_member_fn fn, void *arg);

/* Count refused or dropped peer connections in m (a counter family with
 * one label, the reason: tls, name, member, address, hello, closed,
 * timeout, evicted, busy, superseded, internal); NULL: do not count. */
void fence__peer_tls_set_refusals(struct raft_uv_transport *t, fence_metric *m);

/* Pending (not yet authenticated) incoming connections one source address
 * that is not a member's host may hold; a newer one from it evicts its
 * oldest.  (The total is FENCE_PEER_TLS_PENDING_MAX, src/base/limits.h.) */
#define FENCE_PEER_TLS_PENDING_PER_IP 4
/* A connection that has sent no byte this long after it was accepted is
 * dropped (a real peer sends its ClientHello at once); the whole handshake
 * still has FENCE_PEER_TLS_HANDSHAKE_MS. */
#define FENCE_PEER_TLS_FIRST_BYTE_MS 1000
/* Open (authenticated) incoming connections one member may have; a newer
 * one closes its oldest.  A real node keeps one. */
#define FENCE_PEER_TLS_OPEN_PER_ID 4

#endif /* FENCE_SERVER_PEER_TLS_H */
