/* Fuzz target: the cluster address parsers (src/server/cluster_addr.c) that
 * read CLUSTER.ADD arguments from clients and addresses from raft's
 * configuration.  Properties: no crash or overrun on any bytes; an accepted
 * host:port formats back to text that parses to the same host and port; a
 * split joins back to the input. */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "server/cluster_addr.h"

/* Check the host:port parser on data, and the round trip of what it accepts. */
static void check_hostport(const uint8_t *data, size_t size)
{
    char host[64];
    uint16_t port = 0;
    if (fence__cluster_parse_hostport((const char *)data, size, host, sizeof(host), &port) != 0)
        return;
    FUZZ_CHECK(port >= 1);
    FUZZ_CHECK(strlen(host) < sizeof(host));
    char text[96];
    int n = snprintf(text, sizeof(text), "%s:%u", host, (unsigned)port);
    FUZZ_CHECK(n > 0 && (size_t)n < sizeof(text));
    char host2[64];
    uint16_t port2 = 0;
    FUZZ_CHECK(fence__cluster_parse_hostport(text, (size_t)n, host2, sizeof(host2), &port2) == 0);
    FUZZ_CHECK(strcmp(host, host2) == 0);
    FUZZ_CHECK(port == port2);
    /* A too-small host buffer refuses instead of truncating. */
    size_t hl = strlen(host);
    FUZZ_CHECK(fence__cluster_parse_hostport((const char *)data, size, host2, hl, &port2) != 0);
}

/* Check the split on data as a C string, with buffers of several sizes. */
static void check_split(const uint8_t *data, size_t size)
{
    char in[256];
    size_t len = size < sizeof(in) - 1 ? size : sizeof(in) - 1;
    memcpy(in, data, len);
    in[len] = '\0';
    size_t slen = strlen(in);
    static const size_t caps[] = {1, 2, 8, 24, 256};
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        char raft[256], client[256];
        size_t cap = caps[i];
        if (fence__cluster_split_addr(in, raft, cap, client, cap) != 0)
            continue;
        size_t rl = strlen(raft), cl = strlen(client);
        FUZZ_CHECK(rl < cap && cl < cap);
        FUZZ_CHECK(memcmp(in, raft, rl) == 0);
        if (rl == slen) {
            FUZZ_CHECK(cl == 0);
        } else {
            FUZZ_CHECK(in[rl] == '|');
            FUZZ_CHECK(memchr(raft, '|', rl) == NULL);
            FUZZ_CHECK(rl + 1 + cl == slen);
            FUZZ_CHECK(strcmp(in + rl + 1, client) == 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_hostport(data, size);
    check_split(data, size);
    return 0;
}
