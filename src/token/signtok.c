/* Signed fencing tokens: format, key-file parsing, signing, verification and
 * the verify cache (see signtok.h for the format).  No I/O: key files are
 * read in signtok_file.c. */
#include "token/signtok.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "base/assert.h"

/* The first 16 bytes of every signed message (domain separation). */
static const char msg_prefix[16] = "fenced-token-v1"; /* + its NUL */

_Static_assert(sizeof(msg_prefix) == 16, "prefix is 15 chars and a NUL");

/* Write a printf-style reason into err (if any) and return rc. */
static int fail(int rc, char *err, size_t errcap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(int rc, char *err, size_t errcap, const char *fmt, ...)
{
    if (err != NULL && errcap > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errcap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* Static text for an error code. */
const char *fence_signtok_strerror(int rc)
{
    switch (rc) {
    case FENCE_SIGNTOK_OK:
        return "success";
#define FENCE_SIGNTOK__CASE(name, text)                                      \
    case FENCE_SIGNTOK_E##name:                                              \
        return text;
        FENCE_SIGNTOK_ERRNO_MAP(FENCE_SIGNTOK__CASE)
#undef FENCE_SIGNTOK__CASE
    default:
        return "unknown error";
    }
}

/* ---- Pure format ---------------------------------------------------------- */

/* True for the characters a key id may hold. */
static bool keyid_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '_' || c == '-';
}

/* The scheme of a key id by its first character (NONE if invalid). */
fence_signtok_scheme fence_signtok_keyid_scheme(const char *id, size_t len)
{
    if (id == NULL || len < 1 || len > FENCE_SIGNTOK_KEYID_MAX)
        return FENCE_SIGNTOK_NONE;
    for (size_t i = 0; i < len; i++)
        if (!keyid_char(id[i]))
            return FENCE_SIGNTOK_NONE;
    if (id[0] == 'k')
        return FENCE_SIGNTOK_ED25519;
    if (id[0] == 'h')
        return FENCE_SIGNTOK_HMAC_SHA256;
    return FENCE_SIGNTOK_NONE;
}

/* The scheme's name in key files. */
const char *fence_signtok_scheme_name(fence_signtok_scheme s)
{
    switch (s) {
    case FENCE_SIGNTOK_ED25519:
        return "ed25519";
    case FENCE_SIGNTOK_HMAC_SHA256:
        return "hmac-sha256";
    case FENCE_SIGNTOK_NONE:
        break;
    }
    return "none";
}

/* A scheme from its name in a key file. */
fence_signtok_scheme fence_signtok_scheme_parse(const char *s, size_t len)
{
    if (len == 7 && memcmp(s, "ed25519", 7) == 0)
        return FENCE_SIGNTOK_ED25519;
    if (len == 11 && memcmp(s, "hmac-sha256", 11) == 0)
        return FENCE_SIGNTOK_HMAC_SHA256;
    return FENCE_SIGNTOK_NONE;
}

/* Signature bytes per scheme. */
size_t fence_signtok_sig_len(fence_signtok_scheme s)
{
    switch (s) {
    case FENCE_SIGNTOK_ED25519:
        return 64;
    case FENCE_SIGNTOK_HMAC_SHA256:
        return 32;
    case FENCE_SIGNTOK_NONE:
        break;
    }
    return 0;
}

/* Strict decimal 1..2^64-1. */
int fence_signtok_parse_u64(const char *s, size_t len, uint64_t *out)
{
    if (s == NULL || len < 1 || len > 20)
        return FENCE_SIGNTOK_EFORMAT;
    if (s[0] == '0')
        return FENCE_SIGNTOK_EFORMAT; /* 0 and leading zeros */
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return FENCE_SIGNTOK_EFORMAT;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return FENCE_SIGNTOK_EFORMAT;
        v = v * 10 + d;
    }
    FENCE_ASSERT(v >= 1);
    *out = v;
    return 0;
}

static const char b64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* The value of a base64url character, or -1. */
static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-')
        return 62;
    if (c == '_')
        return 63;
    return -1;
}

