/* Unit tests of the RESP codec (src/proto/resp.c): every request shape,
 * inputs split at every byte, pipelining, every error path, limits at their
 * exact boundaries, inline quoting, the encoders and fence_resp_parse_u64. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/resp.h"
#include "../lib/test.h"

/* The message is large (it holds a scratch buffer of FENCE_INLINE_MAX
 * bytes), so the tests share static ones instead of using the stack. */
static fence_resp_msg msg;
static fence_resp_msg msg2;

/* Expected words of a request, terminated by NULL (words hold no NUL). */
typedef const char *const words[];

/* Parses the whole string s with limits lim (NULL: defaults) into msg. */
static ssize_t parse_s(const char *s, const fence_resp_limits *lim)
{
    return fence_resp_parse(s, strlen(s), lim, &msg);
}

/* Tells whether m holds exactly the words w. */
static bool argv_is(const fence_resp_msg *m, const char *const *w)
{
    uint32_t n = 0;
    while (w[n] != NULL)
        n++;
    if (m->argc != n) {
        printf("#   argc %u, expected %u\n", m->argc, n);
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        size_t len = strlen(w[i]);
        if (m->argv[i].len != len || memcmp(m->argv[i].ptr, w[i], len) != 0) {
            printf("#   argv[%u] is \"%.*s\", expected \"%s\"\n", i,
                   (int)m->argv[i].len, m->argv[i].ptr, w[i]);
            return false;
        }
    }
    return true;
}

/* Tells whether two parsed messages hold the same arguments. */
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

/* Checks that the request buf[0..len) parses to the words w consuming all
 * of it, and that every shorter prefix of it is PARTIAL.  Each prefix is
 * copied into a buffer of exactly its size so ASan catches a read past
 * the end. */
static void check_split(const char *buf, size_t len, const char *const *w)
{
    for (size_t cut = 0; cut < len; cut++) {
        char *p = malloc(cut ? cut : 1);
        REQUIRE(p != NULL);
        memcpy(p, buf, cut);
        ssize_t rc = fence_resp_parse(p, cut, NULL, &msg);
        if (rc != FENCE_RESP_PARTIAL)
            printf("#   prefix of %zu bytes gave %zd\n", cut, rc);
        CHECK_EQ_I64(rc, FENCE_RESP_PARTIAL);
        free(p);
    }
    char *p = malloc(len);
    REQUIRE(p != NULL);
    memcpy(p, buf, len);
    CHECK_EQ_I64(fence_resp_parse(p, len, NULL, &msg), (ssize_t)len);
    CHECK(msg.error == NULL);
    CHECK(argv_is(&msg, w));
    free(p);
}

/* Checks that buf[0..len) fails with rc and text, and that each prefix
 * is either PARTIAL or fails the same way (errors never depend on bytes
 * that have not arrived). */
static void check_error(const char *buf, size_t len,
                        const fence_resp_limits *lim, ssize_t rc,
                        const char *text)
{
    for (size_t cut = 0; cut <= len; cut++) {
        char *p = malloc(cut ? cut : 1);
        REQUIRE(p != NULL);
        memcpy(p, buf, cut);
        ssize_t r = fence_resp_parse(p, cut, lim, &msg);
        if (cut == len) {
            if (r != rc)
                printf("#   input \"%.*s\"\n", (int)len, buf);
            CHECK_EQ_I64(r, rc);
            CHECK_STR(msg.error, text);
        } else if (r != FENCE_RESP_PARTIAL) {
            CHECK_EQ_I64(r, rc);
            CHECK_STR(msg.error, text);
        }
        free(p);
    }
}

#define SPLIT(lit, ...) \
    check_split((lit), sizeof(lit) - 1, (words){__VA_ARGS__, NULL})
#define ERROR(lit, lim, rc, text) \
    check_error((lit), sizeof(lit) - 1, (lim), (rc), (text))

static const char *const PROTO_MB = "Protocol error: invalid multibulk length";
static const char *const PROTO_BULK = "Protocol error: invalid bulk length";
static const char *const PROTO_QUOTES =
    "Protocol error: unbalanced quotes in request";
static const char *const PROTO_MANY = "Protocol error: too many arguments";
static const char *const PROTO_CRLF =
    "Protocol error: expected CRLF after bulk string";

/* ---- Request shapes ------------------------------------------------------ */

static void test_multibulk(void)
{
    const char *s = "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n";
    CHECK_EQ_I64(parse_s(s, NULL), (ssize_t)strlen(s));
    CHECK(argv_is(&msg, (words){"PING", "hi", NULL}));
    CHECK(msg.error == NULL);
    /* Multibulk arguments point into the caller's buffer. */
    CHECK(msg.argv[0].ptr == s + 8);
    CHECK(msg.argv[1].ptr == s + 18);
}

