/* Signed fencing tokens: the format, the key files, signing, verification
 * and a bounded verify cache (docs/security.md, "Signed tokens").
 *
 * A signed token is one printable string that starts with the decimal token:
 *
 *     <token>.<key id>.<signature>          e.g. 34.k1.<86 base64url chars>
 *
 *   token      decimal 1..2^64-1, no sign, no leading zero
 *   key id     1..FENCE_SIGNTOK_KEYID_MAX of [A-Za-z0-9_-]; its first
 *              character names the scheme: 'k' Ed25519, 'h' HMAC-SHA256
 *              (any other first character is refused)
 *   signature  base64url without padding, canonical (unused low bits zero):
 *              86 characters (64 bytes) for Ed25519, 43 (32 bytes) for
 *              HMAC-SHA256
 *
 * What is signed (the message; all lengths are explicit, so no two
 * (key id, name, token) triples share a message, and no other protocol's
 * message starts with the same 16 bytes):
 *
 *     "fenced-token-v1" 0x00 | u8 key id length | key id |
 *     u16 big-endian name length | name | u64 big-endian token
 *
 * Key files (written by `fencectl keygen DIR`):
 *   DIR/signing.key  (mode 0600)  one line "KEYID SCHEME BASE64URL-SECRET"
 *                    (secret: the 32-byte Ed25519 seed, or the 32-byte HMAC
 *                    key); what fenced --token-signing-key loads.
 *   DIR/verify.keys  one line "KEYID SCHEME BASE64URL-KEY" per key (Ed25519:
 *                    the 32-byte public key; HMAC-SHA256: the secret key
 *                    itself, so such a file must be private too).  Several
 *                    lines = rotation: a token verifies if its key id is
 *                    listed and the signature checks under that key.
 *   SCHEME is "ed25519" or "hmac-sha256".  Lines starting with '#' and blank
 *   lines are ignored; fields are separated by one or more spaces or tabs;
 *   anything else is an error naming the line.
 *
 * The parsers and the encoder are pure (no I/O, no allocation).  Signing and
 * verification use libsodium (crypto_sign_detached, crypto_auth_hmacsha256);
 * link with -lsodium.  Reading key files is in signtok_file.c.
 *
 * Errors: 0 or a negative FENCE_SIGNTOK_E* code, with a one-line reason in the
 * caller's err buffer (errcap bytes, always NUL-terminated when errcap > 0).
 * A resource answers a refused token with "-BADTOKEN <reason>". */
#ifndef FENCE_COMMON_SIGNTOK_H
#define FENCE_COMMON_SIGNTOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest key id. */
#define FENCE_SIGNTOK_KEYID_MAX 32
/* Longest lock (fence) name a token can bind (same as FENCE_NAME_MAX). */
#define FENCE_SIGNTOK_NAME_MAX 256
/* Largest signature in bytes (Ed25519). */
#define FENCE_SIGNTOK_SIG_MAX 64
/* Longest signed token string: 20 digits, '.', key id, '.', 86 chars. */
#define FENCE_SIGNTOK_STR_MAX (20 + 1 + FENCE_SIGNTOK_KEYID_MAX + 1 + 86)
/* A buffer that holds any signed token and its NUL. */
#define FENCE_SIGNTOK_BUF_SIZE (FENCE_SIGNTOK_STR_MAX + 1)
/* Longest message fence_signtok_message builds. */
#define FENCE_SIGNTOK_MSG_MAX (16 + 1 + FENCE_SIGNTOK_KEYID_MAX + 2 + \
                               FENCE_SIGNTOK_NAME_MAX + 8)
/* Most keys one verify.keys file may list. */
#define FENCE_SIGNTOK_KEYS_MAX 64
/* Longest line of a key file. */
#define FENCE_SIGNTOK_LINE_MAX 512
/* Largest key file accepted. */
#define FENCE_SIGNTOK_FILE_MAX (FENCE_SIGNTOK_KEYS_MAX * FENCE_SIGNTOK_LINE_MAX)
/* Default and ceiling of a verifier's cache (entries). */
#define FENCE_SIGNTOK_CACHE_DEFAULT 4096
#define FENCE_SIGNTOK_CACHE_MAX (1u << 20)

