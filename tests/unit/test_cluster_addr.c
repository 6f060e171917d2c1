/* Unit tests of the cluster address parsing (src/server/cluster_addr.c):
 * the "raft|client" split and the strict IPv4 host:port parser that
 * CLUSTER.ADD uses on client input. */
#include <stdint.h>
#include <string.h>

#include "server/cluster_addr.h"
#include "../lib/test.h"

/* Parse a NUL-terminated string; returns the parser's result. */
static int hp(const char *s, char *host, size_t cap, uint16_t *port)
{
    return fence__cluster_parse_hostport(s, strlen(s), host, cap, port);
}

/* Well-formed addresses parse into host and port. */
static void test_hostport_ok(void)
{
    char host[64];
    uint16_t port = 0;
    REQUIRE(hp("127.0.0.1:7801", host, sizeof(host), &port) == 0);
    CHECK_STR(host, "127.0.0.1");
    CHECK_EQ_U64(port, 7801);
    REQUIRE(hp("255.255.255.255:65535", host, sizeof(host), &port) == 0);
    CHECK_STR(host, "255.255.255.255");
    CHECK_EQ_U64(port, 65535);
    REQUIRE(hp("10.0.0.1:1", host, sizeof(host), &port) == 0);
    CHECK_EQ_U64(port, 1);
}

/* Everything else is refused: names, IPv6, bad or missing ports. */
static void test_hostport_bad(void)
{
    char host[64];
    uint16_t port;
    const char *bad[] = {
        "", ":", "127.0.0.1", "127.0.0.1:", ":7801", "localhost:7801",
        "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:99999", "127.0.0.1:007",
        "127.0.0.1:+80", "127.0.0.1:-1", "127.0.0.1: 80", "127.0.0.1:80 ",
        " 127.0.0.1:80", "127.0.0.1:80|1.2.3.4:5", "::1:80", "[::1]:80",
        "1.2.3:80", "1.2.3.4.5:80", "256.1.1.1:80", "127.0.0.1:123456",
        "1.2.3.4:8a", "01234567890123456789:1",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (hp(bad[i], host, sizeof(host), &port) == 0) {
            printf("# accepted: '%s'\n", bad[i]);
            CHECK(0);
        }
    }
    /* An embedded NUL is not hidden by C string handling. */
    CHECK(fence__cluster_parse_hostport("1.2.3.4\0:80", 10, host, sizeof(host), &port) != 0);
    CHECK(fence__cluster_parse_hostport("1.2.3.4:8\0", 10, host, sizeof(host), &port) != 0);
    /* A host buffer too small is an error, not an overflow. */
    CHECK(hp("127.0.0.1:80", host, 9, &port) != 0);
    CHECK(hp("127.0.0.1:80", host, 10, &port) == 0);
}

/* The split returns both parts, or the whole address and "" without '|'. */
static void test_split(void)
{
    char raft[32], client[32];
    REQUIRE(fence__cluster_split_addr("1.2.3.4:5|6.7.8.9:10", raft, sizeof(raft), client,
                                      sizeof(client)) == 0);
    CHECK_STR(raft, "1.2.3.4:5");
    CHECK_STR(client, "6.7.8.9:10");
    REQUIRE(fence__cluster_split_addr("1.2.3.4:5", raft, sizeof(raft), client,
                                      sizeof(client)) == 0);
    CHECK_STR(raft, "1.2.3.4:5");
    CHECK_STR(client, "");
    REQUIRE(fence__cluster_split_addr("|", raft, sizeof(raft), client, sizeof(client)) == 0);
    CHECK_STR(raft, "");
    CHECK_STR(client, "");
    /* Only the first '|' splits. */
    REQUIRE(fence__cluster_split_addr("a|b|c", raft, sizeof(raft), client,
                                      sizeof(client)) == 0);
    CHECK_STR(raft, "a");
    CHECK_STR(client, "b|c");
    /* Parts that do not fit are errors. */
    CHECK(fence__cluster_split_addr("12345|x", raft, 5, client, sizeof(client)) != 0);
    CHECK(fence__cluster_split_addr("1234|x", raft, 5, client, sizeof(client)) == 0);
    CHECK(fence__cluster_split_addr("x|12345", raft, sizeof(raft), client, 5) != 0);
}

int main(void)
{
    TEST_RUN(test_hostport_ok);
    TEST_RUN(test_hostport_bad);
    TEST_RUN(test_split);
    return TEST_DONE();
}