/* base64url, no padding. */
size_t fence_signtok_b64_encode(const unsigned char *in, size_t n, char *out,
                                size_t cap)
{
    size_t need = (n * 4 + 2) / 3;
    if (cap < need + 1)
        return 0;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        acc = (acc << 8) | in[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[o++] = b64_alphabet[(acc >> bits) & 63];
        }
    }
    if (bits > 0)
        out[o++] = b64_alphabet[(acc << (6 - bits)) & 63];
    FENCE_ASSERT(o == need);
    out[o] = '\0';
    return o;
}

/* Strict base64url decode of exactly out_len bytes. */
bool fence_signtok_b64_decode(const char *s, size_t len, unsigned char *out,
                              size_t out_len)
{
    if (len != (out_len * 4 + 2) / 3)
        return false;
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(s[i]);
        if (v < 0)
            return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            FENCE_ASSERT(o < out_len);
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    /* Canonical: the bits left over must be zero. */
    if ((acc & ((1u << bits) - 1)) != 0)
        return false;
    return o == out_len;
}

/* Parse "<token>.<keyid>.<sig>" or a plain decimal. */
int fence_signtok_parse(const char *s, size_t len, fence_signtok *out,
                        char *err, size_t errcap)
{
    if (s == NULL || out == NULL)
        return fail(FENCE_SIGNTOK_EFORMAT, err, errcap, "no token");
    memset(out, 0, sizeof(*out));
    if (len > FENCE_SIGNTOK_STR_MAX)
        return fail(FENCE_SIGNTOK_EFORMAT, err, errcap,
                    "token is %zu bytes, longer than a signed token can be "
                    "(%d)", len, FENCE_SIGNTOK_STR_MAX);
    const char *dot = memchr(s, '.', len);
    size_t tlen = dot ? (size_t)(dot - s) : len;
    if (fence_signtok_parse_u64(s, tlen, &out->token) != 0)
        return fail(FENCE_SIGNTOK_EFORMAT, err, errcap,
                    "a token starts with a decimal 1..18446744073709551615 "
                    "(no sign, no leading zero)");
    if (dot == NULL)
        return fail(FENCE_SIGNTOK_EUNSIGNED, err, errcap,
                    "token %" PRIu64 " is not signed", out->token);
    const char *kid = dot + 1;
    size_t rest = len - tlen - 1;
    const char *dot2 = memchr(kid, '.', rest);
    if (dot2 == NULL)
        return fail(FENCE_SIGNTOK_EFORMAT, err, errcap,
                    "signed token has no signature (want TOKEN.KEYID.SIG)");
    size_t klen = (size_t)(dot2 - kid);
    fence_signtok_scheme sch = fence_signtok_keyid_scheme(kid, klen);
    if (sch == FENCE_SIGNTOK_NONE)
        return fail(FENCE_SIGNTOK_EFORMAT, err, errcap,
                    "bad key id: 1..%d of [A-Za-z0-9_-], starting with 'k' "
                    "(ed25519) or 'h' (hmac-sha256)", FENCE_SIGNTOK_KEYID_MAX);
    const char *sig = dot2 + 1;
    size_t slen = rest - klen - 1;
    size_t nbytes = fence_signtok_sig_len(sch);
    if (!fence_signtok_b64_decode(sig, slen, out->sig, nbytes))
        return fail(FENCE_SIGNTOK_EFORMAT, err, errcap,
                    "signature must be %zu characters of unpadded base64url "
                    "(%s)", (nbytes * 4 + 2) / 3,
                    fence_signtok_scheme_name(sch));
    out->scheme = sch;
    out->key_id_len = (uint8_t)klen;
    memcpy(out->key_id, kid, klen);
    out->key_id[klen] = '\0';
    out->sig_len = (uint8_t)nbytes;
    return 0;
}