_Static_assert(FENCE_SIGNTOK_NAME_MAX <= 65535, "the name length is a u16");
_Static_assert(FENCE_SIGNTOK_KEYID_MAX <= 255, "the key id length is a u8");
_Static_assert(FENCE_SIGNTOK_STR_MAX < FENCE_SIGNTOK_LINE_MAX, "limits");

/* Error codes. */
#define FENCE_SIGNTOK_ERRNO_MAP(X)                                           \
    X(FORMAT, "malformed token")                                             \
    X(UNSIGNED, "token is not signed")                                       \
    X(KEY, "token is signed with a key this resource does not list")         \
    X(BADSIG, "token signature does not match its fence and number")         \
    X(KEYFILE, "key file is malformed")                                      \
    X(INVAL, "invalid argument")                                             \
    X(NOMEM, "out of memory")                                                \
    X(IO, "cannot read or write a key file")                                 \
    X(CRYPTO, "libsodium failed to initialise")

enum fence_signtok_errno {
    FENCE_SIGNTOK_OK = 0,
    FENCE_SIGNTOK__ERRNO_BASE = -200,
#define FENCE_SIGNTOK__ENUM(name, text) FENCE_SIGNTOK_E##name,
    FENCE_SIGNTOK_ERRNO_MAP(FENCE_SIGNTOK__ENUM)
#undef FENCE_SIGNTOK__ENUM
    FENCE_SIGNTOK__ERRNO_END
};

/* Signature schemes. */
typedef enum fence_signtok_scheme {
    FENCE_SIGNTOK_NONE = 0,        /* not a valid scheme */
    FENCE_SIGNTOK_ED25519 = 1,     /* key ids start with 'k' */
    FENCE_SIGNTOK_HMAC_SHA256 = 2, /* key ids start with 'h' */
} fence_signtok_scheme;

/* A parsed signed token. */
typedef struct fence_signtok {
    uint64_t token;                           /* the fencing token, >= 1 */
    fence_signtok_scheme scheme;              /* from the key id's first char */
    uint8_t key_id_len;                       /* 1..FENCE_SIGNTOK_KEYID_MAX */
    char key_id[FENCE_SIGNTOK_KEYID_MAX + 1]; /* NUL-terminated */
    uint8_t sig_len;                          /* 64 or 32 (by scheme) */
    unsigned char sig[FENCE_SIGNTOK_SIG_MAX]; /* signature bytes */
} fence_signtok;

/* One key: a verify key (Ed25519 public key or HMAC secret), or a signing
 * key (Ed25519 seed or HMAC secret).  Always 32 bytes. */
typedef struct fence_signtok_key {
    fence_signtok_scheme scheme;              /* the key's scheme */
    uint8_t key_id_len;                       /* 1..FENCE_SIGNTOK_KEYID_MAX */
    char key_id[FENCE_SIGNTOK_KEYID_MAX + 1]; /* NUL-terminated */
    unsigned char key[32];                    /* key bytes */
} fence_signtok_key;

/* A signer: what fenced holds (from signing.key). */
typedef struct fence_signtok_signer {
    fence_signtok_key key;                    /* id, scheme, seed or secret */
    unsigned char ed_sk[64];                  /* Ed25519 secret key (seed+pk);
                                               * unused for HMAC */
} fence_signtok_signer;

/* A verifier: a set of verify keys and a bounded verify cache (opaque).
 * Thread-safe: the cache has a mutex. */
typedef struct fence_signtok_verifier fence_signtok_verifier;

/* ---- Pure format ---------------------------------------------------------- */

/* The static text of an error code ("unknown error" if not one). */
const char *fence_signtok_strerror(int rc);

/* The scheme a key id names by its first character, or FENCE_SIGNTOK_NONE
 * if the key id is not valid (length, charset, first character). */
fence_signtok_scheme fence_signtok_keyid_scheme(const char *id, size_t len);

/* "ed25519" / "hmac-sha256" ("none" otherwise), and back (NONE if unknown). */
const char *fence_signtok_scheme_name(fence_signtok_scheme s);
fence_signtok_scheme fence_signtok_scheme_parse(const char *s, size_t len);

/* Signature length in bytes of a scheme (0 for NONE). */
size_t fence_signtok_sig_len(fence_signtok_scheme s);

/* Parse a decimal token s[0..len): 1..2^64-1, digits only, no leading zero.
 * Returns 0 or FENCE_SIGNTOK_EFORMAT. */
