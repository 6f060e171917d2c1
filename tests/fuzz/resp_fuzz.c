/* Fuzz target for the RESP request parser (src/proto/resp.c).
 *
 * The input is a byte stream from a client.  It is parsed request by
 * request (pipelining), once with the default limits, once with tiny ones
 * and once with the pre-login ones, and for every request that parses:
 *   - the result stays within the limits and within the input or scratch;
 *   - every shorter prefix of the request is PARTIAL;
 *   - encoding it with fence_resp_request parses back to the same argv,
 *     and so does an inline line with every byte \xHH-escaped;
 *   - fence_resp_parse_u64 agrees with a plain reference on every argument.
 * A failed parse must carry an error text and one of the error codes.
 */
#include <assert.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "proto/resp.h"

/* Messages are large (they hold FENCE_INLINE_MAX bytes of scratch). */
static fence_resp_msg msg;
static fence_resp_msg back;
/* Room for a re-encoded request: FENCE_ARGS_MAX headers plus the bytes. */
static char enc[4 * FENCE_INLINE_MAX + 64 * 32];

/* Tells whether two messages hold the same arguments. */
static bool same_argv(const fence_resp_msg *a, const fence_resp_msg *b)
{
    if (a->argc != b->argc)
        return false;
    for (uint32_t i = 0; i < a->argc; i++) {
        if (a->argv[i].len != b->argv[i].len)
            return false;
        if (a->argv[i].len > 0 &&
            memcmp(a->argv[i].ptr, b->argv[i].ptr, a->argv[i].len) != 0)
            return false;
    }
    return true;
}

/* Tells whether p[0..n) lies inside base[0..size). */
static bool inside(const char *p, size_t n, const char *base, size_t size)
{
    return p >= base && n <= size && (size_t)(p - base) <= size - n;
}

/* Checks fence_resp_parse_u64 on p[0..n) against a reference: 1 to 20
 * decimal digits, value computed in 128 bits, at most max. */