/* Encode a parsed (or freshly signed) token. */
size_t fence_signtok_encode(const fence_signtok *t, char *buf, size_t cap)
{
    if (t == NULL || buf == NULL || t->token == 0 ||
        fence_signtok_keyid_scheme(t->key_id, t->key_id_len) != t->scheme ||
        t->sig_len != fence_signtok_sig_len(t->scheme))
        return 0;
    char b64[FENCE_SIGNTOK_SIG_MAX * 2];
    size_t n = fence_signtok_b64_encode(t->sig, t->sig_len, b64, sizeof(b64));
    FENCE_ASSERT(n > 0);
    int w = snprintf(buf, cap, "%" PRIu64 ".%.*s.%s", t->token,
                     (int)t->key_id_len, t->key_id, b64);
    if (w < 0 || (size_t)w >= cap)
        return 0;
    return (size_t)w;
}

/* The signed message (see signtok.h). */
size_t fence_signtok_message(const char *key_id, size_t key_id_len,
                             const char *name, size_t name_len, uint64_t token,
                             unsigned char *buf, size_t cap)
{
    if (key_id_len < 1 || key_id_len > FENCE_SIGNTOK_KEYID_MAX ||
        name_len < 1 || name_len > FENCE_SIGNTOK_NAME_MAX ||
        cap < FENCE_SIGNTOK_MSG_MAX)
        return 0;
    size_t o = 0;
    memcpy(buf, msg_prefix, sizeof(msg_prefix));
    o += sizeof(msg_prefix);
    buf[o++] = (unsigned char)key_id_len;
    memcpy(buf + o, key_id, key_id_len);
    o += key_id_len;
    buf[o++] = (unsigned char)(name_len >> 8);
    buf[o++] = (unsigned char)name_len;
    memcpy(buf + o, name, name_len);
    o += name_len;
    for (int i = 7; i >= 0; i--)
        buf[o++] = (unsigned char)(token >> (8 * i));
    FENCE_ASSERT(o <= FENCE_SIGNTOK_MSG_MAX);
    return o;
}

/* Split line[0..len) into whitespace-separated fields (at most cap). */
static size_t split_fields(const char *line, size_t len, const char **f,
                           size_t *flen, size_t cap)
{
    size_t n = 0, i = 0;
    while (i < len) {
        while (i < len && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i == len)
            break;
        size_t start = i;
        while (i < len && line[i] != ' ' && line[i] != '\t')
            i++;
        if (n == cap)
            return cap + 1;
        f[n] = line + start;
        flen[n] = i - start;
        n++;
    }
    return n;
}

/* Parse one key line "KEYID SCHEME BASE64" (lineno for messages). */
static int parse_key_line(const char *line, size_t len, size_t lineno,
                          fence_signtok_key *k, char *err, size_t errcap)
{
    const char *f[3];
    size_t fl[3];
    size_t n = split_fields(line, len, f, fl, 3);
    if (n != 3)
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "line %zu: want \"KEYID SCHEME KEY\" (3 fields, got %s)",
                    lineno, n > 3 ? "more" : n == 2 ? "2" : n == 1 ? "1" : "0");
    memset(k, 0, sizeof(*k));
    fence_signtok_scheme idsch = fence_signtok_keyid_scheme(f[0], fl[0]);
    if (idsch == FENCE_SIGNTOK_NONE)
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "line %zu: bad key id (1..%d of [A-Za-z0-9_-], starting "
                    "with 'k' for ed25519 or 'h' for hmac-sha256)", lineno,
                    FENCE_SIGNTOK_KEYID_MAX);
    fence_signtok_scheme sch = fence_signtok_scheme_parse(f[1], fl[1]);
    if (sch == FENCE_SIGNTOK_NONE)
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "line %zu: unknown scheme (want ed25519 or hmac-sha256)",
                    lineno);
    if (sch != idsch)
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "line %zu: key id %.*s names scheme %s, but the line says "
                    "%s", lineno, (int)fl[0], f[0],
                    fence_signtok_scheme_name(idsch),
                    fence_signtok_scheme_name(sch));
    if (!fence_signtok_b64_decode(f[2], fl[2], k->key, sizeof(k->key)))
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "line %zu: key must be 43 characters of unpadded "
                    "base64url (32 bytes)", lineno);
    k->scheme = sch;
    k->key_id_len = (uint8_t)fl[0];
    memcpy(k->key_id, f[0], fl[0]);
    k->key_id[fl[0]] = '\0';
    return 0;
}