int fence_signtok_parse_u64(const char *s, size_t len, uint64_t *out);

/* Parse a signed token from s[0..len) (not NUL-terminated; no surrounding
 * bytes allowed).  Returns 0 and fills *out, FENCE_SIGNTOK_EUNSIGNED if s is
 * a valid plain decimal token (out->token is then set), or
 * FENCE_SIGNTOK_EFORMAT with the reason in err. */
int fence_signtok_parse(const char *s, size_t len, fence_signtok *out,
                        char *err, size_t errcap);

/* Write t as a string into buf (cap bytes, NUL-terminated).  Returns the
 * length without the NUL, or 0 if t is not valid or cap is too small (give
 * FENCE_SIGNTOK_BUF_SIZE). */
size_t fence_signtok_encode(const fence_signtok *t, char *buf, size_t cap);

/* Build the signed message of (key id, name, token) into buf (cap bytes,
 * at least FENCE_SIGNTOK_MSG_MAX).  Returns its length, or 0 if an argument
 * is out of range. */
size_t fence_signtok_message(const char *key_id, size_t key_id_len,
                             const char *name, size_t name_len, uint64_t token,
                             unsigned char *buf, size_t cap);

/* base64url without padding.  encode writes 4*n/3 rounded up characters and
 * a NUL into out (cap bytes) and returns the length (0 if cap is too
 * small).  decode accepts only canonical input (no '=', no other alphabet,
 * unused low bits zero, length not 1 mod 4) and exactly out_len bytes;
 * returns true on success. */
size_t fence_signtok_b64_encode(const unsigned char *in, size_t n, char *out,
                                size_t cap);
bool fence_signtok_b64_decode(const char *s, size_t len, unsigned char *out,
                              size_t out_len);

/* Parse a whole verify.keys text (text[0..len)) into keys[0..cap); *n_out
 * is the number of keys.  Refuses duplicate key ids, a key id whose first
 * character does not match SCHEME, and more than cap keys.  Returns 0 or
 * FENCE_SIGNTOK_EKEYFILE with "line N: reason" in err. */
int fence_signtok_keys_parse(const char *text, size_t len,
                             fence_signtok_key *keys, size_t cap,
                             size_t *n_out, char *err, size_t errcap);

/* Parse a signing.key text: exactly one key line (comments and blank lines
 * allowed).  Returns 0 or FENCE_SIGNTOK_EKEYFILE.  The key is a secret:
 * callers wipe it with fence_signtok_signer_wipe. */
int fence_signtok_signer_parse(const char *text, size_t len,
                               fence_signtok_signer *out, char *err,
                               size_t errcap);

/* ---- Crypto (libsodium) --------------------------------------------------- */

/* Make a new key pair: *signer gets the secret, and verify (may be NULL)
 * the verify key.  key_id NULL: generated ('k' or 'h' and 8 hex digits);
 * otherwise it must be valid and start with the scheme's letter.  Returns
 * 0, FENCE_SIGNTOK_EINVAL or FENCE_SIGNTOK_ECRYPTO. */
int fence_signtok_keygen(fence_signtok_scheme scheme, const char *key_id,
                         fence_signtok_signer *signer,
                         fence_signtok_key *verify, char *err, size_t errcap);

/* Format a key as one key-file line "KEYID SCHEME BASE64\n" into buf (cap
 * bytes; 128 is enough).  Returns the length or 0. */
size_t fence_signtok_key_line(const fence_signtok_key *k, char *buf,
                              size_t cap);

/* Sign (name, token) and write the signed token string into out (cap bytes,
 * FENCE_SIGNTOK_BUF_SIZE is enough).  Returns its length, or 0 if name is
 * empty or too long, token is 0 or cap too small. */
size_t fence_signtok_sign(const fence_signtok_signer *s, const char *name,
                          size_t name_len, uint64_t token, char *out,
                          size_t cap);

/* Overwrite a signer's secrets (sodium_memzero). */
void fence_signtok_signer_wipe(fence_signtok_signer *s);

/* Make a verifier from keys[0..n) (copied) with a cache of cache_max
 * entries (0: FENCE_SIGNTOK_CACHE_DEFAULT; at most FENCE_SIGNTOK_CACHE_MAX).
 * Returns 0, FENCE_SIGNTOK_EINVAL, FENCE_SIGNTOK_ENOMEM or
 * FENCE_SIGNTOK_ECRYPTO. */
