/* The OpenSSL context for client TLS (tls.c) and for fence-proxy's
 * HTTPS listener: certificate chain, key, CA and verify mode from the
 * tls-* options, with clear messages for every file problem.  Apart from
 * tls.c so that a program without the connection layer (fence-proxy)
 * links it alone. */
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/assert.h"
#include "base/log.h"
#include "net/tls.h"
#include "net/tls_int.h"

/* OpenSSL's reason for the most recent error (see tls_pump.h). */
void fence__tls_reason(char *buf, size_t cap, const char *fallback)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e != 0 ? ERR_reason_error_string(e) : NULL;
    snprintf(buf, cap, "%s", r != NULL ? r : fallback);
    ERR_clear_error();
}

/* OpenSSL asks for a key passphrase: there is none (encrypted keys are
 * refused rather than prompting on a terminal). */
static int no_passphrase(char *buf, int size, int rw, void *u)
{
    (void)buf;
    (void)size;
    (void)rw;
    (void)u;
    return 0;
}

/* Check that path can be opened for reading; else a message in err. */
static int file_readable(const char *what, const char *path, char *err,
                         size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, cap, "%s %s: cannot open: %s", what, path,
                 strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

/* A private key that group or others may read is a key others may have
 * copied: warn (a refusal would break set-ups where a group such as
 * ssl-cert is meant to read it; the signing key, whose loss forges
 * tokens, is refused instead, signtok_file.c). */
static void warn_key_mode(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || (st.st_mode & 077) == 0)
        return;
    FENCE_LOG_W("tls-key %s: group or others may read it (mode %03o): whoever reads it "
                "can impersonate this server; chmod 600 it", path,
                (unsigned)(st.st_mode & 0777));
}

/* The SSL_CTX for o (see tls_int.h). */
SSL_CTX *fence__tls_ctx_new(const fence_tls_opts *o,
                            int (*verify)(int, X509_STORE_CTX *), char *err,
                            size_t cap)
{
    char why[160];
    bool ca = o->ca != NULL && o->ca[0] != '\0';
    if (file_readable("tls-cert", o->cert, err, cap) != 0 ||
        file_readable("tls-key", o->key, err, cap) != 0 ||
        (ca && file_readable("tls-ca", o->ca, err, cap) != 0))
        return NULL;
    warn_key_mode(o->key);
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == NULL) {
        fence__tls_reason(why, sizeof(why), "out of memory");
        snprintf(err, cap, "TLS: cannot create a context: %s", why);
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    static const unsigned char sid[] = "fence";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    if (SSL_CTX_use_certificate_chain_file(ctx, o->cert) != 1) {
        fence__tls_reason(why, sizeof(why), "not a PEM certificate");
        snprintf(err, cap, "tls-cert %s: cannot load: %s", o->cert, why);
        goto out_free_ctx;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, o->key, SSL_FILETYPE_PEM) != 1) {
        bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) ==
                        X509_R_KEY_VALUES_MISMATCH;
        fence__tls_reason(why, sizeof(why), "not a PEM key");
        if (mismatch)
            snprintf(err, cap, "tls-key %s: does not match tls-cert %s",
                     o->key, o->cert);
        else
            snprintf(err, cap, "tls-key %s: cannot load: %s (an encrypted "
                     "key is not supported)", o->key, why);
        goto out_free_ctx;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        snprintf(err, cap, "tls-key %s: does not match tls-cert %s", o->key,
                 o->cert);
        goto out_free_ctx;
    }
    X509 *own = SSL_CTX_get0_certificate(ctx);
    if (own != NULL && X509_cmp_current_time(X509_get0_notAfter(own)) < 0)
        FENCE_LOG_W("tls-cert %s: the certificate has expired; clients "
                    "will refuse it", o->cert);
    if (ca) {
        if (SSL_CTX_load_verify_locations(ctx, o->ca, NULL) != 1) {
            fence__tls_reason(why, sizeof(why), "not a PEM certificate");
            snprintf(err, cap, "tls-ca %s: cannot load: %s", o->ca, why);
            goto out_free_ctx;
        }
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(o->ca);
        if (names != NULL)
            SSL_CTX_set_client_CA_list(ctx, names);
        ERR_clear_error();
    }
    int mode = SSL_VERIFY_NONE;
    if (o->auth == FENCE_TLS_AUTH_YES)
        mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    else if (o->auth == FENCE_TLS_AUTH_OPTIONAL)
        mode = SSL_VERIFY_PEER;
    SSL_CTX_set_verify(ctx, mode, verify);
    return ctx;

out_free_ctx:
    SSL_CTX_free(ctx);
    return NULL;
}

/* A plain server context (no client certificates) for H2O. */
struct ssl_ctx_st *fence__tls_server_ctx(const fence_tls_opts *o, char *err,
                                         size_t cap)
{
    FENCE_ASSERT(o != NULL);
    FENCE_ASSERT(o->cert != NULL && o->key != NULL);
    fence_tls_opts plain = *o;
    plain.ca = NULL;
    plain.auth = FENCE_TLS_AUTH_NO;
    return fence__tls_ctx_new(&plain, NULL, err, cap);
}
