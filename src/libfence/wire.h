/* libfence's connection layer: one blocking connection to a server, plain
 * TCP, a Unix socket, or TLS (OpenSSL) over TCP, with AUTH sent once when
 * the connection is made.  Commands are encoded with hiredis's
 * redisFormatCommandArgv and replies parsed with its redisReader, so the
 * rest of the library keeps hiredis's redisReply; only redisContext (whose
 * I/O has no TLS in hiredis 0.14) is replaced.  Private; see docs/client.md
 * "TLS and AUTH". */
#ifndef FENCE_CLIENT_WIRE_H
#define FENCE_CLIENT_WIRE_H

#include <hiredis/hiredis.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stdint.h>

#include "libfence/pure.h"

/* What every connection of a client needs besides the address.  The
 * strings are owned by whoever made the struct and outlive every wire. */
typedef struct fence__wire_cfg {
    SSL_CTX *tls;             /* NULL: plaintext */
    const char *server_name;  /* TLS: name to verify (NULL: the address's
                               * host; "" : verify the chain only) */
    const char *user;         /* AUTH user, or NULL for "AUTH password" */
    const char *password;     /* NULL: no AUTH */
} fence__wire_cfg;

typedef struct fence__wire fence__wire;

/* A wire config that owns its strings: copies of the TLS file names, the
 * server name and the login, and the TLS context made from the files.
 * cfg points at them.  Shared by fence_client and fence_store. */
typedef struct fence__wire_owned {
    fence__wire_cfg cfg;  /* what fence__wire_open takes */
    char *ca_file;        /* copies, or NULL */
    char *cert_file;
    char *key_file;
    char *server_name;
    char *user;
    char *password;       /* wiped on fence__wire_owned_free */
} fence__wire_owned;

/* Fill o (zeroed by the caller) from the options: copy the strings, refuse
 * a user without a password and TLS files without tls, and with tls make
 * the TLS context.  0, FENCE_ENOMEM or FENCE_EINVAL (fence__fail called);
 * on error o still holds what was copied: free it. */
int fence__wire_owned_init(fence__wire_owned *o, bool tls, const char *ca_file,
                           const char *cert_file, const char *key_file,
                           const char *server_name, const char *user,
                           const char *password);

/* Free what fence__wire_owned_init made, wiping the password first. */
void fence__wire_owned_free(fence__wire_owned *o);

/* Build the TLS context from the option files (any may be NULL: ca NULL
 * uses the system's trusted CAs; cert and key go together).  NULL on
 * error with the detail in err. */
SSL_CTX *fence__wire_tls_ctx(const char *ca, const char *cert, const char *key,
                             char *err, size_t cap);

/* Connect to a within timeout_ms: TCP (or Unix), TLS handshake and
 * certificate check, then AUTH.  On 0, *out is the connection.  Errors:
 * FENCE_EUNREACHABLE (connect or TLS failed: *refused tells whether the
 * server refused the TCP connection), FENCE_EAUTH (the server refused the
 * login), FENCE_ENOMEM; the detail is in err. */
int fence__wire_open(const fence__addr *a, const fence__wire_cfg *cfg,
                     uint64_t timeout_ms, fence__wire **out, bool *refused,
                     char *err, size_t cap);

/* Send one command and read its reply within timeout_ms.  NULL on failure:
 * *timed_out tells a timeout from a lost connection, the text is in
 * fence__wire_errstr; the connection is then broken (close it).  Blocks
 * SIGPIPE in the calling thread while writing. */
redisReply *fence__wire_command(fence__wire *w, uint64_t timeout_ms, int argc,
                                const char **argv, const size_t *lens,
                                bool *timed_out);

/* Whether the connection failed (it must be closed, not reused). */
bool fence__wire_broken(const fence__wire *w);

/* The last failure's text ("" if none); valid until the next call on w. */
const char *fence__wire_errstr(const fence__wire *w);

/* Close and free; NULL is a no-op. */
void fence__wire_close(fence__wire *w);

#endif /* FENCE_CLIENT_WIRE_H */