static void check_u64(const char *p, size_t n, uint64_t max)
{
    bool ok = n >= 1 && n <= 20;
    unsigned __int128 v = 0;
    for (size_t i = 0; ok && i < n; i++) {
        ok = p[i] >= '0' && p[i] <= '9';
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    ok = ok && v <= max;
    uint64_t got = 0;
    int rc = fence_resp_parse_u64(p, n, max, &got);
    FUZZ_CHECK(rc == (ok ? 0 : -1));
    if (ok)
        FUZZ_CHECK(got == (uint64_t)v);
}

/* Checks that every proper prefix of the request buf[0..n) is PARTIAL
 * (all of them for short requests, a sample for long ones). */
static void check_prefixes(const char *buf, size_t n,
                           const fence_resp_limits *lim)
{
    static fence_resp_msg tmp;
    size_t step = n <= 512 ? 1 : n / 64;
    for (size_t cut = 0; cut < n; cut += step)
        FUZZ_CHECK(fence_resp_parse(buf, cut, lim, &tmp) ==
                   FENCE_RESP_PARTIAL);
    FUZZ_CHECK(fence_resp_parse(buf, n - 1, lim, &tmp) == FENCE_RESP_PARTIAL);
}

/* Re-encodes msg as a multibulk request and as an escaped inline line
 * and checks that both parse back to the same arguments. */
static void check_round_trip(void)
{
    fence_resp_limits wide = {
        .args_max = FENCE_ARGS_MAX,
        .bulk_max = UINT64_MAX,
        .inline_max = FENCE_INLINE_MAX,
    };
    size_t n = fence_resp_request(NULL, 0, msg.argc, msg.argv);
    FUZZ_CHECK(n <= sizeof(enc));
    FUZZ_CHECK(fence_resp_request(enc, sizeof(enc), msg.argc, msg.argv) == n);
    if (msg.argc == 0) {
        FUZZ_CHECK(n == 4 && memcmp(enc, "*0\r\n", 4) == 0);
    } else {
        FUZZ_CHECK(fence_resp_parse(enc, n, &wide, &back) == (ssize_t)n);
        FUZZ_CHECK(same_argv(&msg, &back));
    }

    /* The inline form: every argument double-quoted, every byte \xHH. */
    static const char hex[] = "0123456789abcdef";
    size_t w = 0;
    for (uint32_t i = 0; i < msg.argc; i++) {
        if (w + 4 * msg.argv[i].len + 3 > FENCE_INLINE_MAX)
            return; /* would not fit an inline line: nothing to check */
        enc[w++] = '"';
        for (size_t j = 0; j < msg.argv[i].len; j++) {
            unsigned char c = (unsigned char)msg.argv[i].ptr[j];
            enc[w++] = '\\';
            enc[w++] = 'x';
            enc[w++] = hex[c >> 4];
            enc[w++] = hex[c & 0xf];
        }
        enc[w++] = '"';
        enc[w++] = ' ';
    }
    enc[w++] = '\r';
    enc[w++] = '\n';
    FUZZ_CHECK(fence_resp_parse(enc, w, &wide, &back) == (ssize_t)w);
    FUZZ_CHECK(same_argv(&msg, &back));
}

/* Parses the whole stream buf[0..len) with limits lim, checking each
 * request as described at the top of the file. */
static void parse_stream(const char *buf, size_t len,
                         const fence_resp_limits *lim)
{
    size_t off = 0;
    while (off < len) {
        const char *p = buf + off;
        size_t avail = len - off;
        ssize_t rc = fence_resp_parse(p, avail, lim, &msg);
        if (rc == FENCE_RESP_PARTIAL)
            return;
        if (rc < 0) {
            FUZZ_CHECK(rc == FENCE_RESP_EPROTO || rc == FENCE_RESP_ETOOBIG);
            FUZZ_CHECK(msg.error != NULL);
            FUZZ_CHECK(msg.error[0] != '\0');
            FUZZ_CHECK(strchr(msg.error, '\n') == NULL);
            FUZZ_CHECK(strchr(msg.error, '\r') == NULL);
            return;
        }
        size_t used = (size_t)rc;
        FUZZ_CHECK(used > 0);
        FUZZ_CHECK(used <= avail);
        FUZZ_CHECK(msg.error == NULL);
        FUZZ_CHECK(msg.argc <= lim->args_max);
        FUZZ_CHECK(msg.argc <= FENCE_ARGS_MAX);
        for (uint32_t i = 0; i < msg.argc; i++) {
            const fence_resp_arg *a = &msg.argv[i];
            FUZZ_CHECK(a->len <= lim->bulk_max || p[0] != '*');
            FUZZ_CHECK(inside(a->ptr, a->len, p, used) ||
                       inside(a->ptr, a->len, msg.scratch,
                              sizeof(msg.scratch)));
            check_u64(a->ptr, a->len, UINT64_MAX);
            check_u64(a->ptr, a->len, 100000);
        }
        check_round_trip();
        /* The round trip reused the shared messages: parse again. */
        FUZZ_CHECK(fence_resp_parse(p, avail, lim, &msg) == rc);
        check_prefixes(p, used, lim);
        off += used;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    fence_resp_limits lim;
    fence_resp_limits_default(&lim);
    parse_stream(buf, size, &lim);

    fence_resp_limits tiny = {.args_max = 3, .bulk_max = 8, .inline_max = 16};
    parse_stream(buf, size, &tiny);
    /* The limits of a connection not logged in (src/net/conn_guard.c). */
    fence_resp_limits pre = {.args_max = FENCE_PRELOGIN_ARGS_MAX,
                             .bulk_max = FENCE_PRELOGIN_BULK_MAX,
                             .inline_max = FENCE_PRELOGIN_INLINE_MAX};
    parse_stream(buf, size, &pre);
    return 0;
}
