/* One OpenSSL session over two memory BIOs, so the libuv loop keeps owning
 * the socket: the one "pump" under both TLS users of the tree, the client
 * transport of the connection layer (tls.c: fenced's and fence-store's
 * client ports) and the raft peers' mutual-TLS transport
 * (src/server/peer_tls.c).
 *
 *   socket --read--> fence__tls_pump_feed --> rbio --> SSL_read/handshake
 *   SSL_write/handshake --> wbio --> fence__tls_pump_send --uv_write--> socket
 *
 * The caller drives the session (SSL_do_handshake, SSL_read, SSL_write on
 * p->ssl) and calls fence__tls_pump_send after every SSL call that may
 * have produced ciphertext (handshake messages and alerts too).  Memory:
 * the BIOs grow with what the peer sends before the caller reads it and
 * with what the caller writes before the socket takes it, so each caller
 * bounds both (tls.c: the layer's read buffer and slow-reader limits;
 * peer_tls.c: FENCE_PEER_TLS_FLOW_MAX and read pausing).  Single-threaded:
 * a pump belongs to the loop thread that owns its socket. */
#ifndef FENCE_COMMON_TLS_PUMP_H
#define FENCE_COMMON_TLS_PUMP_H

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* A session and its two BIOs (all NULL before init and after free). */
typedef struct fence_tls_pump {
    SSL *ssl;  /* the session; owns both BIOs */
    BIO *rbio; /* ciphertext in: network -> SSL */
    BIO *wbio; /* ciphertext out: SSL -> network */
    uint64_t wdropped; /* bytes of wbio's output discarded unsent */
} fence_tls_pump;

/* A queued send ended: arg and tag as given to fence__tls_pump_send,
 * status 0 or a libuv error (UV_ECANCELED when the stream was closed
 * first).  Runs before the stream's close callback. */
typedef void (*fence_tls_pump_sent_fn)(void *arg, size_t tag, int status);

/* Make p's session from ctx over two new memory BIOs (empty means "retry",
 * never EOF), in the server (accept true) or client role.  0, or
 * UV_ENOMEM with nothing allocated and OpenSSL's error queue cleared. */
int fence__tls_pump_init(fence_tls_pump *p, SSL_CTX *ctx, bool accept);

/* Free the session and both BIOs; p becomes all NULL.  Harmless on an
 * all-NULL pump. */
void fence__tls_pump_free(fence_tls_pump *p);

/* Hand len bytes of ciphertext read from the socket to the session (they
 * are copied).  0, or UV_ENOMEM (nothing taken: close the connection). */
int fence__tls_pump_feed(fence_tls_pump *p, const void *buf, size_t len);

/* Bytes of ciphertext fed and not yet consumed by the session.  From the
 * BIO's byte counters (fed minus read), not BIO_ctrl_pending: the pump
 * asks after every record, both ways, and a BIO_ctrl costs about 120
 * instructions where the counters cost a load each. */
size_t fence__tls_pump_input(const fence_tls_pump *p);

/* Bytes of ciphertext the session produced, not yet sent (written minus
 * read minus discarded, as fence__tls_pump_input). */
size_t fence__tls_pump_output(const fence_tls_pump *p);

/* Drop the ciphertext not yet sent (a connection being closed). */
void fence__tls_pump_discard(fence_tls_pump *p);

/* Send the ciphertext the session produced on stream s, in order after
 * every earlier send.  With a scratch buffer (cap bytes, or NULL and 0),
 * output that fits is first offered to the kernel directly (uv_try_write,
 * which takes nothing while earlier writes are queued, so order is kept);
 * what it does not take is copied into one uv_write request.  Returns 0
 * when nothing is left in flight from this call (nothing to send, or the
 * kernel took it all): sent is not called; 1 when a write was queued:
 * sent(arg, tag, status) runs when it ends; or a negative libuv error:
 * nothing queued, sent not called, the ciphertext is lost (close the
 * connection). */
int fence__tls_pump_send(fence_tls_pump *p, uv_stream_t *s, char *scratch,
                         size_t cap, fence_tls_pump_sent_fn sent, void *arg,
                         size_t tag);

/* Empty this thread's OpenSSL error queue before an SSL call whose
 * SSL_get_error is read.  The queue is almost always empty already (every
 * failure path here clears it), and ERR_peek_error costs a tenth of
 * ERR_clear_error, which walks all of the queue's slots: on the per-record
 * path (one SSL_read and one SSL_write per request) that is most of a
 * microsecond a request. */
static inline void fence__tls_errors_clear(void)
{
    if (ERR_peek_error() != 0)
        ERR_clear_error();
}

/* OpenSSL's reason for the most recent error, or fallback, into
 * buf[0..cap); clears the thread's error queue (tls_ctx.c). */
void fence__tls_reason(char *buf, size_t cap, const char *fallback);

#endif /* FENCE_COMMON_TLS_PUMP_H */
