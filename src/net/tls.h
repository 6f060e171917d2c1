/* TLS for client connections (fenced, fence-store): one more transport
 * under the connection layer (src/net/conn.h), after Redis's src/tls.c.
 *
 * OpenSSL 3 runs over two memory BIOs per connection, so the libuv loop
 * keeps owning the socket: ciphertext read from the stream goes into the
 * read BIO, SSL_read hands plaintext to the layer (fence__net_conn_input),
 * and every SSL call's output is taken from the write BIO and queued with
 * uv_write.  The layer sees plaintext only, with the same read buffer,
 * pipeline and slow-reader bounds as a plain connection.
 *
 * A connection on the TLS listener
 *   - must finish the handshake within handshake_ms (else it is logged and
 *     closed); no request is parsed before it has;
 *   - with auth FENCE_TLS_AUTH_YES must present a certificate that chains
 *     to the --tls-ca file and is valid now (mTLS); with _OPTIONAL it may
 *     present none, but one it presents is verified the same way; with _NO
 *     none is asked for;
 *   - whose handshake fails (garbage, plaintext RESP, an unknown protocol
 *     version, no certificate, another CA's, an expired one) is logged at
 *     warn as "conn N (ADDR): TLS handshake failed: WHY" and closed; the
 *     daemon carries on.
 * The verified certificate's common name is fence__net_conn_peer_cn.
 * Nothing secret is logged: file names and OpenSSL's reason strings only.
 *
 * The option checks (fence__tls_conf_check, fence__tls_auth_parse,
 * fence__tls_cn_valid) are pure and live in tls_conf.c, which needs no
 * OpenSSL (the config fuzzers link it).  Single-threaded, like the layer. */
#ifndef FENCE_COMMON_TLS_H
#define FENCE_COMMON_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net/conn.h"

/* Whether clients must present a certificate. */
enum fence_tls_auth {
    FENCE_TLS_AUTH_NO = 0,   /* no client certificate asked for */
    FENCE_TLS_AUTH_YES,      /* a verified certificate is required (mTLS) */
    FENCE_TLS_AUTH_OPTIONAL, /* asked for; verified when one is presented */
};

/* The TLS options a daemon was given (strings NUL-terminated, "" for
 * unset; borrowed for the duration of the call). */
typedef struct fence_tls_conf {
    const char *cert;      /* --tls-cert: PEM certificate chain */
    const char *key;       /* --tls-key: PEM private key (unencrypted) */
    const char *ca;        /* --tls-ca: PEM CA bundle for client certs */
    const char *auth_word; /* --tls-auth-clients: yes, no, optional or "" */
    uint64_t port;         /* --port (0: no plain TCP listener) */
    uint64_t tls_port;     /* --tls-port (0: no TLS listener) */
    bool have_unix;        /* a --unix-socket is configured */
} fence_tls_conf;

/* Check the TLS options together with the listeners: tls-port needs
 * tls-cert and tls-key; those (and tls-ca) without tls-port are refused,
 * as is a tls-port equal to port; tls-auth-clients yes or optional needs
 * tls-ca; port 0 needs another listener.  On success *auth is the
 * effective mode ("" means yes with a tls-ca, else no).  Returns 0, or -1
 * with "NAME: message" in err[0..cap).  Pure. */
int fence__tls_conf_check(const fence_tls_conf *tc, int *auth, char *err,
                          size_t cap);

/* Parse a tls-auth-clients word ("yes", "no", "optional"; "" picks yes
 * when have_ca, else no) into *auth.  Returns 0 or -1 (unknown word). */
int fence__tls_auth_parse(const char *word, bool have_ca, int *auth);

/* The word for an enum fence_tls_auth value. */
const char *fence__tls_auth_name(int auth);

/* True if cn[0..len) may be handed out as a peer's name: 1 to
 * FENCE_TLS_CN_MAX bytes, no NUL, no control character (bytes below 0x20
 * and 0x7f); UTF-8 beyond ASCII is allowed.  Pure. */
bool fence__tls_cn_valid(const char *cn, size_t len);

/* What fence__tls_listen needs. */
typedef struct fence_tls_opts {
    const char *cert;      /* PEM certificate chain file */
    const char *key;       /* PEM private key file */
    const char *ca;        /* PEM CA file, or "" / NULL */
    int auth;              /* enum fence_tls_auth */
    uint64_t handshake_ms; /* handshake deadline per connection */
} fence_tls_opts;

/* The TLS transport (its connections come from fence__tls_listen). */
extern const fence_net_transport fence__net_tls;

/* Load the certificate, key and CA into a new OpenSSL context and listen
 * for TLS clients on bind:port through net (one TLS listener per layer).
 * The context lives until fence__net_stop, which releases it.  Returns 0,
 * or -1 with a message in err ("tls-key FILE: cannot load: reason",
 * "listen on ADDR:PORT: reason"); after a -1 the caller still stops the
 * layer as usual. */
int fence__tls_listen(fence_net *net, const fence_tls_opts *o,
                      const char *bind, unsigned port, char *err, size_t cap);

/* A server SSL_CTX for a daemon whose TLS is not on this layer (fence-proxy
 * hands it to H2O): o->cert and o->key loaded and checked as for
 * fence__tls_listen, TLS 1.2+, no client certificates (o->ca and o->auth
 * are ignored).  Returns it (free with SSL_CTX_free), or NULL with a
 * message in err. */
struct ssl_ctx_st *fence__tls_server_ctx(const fence_tls_opts *o, char *err,
                                         size_t cap);

/* Counters of a layer's TLS listener (all 0 without one). */
typedef struct fence_tls_stats {
    uint64_t handshakes;   /* handshakes finished */
    uint64_t failed;       /* handshakes that failed (bad cert, garbage) */
    uint64_t timed_out;    /* handshakes past the deadline */
    uint64_t released;     /* idle connections' record buffers freed */
} fence_tls_stats;

/* Fill *st from net's TLS listener. */
void fence__tls_stats_get(const fence_net *net, fence_tls_stats *st);

#endif /* FENCE_COMMON_TLS_H */
