/* Fuzz target for libfence's and fencectl's parsers: server address lists,
 * the error replies the client interprets (NOTLEADER, STALE, the code
 * map), decimal numbers, and fencectl's whole command line.
 *
 * The first byte picks the parser; the rest is its input.  Properties:
 * nothing crashes or reads out of bounds; a parsed address list formats and
 * parses back to the same addresses; a parsed number matches strtoull; a
 * parsed command line is internally consistent. */
#include <string.h>

#include "fencectl/args.h"
#include "libfence/pure.h"
#include "fence.h"
#include "fuzz.h"

/* Address lists round-trip through fence__addr_format. */
static void fuzz_addrs(const char *s)
{
    fence__addr a[FENCE__ADDRS_MAX];
    size_t n = 0;
    if (fence__addr_parse_list(s, a, FENCE__ADDRS_MAX, &n) != 0)
        return;
    FUZZ_CHECK(n >= 1 && n <= FENCE__ADDRS_MAX);
    for (size_t i = 0; i < n; i++) {
        char buf[FENCE__HOST_MAX + 32];
        fence__addr b;
        FUZZ_CHECK(a[i].is_unix || (a[i].port >= 1 && a[i].port <= 65535));
        fence__addr_format(&a[i], buf, sizeof(buf));
        FUZZ_CHECK(fence__addr_parse(buf, strlen(buf), &b) == 0);
        FUZZ_CHECK(fence__addr_equal(&a[i], &b));
    }
}

/* Error replies: codes stay in range, parsers agree with the code map. */
static void fuzz_errors(const char *s)
{
    int code = fence__error_code(s);
    FUZZ_CHECK(code < 0);
    FUZZ_CHECK(strcmp(fence_strerror(code), "unknown error") != 0);
    fence__addr a;
    if (fence__parse_notleader(s, &a) == 0)
        FUZZ_CHECK(code == FENCE_ENOTLEADER);
    uint64_t h;
    if (fence__parse_stale(s, &h) == 0)
        FUZZ_CHECK(code == FENCE_ESTALE);
}

/* Decimal parsing agrees with strtoull on plain digit strings. */
static void fuzz_u64(const char *s, size_t len)
{
    uint64_t v;
    bool ok = fence__parse_u64(s, len, &v);
    if (!ok)
        return;
    FUZZ_CHECK(len >= 1 && len <= 20);
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK(s[i] >= '0' && s[i] <= '9');
    char buf[24];
    memcpy(buf, s, len);
    buf[len] = '\0';
    FUZZ_CHECK(strtoull(buf, NULL, 10) == v);
}

/* fencectl's command line: words separated by NUL or newline bytes. */
static void fuzz_argv(char *s, size_t len)
{
    char *argv[40];
    int argc = 0;
    argv[argc++] = (char *)"fencectl";
    char *p = s;
    char *end = s + len;
    while (p < end && argc < 39) {
        char *w = p;
        while (p < end && *p != '\0' && *p != '\n')
            p++;
        *p = '\0';
        argv[argc++] = w;
        p++;
    }
    argv[argc] = NULL;
    fencectl_args a;
    char err[256];
    int rv = fencectl_parse(argc, argv, &a, err, sizeof(err));
    FUZZ_CHECK(rv == 0 || rv == FENCECTL_EXIT_USAGE);
    FUZZ_CHECK(fencectl_usage(a.cmd) != NULL);
    if (rv != 0) {
        FUZZ_CHECK(err[0] != '\0');
        return;
    }
    if (a.help)
        return;
    FUZZ_CHECK(a.cmd != FENCECTL_NONE);
    FUZZ_CHECK(a.ttl_ms >= 10);
    FUZZ_CHECK(a.n_conns >= 1 && a.n_conns <= FENCECTL_CONNS_MAX);
    if (a.cmd == FENCECTL_LOCK) {
        FUZZ_CHECK(a.cmd_argc >= 1);
        FUZZ_CHECK(a.cmd_argv[a.cmd_argc] == NULL);
    }
    if (a.cmd == FENCECTL_LOCK || a.cmd == FENCECTL_ACQUIRE || a.cmd == FENCECTL_RELEASE ||
        a.cmd == FENCECTL_INFO) {
        FUZZ_CHECK(a.name != NULL);
        size_t n = strlen(a.name);
        FUZZ_CHECK(n >= 1 && n <= 256);
    }
    if (a.cmd == FENCECTL_RELEASE)
        FUZZ_CHECK(a.token > 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    /* A NUL-terminated copy of the payload. */
    size_t len = size - 1;
    char *s = malloc(len + 1);
    FUZZ_CHECK(s != NULL);
    memcpy(s, data + 1, len);
    s[len] = '\0';
    switch (data[0] % 4) {
    case 0:
        fuzz_addrs(s);
        break;
    case 1:
        fuzz_errors(s);
        break;
    case 2:
        fuzz_u64(s, len);
        break;
    default:
        fuzz_argv(s, len);
        break;
    }
    free(s);
    return 0;
}
