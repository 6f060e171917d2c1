/* Unit tests of the raft transport's hello (src/server/peer_hello.c): the
 * round trip, every refusal, and that every prefix of a hello asks for
 * more rather than being judged early or late. */
#include <stdint.h>
#include <string.h>

#include "server/peer_hello.h"
#include "../lib/test.h"

/* A hello encodes to the documented bytes and decodes back. */
static void test_round_trip(void)
{
    uint8_t b[FENCE_PEER_HELLO_MAX + 8];
    long n = fence__peer_hello_encode(0x0102030405060708ULL, "127.0.0.1:7001", b, sizeof(b));
    REQUIRE(n == FENCE_PEER_HELLO_HEAD + 14);
    CHECK(memcmp(b, "FNCR\0\0\0\1\1\2\3\4\5\6\7\10\0\16" "127.0.0.1:7001", (size_t)n) == 0);
    memcpy(b + n, "raft", 4); /* raft's bytes follow */
    uint64_t id = 0;
    char addr[FENCE_PEER_HELLO_ADDR_MAX];
    size_t need = 0;
    CHECK(fence__peer_hello_decode(b, (size_t)n + 4, &id, addr, &need) == n);
    CHECK_EQ_U64(id, 0x0102030405060708ULL);
    CHECK_STR(addr, "127.0.0.1:7001");
    for (long k = 0; k < n; k++) {
        need = 0;
        CHECK(fence__peer_hello_decode(b, (size_t)k, &id, addr, &need) ==
              FENCE_PEER_HELLO_PARTIAL);
        CHECK(need > (size_t)k && need <= (size_t)n);
    }
}

/* The longest address fits; one more byte does not, on either side. */
static void test_lengths(void)
{
    char longest[FENCE_PEER_HELLO_ADDR_MAX];
    memset(longest, 'a', sizeof(longest) - 1);
    longest[sizeof(longest) - 1] = '\0';
    uint8_t b[FENCE_PEER_HELLO_MAX];
    long n = fence__peer_hello_encode(7, longest, b, sizeof(b));
    REQUIRE(n == FENCE_PEER_HELLO_MAX);
    uint64_t id;
    char addr[FENCE_PEER_HELLO_ADDR_MAX];
    size_t need;
    CHECK(fence__peer_hello_decode(b, (size_t)n, &id, addr, &need) == n);
    CHECK(strlen(addr) == sizeof(longest) - 1);
    CHECK(fence__peer_hello_encode(7, longest, b, sizeof(b) - 1) == -1);
    b[16] = (uint8_t)(FENCE_PEER_HELLO_ADDR_MAX >> 8);
    b[17] = (uint8_t)FENCE_PEER_HELLO_ADDR_MAX;
    CHECK(fence__peer_hello_decode(b, FENCE_PEER_HELLO_HEAD, &id, addr, &need) ==
          FENCE_PEER_HELLO_ETOOLONG);
    b[16] = 0xff;
    b[17] = 0xff;
    CHECK(fence__peer_hello_decode(b, FENCE_PEER_HELLO_HEAD, &id, addr, &need) ==
          FENCE_PEER_HELLO_ETOOLONG);
    CHECK(fence__peer_hello_encode(0, "1.2.3.4:5", b, sizeof(b)) == -1);
    CHECK(fence__peer_hello_encode(1, "", b, sizeof(b)) == -1);
}

/* Wrong magic (judged from the first byte), version, id 0, an empty
 * address and a NUL inside it are refused. */
static void test_refusals(void)
{
    uint8_t b[FENCE_PEER_HELLO_MAX];
    uint64_t id;
    char addr[FENCE_PEER_HELLO_ADDR_MAX];
    size_t need;
    long n = fence__peer_hello_encode(3, "10.0.0.3:7000", b, sizeof(b));
    REQUIRE(n > 0);
    CHECK(fence__peer_hello_decode((const uint8_t *)"G", 1, &id, addr, &need) ==
          FENCE_PEER_HELLO_EMAGIC);
    CHECK(fence__peer_hello_decode((const uint8_t *)"\x16\x03\x01", 3, &id, addr, &need) ==
          FENCE_PEER_HELLO_EMAGIC);
    b[7] = 2;
    CHECK(fence__peer_hello_decode(b, (size_t)n, &id, addr, &need) ==
          FENCE_PEER_HELLO_EVERSION);
    b[7] = 1;
    uint8_t z[FENCE_PEER_HELLO_MAX];
    memcpy(z, b, (size_t)n);
    memset(z + 8, 0, 8);
    CHECK(fence__peer_hello_decode(z, (size_t)n, &id, addr, &need) ==
          FENCE_PEER_HELLO_EMALFORMED);
    memcpy(z, b, (size_t)n);
    z[16] = 0;
    z[17] = 0;
    CHECK(fence__peer_hello_decode(z, FENCE_PEER_HELLO_HEAD, &id, addr, &need) ==
          FENCE_PEER_HELLO_EMALFORMED);
    memcpy(z, b, (size_t)n);
    z[FENCE_PEER_HELLO_HEAD + 2] = '\0';
    CHECK(fence__peer_hello_decode(z, (size_t)n, &id, addr, &need) ==
          FENCE_PEER_HELLO_EMALFORMED);
    CHECK(strcmp(fence__peer_hello_strerror(FENCE_PEER_HELLO_EMAGIC), "bad hello magic") == 0);
}

int main(void)
{
    TEST_RUN(test_round_trip);
    TEST_RUN(test_lengths);
    TEST_RUN(test_refusals);
    return TEST_DONE();
}
