/* Fuzz target for the signed-token parsers (src/token/signtok.c).
 *
 * The first input byte picks the parser (mod 4), the rest is its input:
 *   0  fence_signtok_parse (and fence_signtok_check, with and without a
 *      verifier): an accepted token encodes back to exactly the input (one
 *      spelling per token), a plain decimal prints back to the input, a
 *      refusal always says why; check agrees with parse and never admits
 *      what parse refused;
 *   1  fence_signtok_keys_parse: accepted keys format back to lines that
 *      parse to the same keys; a refusal names a line or says "no keys";
 *   2  fence_signtok_signer_parse: likewise for one signing key;
 *   3  fence_signtok_b64_decode (32 and 64 bytes): decode then encode gives
 *      the input back.
 */
#include <string.h>

#include "token/signtok.h"
#include "fuzz.h"

/* The signed-token parser and the resource hook. */
static void fuzz_token(const char *s, size_t n)
{
    fence_signtok t;
    char err[256] = "";
    int rc = fence_signtok_parse(s, n, &t, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || rc == FENCE_SIGNTOK_EUNSIGNED ||
               rc == FENCE_SIGNTOK_EFORMAT);
    FUZZ_CHECK(rc == 0 || err[0] != '\0');
    char buf[FENCE_SIGNTOK_BUF_SIZE];
    if (rc == 0) {
        size_t m = fence_signtok_encode(&t, buf, sizeof(buf));
        FUZZ_CHECK(m == n);
        FUZZ_CHECK(memcmp(buf, s, n) == 0);
        FUZZ_CHECK(t.token >= 1);
    } else if (rc == FENCE_SIGNTOK_EUNSIGNED) {
        int m = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)t.token);
        FUZZ_CHECK(m > 0 && (size_t)m == n && memcmp(buf, s, n) == 0);
    }
    uint64_t tok = 0;
    int crc = fence_signtok_check(NULL, "f", 1, s, n, &tok, err, sizeof(err));
    FUZZ_CHECK((crc == 0) == (rc == 0 || rc == FENCE_SIGNTOK_EUNSIGNED));
    FUZZ_CHECK(crc != 0 || tok == t.token);

    /* A verifier with one fixed key of each scheme. */
    fence_signtok_key keys[2];
    memset(keys, 0, sizeof(keys));
    keys[0].scheme = FENCE_SIGNTOK_ED25519;
    keys[0].key_id_len = 2;
    memcpy(keys[0].key_id, "k1", 3);
    keys[1].scheme = FENCE_SIGNTOK_HMAC_SHA256;
    keys[1].key_id_len = 2;
    memcpy(keys[1].key_id, "h1", 3);
    for (int i = 0; i < 32; i++)
        keys[1].key[i] = (unsigned char)i;
    fence_signtok_verifier *v = NULL;
    if (fence_signtok_verifier_new(keys, 2, 1, &v) != 0)
        return;
    tok = 0;
    crc = fence_signtok_check(v, "orders", 6, s, n, &tok, err, sizeof(err));
    FUZZ_CHECK(crc == 0 || err[0] != '\0');
    FUZZ_CHECK(crc != 0 || (rc == 0 && tok == t.token));
    FUZZ_CHECK(rc != FENCE_SIGNTOK_EUNSIGNED || crc == FENCE_SIGNTOK_EUNSIGNED);
    fence_signtok_verifier_free(v);
}

/* The verify.keys parser. */
static void fuzz_keys(const char *s, size_t n)
{
    fence_signtok_key keys[FENCE_SIGNTOK_KEYS_MAX], again[FENCE_SIGNTOK_KEYS_MAX];
    size_t nk = 0;
    char err[256] = "";
    int rc = fence_signtok_keys_parse(s, n, keys, FENCE_SIGNTOK_KEYS_MAX, &nk,
                                      err, sizeof(err));
    if (rc != 0) {
        FUZZ_CHECK(rc == FENCE_SIGNTOK_EKEYFILE);
        FUZZ_CHECK(strncmp(err, "line ", 5) == 0 || strstr(err, "no keys") ||
                   strstr(err, "larger than"));
        return;
    }
    FUZZ_CHECK(nk >= 1 && nk <= FENCE_SIGNTOK_KEYS_MAX);
    static char text[FENCE_SIGNTOK_KEYS_MAX * 128];
    size_t len = 0;
    for (size_t i = 0; i < nk; i++) {
        size_t m = fence_signtok_key_line(&keys[i], text + len, sizeof(text) - len);
        FUZZ_CHECK(m > 0);
        len += m;
    }
    size_t n2 = 0;
    FUZZ_CHECK(fence_signtok_keys_parse(text, len, again, FENCE_SIGNTOK_KEYS_MAX,
                                        &n2, err, sizeof(err)) == 0);
    FUZZ_CHECK(n2 == nk);
    FUZZ_CHECK(memcmp(keys, again, nk * sizeof(keys[0])) == 0);
}

/* The signing.key parser. */
static void fuzz_signer(const char *s, size_t n)
{
    fence_signtok_signer sg, again;
    char err[256] = "";
    int rc = fence_signtok_signer_parse(s, n, &sg, err, sizeof(err));
    if (rc != 0) {
        FUZZ_CHECK(rc == FENCE_SIGNTOK_EKEYFILE);
        FUZZ_CHECK(err[0] != '\0');
        return;
    }
    char line[128];
    size_t m = fence_signtok_key_line(&sg.key, line, sizeof(line));
    FUZZ_CHECK(m > 0);
    FUZZ_CHECK(fence_signtok_signer_parse(line, m, &again, err, sizeof(err)) == 0);
    FUZZ_CHECK(memcmp(&sg, &again, sizeof(sg)) == 0);
    /* What it signs parses and names its key. */
    char tok[FENCE_SIGNTOK_BUF_SIZE];
    size_t tn = fence_signtok_sign(&sg, "f", 1, 7, tok, sizeof(tok));
    FUZZ_CHECK(tn > 0);
    fence_signtok t;
    FUZZ_CHECK(fence_signtok_parse(tok, tn, &t, err, sizeof(err)) == 0);
    FUZZ_CHECK(t.token == 7 && strcmp(t.key_id, sg.key.key_id) == 0);
}

/* The base64url decoder. */
static void fuzz_b64(const char *s, size_t n)
{
    unsigned char out[64];
    char back[128];
    const size_t sizes[] = {32, 64};
    for (size_t i = 0; i < 2; i++) {
        if (!fence_signtok_b64_decode(s, n, out, sizes[i]))
            continue;
        size_t m = fence_signtok_b64_encode(out, sizes[i], back, sizeof(back));
        FUZZ_CHECK(m == n && memcmp(back, s, n) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *s = (const char *)data + 1;
    size_t n = size - 1;
    switch (data[0] % 4) {
    case 0:
        fuzz_token(s, n);
        break;
    case 1:
        fuzz_keys(s, n);
        break;
    case 2:
        fuzz_signer(s, n);
        break;
    default:
        fuzz_b64(s, n);
        break;
    }
    return 0;
}
