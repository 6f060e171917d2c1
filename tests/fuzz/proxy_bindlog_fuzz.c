/* Fuzz target for fence-proxy's bindings log reader
 * (fence__proxy_bindlog_walk, src/proxy/bindlog.c).  The input is the
 * bytes of a log.  Properties:
 *   - the walk fails with a message, or returns a good prefix 0..n;
 *   - walking just that prefix returns all of it, with the same bindings;
 *   - the prefix followed by zero bytes (a torn append) walks to the prefix;
 *   - the bindings read, written again as one batch, walk back to the same
 *     bindings. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proxy/bindlog.h"

#define CAP 8192

/* The bindings one walk read: "path\0fence\0"..., and how many. */
typedef struct {
    char bytes[2 * CAP];
    size_t len;
    size_t n;
    size_t plen[CAP], flen[CAP];
    size_t off[CAP];
} seen_t;

static seen_t a, b;

static int collect(void *arg, const char *path, size_t plen, const char *fence, size_t flen,
                   char *err, size_t cap)
{
    (void)err;
    (void)cap;
    seen_t *s = arg;
    FUZZ_CHECK(plen > 0 && flen > 0);
    FUZZ_CHECK(s->n < CAP && s->len + plen + flen <= sizeof(s->bytes));
    s->off[s->n] = s->len;
    s->plen[s->n] = plen;
    s->flen[s->n] = flen;
    memcpy(s->bytes + s->len, path, plen);
    memcpy(s->bytes + s->len + plen, fence, flen);
    s->len += plen + flen;
    s->n++;
    return 0;
}

static bool same(const seen_t *x, const seen_t *y)
{
    if (x->n != y->n || x->len != y->len || memcmp(x->bytes, y->bytes, x->len) != 0)
        return false;
    for (size_t i = 0; i < x->n; i++)
        if (x->plen[i] != y->plen[i] || x->flen[i] != y->flen[i])
            return false;
    return true;
}

static unsigned char buf2[CAP + FENCE_PROXY_BINDLOG_BATCH_HDR + 64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > CAP)
        return 0;
    char err[256];
    memset(&a, 0, sizeof(a));
    err[0] = '\0';
    long good = fence__proxy_bindlog_walk(data, size, "f", collect, &a, err, sizeof(err));
    if (good < 0) {
        FUZZ_CHECK(good == -1 && err[0] != '\0');
        return 0;
    }
    FUZZ_CHECK((size_t)good <= size);
    memset(&b, 0, sizeof(b));
    FUZZ_CHECK(fence__proxy_bindlog_walk(data, (size_t)good, "f", collect, &b, err, sizeof(err)) ==
               good);
    FUZZ_CHECK(same(&a, &b));
    /* A zero-filled torn append after the good prefix. */
    memcpy(buf2, data, (size_t)good);
    memset(buf2 + good, 0, 40);
    memset(&b, 0, sizeof(b));
    FUZZ_CHECK(fence__proxy_bindlog_walk(buf2, (size_t)good + 40, "f", collect, &b, err,
                                         sizeof(err)) == good);
    FUZZ_CHECK(same(&a, &b));
    /* The same bindings written again as one batch. */
    size_t len = FENCE_PROXY_BINDLOG_BATCH_HDR;
    for (size_t i = 0; i < a.n; i++) {
        FUZZ_CHECK(len + FENCE_PROXY_BINDLOG_REC_HDR + a.plen[i] + a.flen[i] <= sizeof(buf2));
        len += fence__proxy_bindlog_record((char *)buf2 + len, a.bytes + a.off[i], a.plen[i],
                                           a.bytes + a.off[i] + a.plen[i], a.flen[i]);
    }
    if (a.n == 0)
        return 0;
    fence__proxy_bindlog_seal((char *)buf2, len);
    memset(&b, 0, sizeof(b));
    FUZZ_CHECK(fence__proxy_bindlog_walk(buf2, len, "f", collect, &b, err, sizeof(err)) ==
               (long)len);
    FUZZ_CHECK(same(&a, &b));
    return 0;
}