int fence_signtok_verifier_new(const fence_signtok_key *keys, size_t n,
                               size_t cache_max,
                               fence_signtok_verifier **out);

/* Free a verifier (NULL is a no-op). */
void fence_signtok_verifier_free(fence_signtok_verifier *v);

/* Verify a parsed token against fence name[0..len): its key id must be
 * listed and its signature must check under that key.  A success is
 * remembered (keyed by name, token, key id and signature), so verifying the
 * same token again costs one hash and a table probe.  Returns 0,
 * FENCE_SIGNTOK_EKEY or FENCE_SIGNTOK_EBADSIG (reason in err). */
int fence_signtok_verify(fence_signtok_verifier *v, const char *name,
                         size_t len, const fence_signtok *t, char *err,
                         size_t errcap);

/* The resource hook: check a token argument arg[0..arg_len) as a client sent
 * it, for fence[0..fence_len), and give its number in *token.
 *   v != NULL: arg must be a signed token that verifies (fence_signtok_parse
 *              + fence_signtok_verify); a plain decimal is refused with
 *              FENCE_SIGNTOK_EUNSIGNED.
 *   v == NULL: no verification: a plain decimal or a signed token (its
 *              number, NOT verified) is accepted.
 * Returns 0, or FENCE_SIGNTOK_EFORMAT / EUNSIGNED / EKEY / EBADSIG with a
 * reason in err that the resource sends as "-BADTOKEN <err>".  Call it
 * BEFORE anything compares or raises a mark. */
int fence_signtok_check(fence_signtok_verifier *v, const char *fence,
                        size_t fence_len, const char *arg, size_t arg_len,
                        uint64_t *token, char *err, size_t errcap);

/* Counters of a verifier (for INFO and tests). */
typedef struct fence_signtok_stats {
    uint64_t verified;   /* signatures checked with libsodium and good */
    uint64_t cache_hits; /* verifications answered from the cache */
    uint64_t refused;    /* tokens refused (any reason) */
} fence_signtok_stats;
void fence_signtok_verifier_stats(fence_signtok_verifier *v,
                                  fence_signtok_stats *out);

/* Add from's counters to to's (a reload keeps the totals). */
void fence_signtok_verifier_stats_carry(fence_signtok_verifier *to,
                                        fence_signtok_verifier *from);

/* Number of keys a verifier holds. */
size_t fence_signtok_verifier_nkeys(const fence_signtok_verifier *v);

/* ---- Key files (signtok_file.c: I/O) -------------------------------------- */

/* Read and parse a verify.keys file and make a verifier of it.  Refuses a
 * file any user may write (mode & 002: he could add a key of his own) with
 * FENCE_SIGNTOK_EKEYFILE.  Returns 0,
 * FENCE_SIGNTOK_EIO, FENCE_SIGNTOK_EKEYFILE ("PATH: line N: reason"),
 * FENCE_SIGNTOK_ENOMEM or FENCE_SIGNTOK_ECRYPTO. */
int fence_signtok_verifier_load(const char *path, size_t cache_max,
                                fence_signtok_verifier **out, char *err,
                                size_t errcap);

/* Reload: read path again into a new verifier (fence_signtok_verifier_load)
 * and, only when that succeeds, put it in *vp, carry the counters over and
 * free the old one; on any failure *vp is left as it was (the old keys stay
 * in force) and err says why.  Atomic for the caller's thread: the swap is
 * one pointer store, so call it on the one thread that verifies (the
 * daemons' loop thread, e.g. from a SIGHUP handler); a verifier that other
 * threads use must not be swapped this way.  Returns 0 or the load's
 * error. */
int fence_signtok_verifier_reload(const char *path, size_t cache_max,
                                  fence_signtok_verifier **vp, char *err,
                                  size_t errcap);

/* Read and parse a signing.key file.  Refuses a file that group or others
 * may read (mode & 077) with FENCE_SIGNTOK_EKEYFILE.  Returns 0,
 * FENCE_SIGNTOK_EIO or FENCE_SIGNTOK_EKEYFILE. */
int fence_signtok_signer_load(const char *path, fence_signtok_signer *out,
                              char *err, size_t errcap);

#endif /* FENCE_COMMON_SIGNTOK_H */
