/* libFuzzer target: the client-TLS option checks and the certificate
 * common-name rule (src/net/tls_conf.c).  The input is split at '\n'
 * into cert, key, ca, tls-auth-clients word, port, tls-port and a unix
 * flag; the whole input is also given to fence__tls_cn_valid. */
#include <string.h>

#include "base/limits.h"
#include "net/tls.h"
#include "fuzz.h"

/* Copy the next '\n'-terminated field of data into out (cut at cap-1). */
static const uint8_t *field(const uint8_t *p, const uint8_t *end, char *out,
                            size_t cap)
{
    size_t n = 0;
    while (p < end && *p != '\n') {
        if (n + 1 < cap && *p != '\0')
            out[n++] = (char)*p;
        p++;
    }
    out[n] = '\0';
    return p < end ? p + 1 : p;
}

/* Check one input.  Properties: an error has a message; a success obeys
 * every rule the daemons rely on (a TLS port has a certificate and a key
 * and differs from the plain port; a mode that asks for certificates has
 * a CA; some listener exists); a valid CN has no control byte. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char cert[64], key[64], ca[64], word[32], num[8];
    const uint8_t *p = data, *end = data + size;
    p = field(p, end, cert, sizeof(cert));
    p = field(p, end, key, sizeof(key));
    p = field(p, end, ca, sizeof(ca));
    p = field(p, end, word, sizeof(word));
    p = field(p, end, num, sizeof(num));
    fence_tls_conf tc = {cert, key, ca, word, 0, 0, false};
    tc.port = num[0] ? (uint8_t)num[0] % 4 : 0;
    tc.tls_port = num[0] && num[1] ? (uint8_t)num[1] % 4 : 0;
    tc.have_unix = num[0] && num[1] && num[2] ? (num[2] & 1) != 0 : false;
    char err[256];
    int auth = -1;
    err[0] = '\0';
    int rc = fence__tls_conf_check(&tc, &auth, err, sizeof(err));
    if (rc != 0) {
        FUZZ_CHECK(rc == -1);
        FUZZ_CHECK(err[0] != '\0');
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    } else {
        FUZZ_CHECK(auth == FENCE_TLS_AUTH_NO || auth == FENCE_TLS_AUTH_YES ||
                   auth == FENCE_TLS_AUTH_OPTIONAL);
        FUZZ_CHECK(tc.port != 0 || tc.tls_port != 0 || tc.have_unix);
        if (tc.tls_port != 0) {
            FUZZ_CHECK(cert[0] != '\0' && key[0] != '\0');
            FUZZ_CHECK(tc.tls_port != tc.port);
            FUZZ_CHECK(auth == FENCE_TLS_AUTH_NO || ca[0] != '\0');
        } else {
            FUZZ_CHECK(cert[0] == '\0' && key[0] == '\0' && ca[0] == '\0');
        }
        FUZZ_CHECK(strcmp(fence__tls_auth_name(auth), "?") != 0);
    }
    if (fence__tls_cn_valid((const char *)data, size)) {
        FUZZ_CHECK(size >= 1 && size <= FENCE_TLS_CN_MAX);
        for (size_t i = 0; i < size; i++)
            FUZZ_CHECK(data[i] >= 0x20 && data[i] != 0x7f);
    }
    return 0;
}
