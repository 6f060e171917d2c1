/* Private to src/net/tls*.c: the OpenSSL context builder shared by the
 * client-TLS transport (tls.c) and fence__tls_server_ctx (tls_ctx.c).
 * Code outside src/net uses tls.h and tls_pump.h (the memory-BIO
 * session and fence__tls_reason), never this header. */
#ifndef FENCE_COMMON_TLS_INT_H
#define FENCE_COMMON_TLS_INT_H

#include <openssl/ssl.h>
#include <stddef.h>

#include "net/tls.h"
#include "net/tls_pump.h"

/* A server SSL_CTX: TLS 1.2+, no renegotiation or compression, released
 * buffers, no passphrase prompt; o->cert's chain and o->key loaded and
 * checked against each other (an expired certificate is warned about);
 * with o->ca, the CA loaded and advertised, and the verify mode from
 * o->auth with callback verify (may be NULL).  NULL with "tls-cert FILE:
 * ..." (or tls-key, tls-ca) in err on any problem. */
SSL_CTX *fence__tls_ctx_new(const fence_tls_opts *o,
                            int (*verify)(int, X509_STORE_CTX *), char *err,
                            size_t cap);

#endif /* FENCE_COMMON_TLS_INT_H */
