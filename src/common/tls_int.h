/* Private to src/common/tls*.c: the OpenSSL context builder shared by the
 * client-TLS transport (tls.c) and fence__tls_server_ctx (tls_ctx.c). */
#ifndef FENCE_COMMON_TLS_INT_H
#define FENCE_COMMON_TLS_INT_H

#include <openssl/ssl.h>
#include <stddef.h>

#include "common/tls.h"

/* A server SSL_CTX: TLS 1.2+, no renegotiation or compression, released
 * buffers, no passphrase prompt; o->cert's chain and o->key loaded and
 * checked against each other (an expired certificate is warned about);
 * with o->ca, the CA loaded and advertised, and the verify mode from
 * o->auth with callback verify (may be NULL).  NULL with "tls-cert FILE:
 * ..." (or tls-key, tls-ca) in err on any problem. */
SSL_CTX *fence__tls_ctx_new(const fence_tls_opts *o,
                            int (*verify)(int, X509_STORE_CTX *), char *err,
                            size_t cap);

/* OpenSSL's reason for the most recent error, or fallback, into
 * buf[0..cap); clears the thread's error queue. */
void fence__tls_reason(char *buf, size_t cap, const char *fallback);

#endif /* FENCE_COMMON_TLS_INT_H */
