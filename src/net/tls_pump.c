/* One OpenSSL session over two memory BIOs (see tls_pump.h). */
#include "net/tls_pump.h"

#include <limits.h>
#include <openssl/err.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"

/* A queued send with its ciphertext behind it (one allocation). */
typedef struct pump_wreq {
    uv_write_t req;              /* libuv request */
    fence_tls_pump_sent_fn sent; /* called when it ends */
    void *arg;                   /* sent's argument */
    size_t tag;                  /* sent's tag */
    char data[];                 /* the ciphertext */
} pump_wreq;

/* Make the session (tls_pump.h). */
int fence__tls_pump_init(fence_tls_pump *p, SSL_CTX *ctx, bool accept)
{
    memset(p, 0, sizeof(*p));
    SSL *ssl = SSL_new(ctx);
    if (ssl == NULL)
        goto out_nomem;
    BIO *rbio = BIO_new(BIO_s_mem());
    if (rbio == NULL)
        goto out_free_ssl;
    BIO *wbio = BIO_new(BIO_s_mem());
    if (wbio == NULL)
        goto out_free_rbio;
    BIO_set_mem_eof_return(rbio, -1); /* empty: retry, not EOF */
    BIO_set_mem_eof_return(wbio, -1);
    SSL_set_bio(ssl, rbio, wbio); /* the SSL owns them now */
    if (accept)
        SSL_set_accept_state(ssl);
    else
        SSL_set_connect_state(ssl);
    p->ssl = ssl;
    p->rbio = rbio;
    p->wbio = wbio;
    return 0;

out_free_rbio:
    BIO_free(rbio);
out_free_ssl:
    SSL_free(ssl);
out_nomem:
    ERR_clear_error();
    return UV_ENOMEM;
}

/* Free the session (tls_pump.h). */
void fence__tls_pump_free(fence_tls_pump *p)
{
    SSL_free(p->ssl); /* frees both BIOs; NULL is a no-op */
    memset(p, 0, sizeof(*p));
}

/* Ciphertext in (tls_pump.h). */
int fence__tls_pump_feed(fence_tls_pump *p, const void *buf, size_t len)
{
    FENCE_ASSERT(p->rbio != NULL);
    FENCE_ASSERT(len <= INT_MAX);
    if (len == 0)
        return 0;
    int put = BIO_write(p->rbio, buf, (int)len);
    if (put != (int)len) {
        ERR_clear_error();
        return UV_ENOMEM;
    }
    return 0;
}

/* Ciphertext fed, not yet consumed (tls_pump.h): a memory BIO counts
 * every byte written into it and read out of it (BIO_write, BIO_read);
 * the rbio is never reset. */
size_t fence__tls_pump_input(const fence_tls_pump *p)
{
    uint64_t in = BIO_number_written(p->rbio);
    uint64_t out = BIO_number_read(p->rbio);
    FENCE_ASSERT(in >= out);
    return (size_t)(in - out);
}

/* Ciphertext produced, not yet sent (tls_pump.h). */
size_t fence__tls_pump_output(const fence_tls_pump *p)
{
    uint64_t in = BIO_number_written(p->wbio);
    uint64_t out = BIO_number_read(p->wbio) + p->wdropped;
    FENCE_ASSERT(in >= out);
    return (size_t)(in - out);
}

/* Drop the ciphertext not yet sent (tls_pump.h); BIO_reset leaves the
 * counters alone, so the pump counts what it dropped. */
void fence__tls_pump_discard(fence_tls_pump *p)
{
    p->wdropped += fence__tls_pump_output(p);
    (void)BIO_reset(p->wbio);
}

/* A queued send ended: free it, then tell its owner. */
static void wreq_cb(uv_write_t *req, int status)
{
    pump_wreq *w = (pump_wreq *)req;
    fence_tls_pump_sent_fn sent = w->sent;
    void *arg = w->arg;
    size_t tag = w->tag;
    free(w);
    sent(arg, tag, status);
}

/* Ciphertext out (tls_pump.h). */
int fence__tls_pump_send(fence_tls_pump *p, uv_stream_t *s, char *scratch,
                         size_t cap, fence_tls_pump_sent_fn sent, void *arg,
                         size_t tag)
{
    FENCE_ASSERT(sent != NULL);
    size_t n = fence__tls_pump_output(p);
    if (n == 0)
        return 0;
    FENCE_ASSERT(n <= INT_MAX);
    const char *src = NULL; /* ciphertext already read out, still to queue */
    if (scratch != NULL && n <= cap) {
        int got = BIO_read(p->wbio, scratch, (int)n);
        FENCE_ASSERT(got == (int)n);
        uv_buf_t b = uv_buf_init(scratch, (unsigned)n);
        int k = uv_try_write(s, &b, 1);
        if (k == (int)n)
            return 0;
        size_t done = k > 0 ? (size_t)k : 0;
        src = scratch + done;
        n -= done;
    }
    pump_wreq *w = malloc(sizeof(*w) + n);
    if (w == NULL)
        return UV_ENOMEM;
    if (src != NULL) {
        memcpy(w->data, src, n);
    } else {
        int got = BIO_read(p->wbio, w->data, (int)n);
        FENCE_ASSERT(got == (int)n);
    }
    w->sent = sent;
    w->arg = arg;
    w->tag = tag;
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    int rc = uv_write(&w->req, s, &b, 1, wreq_cb);
    if (rc != 0) {
        free(w);
        return rc;
    }
    return 1;
}
