/* The hello of the mutual-TLS raft transport (peer_tls.h), as pure code:
 * no I/O, no OpenSSL, no libuv; unit-tested in tests/unit/test_peer_hello.c
 * and fuzzed by tests/fuzz/peer_hello_fuzz.c.
 *
 * The connecting side sends it once, inside TLS, right after the
 * handshake; raft's own bytes follow it on the same stream.  Layout (all
 * integers big-endian):
 *
 *   offset  size  field
 *        0     4  magic "FNCR"
 *        4     4  version (1)
 *        8     8  raft id of the sender (never 0)
 *       16     2  length L of the address (1 .. FENCE_PEER_HELLO_ADDR_MAX - 1)
 *       18     L  the sender's raft address ("a.b.c.d:port"), no NUL
 *
 * The address is only a claim: the accepting side admits the sender only
 * if it matches the configuration (peer_tls.c). */
#ifndef FENCE_SERVER_PEER_HELLO_H
#define FENCE_SERVER_PEER_HELLO_H

#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"

/* Fixed part: magic, version, id, address length. */
#define FENCE_PEER_HELLO_HEAD 18
/* Room for an address with its NUL (the longest address is one less). */
#define FENCE_PEER_HELLO_ADDR_MAX FENCE_PEER_TLS_ADDR_MAX
/* Longest hello on the wire. */
#define FENCE_PEER_HELLO_MAX (FENCE_PEER_HELLO_HEAD + FENCE_PEER_HELLO_ADDR_MAX - 1)
/* The version this build speaks. */
#define FENCE_PEER_HELLO_VERSION 1u

/* Results of fence__peer_hello_decode besides a length. */
enum fence_peer_hello_rc {
    FENCE_PEER_HELLO_PARTIAL = -1,   /* well-formed so far: read more */
    FENCE_PEER_HELLO_EMAGIC = -2,    /* not "FNCR" */
    FENCE_PEER_HELLO_EVERSION = -3,  /* another version */
    FENCE_PEER_HELLO_ETOOLONG = -4,  /* address length past FENCE_PEER_HELLO_ADDR_MAX - 1 */
    FENCE_PEER_HELLO_EMALFORMED = -5, /* id 0, empty address, or a NUL in it */
};

/* Encode the hello of (id, addr) into out (cap bytes).  Returns its length,
 * or -1 when id is 0, addr is empty or too long, or out is too small. */
long fence__peer_hello_encode(uint64_t id, const char *addr, uint8_t *out, size_t cap);

/* Decode the first len bytes received, buf[0..len).  Returns the length of
 * the complete hello (> 0; bytes after it are raft's) and sets *id and addr
 * (NUL-terminated; addr has FENCE_PEER_HELLO_ADDR_MAX bytes); or
 * FENCE_PEER_HELLO_PARTIAL when the bytes so far are a valid beginning, with
 * *need set to the total length to read before calling again; or another
 * enum fence_peer_hello_rc code (refuse the peer).  The magic, version and
 * address length are judged as soon as the fixed part is in. */
long fence__peer_hello_decode(const uint8_t *buf, size_t len, uint64_t *id,
                              char addr[FENCE_PEER_HELLO_ADDR_MAX], size_t *need);

/* Words for a code of enum fence_peer_hello_rc (for "refused: ..."). */
const char *fence__peer_hello_strerror(long rc);

#endif /* FENCE_SERVER_PEER_HELLO_H */