/* Callback per key line of a key file. */
typedef int (*line_fn)(void *ctx, const char *line, size_t len, size_t lineno,
                       char *err, size_t errcap);

/* Walk the lines of a key file: reject NULs, overlong lines and control
 * characters; skip blank and '#' lines; call fn for the others. */
static int each_line(const char *text, size_t len, line_fn fn, void *ctx,
                     char *err, size_t errcap)
{
    if (len > FENCE_SIGNTOK_FILE_MAX)
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "key file is larger than %d bytes", FENCE_SIGNTOK_FILE_MAX);
    size_t lineno = 0, i = 0;
    while (i < len) {
        lineno++;
        const char *nl = memchr(text + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (text + i)) : len - i;
        const char *line = text + i;
        i += l + (nl ? 1 : 0);
        if (l > 0 && line[l - 1] == '\r')
            l--;
        if (l > FENCE_SIGNTOK_LINE_MAX)
            return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                        "line %zu: longer than %d bytes", lineno,
                        FENCE_SIGNTOK_LINE_MAX);
        for (size_t j = 0; j < l; j++) {
            unsigned char c = (unsigned char)line[j];
            if ((c < 0x20 && c != '\t') || c == 0x7f)
                return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                            "line %zu: control character 0x%02x", lineno, c);
        }
        size_t k = 0;
        while (k < l && (line[k] == ' ' || line[k] == '\t'))
            k++;
        if (k == l || line[k] == '#')
            continue;
        int rc = fn(ctx, line, l, lineno, err, errcap);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* State of fence_signtok_keys_parse. */
typedef struct keys_ctx {
    fence_signtok_key *keys; /* output array */
    size_t cap;              /* its size */
    size_t n;                /* keys parsed */
} keys_ctx;

/* One verify.keys line. */
static int keys_line(void *p, const char *line, size_t len, size_t lineno,
                     char *err, size_t errcap)
{
    keys_ctx *c = p;
    if (c->n == c->cap)
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "line %zu: more than %zu keys", lineno, c->cap);
    fence_signtok_key *k = &c->keys[c->n];
    int rc = parse_key_line(line, len, lineno, k, err, errcap);
    if (rc != 0)
        return rc;
    for (size_t i = 0; i < c->n; i++)
        if (c->keys[i].key_id_len == k->key_id_len &&
            memcmp(c->keys[i].key_id, k->key_id, k->key_id_len) == 0)
            return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                        "line %zu: key id %s is listed twice", lineno,
                        k->key_id);
    c->n++;
    return 0;
}

/* Parse a verify.keys text. */
int fence_signtok_keys_parse(const char *text, size_t len,
                             fence_signtok_key *keys, size_t cap,
                             size_t *n_out, char *err, size_t errcap)
{
    if ((text == NULL && len > 0) || keys == NULL || n_out == NULL)
        return fail(FENCE_SIGNTOK_EINVAL, err, errcap, "invalid argument");
    keys_ctx c = {keys, cap, 0};
    *n_out = 0;
    int rc = each_line(text, len, keys_line, &c, err, errcap);
    if (rc != 0)
        return rc;
    if (c.n == 0)
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "no keys (want lines \"KEYID SCHEME KEY\")");
    *n_out = c.n;
    return 0;
}

/* State of fence_signtok_signer_parse. */
typedef struct signer_ctx {
    fence_signtok_signer *s; /* output */
    size_t n;                /* key lines seen */
} signer_ctx;

/* One signing.key line. */
static int signer_line(void *p, const char *line, size_t len, size_t lineno,
                       char *err, size_t errcap)
{
    signer_ctx *c = p;
    if (c->n++ > 0)
        return fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                    "line %zu: a signing key file holds exactly one key",
                    lineno);
    return parse_key_line(line, len, lineno, &c->s->key, err, errcap);
}

