/* Fuzz target for the reply encoders of src/proto/resp.c, RESP2 and RESP3.
 *
 * The input is a script: each byte picks an encoder (simple, error, int,
 * uint, bulk, nil, bool, double, verbatim, array, map, set) and the bytes
 * after it its arguments (texts, numbers, the element counts of
 * aggregates, nested up to depth 5).  The same reply tree is encoded twice,
 * with the protocol-aware helpers for RESP2 and for RESP3, and:
 *   - every encoder's size with cap 0 is what it writes, and with one byte
 *     less room it writes nothing at all (snprintf-style contract);
 *   - the RESP2 bytes are one well-formed RESP2 reply, the RESP3 bytes one
 *     well-formed RESP3 reply (tests/lib/resp_check.h);
 *   - the RESP3 reply with its types mapped back (map -> array of 2n,
 *     set -> array, null -> $-1, boolean -> :1/:0, double and verbatim ->
 *     bulk) is byte for byte the RESP2 reply: a RESP2 client sees what it
 *     has always seen.
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "proto/resp.h"
#include "../lib/resp_check.h"

#define OUT_MAX (1 << 16)
#define DEPTH_MAX 5

/* One encoding in progress. */
struct out {
    char buf[OUT_MAX];
    size_t len;
    int resp;
};

/* The script being read. */
struct script {
    const uint8_t *p;
    size_t left;
    bool full; /* an output ran out of room: stop */
};

static struct out o2, o3;
static char conv[2 * OUT_MAX + 64];

static uint8_t byte(struct script *s)
{
    if (s->left == 0)
        return 0;
    s->left--;
    return *s->p++;
}

static uint64_t u64(struct script *s)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | byte(s);
    return v;
}

/* Up to 63 bytes of text from the script (may hold CR, LF, NUL). */
static size_t text(struct script *s, char *t)
{
    size_t n = byte(s) % 64;
    if (n > s->left)
        n = s->left;
    memcpy(t, s->p, n);
    s->p += n;
    s->left -= n;
    return n;
}

/* Encode with CALL (which uses B and C as buffer and capacity) into o:
 * the size with C = 0, nothing written with one byte less, then for real. */
#define EMIT(o, CALL)                                                        \
    do {                                                                     \
        char *B = NULL;                                                      \
        size_t C = 0;                                                        \
        size_t need_ = (CALL);                                               \
        FUZZ_CHECK(need_ >= 3);                                              \
        if (need_ > OUT_MAX - (o)->len) {                                    \
            s->full = true;                                                  \
            break;                                                           \
        }                                                                    \
        B = (o)->buf + (o)->len;                                             \
        memset(B, 0xA5, need_);                                              \
        C = need_ - 1;                                                       \
        FUZZ_CHECK((CALL) == need_);                                         \
        for (size_t i_ = 0; i_ < need_; i_++)                                \
            FUZZ_CHECK((unsigned char)B[i_] == 0xA5);                        \
        C = need_;                                                           \
        FUZZ_CHECK((CALL) == need_);                                         \
        (o)->len += need_;                                                   \
    } while (0)

/* Both encodings of one call, with R as the protocol. */
#define EMIT2(CALL_WITH_R)                                                   \
    do {                                                                     \
        int R = 2;                                                           \
        EMIT(&o2, CALL_WITH_R);                                              \
        R = 3;                                                               \
        EMIT(&o3, CALL_WITH_R);                                              \
        (void)R;                                                             \
    } while (0)

/* Emit one reply (and its elements) from the script. */
static void gen(struct script *s, int depth)
{
    if (s->full)
        return;
    char t[64], code[64];
    uint8_t op = byte(s);
    switch (op % 13) {
    case 0: {
        size_t n = text(s, t);
        t[n] = '\0';
        /* simple and error take C strings: a NUL ends them. */
        EMIT2(fence_resp_simple(B, C, t));
        break;
    }
    case 1: {
        size_t n = text(s, t);
        t[n] = '\0';
        size_t k = text(s, code);
        code[k] = '\0';
        if (code[0] == '\0')
            strcpy(code, "ERR");
        EMIT2(fence_resp_error(B, C, code, t[0] ? t : NULL));
        break;
    }
    case 2: {
        int64_t v = (int64_t)u64(s);
        EMIT2(fence_resp_int(B, C, v));
        break;
    }
    case 3: {
        uint64_t v = u64(s) >> 1;
        EMIT2(fence_resp_uint(B, C, v));
        break;
    }
    case 4: {
        size_t n = text(s, t);
        EMIT2(fence_resp_bulk(B, C, t, n));
        break;
    }
    case 5:
        EMIT2(fence_resp_nil_v(B, C, R));
        break;
    case 6: {
        int v = byte(s) & 1;
        EMIT2(fence_resp_bool_v(B, C, v, R));
        break;
    }
    case 7: {
        uint64_t bits = u64(s);
        double v;
        memcpy(&v, &bits, sizeof(v));
        EMIT2(fence_resp_double_v(B, C, v, R));
        break;
    }
    case 8: {
        size_t n = text(s, t);
        const char *fmt = (op & 0x80) ? "mkd" : "txt";
        EMIT2(fence_resp_verbatim_v(B, C, fmt, t, n, R));
        break;
    }
    case 9:
    case 10:
    case 11: {
        int64_t n = depth >= DEPTH_MAX ? 0 : byte(s) % 5;
        if (op % 13 == 9)
            EMIT2(fence_resp_array(B, C, n));
        else if (op % 13 == 10)
            EMIT2(fence_resp_map_v(B, C, n, R));
        else
            EMIT2(fence_resp_set_v(B, C, n, R));
        int64_t items = op % 13 == 10 ? 2 * n : n;
        for (int64_t i = 0; i < items; i++)
            gen(s, depth + 1);
        break;
    }
    default:
        EMIT2(fence_resp_array(B, C, -1));
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct script s = {.p = data, .left = size, .full = false};
    while (s.left > 0 && !s.full) {
        o2.len = 0;
        o3.len = 0;
        gen(&s, 0);
        if (s.full)
            break;
        FUZZ_CHECK(resp_check_all(o2.buf, o2.len));
        FUZZ_CHECK(resp3_check_all(o3.buf, o3.len));
        long k = resp3_to_resp2(o3.buf, o3.len, conv, sizeof(conv));
        FUZZ_CHECK(k > 0);
        FUZZ_CHECK((size_t)k == o2.len);
        FUZZ_CHECK(memcmp(conv, o2.buf, o2.len) == 0);
    }
    return 0;
}
