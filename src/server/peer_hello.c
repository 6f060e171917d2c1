/* The raft transport's hello, encoded and decoded; see peer_hello.h. */
#include "server/peer_hello.h"

#include <string.h>

#include "base/assert.h"

_Static_assert(FENCE_PEER_HELLO_ADDR_MAX - 1 <= 0xffff, "the length field is 16 bits");

/* The magic, as bytes. */
static const uint8_t magic[4] = {'F', 'N', 'C', 'R'};

/* Big-endian n-byte integer at p. */
static uint64_t get_be(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* Write v as a big-endian n-byte integer at p. */
static void put_be(uint8_t *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

/* See peer_hello.h. */
long fence__peer_hello_encode(uint64_t id, const char *addr, uint8_t *out, size_t cap)
{
    FENCE_ASSERT(addr != NULL);
    FENCE_ASSERT(out != NULL);
    size_t alen = strlen(addr);
    if (id == 0 || alen == 0 || alen >= FENCE_PEER_HELLO_ADDR_MAX ||
        cap < FENCE_PEER_HELLO_HEAD + alen)
        return -1;
    memcpy(out, magic, sizeof(magic));
    put_be(out + 4, FENCE_PEER_HELLO_VERSION, 4);
    put_be(out + 8, id, 8);
    put_be(out + 16, alen, 2);
    memcpy(out + FENCE_PEER_HELLO_HEAD, addr, alen);
    return (long)(FENCE_PEER_HELLO_HEAD + alen);
}

/* See peer_hello.h. */
long fence__peer_hello_decode(const uint8_t *buf, size_t len, uint64_t *id,
                              char addr[FENCE_PEER_HELLO_ADDR_MAX], size_t *need)
{
    FENCE_ASSERT(buf != NULL || len == 0);
    size_t m = len < sizeof(magic) ? len : sizeof(magic);
    if (m > 0 && memcmp(buf, magic, m) != 0)
        return FENCE_PEER_HELLO_EMAGIC;
    if (len < FENCE_PEER_HELLO_HEAD) {
        *need = FENCE_PEER_HELLO_HEAD;
        return FENCE_PEER_HELLO_PARTIAL;
    }
    if (get_be(buf + 4, 4) != FENCE_PEER_HELLO_VERSION)
        return FENCE_PEER_HELLO_EVERSION;
    size_t alen = (size_t)get_be(buf + 16, 2);
    if (alen >= FENCE_PEER_HELLO_ADDR_MAX)
        return FENCE_PEER_HELLO_ETOOLONG;
    if (alen == 0)
        return FENCE_PEER_HELLO_EMALFORMED;
    size_t total = FENCE_PEER_HELLO_HEAD + alen;
    if (len < total) {
        *need = total;
        return FENCE_PEER_HELLO_PARTIAL;
    }
    uint64_t v = get_be(buf + 8, 8);
    const uint8_t *a = buf + FENCE_PEER_HELLO_HEAD;
    if (v == 0 || memchr(a, '\0', alen) != NULL)
        return FENCE_PEER_HELLO_EMALFORMED;
    *id = v;
    memcpy(addr, a, alen);
    addr[alen] = '\0';
    FENCE_ASSERT(total <= FENCE_PEER_HELLO_MAX);
    return (long)total;
}

/* See peer_hello.h. */
const char *fence__peer_hello_strerror(long rc)
{
    switch (rc) {
    case FENCE_PEER_HELLO_PARTIAL:
        return "incomplete hello";
    case FENCE_PEER_HELLO_EMAGIC:
        return "bad hello magic";
    case FENCE_PEER_HELLO_EVERSION:
        return "hello of another version";
    case FENCE_PEER_HELLO_ETOOLONG:
        return "hello address too long";
    case FENCE_PEER_HELLO_EMALFORMED:
        return "malformed hello";
    default:
        return "hello error";
    }
}