/* Parse a signing.key text and derive the Ed25519 secret key. */
int fence_signtok_signer_parse(const char *text, size_t len,
                               fence_signtok_signer *out, char *err,
                               size_t errcap)
{
    if ((text == NULL && len > 0) || out == NULL)
        return fail(FENCE_SIGNTOK_EINVAL, err, errcap, "invalid argument");
    memset(out, 0, sizeof(*out));
    signer_ctx c = {out, 0};
    int rc = each_line(text, len, signer_line, &c, err, errcap);
    if (rc == 0 && c.n == 0)
        rc = fail(FENCE_SIGNTOK_EKEYFILE, err, errcap,
                  "no key (want one line \"KEYID SCHEME SECRET\")");
    if (rc == 0 && out->key.scheme == FENCE_SIGNTOK_ED25519) {
        if (sodium_init() < 0)
            rc = fail(FENCE_SIGNTOK_ECRYPTO, err, errcap, "sodium_init failed");
        else {
            unsigned char pk[crypto_sign_PUBLICKEYBYTES];
            crypto_sign_seed_keypair(pk, out->ed_sk, out->key.key);
        }
    }
    if (rc != 0)
        fence_signtok_signer_wipe(out);
    return rc;
}

/* ---- Crypto ---------------------------------------------------------------- */

_Static_assert(crypto_sign_BYTES == 64, "Ed25519 signature size");
_Static_assert(crypto_sign_SEEDBYTES == 32, "Ed25519 seed size");
_Static_assert(crypto_sign_PUBLICKEYBYTES == 32, "Ed25519 public key size");
_Static_assert(crypto_sign_SECRETKEYBYTES == 64, "Ed25519 secret key size");
_Static_assert(crypto_auth_hmacsha256_BYTES == 32, "HMAC-SHA256 size");
_Static_assert(crypto_auth_hmacsha256_KEYBYTES == 32, "HMAC key size");

/* Wipe a signer. */
void fence_signtok_signer_wipe(fence_signtok_signer *s)
{
    if (s != NULL)
        sodium_memzero(s, sizeof(*s));
}

/* New key pair. */
int fence_signtok_keygen(fence_signtok_scheme scheme, const char *key_id,
                         fence_signtok_signer *signer,
                         fence_signtok_key *verify, char *err, size_t errcap)
{
    if (signer == NULL || (scheme != FENCE_SIGNTOK_ED25519 &&
                           scheme != FENCE_SIGNTOK_HMAC_SHA256))
        return fail(FENCE_SIGNTOK_EINVAL, err, errcap, "invalid argument");
    if (sodium_init() < 0)
        return fail(FENCE_SIGNTOK_ECRYPTO, err, errcap, "sodium_init failed");
    memset(signer, 0, sizeof(*signer));
    char gen[16];
    if (key_id == NULL) {
        uint32_t r = randombytes_random();
        snprintf(gen, sizeof(gen), "%c%08" PRIx32,
                 scheme == FENCE_SIGNTOK_ED25519 ? 'k' : 'h', r);
        key_id = gen;
    }
    size_t klen = strlen(key_id);
    fence_signtok_scheme idsch = fence_signtok_keyid_scheme(key_id, klen);
    if (idsch == FENCE_SIGNTOK_NONE)
        return fail(FENCE_SIGNTOK_EINVAL, err, errcap,
                    "key id \"%s\": want 1..%d of [A-Za-z0-9_-], starting "
                    "with 'k' (ed25519) or 'h' (hmac-sha256)", key_id,
                    FENCE_SIGNTOK_KEYID_MAX);
    if (idsch != scheme)
        return fail(FENCE_SIGNTOK_EINVAL, err, errcap,
                    "key id \"%s\" names scheme %s; %s key ids start with "
                    "'%c'", key_id, fence_signtok_scheme_name(idsch),
                    fence_signtok_scheme_name(scheme),
                    scheme == FENCE_SIGNTOK_ED25519 ? 'k' : 'h');
    signer->key.scheme = scheme;
    signer->key.key_id_len = (uint8_t)klen;
    memcpy(signer->key.key_id, key_id, klen + 1);
    fence_signtok_key v = signer->key;
    if (scheme == FENCE_SIGNTOK_ED25519) {
        randombytes_buf(signer->key.key, sizeof(signer->key.key));
        crypto_sign_seed_keypair(v.key, signer->ed_sk, signer->key.key);
    } else {
        crypto_auth_hmacsha256_keygen(signer->key.key);
        memcpy(v.key, signer->key.key, sizeof(v.key));
    }
    if (verify != NULL)
        *verify = v;
    sodium_memzero(&v, sizeof(v));
    return 0;
}

