/* The mutual-TLS raft transport (--peer-tls-cert/--peer-tls-key/--peer-tls-ca).
 *
 * libraft 0.15's raft_uv talks to its peers through a struct
 * raft_uv_transport that hands it plain uv_stream_t handles.  This
 * transport gives raft one end of a Unix socketpair per peer connection and
 * pumps the other end through OpenSSL (memory BIOs, so libuv keeps owning
 * the TCP socket) to the real TCP connection.
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
 *      handshake, which a stranger could forge).
 * Only then does raft get its stream.  Anything else (plaintext, garbage,
 * no certificate, a certificate from another CA, a wrong name, a silent
 * peer past the handshake timeout) is closed and logged as "raft peer
 * ... refused: why".  See docs/security.md "Cluster transport". */
#ifndef FENCE_SERVER_PEER_TLS_H
#define FENCE_SERVER_PEER_TLS_H

#include <raft/uv.h>
#include <stdbool.h>
#include <uv.h>

/* Fill t with the TLS transport: load the certificate, key and CA, and
 * prepare the OpenSSL context.  check_id: require CN "node-<id>".
 * Returns 0, or -1 after logging what is wrong with the files.  The
 * transport is released by its own close function (raft_uv calls it). */
int fence__peer_tls_init(struct raft_uv_transport *t, uv_loop_t *loop,
                         const char *cert, const char *key, const char *ca,
                         bool check_id);

#endif /* FENCE_SERVER_PEER_TLS_H */
