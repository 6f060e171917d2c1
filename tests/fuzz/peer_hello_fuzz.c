/* Fuzz target: the raft transport's hello decoder (src/server/peer_hello.c),
 * which reads the first bytes any holder of a cluster-CA certificate sends
 * inside TLS.  Properties: no crash or overrun on any bytes; a decoded hello
 * is at most FENCE_PEER_HELLO_MAX bytes, has a nonzero id and a NUL-free
 * address, and encodes back to exactly the bytes it was decoded from; every
 * shorter prefix of it decodes as partial, asking for more than it has but
 * no more than the whole; a partial answer never asks for more than a
 * maximal hello. */
#include <string.h>

#include "fuzz.h"
#include "server/peer_hello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t id = 0;
    char addr[FENCE_PEER_HELLO_ADDR_MAX];
    size_t need = 0;
    long rc = fence__peer_hello_decode(data, size, &id, addr, &need);
    if (rc == FENCE_PEER_HELLO_PARTIAL) {
        FUZZ_CHECK(need > size);
        FUZZ_CHECK(need <= FENCE_PEER_HELLO_MAX);
        return 0;
    }
    if (rc < 0) {
        FUZZ_CHECK(rc >= FENCE_PEER_HELLO_EMALFORMED);
        FUZZ_CHECK(fence__peer_hello_strerror(rc)[0] != '\0');
        return 0;
    }
    FUZZ_CHECK((size_t)rc <= size);
    FUZZ_CHECK(rc <= FENCE_PEER_HELLO_MAX);
    FUZZ_CHECK(id != 0);
    size_t alen = strlen(addr);
    FUZZ_CHECK(alen > 0 && alen < FENCE_PEER_HELLO_ADDR_MAX);
    FUZZ_CHECK((size_t)rc == FENCE_PEER_HELLO_HEAD + alen);
    uint8_t again[FENCE_PEER_HELLO_MAX];
    FUZZ_CHECK(fence__peer_hello_encode(id, addr, again, sizeof(again)) == rc);
    FUZZ_CHECK(memcmp(again, data, (size_t)rc) == 0);
    for (long k = 0; k < rc; k++) {
        uint64_t id2;
        char addr2[FENCE_PEER_HELLO_ADDR_MAX];
        size_t need2 = 0;
        FUZZ_CHECK(fence__peer_hello_decode(data, (size_t)k, &id2, addr2, &need2) ==
                   FENCE_PEER_HELLO_PARTIAL);
        FUZZ_CHECK(need2 > (size_t)k && need2 <= (size_t)rc);
    }
    return 0;
}