static void test_multibulk_binary(void)
{
    static const char s[] = "*3\r\n$0\r\n\r\n$3\r\na\0b\r\n$2\r\n\r\n\r\n";
    CHECK_EQ_I64(fence_resp_parse(s, sizeof(s) - 1, NULL, &msg),
                 (ssize_t)sizeof(s) - 1);
    REQUIRE(msg.argc == 3);
    CHECK_EQ_U64(msg.argv[0].len, 0);
    CHECK_EQ_U64(msg.argv[1].len, 3);
    CHECK(memcmp(msg.argv[1].ptr, "a\0b", 3) == 0);
    CHECK_EQ_U64(msg.argv[2].len, 2);
    CHECK(memcmp(msg.argv[2].ptr, "\r\n", 2) == 0);
}

static void test_multibulk_empty(void)
{
    CHECK_EQ_I64(parse_s("*0\r\n", NULL), 4);
    CHECK_EQ_U64(msg.argc, 0);
    CHECK(msg.error == NULL);
    CHECK_EQ_I64(parse_s("*-1\r\n", NULL), 5);
    CHECK_EQ_U64(msg.argc, 0);
    /* Only the header is consumed; what follows is the next request. */
    CHECK_EQ_I64(parse_s("*0\r\nPING\r\n", NULL), 4);
}

static void test_inline(void)
{
    CHECK_EQ_I64(parse_s("PING\r\n", NULL), 6);
    CHECK(argv_is(&msg, (words){"PING", NULL}));
    CHECK_EQ_I64(parse_s("LOCK a 5\n", NULL), 9);
    CHECK(argv_is(&msg, (words){"LOCK", "a", "5", NULL}));
    CHECK_EQ_I64(parse_s("  \tset\t\t k  v \t\r\n", NULL), 17);
    CHECK(argv_is(&msg, (words){"set", "k", "v", NULL}));
    /* "\r" inside a line, "\v" and "\f" separate words (Redis isspace). */
    CHECK_EQ_I64(parse_s("a\rb\vc\fd\n", NULL), 8);
    CHECK(argv_is(&msg, (words){"a", "b", "c", "d", NULL}));
    /* A line that begins with a space and then "*" is still inline. */
    CHECK_EQ_I64(parse_s(" *2\r\n", NULL), 5);
    CHECK(argv_is(&msg, (words){"*2", NULL}));
}

static void test_inline_empty_lines(void)
{
    CHECK_EQ_I64(parse_s("\r\n", NULL), 2);
    CHECK_EQ_U64(msg.argc, 0);
    CHECK(msg.error == NULL);
    CHECK_EQ_I64(parse_s("\n", NULL), 1);
    CHECK_EQ_U64(msg.argc, 0);
    CHECK_EQ_I64(parse_s(" \t \r\n", NULL), 5);
    CHECK_EQ_U64(msg.argc, 0);
    CHECK_EQ_I64(parse_s("\r\r\n", NULL), 3);
    CHECK_EQ_U64(msg.argc, 0);
}

static void test_inline_nul_byte(void)
{
    static const char s[] = "SET a\0b \"\\x00\"\n";
    CHECK_EQ_I64(fence_resp_parse(s, sizeof(s) - 1, NULL, &msg),
                 (ssize_t)sizeof(s) - 1);
    REQUIRE(msg.argc == 3);
    CHECK_EQ_U64(msg.argv[1].len, 3);
    CHECK(memcmp(msg.argv[1].ptr, "a\0b", 3) == 0);
    CHECK_EQ_U64(msg.argv[2].len, 1);
    CHECK(msg.argv[2].ptr[0] == '\0');
}

static void test_partial_empty_buffer(void)
{
    CHECK_EQ_I64(fence_resp_parse("", 0, NULL, &msg), FENCE_RESP_PARTIAL);
    CHECK_EQ_I64(fence_resp_parse(NULL, 0, NULL, &msg), FENCE_RESP_PARTIAL);
}

/* ---- Split input --------------------------------------------------------- */

static void test_split_every_byte(void)
{
    SPLIT("*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", "PING", "hi");
    SPLIT("*1\r\n$0\r\n\r\n", "");
    SPLIT("*2\r\n$11\r\nLEASE.GRANT\r\n$3\r\n100\r\n", "LEASE.GRANT", "100");
    SPLIT("PING\r\n", "PING");
    SPLIT("PING\n", "PING");
    SPLIT("LOCK \"a b\" 'c d' e\r\n", "LOCK", "a b", "c d", "e");
    SPLIT("x \"\\x41\\n\" y\n", "x", "A\n", "y");
    SPLIT("*0\r\n", NULL);
    SPLIT("*-1\r\n", NULL);
    SPLIT("\r\n", NULL);
}

