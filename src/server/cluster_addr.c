/* Address parsing for cluster membership; see cluster_addr.h. */
#include "base/assert.h"
#include "server/cluster_addr.h"

#include <arpa/inet.h>
#include <string.h>

/* Split at the first '|'; see cluster_addr.h. */
int fence__cluster_split_addr(const char *addr, char *raft, size_t raft_cap,
                              char *client, size_t client_cap)
{
    FENCE_ASSERT(addr != NULL);
    FENCE_ASSERT(raft != NULL);
    FENCE_ASSERT(client != NULL);
    FENCE_ASSERT(raft_cap > 0);
    FENCE_ASSERT(client_cap > 0);
    const char *bar = strchr(addr, '|');
    size_t rlen = bar != NULL ? (size_t)(bar - addr) : strlen(addr);
    const char *cpart = bar != NULL ? bar + 1 : "";
    size_t clen = strlen(cpart);
    if (rlen >= raft_cap || clen >= client_cap)
        return -1;
    memcpy(raft, addr, rlen);
    raft[rlen] = '\0';
    memcpy(client, cpart, clen + 1);
    return 0;
}

/* Strict "a.b.c.d:port"; see cluster_addr.h. */
int fence__cluster_parse_hostport(const char *s, size_t len, char *host, size_t cap,
                                  uint16_t *port)
{
    FENCE_ASSERT(s != NULL || len == 0);
    FENCE_ASSERT(host != NULL);
    FENCE_ASSERT(port != NULL);
    FENCE_ASSERT(cap > 0);
    /* The port is everything after the last colon (IPv4 has none). */
    size_t colon = len;
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':')
            colon = i;
    if (colon == len || colon == 0)
        return -1;
    size_t digits = len - colon - 1;
    if (digits < 1 || digits > 5 || s[colon + 1] == '0')
        return -1;
    uint32_t p = 0;
    for (size_t i = colon + 1; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        p = p * 10 + (uint32_t)(s[i] - '0');
    }
    if (p < 1 || p > 65535)
        return -1;
    /* The host: at most "255.255.255.255", checked by inet_pton. */
    char buf[INET_ADDRSTRLEN];
    if (colon >= sizeof(buf) || colon >= cap)
        return -1;
    memcpy(buf, s, colon);
    buf[colon] = '\0';
    if (memchr(buf, '\0', colon) != NULL)
        return -1;
    struct in_addr a;
    if (inet_pton(AF_INET, buf, &a) != 1)
        return -1;
    memcpy(host, buf, colon + 1);
    *port = (uint16_t)p;
    return 0;
}
