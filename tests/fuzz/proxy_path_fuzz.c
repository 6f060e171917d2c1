/* Fuzz target for fence-proxy's request-target normaliser
 * (src/proxy/path.c).  The input is a request target.  Properties of a
 * success:
 *   - the result starts with '/', holds visible ASCII only, is no longer
 *     than the path it came from, and has no empty, "." or ".." segment;
 *   - every '%' is followed by two upper-case hex digits encoding a byte
 *     that is neither unreserved nor '/', '\' or NUL;
 *   - it is a fixed point: normalising it again gives it back unchanged;
 *   - the query offset points at the first '?' (or the end);
 *   - a trailing '/' of the input path survives.
 * A failure gives a reason.  Whatever the input, the output buffer is
 * never written past its capacity (ASan, and a guard byte here). */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "proxy/path.h"

static bool is_hexu(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

static int hexv(char c)
{
    return c <= '9' ? c - '0' : c - 'A' + 10;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char out[8192 + 1], again[8192];
    const char *p = (const char *)data;
    size_t ol = 0, qo = 0;
    const char *why = NULL;
    out[size] = 'G';
    int rc = fence__proxy_path_normalize(p, size, out, size, &ol, &qo, &why);
    FUZZ_CHECK(out[size] == 'G');
    if (rc != 0) {
        FUZZ_CHECK(rc == -1);
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        return 0;
    }
    const char *q = memchr(p, '?', size);
    FUZZ_CHECK(qo == (q != NULL ? (size_t)(q - p) : size));
    FUZZ_CHECK(ol >= 1 && ol <= qo);
    FUZZ_CHECK(out[0] == '/');
    for (size_t i = 0; i < ol; i++) {
        unsigned char c = (unsigned char)out[i];
        FUZZ_CHECK(c >= 0x21 && c <= 0x7e && c != '\\' && c != '#' && c != '?');
        if (c == '%') {
            FUZZ_CHECK(i + 2 < ol && is_hexu(out[i + 1]) && is_hexu(out[i + 2]));
            int v = hexv(out[i + 1]) * 16 + hexv(out[i + 2]);
            bool unres = (v >= 'A' && v <= 'Z') || (v >= 'a' && v <= 'z') ||
                         (v >= '0' && v <= '9') || v == '-' || v == '.' || v == '_' || v == '~';
            FUZZ_CHECK(!unres && v != '/' && v != '\\' && v != 0);
        }
        if (c == '/' && i + 1 < ol) {
            /* The segment starting after this '/'. */
            size_t e = i + 1;
            while (e < ol && out[e] != '/')
                e++;
            size_t sl = e - (i + 1);
            FUZZ_CHECK(sl > 0);
            FUZZ_CHECK(!(sl == 1 && out[i + 1] == '.'));
            FUZZ_CHECK(!(sl == 2 && out[i + 1] == '.' && out[i + 2] == '.'));
        }
    }
    if (qo > 1 && p[qo - 1] == '/')
        FUZZ_CHECK(out[ol - 1] == '/');
    size_t al = 0, aq = 0;
    FUZZ_CHECK(fence__proxy_path_normalize(out, ol, again, sizeof(again), &al, &aq, &why) == 0);
    FUZZ_CHECK(al == ol && aq == ol && memcmp(again, out, ol) == 0);
    return 0;
}