static void test_split_long_bulk(void)
{
    /* A request with a bulk of 1000 bytes, fed at every split point. */
    static char big[1000 + 1];
    memset(big, 'z', 1000);
    char buf[1100];
    fence_resp_arg a[2] = {{"SET", 3}, {big, 1000}};
    size_t n = fence_resp_request(buf, sizeof(buf), 2, a);
    REQUIRE(n <= sizeof(buf));
    check_split(buf, n, (words){"SET", big, NULL});
}

/* ---- Pipelining ---------------------------------------------------------- */

static void test_pipelined(void)
{
    static const char s[] = "*1\r\n$4\r\nPING\r\n"
                            "PING hello\r\n"
                            "\r\n"
                            "*2\r\n$4\r\nECHO\r\n$1\r\nx\r\n"
                            "*0\r\n"
                            "QUIT\n"
                            "*1\r\n$4\r\nPI";
    const char *const *expect[] = {
        (words){"PING", NULL},         (words){"PING", "hello", NULL},
        (words){NULL},                 (words){"ECHO", "x", NULL},
        (words){NULL},                 (words){"QUIT", NULL},
    };
    size_t off = 0, len = sizeof(s) - 1;
    for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
        ssize_t rc = fence_resp_parse(s + off, len - off, NULL, &msg);
        REQUIRE(rc > 0);
        CHECK(argv_is(&msg, expect[i]));
        off += (size_t)rc;
    }
    CHECK_EQ_I64(fence_resp_parse(s + off, len - off, NULL, &msg),
                 FENCE_RESP_PARTIAL);
}

/* ---- Error paths --------------------------------------------------------- */