/* One key-file line. */
size_t fence_signtok_key_line(const fence_signtok_key *k, char *buf,
                              size_t cap)
{
    char b64[64];
    if (k == NULL || fence_signtok_keyid_scheme(k->key_id, k->key_id_len) !=
                         k->scheme)
        return 0;
    fence_signtok_b64_encode(k->key, sizeof(k->key), b64, sizeof(b64));
    int w = snprintf(buf, cap, "%s %s %s\n", k->key_id,
                     fence_signtok_scheme_name(k->scheme), b64);
    sodium_memzero(b64, sizeof(b64));
    if (w < 0 || (size_t)w >= cap)
        return 0;
    return (size_t)w;
}

/* Sign (name, token). */
size_t fence_signtok_sign(const fence_signtok_signer *s, const char *name,
                          size_t name_len, uint64_t token, char *out,
                          size_t cap)
{
    FENCE_ASSERT(s != NULL);
    unsigned char msg[FENCE_SIGNTOK_MSG_MAX];
    if (token == 0)
        return 0;
    size_t mlen = fence_signtok_message(s->key.key_id, s->key.key_id_len,
                                        name, name_len, token, msg,
                                        sizeof(msg));
    if (mlen == 0)
        return 0;
    fence_signtok t;
    memset(&t, 0, sizeof(t));
    t.token = token;
    t.scheme = s->key.scheme;
    t.key_id_len = s->key.key_id_len;
    memcpy(t.key_id, s->key.key_id, s->key.key_id_len + 1);
    if (s->key.scheme == FENCE_SIGNTOK_ED25519) {
        crypto_sign_detached(t.sig, NULL, msg, mlen, s->ed_sk);
        t.sig_len = 64;
    } else {
        FENCE_ASSERT(s->key.scheme == FENCE_SIGNTOK_HMAC_SHA256);
        crypto_auth_hmacsha256(t.sig, msg, mlen, s->key.key);
        t.sig_len = 32;
    }
    return fence_signtok_encode(&t, out, cap);
}

/* ---- Verifier and its cache -------------------------------------------------- */

/* Size of a cache entry's digest. */
#define DIGEST_BYTES 32

struct fence_signtok_verifier {
    pthread_mutex_t mu;             /* protects slots, used and stats */
    size_t nkeys;                   /* keys in keys */
    fence_signtok_key keys[FENCE_SIGNTOK_KEYS_MAX]; /* the verify keys */
    unsigned char hkey[crypto_generichash_KEYBYTES]; /* random key of the
                                     * cache digest, so inputs cannot be
                                     * chosen to collide in the table */
    size_t nslots;                  /* cache entries, a power of two */
    unsigned char (*slots)[DIGEST_BYTES]; /* digests of verified tokens */
    unsigned char *used;            /* used[i]: slots[i] holds a digest */
    fence_signtok_stats stats;      /* counters */
};

/* Make a verifier. */
int fence_signtok_verifier_new(const fence_signtok_key *keys, size_t n,
                               size_t cache_max,
                               fence_signtok_verifier **out)
{
    if (out == NULL)
        return FENCE_SIGNTOK_EINVAL;
    *out = NULL;
    if (keys == NULL || n < 1 || n > FENCE_SIGNTOK_KEYS_MAX ||
        cache_max > FENCE_SIGNTOK_CACHE_MAX)
        return FENCE_SIGNTOK_EINVAL;
    if (sodium_init() < 0)
        return FENCE_SIGNTOK_ECRYPTO;
    if (cache_max == 0)
        cache_max = FENCE_SIGNTOK_CACHE_DEFAULT;
    size_t slots = 1;
    while (slots < cache_max)
        slots <<= 1;
    fence_signtok_verifier *v = calloc(1, sizeof(*v));
    if (v == NULL)
        return FENCE_SIGNTOK_ENOMEM;
    v->slots = calloc(slots, sizeof(*v->slots));
    if (v->slots == NULL)
        goto out_free_v;
    v->used = calloc(slots, 1);
    if (v->used == NULL)
        goto out_free_slots;
    v->nslots = slots;
    v->nkeys = n;
    memcpy(v->keys, keys, n * sizeof(*keys));
    randombytes_buf(v->hkey, sizeof(v->hkey));
    pthread_mutex_init(&v->mu, NULL);
    *out = v;
    return 0;

out_free_slots:
    free(v->slots);
out_free_v:
    free(v);
    return FENCE_SIGNTOK_ENOMEM;
}

