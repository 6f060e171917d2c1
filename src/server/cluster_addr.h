/* Pure parsing of the addresses CLUSTER.ADD takes and raft's configuration
 * stores (see cluster.h for the "raft|client" format).  No I/O, no raft, no
 * libuv: unit-tested in tests/unit/test_cluster_addr.c and fuzzed by
 * tests/fuzz/cluster_addr_fuzz.c. */
#ifndef FENCE_SERVER_CLUSTER_ADDR_H
#define FENCE_SERVER_CLUSTER_ADDR_H

#include <stddef.h>
#include <stdint.h>

/* Split the NUL-terminated configuration address addr at its first '|' into
 * its raft part and its client part (client is "" when there is no '|').
 * Returns 0, or -1 when a part does not fit its buffer (raft_cap and
 * client_cap bytes, both > 0), leaving the buffers unspecified. */
int fence__cluster_split_addr(const char *addr, char *raft, size_t raft_cap,
                              char *client, size_t client_cap);

/* Parse s[0..len) (not NUL-terminated) as "a.b.c.d:port": a dotted IPv4
 * address, a colon, and a decimal port in 1..65535 without sign, spaces or
 * leading zeros.  On success writes the address (NUL-terminated, at most
 * cap - 1 bytes) to host and the port to *port and returns 0; otherwise
 * returns -1 (host and *port unspecified). */
int fence__cluster_parse_hostport(const char *s, size_t len, char *host, size_t cap,
                                  uint16_t *port);

#endif /* FENCE_SERVER_CLUSTER_ADDR_H */