static void test_error_multibulk_length(void)
{
    ERROR("*x\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*-2\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*-0\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*01\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*+1\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("* 1\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*1 \r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*1\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*1\rx\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*99999999999999999999\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    ERROR("*-99999999999999999999\r\n", NULL, FENCE_RESP_EPROTO, PROTO_MB);
    /* Valid numbers that are simply too many are ETOOBIG. */
    ERROR("*81\r\n", NULL, FENCE_RESP_ETOOBIG, PROTO_MANY); /* FENCE_ARGS_MAX + 1 */
    ERROR("*9223372036854775807\r\n", NULL, FENCE_RESP_ETOOBIG, PROTO_MANY);
}

static void test_error_expected_dollar(void)
{
    ERROR("*1\r\nx", NULL, FENCE_RESP_EPROTO,
          "Protocol error: expected '$', got 'x'");
    ERROR("*2\r\n$1\r\na\r\n:1\r\n", NULL, FENCE_RESP_EPROTO,
          "Protocol error: expected '$', got ':'");
    ERROR("*1\r\n\r\n", NULL, FENCE_RESP_EPROTO,
          "Protocol error: expected '$', got '\\x0d'");
    ERROR("*1\r\n\x01", NULL, FENCE_RESP_EPROTO,
          "Protocol error: expected '$', got '\\x01'");
    ERROR("*1\r\n\xff", NULL, FENCE_RESP_EPROTO,
          "Protocol error: expected '$', got '\\xff'");
}

static void test_error_bulk_length(void)
{
    ERROR("*1\r\n$-1\r\n", NULL, FENCE_RESP_EPROTO, PROTO_BULK);
    ERROR("*1\r\n$x\r\n", NULL, FENCE_RESP_EPROTO, PROTO_BULK);
    ERROR("*1\r\n$\r\n", NULL, FENCE_RESP_EPROTO, PROTO_BULK);
    ERROR("*1\r\n$01\r\n", NULL, FENCE_RESP_EPROTO, PROTO_BULK);
    ERROR("*1\r\n$+1\r\n", NULL, FENCE_RESP_EPROTO, PROTO_BULK);
    ERROR("*1\r\n$1\n", NULL, FENCE_RESP_EPROTO, PROTO_BULK);
    ERROR("*1\r\n$1 \r\n", NULL, FENCE_RESP_EPROTO, PROTO_BULK);
    ERROR("*1\r\n$99999999999999999999\r\n", NULL, FENCE_RESP_EPROTO,
          PROTO_BULK);
}

static void test_error_bulk_terminator(void)
{
    ERROR("*1\r\n$3\r\nabcd", NULL, FENCE_RESP_EPROTO, PROTO_CRLF);
    ERROR("*1\r\n$3\r\nabc\rx", NULL, FENCE_RESP_EPROTO, PROTO_CRLF);
    ERROR("*1\r\n$3\r\nabc\n\r", NULL, FENCE_RESP_EPROTO, PROTO_CRLF);
    ERROR("*1\r\n$0\r\nx", NULL, FENCE_RESP_EPROTO, PROTO_CRLF);
}

static void test_error_unbalanced_quotes(void)
{
    ERROR("\"abc\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
    ERROR("'abc\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
    ERROR("\"a\"b\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
    ERROR("'a'b\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
    ERROR("\"abc\\\"\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
    ERROR("x \"abc\\\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
    ERROR("'abc\\'\r\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
    ERROR("a\"b c\"d\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
}

/* ---- Limits at their boundaries ------------------------------------------ */

static void test_limit_args_multibulk(void)
{
    fence_resp_limits lim = {.args_max = 2, .bulk_max = 100, .inline_max = 100};
    CHECK_EQ_I64(parse_s("*2\r\n$1\r\na\r\n$1\r\nb\r\n", &lim), 18);
    ERROR("*3\r\n", &lim, FENCE_RESP_ETOOBIG, PROTO_MANY);
    /* The default is FENCE_ARGS_MAX, exactly. */
    char buf[1024];
    size_t n = 0;
    n += (size_t)sprintf(buf, "*%d\r\n", FENCE_ARGS_MAX);
    for (int i = 0; i < FENCE_ARGS_MAX; i++)
        n += (size_t)sprintf(buf + n, "$1\r\nx\r\n");
    CHECK_EQ_I64(fence_resp_parse(buf, n, NULL, &msg), (ssize_t)n);
    CHECK_EQ_U64(msg.argc, FENCE_ARGS_MAX);
    /* A larger limit cannot exceed the array in the message. */
    lim.args_max = 100000;
    sprintf(buf, "*%d\r\n", FENCE_ARGS_MAX + 1);
    CHECK_EQ_I64(parse_s(buf, &lim), FENCE_RESP_ETOOBIG);
    CHECK_STR(msg.error, PROTO_MANY);
    /* args_max 0 allows only empty requests. */
    lim.args_max = 0;
    CHECK_EQ_I64(parse_s("*0\r\n", &lim), 4);
    CHECK_EQ_I64(parse_s("\r\n", &lim), 2);
    CHECK_EQ_I64(parse_s("*1\r\n", &lim), FENCE_RESP_ETOOBIG);
    CHECK_EQ_I64(parse_s("a\r\n", &lim), FENCE_RESP_ETOOBIG);
}

static void test_limit_args_inline(void)
{
    fence_resp_limits lim = {.args_max = 2, .bulk_max = 100, .inline_max = 100};
    CHECK_EQ_I64(parse_s("a b\r\n", &lim), 5);
    CHECK(argv_is(&msg, (words){"a", "b", NULL}));
    CHECK_EQ_I64(parse_s("a b   \r\n", &lim), 8);
    ERROR("a b c\r\n", &lim, FENCE_RESP_ETOOBIG, PROTO_MANY);
    ERROR("a b ''\r\n", &lim, FENCE_RESP_ETOOBIG, PROTO_MANY);
    /* 64 words pass with the defaults, 65 do not. */
    char buf[256];
    size_t n = 0;
    for (int i = 0; i < FENCE_ARGS_MAX; i++)
        n += (size_t)sprintf(buf + n, "x ");
    buf[n++] = '\n';
    CHECK_EQ_I64(fence_resp_parse(buf, n, NULL, &msg), (ssize_t)n);
    CHECK_EQ_U64(msg.argc, FENCE_ARGS_MAX);
    buf[n - 1] = 'y';
    buf[n++] = '\n';
    CHECK_EQ_I64(fence_resp_parse(buf, n, NULL, &msg), FENCE_RESP_ETOOBIG);
    CHECK_STR(msg.error, PROTO_MANY);
}

static void test_limit_bulk(void)
{
    fence_resp_limits lim = {.args_max = 4, .bulk_max = 3, .inline_max = 100};
    CHECK_EQ_I64(parse_s("*1\r\n$3\r\nabc\r\n", &lim), 13);
    CHECK(argv_is(&msg, (words){"abc", NULL}));
    /* Over the limit: refused as soon as the header is complete, before
     * any data arrives. */
    ERROR("*1\r\n$4\r\n", &lim, FENCE_RESP_ETOOBIG,
          "Protocol error: invalid bulk length (over the limit)");
    lim.bulk_max = 0;
    CHECK_EQ_I64(parse_s("*1\r\n$0\r\n\r\n", &lim), 10);
    CHECK_EQ_I64(parse_s("*1\r\n$1\r\n", &lim), FENCE_RESP_ETOOBIG);
    /* The default limit, exactly. */
    char hdr[64];
    sprintf(hdr, "*1\r\n$%d\r\n", FENCE_BULK_DEFAULT);
    CHECK_EQ_I64(parse_s(hdr, NULL), FENCE_RESP_PARTIAL);
    sprintf(hdr, "*1\r\n$%d\r\n", FENCE_BULK_DEFAULT + 1);
    CHECK_EQ_I64(parse_s(hdr, NULL), FENCE_RESP_ETOOBIG);
    /* The largest bulk length a header can hold, with the largest limit. */
    lim.bulk_max = UINT64_MAX;
    CHECK_EQ_I64(parse_s("*1\r\n$9223372036854775807\r\nab", &lim),
                 FENCE_RESP_PARTIAL);
}

static void test_limit_inline_line(void)
{
    fence_resp_limits lim = {.args_max = 8, .bulk_max = 100, .inline_max = 8};
    /* Exactly 8 bytes of content, with either terminator. */
    CHECK_EQ_I64(parse_s("abcd efg\r\n", &lim), 10);
    CHECK_EQ_I64(parse_s("abcd efg\n", &lim), 9);
    /* 8 bytes and then "\r": still possibly a valid line. */
    CHECK_EQ_I64(parse_s("abcd efg", &lim), FENCE_RESP_PARTIAL);
    CHECK_EQ_I64(parse_s("abcd efg\r", &lim), FENCE_RESP_PARTIAL);
    /* 9 bytes of content: refused before any newline arrives. */
    ERROR("abcd efgh\r\n", &lim, FENCE_RESP_ETOOBIG,
          "Protocol error: too big inline request");
    CHECK_EQ_I64(parse_s("abcd efgh", &lim), FENCE_RESP_ETOOBIG);
    CHECK_EQ_I64(parse_s("abcd efg\rx", &lim), FENCE_RESP_ETOOBIG);
    CHECK_EQ_I64(parse_s("abcd efg\r\r\n", &lim), FENCE_RESP_ETOOBIG);
    /* An endless line without newline never stays PARTIAL. */
    static char endless[3 * FENCE_INLINE_MAX];
    memset(endless, 'a', sizeof(endless));
    CHECK_EQ_I64(fence_resp_parse(endless, FENCE_INLINE_MAX, NULL, &msg),
                 FENCE_RESP_PARTIAL);
    CHECK_EQ_I64(fence_resp_parse(endless, FENCE_INLINE_MAX + 1, NULL, &msg),
                 FENCE_RESP_ETOOBIG);
    CHECK_EQ_I64(fence_resp_parse(endless, sizeof(endless), NULL, &msg),
                 FENCE_RESP_ETOOBIG);
    /* A larger configured limit is capped at FENCE_INLINE_MAX. */
    lim.inline_max = UINT64_MAX;
    CHECK_EQ_I64(fence_resp_parse(endless, sizeof(endless), &lim, &msg),
                 FENCE_RESP_ETOOBIG);
    /* A line of exactly FENCE_INLINE_MAX bytes of one word is accepted and
     * fits the scratch buffer. */
    memcpy(endless + FENCE_INLINE_MAX, "\r\n", 2);
    CHECK_EQ_I64(fence_resp_parse(endless, FENCE_INLINE_MAX + 2, NULL, &msg),
                 FENCE_INLINE_MAX + 2);
    CHECK_EQ_U64(msg.argc, 1);
    CHECK_EQ_U64(msg.argv[0].len, FENCE_INLINE_MAX);
}

static void test_limit_header_lines(void)
{
    fence_resp_limits lim = {.args_max = 8, .bulk_max = 1000, .inline_max = 4};
    /* "*8" and "$100" fit in 4 bytes; "$1000" does not. */
    CHECK_EQ_I64(parse_s("*8\r\n", &lim), FENCE_RESP_PARTIAL);
    ERROR("*0008\r\n", &lim, FENCE_RESP_ETOOBIG,
          "Protocol error: too big mbulk count string");
    CHECK_EQ_I64(parse_s("*1\r\n$100\r\n", &lim), FENCE_RESP_PARTIAL);
    ERROR("*1\r\n$1000\r\n", &lim, FENCE_RESP_ETOOBIG,
          "Protocol error: too big bulk count string");
    /* Without any CRLF, an endless header is refused once it is too long. */
    CHECK_EQ_I64(parse_s("*000", &lim), FENCE_RESP_PARTIAL);
    CHECK_EQ_I64(parse_s("*000\r", &lim), FENCE_RESP_PARTIAL);
    CHECK_EQ_I64(parse_s("*0000", &lim), FENCE_RESP_ETOOBIG);
    CHECK_EQ_I64(parse_s("*1\r\n$0000", &lim), FENCE_RESP_ETOOBIG);
}

/* ---- Inline quoting ------------------------------------------------------ */

static void test_inline_double_quotes(void)
{
    CHECK(parse_s("\"a b\"\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"a b", NULL}));
    CHECK(parse_s("\"\\n\\r\\t\\\"\\\\\\a\\b\"\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"\n\r\t\"\\\a\b", NULL}));
    CHECK(parse_s("\"\\x41\\x7a\\xFF\\x00\"\n", NULL) > 0);
    REQUIRE(msg.argc == 1);
    CHECK_EQ_U64(msg.argv[0].len, 4);
    CHECK(memcmp(msg.argv[0].ptr, "Az\xff\0", 4) == 0);
    /* Not a hex escape: "\x" stands for "x". */
    CHECK(parse_s("\"\\xZZ\\x4\"\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"xZZx4", NULL}));
    /* Any other escaped character stands for itself. */
    CHECK(parse_s("\"\\q\\'\\ \"\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"q' ", NULL}));
    /* Empty quoted words are words. */
    CHECK(parse_s("a \"\" b\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"a", "", "b", NULL}));
    /* A quote inside a word starts quoting; the rest joins the word. */
    CHECK(parse_s("ab\"c d\" e\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"abc d", "e", NULL}));
    /* A closing quote at the end of the line, before "\r\n". */
    CHECK(parse_s("x \"y\"\r\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"x", "y", NULL}));
    /* "\r" counts as a separator after a closing quote. */
    CHECK(parse_s("\"y\"\rz\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"y", "z", NULL}));
}

static void test_inline_single_quotes(void)
{
    CHECK(parse_s("'a b'\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"a b", NULL}));
    /* Only \' is an escape; other backslashes are literal. */
    CHECK(parse_s("'it\\'s \\n \\x41 \"'\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"it's \\n \\x41 \"", NULL}));
    CHECK(parse_s("'' x'y z'\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"", "xy z", NULL}));
    CHECK(parse_s("'a\\\\b'\n", NULL) > 0);
    CHECK(argv_is(&msg, (words){"a\\\\b", NULL}));
    /* As in Redis, a backslash right before the closing quote escapes it. */
    ERROR("'\\\\'\n", NULL, FENCE_RESP_EPROTO, PROTO_QUOTES);
}

/* ---- Encoders ------------------------------------------------------------ */

/* Encodes with enc into a buffer of exactly the size it asks for, checks
 * the bytes, and checks that one byte less writes nothing. */
#define CHECK_ENC(expect, call_buf_cap)                                     \
    do {                                                                   \
        char *buf = NULL;                                                  \
        size_t cap = 0;                                                    \
        size_t need = (call_buf_cap);                                      \
        CHECK_EQ_U64(need, sizeof(expect) - 1);                            \
        char small[256];                                                   \
        memset(small, '#', sizeof(small));                                 \
        buf = small;                                                       \
        cap = need - 1;                                                    \
        CHECK_EQ_U64((call_buf_cap), need);                                \
        CHECK(small[0] == '#');                                            \
        buf = malloc(need);                                                \
        REQUIRE(buf != NULL);                                              \
        cap = need;                                                        \
        CHECK_EQ_U64((call_buf_cap), need);                                \
        CHECK(memcmp(buf, (expect), need) == 0);                           \
        free(buf);                                                         \
    } while (0)

/* RESP3 types and the protocol-aware helpers (RESP2 bytes unchanged). */
static void test_encode_resp3(void)
{
    CHECK_ENC("%0\r\n", fence_resp_map(buf, cap, 0));
    CHECK_ENC("%7\r\n", fence_resp_map(buf, cap, 7));
    CHECK_ENC("~3\r\n", fence_resp_set(buf, cap, 3));
    CHECK_ENC("_\r\n", fence_resp_null(buf, cap));
    CHECK_ENC("#t\r\n", fence_resp_bool(buf, cap, 1));
    CHECK_ENC("#f\r\n", fence_resp_bool(buf, cap, 0));
    CHECK_ENC(",1.5\r\n", fence_resp_double(buf, cap, 1.5));
    CHECK_ENC(",-0\r\n", fence_resp_double(buf, cap, -0.0));
    CHECK_ENC(",0.10000000000000001\r\n", fence_resp_double(buf, cap, 0.1));
    CHECK_ENC(",inf\r\n", fence_resp_double(buf, cap, 1.0 / 0.0));
    CHECK_ENC(",-inf\r\n", fence_resp_double(buf, cap, -1.0 / 0.0));
    CHECK_ENC(",nan\r\n", fence_resp_double(buf, cap, 0.0 / 0.0));
    CHECK_ENC(",-1.7976931348623157e+308\r\n", fence_resp_double(buf, cap, -1.7976931348623157e308));
    CHECK_ENC("=8\r\ntxt:a\r\nb\r\n", fence_resp_verbatim(buf, cap, "txt", "a\r\nb", 4));
    CHECK_ENC("=4\r\nmkd:\r\n", fence_resp_verbatim(buf, cap, "mkd", "", 0));
    CHECK_ENC("$-1\r\n", fence_resp_nil_v(buf, cap, 2));
    CHECK_ENC("_\r\n", fence_resp_nil_v(buf, cap, 3));
    CHECK_ENC("*14\r\n", fence_resp_map_v(buf, cap, 7, 2));
    CHECK_ENC("%7\r\n", fence_resp_map_v(buf, cap, 7, 3));
    CHECK_ENC("*2\r\n", fence_resp_set_v(buf, cap, 2, 2));
    CHECK_ENC("~2\r\n", fence_resp_set_v(buf, cap, 2, 3));
    CHECK_ENC(":1\r\n", fence_resp_bool_v(buf, cap, 5, 2));
    CHECK_ENC(":0\r\n", fence_resp_bool_v(buf, cap, 0, 2));
    CHECK_ENC("#t\r\n", fence_resp_bool_v(buf, cap, 5, 3));
}

static void test_encode_simple_error(void)
{
    CHECK_ENC("+OK\r\n", fence_resp_simple(buf, cap, "OK"));
    CHECK_ENC("+\r\n", fence_resp_simple(buf, cap, ""));
    CHECK_ENC("+a  b\r\n", fence_resp_simple(buf, cap, "a\r\nb"));
    CHECK_ENC("-ERR unknown command\r\n",
              fence_resp_error(buf, cap, "ERR", "unknown command"));
    CHECK_ENC("-NOLEASE\r\n", fence_resp_error(buf, cap, "NOLEASE", NULL));
    CHECK_ENC("-NOLEASE\r\n", fence_resp_error(buf, cap, "NOLEASE", ""));
    CHECK_ENC("-ERR bad  arg\r\n",
              fence_resp_error(buf, cap, "ERR", "bad\r\narg"));
}

static void test_encode_numbers(void)
{
    CHECK_ENC(":0\r\n", fence_resp_int(buf, cap, 0));
    CHECK_ENC(":-1\r\n", fence_resp_int(buf, cap, -1));
    CHECK_ENC(":9223372036854775807\r\n", fence_resp_int(buf, cap, INT64_MAX));
    CHECK_ENC(":-9223372036854775808\r\n", fence_resp_int(buf, cap, INT64_MIN));
    CHECK_ENC(":42\r\n", fence_resp_uint(buf, cap, 42));
    CHECK_ENC(":9223372036854775807\r\n",
              fence_resp_uint(buf, cap, (uint64_t)INT64_MAX));
}

static void test_encode_bulk_nil_array(void)
{
    CHECK_ENC("$2\r\nhi\r\n", fence_resp_bulk(buf, cap, "hi", 2));
    CHECK_ENC("$0\r\n\r\n", fence_resp_bulk(buf, cap, NULL, 0));
    CHECK_ENC("$3\r\na\0b\r\n", fence_resp_bulk(buf, cap, "a\0b", 3));
    CHECK_ENC("$-1\r\n", fence_resp_nil(buf, cap));
    CHECK_ENC("*3\r\n", fence_resp_array(buf, cap, 3));
    CHECK_ENC("*0\r\n", fence_resp_array(buf, cap, 0));
    CHECK_ENC("*-1\r\n", fence_resp_array(buf, cap, -1));
    /* Size queries with no buffer at all. */
    CHECK_EQ_U64(fence_resp_bulk(NULL, 0, "hello", 5), 11);
    CHECK_EQ_U64(fence_resp_nil(NULL, 0), 5);
}

static void test_encode_request(void)
{
    fence_resp_arg a[3] = {{"LOCK", 4}, {"a b", 3}, {"", 0}};
    CHECK_ENC("*3\r\n$4\r\nLOCK\r\n$3\r\na b\r\n$0\r\n\r\n",
              fence_resp_request(buf, cap, 3, a));
    CHECK_ENC("*0\r\n", fence_resp_request(buf, cap, 0, NULL));
}

static void test_round_trip(void)
{
    /* inline -> parse -> encode -> parse gives the same arguments. */
    static const char *const lines[] = {
        "LOCK \"a\\x00b\" 'c d' \"\" e\n",
        "  PING\t\"\\r\\n\"\r\n",
        "x\n",
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        REQUIRE(parse_s(lines[i], NULL) > 0);
        char buf[256];
        size_t n = fence_resp_request(buf, sizeof(buf), msg.argc, msg.argv);
        REQUIRE(n <= sizeof(buf));
        CHECK_EQ_I64(fence_resp_parse(buf, n, NULL, &msg2), (ssize_t)n);
        CHECK(same_argv(&msg, &msg2));
    }
}

/* ---- fence_resp_parse_u64 ------------------------------------------------ */

/* Parses the string s with fence_resp_parse_u64. */
static int u64(const char *s, uint64_t max, uint64_t *out)
{
    return fence_resp_parse_u64(s, strlen(s), max, out);
}

static void test_parse_u64(void)
{
    uint64_t v = 7;
    CHECK_EQ_I64(u64("0", UINT64_MAX, &v), 0);
    CHECK_EQ_U64(v, 0);
    CHECK_EQ_I64(u64("123", UINT64_MAX, &v), 0);
    CHECK_EQ_U64(v, 123);
    CHECK_EQ_I64(u64("18446744073709551615", UINT64_MAX, &v), 0);
    CHECK_EQ_U64(v, UINT64_MAX);
    /* 20 digits with leading zeros are fine; 21 digits never are. */
    CHECK_EQ_I64(u64("00000000000000000001", UINT64_MAX, &v), 0);
    CHECK_EQ_U64(v, 1);
    CHECK_EQ_I64(u64("000000000000000000001", UINT64_MAX, &v), -1);
    v = 7;
    CHECK_EQ_I64(u64("18446744073709551616", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("99999999999999999999", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(fence_resp_parse_u64(NULL, 0, UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("-1", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("-0", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("+1", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64(" 1", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("1 ", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("1a", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("0x10", UINT64_MAX, &v), -1);
    CHECK_EQ_I64(u64("1.5", UINT64_MAX, &v), -1);
    CHECK_EQ_U64(v, 7); /* failures leave *out alone */
    /* The bound is inclusive. */
    CHECK_EQ_I64(u64("9", 9, &v), 0);
    CHECK_EQ_I64(u64("10", 9, &v), -1);
    CHECK_EQ_I64(u64("0", 0, &v), 0);
    CHECK_EQ_I64(u64("1", 0, &v), -1);
    /* Only the n given bytes are read. */
    CHECK_EQ_I64(fence_resp_parse_u64("12x", 2, UINT64_MAX, &v), 0);
    CHECK_EQ_U64(v, 12);
}

static void test_limits_default(void)
{
    fence_resp_limits lim;
    fence_resp_limits_default(&lim);
    CHECK_EQ_U64(lim.args_max, FENCE_ARGS_MAX);
    CHECK_EQ_U64(lim.bulk_max, FENCE_BULK_DEFAULT);
    CHECK_EQ_U64(lim.inline_max, FENCE_INLINE_MAX);
}

int main(void)
{
    TEST_RUN(test_multibulk);
    TEST_RUN(test_multibulk_binary);
    TEST_RUN(test_multibulk_empty);
    TEST_RUN(test_inline);
    TEST_RUN(test_inline_empty_lines);
    TEST_RUN(test_inline_nul_byte);
    TEST_RUN(test_partial_empty_buffer);
    TEST_RUN(test_split_every_byte);
    TEST_RUN(test_split_long_bulk);
    TEST_RUN(test_pipelined);
    TEST_RUN(test_error_multibulk_length);
    TEST_RUN(test_error_expected_dollar);
    TEST_RUN(test_error_bulk_length);
    TEST_RUN(test_error_bulk_terminator);
    TEST_RUN(test_error_unbalanced_quotes);
    TEST_RUN(test_limit_args_multibulk);
    TEST_RUN(test_limit_args_inline);
    TEST_RUN(test_limit_bulk);
    TEST_RUN(test_limit_inline_line);
    TEST_RUN(test_limit_header_lines);
    TEST_RUN(test_inline_double_quotes);
    TEST_RUN(test_inline_single_quotes);
    TEST_RUN(test_encode_simple_error);
    TEST_RUN(test_encode_numbers);
    TEST_RUN(test_encode_resp3);
    TEST_RUN(test_encode_bulk_nil_array);
    TEST_RUN(test_encode_request);
    TEST_RUN(test_round_trip);
    TEST_RUN(test_parse_u64);
    TEST_RUN(test_limits_default);
    return TEST_DONE();
}