/* Free a verifier. */
void fence_signtok_verifier_free(fence_signtok_verifier *v)
{
    if (v == NULL)
        return;
    pthread_mutex_destroy(&v->mu);
    free(v->used);
    free(v->slots);
    sodium_memzero(v, sizeof(*v));
    free(v);
}

/* Number of keys. */
size_t fence_signtok_verifier_nkeys(const fence_signtok_verifier *v)
{
    return v ? v->nkeys : 0;
}

/* Copy the counters. */
void fence_signtok_verifier_stats(fence_signtok_verifier *v,
                                  fence_signtok_stats *out)
{
    FENCE_ASSERT(v != NULL);
    FENCE_ASSERT(out != NULL);
    pthread_mutex_lock(&v->mu);
    *out = v->stats;
    pthread_mutex_unlock(&v->mu);
}

/* Carry the counters of from over to to (a reload keeps INFO's totals). */
void fence_signtok_verifier_stats_carry(fence_signtok_verifier *to,
                                        fence_signtok_verifier *from)
{
    FENCE_ASSERT(to != NULL);
    FENCE_ASSERT(from != NULL);
    FENCE_ASSERT(to != from);
    fence_signtok_stats st;
    fence_signtok_verifier_stats(from, &st);
    pthread_mutex_lock(&to->mu);
    to->stats.verified += st.verified;
    to->stats.cache_hits += st.cache_hits;
    to->stats.refused += st.refused;
    pthread_mutex_unlock(&to->mu);
}

/* The cache digest of (name, token, key id, signature): keyed BLAKE2b over
 * length-prefixed fields, so distinct tuples never share an input. */
static void cache_digest(const fence_signtok_verifier *v, const char *name,
                         size_t len, const fence_signtok *t,
                         unsigned char out[DIGEST_BYTES])
{
    crypto_generichash_state st;
    unsigned char hdr[2 + 8 + 1 + 1];
    hdr[0] = (unsigned char)(len >> 8);
    hdr[1] = (unsigned char)len;
    for (int i = 0; i < 8; i++)
        hdr[2 + i] = (unsigned char)(t->token >> (8 * (7 - i)));
    hdr[10] = t->key_id_len;
    hdr[11] = t->sig_len;
    crypto_generichash_init(&st, v->hkey, sizeof(v->hkey), DIGEST_BYTES);
    crypto_generichash_update(&st, hdr, sizeof(hdr));
    crypto_generichash_update(&st, (const unsigned char *)name, len);
    crypto_generichash_update(&st, (const unsigned char *)t->key_id,
                              t->key_id_len);
    crypto_generichash_update(&st, t->sig, t->sig_len);
    crypto_generichash_final(&st, out, DIGEST_BYTES);
}

/* The cache slot of a digest (direct-mapped: a newer entry replaces an
 * older one in the same slot). */
static size_t cache_slot(const fence_signtok_verifier *v,
                         const unsigned char d[DIGEST_BYTES])
{
    uint64_t h = 0;
    for (int i = 0; i < 8; i++)
        h = (h << 8) | d[i];
    return (size_t)(h & (v->nslots - 1));
}

/* Verify a parsed token (see signtok.h). */
int fence_signtok_verify(fence_signtok_verifier *v, const char *name,
                         size_t len, const fence_signtok *t, char *err,
                         size_t errcap)
{
    FENCE_ASSERT(v != NULL);
    FENCE_ASSERT(t != NULL);
    if (name == NULL || len < 1 || len > FENCE_SIGNTOK_NAME_MAX)
        return fail(FENCE_SIGNTOK_EFORMAT, err, errcap,
                    "fence name must be 1..%d bytes", FENCE_SIGNTOK_NAME_MAX);
    unsigned char d[DIGEST_BYTES];
    cache_digest(v, name, len, t, d);
    size_t slot = cache_slot(v, d);
    pthread_mutex_lock(&v->mu);
    if (v->used[slot] && sodium_memcmp(v->slots[slot], d, DIGEST_BYTES) == 0) {
        v->stats.cache_hits++;
        pthread_mutex_unlock(&v->mu);
        return 0;
    }
    pthread_mutex_unlock(&v->mu);

    const fence_signtok_key *k = NULL;
    for (size_t i = 0; i < v->nkeys; i++)
        if (v->keys[i].key_id_len == t->key_id_len &&
            memcmp(v->keys[i].key_id, t->key_id, t->key_id_len) == 0) {
            k = &v->keys[i];
            break;
        }
    int rc = 0;
    unsigned char msg[FENCE_SIGNTOK_MSG_MAX];
    size_t mlen = 0;
    if (k == NULL || k->scheme != t->scheme) {
        rc = fail(FENCE_SIGNTOK_EKEY, err, errcap,
                  "token %" PRIu64 " is signed with key %s, which this "
                  "resource does not list", t->token, t->key_id);
        goto out_count;
    }
    mlen = fence_signtok_message(t->key_id, t->key_id_len, name, len,
                                 t->token, msg, sizeof(msg));
    FENCE_ASSERT(mlen > 0);
    bool good;
    if (t->scheme == FENCE_SIGNTOK_ED25519) {
        FENCE_ASSERT(t->sig_len == crypto_sign_BYTES);
        good = crypto_sign_verify_detached(t->sig, msg, mlen, k->key) == 0;
    } else {
        FENCE_ASSERT(t->sig_len == crypto_auth_hmacsha256_BYTES);
        good = crypto_auth_hmacsha256_verify(t->sig, msg, mlen, k->key) == 0;
    }
    if (!good)
        rc = fail(FENCE_SIGNTOK_EBADSIG, err, errcap,
                  "the signature of token %" PRIu64 " (key %s) does not "
                  "match fence \"%.*s\" and that number: forged, altered or "
                  "issued for another lock", t->token, t->key_id,
                  (int)(len > 64 ? 64 : len), name);
out_count:
    pthread_mutex_lock(&v->mu);
    if (rc == 0) {
        v->stats.verified++;
        memcpy(v->slots[slot], d, DIGEST_BYTES);
        v->used[slot] = 1;
    } else {
        v->stats.refused++;
    }
    pthread_mutex_unlock(&v->mu);
    return rc;
}

/* The resource hook (see signtok.h). */
int fence_signtok_check(fence_signtok_verifier *v, const char *fence,
                        size_t fence_len, const char *arg, size_t arg_len,
                        uint64_t *token, char *err, size_t errcap)
{
    FENCE_ASSERT(token != NULL);
    fence_signtok t;
    int rc = fence_signtok_parse(arg, arg_len, &t, err, errcap);
    if (v == NULL) {
        if (rc == 0 || rc == FENCE_SIGNTOK_EUNSIGNED) {
            *token = t.token;
            return 0;
        }
        return rc;
    }
    if (rc == FENCE_SIGNTOK_EUNSIGNED) {
        rc = fail(FENCE_SIGNTOK_EUNSIGNED, err, errcap,
                  "token %" PRIu64 " is not signed; this resource accepts "
                  "only signed tokens (LOCK ... SIGNED)", t.token);
    }
    if (rc != 0) {
        pthread_mutex_lock(&v->mu);
        v->stats.refused++;
        pthread_mutex_unlock(&v->mu);
        return rc;
    }
    rc = fence_signtok_verify(v, fence, fence_len, &t, err, errcap);
    if (rc != 0)
        return rc;
    *token = t.token;
    return 0;
}
