/* The TLS transport for client connections (see tls.h).
 *
 * Per connection: an SSL object over a read BIO (ciphertext from the
 * socket) and a write BIO (ciphertext for the socket), both memory BIOs
 * (the pump, tls_pump.h, which the raft peers' TLS shares).
 * Socket reading is on while the handshake runs, and afterwards while the
 * layer wants input; when the layer pauses (pipeline full), plaintext that
 * OpenSSL already holds stays there, and a later read_start delivers it
 * from an idle callback (never from inside the layer's own call).
 *
 * Per listener (struct fence_tls): the SSL_CTX, one timer for the
 * handshake deadlines (the connections in handshake are a list in accept
 * order, so deadlines are in order too), one idle handle for the deferred
 * deliveries, and a scratch buffer every socket read lands in (OpenSSL
 * copies it into the read BIO at once).
 *
 * Record buffers: a connection keeps OpenSSL's two record buffers (about
 * 17 KB each) while it is busy, not SSL_MODE_RELEASE_BUFFERS's malloc and
 * free of both for every record.  Established connections that hold them
 * are a list in the order of their last record (a record moves its
 * connection to the tail), and a sweep timer frees the buffers of those
 * idle for FENCE_TLS_IDLE_RELEASE_MS (SSL_free_buffers; OpenSSL allocates
 * them again for the next record), so an idle connection costs what it
 * did with RELEASE_BUFFERS. */
#include "net/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"
#include "net/tls_int.h"
#include "net/tls_pump.h"

typedef struct tls_conn tls_conn;

/* A TLS listener's context. */
typedef struct fence_tls {
    SSL_CTX *ctx;            /* certificate, key, CA, verify mode */
    fence_net *net;          /* the layer it serves */
    int auth;                /* enum fence_tls_auth */
    uint64_t handshake_ms;   /* deadline after accept */
    uv_timer_t timer;        /* fires at the oldest handshake's deadline */
    uv_idle_t idle;          /* runs deferred deliveries */
    uv_timer_t sweep;        /* frees idle connections' record buffers */
    int open_handles;        /* timer, idle and sweep not yet closed */
    tls_conn *act_head;      /* holding buffers, least recently active first */
    tls_conn *act_tail;      /* most recently active */
    tls_conn *hs_head;       /* connections in handshake, oldest first */
    tls_conn *hs_tail;       /* newest of them */
    tls_conn *drain;         /* connections with plaintext to deliver */
    fence_tls_stats stats;   /* counters */
    char rbuf[FENCE_TLS_READ_CHUNK]; /* socket reads land here */
    char wbuf[FENCE_TLS_READ_CHUNK]; /* ciphertext on its way to uv_try_write */
} fence_tls;

/* One TLS connection's state (fence_net_conn.tr_data). */
struct tls_conn {
    fence_net_conn *c;       /* the layer's connection */
    fence_tls *t;            /* the listener (valid while c is open) */
    fence_tls_pump pump;     /* OpenSSL's connection over its two BIOs */
    bool want_input;         /* the layer asked for input (read_start) */
    bool sock_reading;       /* uv_read_start is on */
    bool established;        /* handshake finished */
    bool in_pump;            /* inside pump (no re-entry) */
    bool on_drain;           /* on t->drain */
    bool on_hs;              /* on the handshake list */
    tls_conn *hs_prev;       /* handshake list */
    tls_conn *hs_next;       /* handshake list */
    tls_conn *drain_next;    /* t->drain list */
    bool on_act;             /* on t's activity list */
    tls_conn *act_prev;      /* activity list */
    tls_conn *act_next;      /* activity list */
    uint64_t last_active;    /* uv_now of its last record either way */
    uint64_t deadline;       /* uv_now at which the handshake times out */
    char *pend;              /* plaintext written before the handshake ended */
    size_t pend_len;         /* bytes in pend */
    char peer[64];           /* "ADDR:PORT" for logs */
    bool have_cn;            /* cn holds the verified certificate's CN */
    char cn[FENCE_TLS_CN_MAX + 1]; /* NUL-terminated */
    long verify_err;         /* first certificate error seen, 0 none */
    int verify_depth;        /* its depth in the chain */
    char verify_subject[160]; /* its certificate's subject (printable) */
};

static void pump(tls_conn *tc);

/* ---- helpers ---------------------------------------------------------- */

/* Replace every byte outside printable ASCII with '?' (names from a
 * certificate go into logs). */
static void printable(char *s)
{
    for (; *s != '\0'; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
}

/* Unlink tc from the handshake list. */
static void hs_remove(tls_conn *tc)
{
    if (!tc->on_hs)
        return;
    fence_tls *t = tc->t;
    if (tc->hs_prev != NULL)
        tc->hs_prev->hs_next = tc->hs_next;
    else
        t->hs_head = tc->hs_next;
    if (tc->hs_next != NULL)
        tc->hs_next->hs_prev = tc->hs_prev;
    else
        t->hs_tail = tc->hs_prev;
    tc->hs_prev = tc->hs_next = NULL;
    tc->on_hs = false;
    if (t->hs_head == NULL)
        uv_timer_stop(&t->timer);
}

/* Unlink tc from the deferred-delivery list. */
static void drain_remove(tls_conn *tc)
{
    if (!tc->on_drain)
        return;
    tls_conn **pp = &tc->t->drain;
    while (*pp != tc)
        pp = &(*pp)->drain_next;
    *pp = tc->drain_next;
    tc->drain_next = NULL;
    tc->on_drain = false;
}

/* Unlink tc from the activity list. */
static void act_remove(tls_conn *tc)
{
    if (!tc->on_act)
        return;
    fence_tls *t = tc->t;
    if (tc->act_prev != NULL)
        tc->act_prev->act_next = tc->act_next;
    else
        t->act_head = tc->act_next;
    if (tc->act_next != NULL)
        tc->act_next->act_prev = tc->act_prev;
    else
        t->act_tail = tc->act_prev;
    tc->act_prev = tc->act_next = NULL;
    tc->on_act = false;
}

static void on_sweep(uv_timer_t *h);

/* tc (established) had a record either way: it is the most recently
 * active connection now, and holds its buffers until it has been idle. */
static void act_touch(tls_conn *tc)
{
    fence_tls *t = tc->t;
    if (tc->c->closing)
        return; /* tls_close took it off the list; it stays off */
    tc->last_active = uv_now(tc->c->net->loop);
    if (t->act_tail == tc)
        return;
    act_remove(tc);
    tc->act_prev = t->act_tail;
    if (t->act_tail != NULL)
        t->act_tail->act_next = tc;
    else
        t->act_head = tc;
    t->act_tail = tc;
    tc->on_act = true;
    if (!uv_is_active((uv_handle_t *)&t->sweep))
        uv_timer_start(&t->sweep, on_sweep, FENCE_TLS_IDLE_RELEASE_MS,
                       FENCE_TLS_IDLE_RELEASE_MS);
}

/* The sweep: free the record buffers of every connection idle for
 * FENCE_TLS_IDLE_RELEASE_MS (oldest first, so it stops at the first one
 * that is not).  SSL_free_buffers refuses while a buffer holds a record
 * or part of one; such a connection is asked again at its next record. */
static void on_sweep(uv_timer_t *h)
{
    fence_tls *t = h->data;
    uint64_t now = uv_now(h->loop);
    while (t->act_head != NULL &&
           now - t->act_head->last_active >= FENCE_TLS_IDLE_RELEASE_MS) {
        tls_conn *tc = t->act_head;
        act_remove(tc);
        if (tc->c->closing || SSL_has_pending(tc->pump.ssl) ||
            fence__tls_pump_output(&tc->pump) != 0)
            continue;
        if (SSL_free_buffers(tc->pump.ssl) == 1) {
            t->stats.released++;
            FENCE_LOG_D("conn %" PRIu64 " (%s): TLS idle, record buffers "
                        "freed", tc->c->id, tc->peer);
        }
    }
    if (t->act_head == NULL)
        uv_timer_stop(&t->sweep);
}

/* ---- output ----------------------------------------------------------- */

/* A ciphertext write finished (fence_tls_pump_sent_fn; arg is the
 * connection, valid until its close callback, and tag the plaintext bytes
 * of the layer's it carried): report them. */
static void wreq_sent(void *arg, size_t plain, int status)
{
    fence_net_conn *c = arg;
    if (plain > 0 || status != 0)
        fence__net_conn_written(c, plain, status);
}

/* Send whatever OpenSSL wrote to the write BIO; plain is the layer's
 * plaintext it carries (reported when the write ends).  As the plain
 * streams do (conn.c stream_write): straight to the kernel first
 * (uv_try_write, which refuses while earlier bytes are queued, so order is
 * kept), then queue what it did not take; ciphertext the kernel takes
 * whole, the usual case, costs one write(2) and no request.  Returns 0 or
 * a libuv error (nothing will be reported then). */
static int flush_wbio(tls_conn *tc, size_t plain)
{
    if (fence__tls_pump_output(&tc->pump) == 0) {
        FENCE_ASSERT(plain == 0);
        return 0;
    }
    if (tc->c->closing) {
        fence__tls_pump_discard(&tc->pump);
        return UV_ECANCELED;
    }
    int rc = fence__tls_pump_send(&tc->pump, &tc->c->h.stream, tc->t->wbuf,
                                  sizeof(tc->t->wbuf), wreq_sent, tc->c, plain);
    if (rc == 0 && plain > 0) /* the kernel took it all */
        fence__net_conn_written(tc->c, plain, 0);
    return rc < 0 ? rc : 0;
}

/* Encrypt buf[0..len) and queue it. */
static int encrypt_out(tls_conn *tc, const char *buf, size_t len)
{
    FENCE_ASSERT(len > 0);
    for (size_t off = 0; off < len;) {
        size_t part = len - off > (1u << 30) ? (1u << 30) : len - off;
        fence__tls_errors_clear();
        int n = SSL_write(tc->pump.ssl, buf + off, (int)part);
        if (n <= 0 || (size_t)n != part) {
            char why[128];
            fence__tls_reason(why, sizeof(why), "encryption failed");
            FENCE_LOG_D("conn %" PRIu64 " (%s): TLS write: %s", tc->c->id,
                        tc->peer, why);
            fence__tls_pump_discard(&tc->pump);
            return UV_EPROTO;
        }
        off += part;
    }
    return flush_wbio(tc, len);
}

/* ---- input ------------------------------------------------------------ */

/* Socket reading on or off as the state wants: during the handshake
 * always, afterwards while the layer wants input. */
static void sock_update(tls_conn *tc);

/* libuv wants room for ciphertext: the listener's scratch buffer. */
static void sock_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    fence_net_conn *c = h->data;
    tls_conn *tc = c->tr_data;
    (void)hint;
    *buf = uv_buf_init(tc->t->rbuf, sizeof(tc->t->rbuf));
}

/* The verify callback: remember the first certificate error, with its
 * depth and subject, for the log line. */
static int verify_cb(int ok, X509_STORE_CTX *xs)
{
    if (ok)
        return ok;
    SSL *ssl = X509_STORE_CTX_get_ex_data(xs,
                                          SSL_get_ex_data_X509_STORE_CTX_idx());
    tls_conn *tc = ssl != NULL ? SSL_get_app_data(ssl) : NULL;
    if (tc != NULL && tc->verify_err == 0) {
        tc->verify_err = X509_STORE_CTX_get_error(xs);
        tc->verify_depth = X509_STORE_CTX_get_error_depth(xs);
        X509 *cert = X509_STORE_CTX_get_current_cert(xs);
        tc->verify_subject[0] = '\0';
        if (cert != NULL)
            X509_NAME_oneline(X509_get_subject_name(cert), tc->verify_subject,
                              (int)sizeof(tc->verify_subject));
        printable(tc->verify_subject);
    }
    return ok;
}

/* The handshake failed: log why, send OpenSSL's alert, close. */
static void handshake_failed(tls_conn *tc, const char *fallback)
{
    char why[256];
    if (tc->verify_err != 0) {
        snprintf(why, sizeof(why), "client certificate refused: %s "
                 "(depth %d, subject %s)",
                 X509_verify_cert_error_string(tc->verify_err),
                 tc->verify_depth,
                 tc->verify_subject[0] ? tc->verify_subject : "?");
        ERR_clear_error();
    } else {
        fence__tls_reason(why, sizeof(why), fallback);
    }
    tc->t->stats.failed++;
    FENCE_LOG_W("conn %" PRIu64 " (%s): TLS handshake failed: %s; closing",
                tc->c->id, tc->peer, why);
    (void)flush_wbio(tc, 0); /* the alert, best effort */
    fence__net_conn_close(tc->c);
}

/* The handshake finished: take the verified name, send what was written
 * meanwhile.  false if the connection was closed. */
static bool handshake_done(tls_conn *tc)
{
    fence_net_conn *c = tc->c;
    hs_remove(tc);
    tc->established = true;
    tc->t->stats.handshakes++;
    X509 *peer = SSL_get0_peer_certificate(tc->pump.ssl);
    if (peer != NULL && SSL_get_verify_result(tc->pump.ssl) == X509_V_OK &&
        tc->t->auth != FENCE_TLS_AUTH_NO) {
        X509_NAME *name = X509_get_subject_name(peer);
        int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
        if (i >= 0 && X509_NAME_get_index_by_NID(name, NID_commonName, i) >= 0) {
            tc->t->stats.failed++;
            FENCE_LOG_W("conn %" PRIu64 " (%s): TLS client certificate has "
                        "more than one CN; closing", c->id, tc->peer);
            fence__net_conn_close(c);
            return false;
        }
        if (i >= 0) {
            ASN1_STRING *d = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i));
            unsigned char *u = NULL;
            int n = ASN1_STRING_to_UTF8(&u, d);
            bool ok = n > 0 && fence__tls_cn_valid((const char *)u, (size_t)n);
            if (ok) {
                memcpy(tc->cn, u, (size_t)n);
                tc->cn[n] = '\0';
                tc->have_cn = true;
            }
            OPENSSL_free(u);
            if (!ok) {
                tc->t->stats.failed++;
                FENCE_LOG_W("conn %" PRIu64 " (%s): TLS client certificate "
                            "CN is empty, too long or has control "
                            "characters; closing", c->id, tc->peer);
                fence__net_conn_close(c);
                return false;
            }
        }
    }
    char cn_log[FENCE_TLS_CN_MAX + 1];
    snprintf(cn_log, sizeof(cn_log), "%s", tc->have_cn ? tc->cn : "-");
    printable(cn_log);
    FENCE_LOG_D("conn %" PRIu64 " (%s): TLS %s %s, client CN %s", c->id,
                tc->peer, SSL_get_version(tc->pump.ssl), SSL_get_cipher_name(tc->pump.ssl),
                cn_log);
    if (tc->pend_len > 0) {
        char *p = tc->pend;
        size_t n = tc->pend_len;
        tc->pend = NULL;
        tc->pend_len = 0;
        int rc = encrypt_out(tc, p, n);
        free(p);
        if (rc != 0) {
            fence__net_conn_close(c);
            return false;
        }
    }
    sock_update(tc);
    return true;
}

/* Drive the handshake with what the read BIO holds.  false if the
 * connection was closed or the handshake needs more bytes. */
static bool advance_handshake(tls_conn *tc)
{
    ERR_clear_error();
    int r = SSL_do_handshake(tc->pump.ssl);
    if (r == 1) {
        if (flush_wbio(tc, 0) != 0) {
            fence__net_conn_close(tc->c);
            return false;
        }
        return handshake_done(tc);
    }
    int e = SSL_get_error(tc->pump.ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        if (flush_wbio(tc, 0) != 0)
            fence__net_conn_close(tc->c);
        return false;
    }
    handshake_failed(tc, e == SSL_ERROR_SYSCALL ? "unexpected end of the "
                     "handshake" : "protocol error");
    return false;
}

/* Hand decrypted input to the layer while it wants it. */
static void pump(tls_conn *tc)
{
    fence_net_conn *c = tc->c;
    if (tc->in_pump)
        return;
    tc->in_pump = true;
    while (tc->want_input && !c->closing) {
        char *p;
        size_t room;
        fence__net_conn_rbuf(c, &p, &room);
        if (room == 0) {
            fence__net_conn_eof(c, UV_ENOBUFS); /* a request too large */
            break;
        }
        if (room > INT32_MAX)
            room = INT32_MAX;
        fence__tls_errors_clear();
        int n = SSL_read(tc->pump.ssl, p, (int)room);
        if (n > 0) {
            fence__net_conn_input(c, (size_t)n);
            /* Nothing left in the session (no plaintext, no read-ahead
             * ciphertext) nor in the read BIO: another SSL_read could only
             * say WANT_READ, at the cost of a record-layer pass and the
             * error-queue calls around it.  The next socket read resumes. */
            if (!SSL_has_pending(tc->pump.ssl) &&
                fence__tls_pump_input(&tc->pump) == 0)
                break;
            continue;
        }
        int e = SSL_get_error(tc->pump.ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            break;
        if (e == SSL_ERROR_ZERO_RETURN) { /* close_notify */
            ERR_clear_error();
            fence__net_conn_eof(c, UV_EOF);
            break;
        }
        char why[128];
        fence__tls_reason(why, sizeof(why), "connection error");
        FENCE_LOG_I("conn %" PRIu64 " (%s): TLS error: %s; closing", c->id,
                    tc->peer, why);
        fence__net_conn_close(c);
        break;
    }
    tc->in_pump = false;
    /* SSL_read may have produced output (a key update, a ticket). */
    if (!c->closing && flush_wbio(tc, 0) != 0)
        fence__net_conn_close(c);
}

/* Ciphertext arrived, or EOF, or an error. */
static void sock_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    fence_net_conn *c = st->data;
    tls_conn *tc = c->tr_data;
    if (nread == 0 || c->closing)
        return;
    if (nread < 0) {
        if (!tc->established) {
            tc->t->stats.failed++;
            FENCE_LOG_I("conn %" PRIu64 " (%s): TLS handshake failed: the "
                        "client hung up (%s); closing", c->id, tc->peer,
                        uv_strerror((int)nread));
            fence__net_conn_close(c);
            return;
        }
        fence__net_conn_eof(c, (int)nread);
        return;
    }
    if (fence__tls_pump_feed(&tc->pump, buf->base, (size_t)nread) != 0) {
        FENCE_LOG_E("conn %" PRIu64 ": out of memory for TLS input; closing",
                    c->id);
        fence__net_conn_close(c);
        return;
    }
    if (!tc->established && !advance_handshake(tc))
        return;
    act_touch(tc);
    pump(tc);
}

/* See the declaration above. */
static void sock_update(tls_conn *tc)
{
    bool want = !tc->c->closing && (!tc->established || tc->want_input);
    if (want && !tc->sock_reading) {
        if (uv_read_start(&tc->c->h.stream, sock_alloc_cb, sock_read_cb) == 0)
            tc->sock_reading = true;
    } else if (!want && tc->sock_reading) {
        uv_read_stop(&tc->c->h.stream);
        tc->sock_reading = false;
    }
}

/* Deferred deliveries: plaintext OpenSSL held while the layer paused. */
static void on_idle(uv_idle_t *h)
{
    fence_tls *t = h->data;
    tls_conn *list = t->drain;
    t->drain = NULL;
    while (list != NULL) {
        tls_conn *tc = list;
        list = tc->drain_next;
        tc->drain_next = NULL;
        tc->on_drain = false;
        if (tc->want_input && !tc->c->closing)
            pump(tc);
    }
    if (t->drain == NULL)
        uv_idle_stop(&t->idle);
}

/* Handshake deadlines: close every connection past its own. */
static void on_timer(uv_timer_t *h)
{
    fence_tls *t = h->data;
    uint64_t now = uv_now(h->loop);
    while (t->hs_head != NULL && t->hs_head->deadline <= now) {
        tls_conn *tc = t->hs_head;
        hs_remove(tc);
        t->stats.timed_out++;
        FENCE_LOG_W("conn %" PRIu64 " (%s): TLS handshake not finished "
                    "within %" PRIu64 " ms; closing", tc->c->id, tc->peer,
                    t->handshake_ms);
        fence__net_conn_close(tc->c);
    }
    if (t->hs_head != NULL)
        uv_timer_start(&t->timer, on_timer, t->hs_head->deadline - now, 0);
}

/* ---- the transport ------------------------------------------------------ */

/* The layer wants input: read the socket, and deliver what OpenSSL
 * already holds from the idle callback. */
static int tls_read_start(fence_net_conn *c)
{
    tls_conn *tc = c->tr_data;
    if (tc == NULL || c->closing)
        return UV_EINVAL;
    tc->want_input = true;
    sock_update(tc);
    if (tc->established && !tc->on_drain &&
        (SSL_has_pending(tc->pump.ssl) || fence__tls_pump_input(&tc->pump) > 0)) {
        tc->on_drain = true;
        tc->drain_next = tc->t->drain;
        tc->t->drain = tc;
        uv_idle_start(&tc->t->idle, on_idle);
    }
    return 0;
}

/* The layer wants no input for now. */
static int tls_read_stop(fence_net_conn *c)
{
    tls_conn *tc = c->tr_data;
    if (tc == NULL)
        return 0;
    tc->want_input = false;
    drain_remove(tc);
    sock_update(tc);
    return 0;
}

/* Encrypt and queue the layer's bytes (held until the handshake ends). */
static int tls_write(fence_net_conn *c, char *buf, size_t len)
{
    tls_conn *tc = c->tr_data;
    if (tc == NULL || len == 0) {
        free(buf);
        return tc == NULL ? UV_EINVAL : 0;
    }
    if (!tc->established) {
        char *p = realloc(tc->pend, tc->pend_len + len);
        if (p == NULL) {
            free(buf);
            return UV_ENOMEM;
        }
        memcpy(p + tc->pend_len, buf, len);
        tc->pend = p;
        tc->pend_len += len;
        free(buf);
        return 0;
    }
    act_touch(tc);
    int rc = encrypt_out(tc, buf, len);
    free(buf);
    return rc;
}

/* A shutdown request finished. */
static void shutdown_cb(uv_shutdown_t *req, int status)
{
    (void)status;
    free(req);
}

/* Send close_notify, then half-close the socket. */
static int tls_shutdown(fence_net_conn *c)
{
    tls_conn *tc = c->tr_data;
    if (tc != NULL && tc->established) {
        ERR_clear_error();
        (void)SSL_shutdown(tc->pump.ssl);
        ERR_clear_error();
        int rc = flush_wbio(tc, 0);
        if (rc != 0)
            return rc;
    }
    uv_shutdown_t *req = malloc(sizeof(*req));
    if (req == NULL)
        return UV_ENOMEM;
    int rc = uv_shutdown(req, &c->h.stream, shutdown_cb);
    if (rc != 0)
        free(req);
    return rc;
}

/* Bytes not yet taken by the kernel, plus those held for the handshake. */
static size_t tls_queued(fence_net_conn *c)
{
    tls_conn *tc = c->tr_data;
    size_t n = uv_stream_get_write_queue_size(&c->h.stream);
    return tc != NULL ? n + tc->pend_len : n;
}

/* The stream is closed: free the TLS state, then the connection. */
static void tls_closed(uv_handle_t *h)
{
    fence_net_conn *c = h->data;
    tls_conn *tc = c->tr_data;
    if (tc != NULL) {
        /* Off every list before it is freed, whatever ran since tls_close
         * (a reply written while the stream closed once put a freed
         * connection back on the activity list: ASan, fence-store's stop). */
        hs_remove(tc);
        drain_remove(tc);
        act_remove(tc);
        fence__tls_pump_free(&tc->pump);
        free(tc->pend);
        free(tc);
        c->tr_data = NULL;
    }
    fence__net_conn_closed(h);
}

/* Leave the listener's lists and close the stream. */
static void tls_close(fence_net_conn *c)
{
    tls_conn *tc = c->tr_data;
    if (tc != NULL) {
        hs_remove(tc);
        drain_remove(tc);
        act_remove(tc);
        tc->want_input = false;
        if (tc->sock_reading) {
            uv_read_stop(&c->h.stream);
            tc->sock_reading = false;
        }
    }
    uv_close(&c->h.handle, tls_closed);
}

/* A connection was accepted on the TLS listener: its SSL object, the
 * handshake deadline, socket reading. */
static int tls_open(fence_net_conn *c)
{
    fence_tls *t = c->net->tr_ctx;
    FENCE_ASSERT(t != NULL);
    tls_conn *tc = calloc(1, sizeof(*tc));
    if (tc == NULL)
        goto out_nomem;
    tc->c = c;
    tc->t = t;
    if (fence__tls_pump_init(&tc->pump, t->ctx, true) != 0)
        goto out_free_tc;
    SSL_set_app_data(tc->pump.ssl, tc);

    struct sockaddr_storage ss;
    int len = sizeof(ss);
    char ip[48] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        } else {
            uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        }
    }
    snprintf(tc->peer, sizeof(tc->peer), "%s:%d", ip, port);
    c->tr_data = tc;

    tc->deadline = uv_now(c->net->loop) + t->handshake_ms;
    tc->on_hs = true;
    tc->hs_prev = t->hs_tail;
    if (t->hs_tail != NULL)
        t->hs_tail->hs_next = tc;
    else
        t->hs_head = tc;
    t->hs_tail = tc;
    if (!uv_is_active((uv_handle_t *)&t->timer))
        uv_timer_start(&t->timer, on_timer, t->handshake_ms, 0);
    sock_update(tc);
    return 0;

out_free_tc:
    free(tc);
out_nomem:
    FENCE_LOG_E("conn %" PRIu64 ": out of memory for TLS; closing", c->id);
    ERR_clear_error();
    return UV_ENOMEM;
}

/* The verified certificate's CN. */
static const char *tls_peer_cn(const fence_net_conn *c)
{
    const tls_conn *tc = c->tr_data;
    return tc != NULL && tc->established && tc->have_cn ? tc->cn : NULL;
}

const fence_net_transport fence__net_tls = {
    "tls", tls_read_start, tls_read_stop, tls_write,
    tls_shutdown, tls_queued, tls_close, tls_open, tls_peer_cn,
};

/* ---- the listener ------------------------------------------------------- */

/* Every one of the context's handles is closed: free it. */
static void ctx_handle_closed(uv_handle_t *h)
{
    fence_tls *t = h->data;
    FENCE_ASSERT(t->open_handles > 0);
    if (--t->open_handles == 0) {
        SSL_CTX_free(t->ctx);
        free(t);
    }
}

/* The layer stops (fence__net_stop, after every connection is closed):
 * close the context's handles; the last close frees it. */
static void tls_ctx_stop(void *ctx)
{
    fence_tls *t = ctx;
    uv_close((uv_handle_t *)&t->timer, ctx_handle_closed);
    uv_close((uv_handle_t *)&t->idle, ctx_handle_closed);
    uv_close((uv_handle_t *)&t->sweep, ctx_handle_closed);
}

/* Context and listener. */
int fence__tls_listen(fence_net *net, const fence_tls_opts *o,
                      const char *bind, unsigned port, char *err, size_t cap)
{
    FENCE_ASSERT(net != NULL);
    FENCE_ASSERT(o != NULL);
    FENCE_ASSERT(o->cert != NULL && o->key != NULL);
    FENCE_ASSERT(o->handshake_ms > 0);
    if (o->auth != FENCE_TLS_AUTH_NO && (o->ca == NULL || o->ca[0] == '\0')) {
        snprintf(err, cap, "tls-auth-clients %s needs tls-ca",
                 fence__tls_auth_name(o->auth));
        return -1;
    }
    fence_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        snprintf(err, cap, "TLS: out of memory");
        return -1;
    }
    t->ctx = fence__tls_ctx_new(o, verify_cb, err, cap);
    if (t->ctx == NULL) {
        free(t);
        return -1;
    }
    /* Read-ahead: one BIO_read takes every record the read BIO holds (up
     * to OpenSSL's buffer) instead of a 5-byte header and then its body;
     * what it read beyond a record is SSL_has_pending, which tls_read_start
     * and pump check (SSL_pending would miss it). */
    SSL_CTX_set_read_ahead(t->ctx, 1);
    /* Keep a busy connection's record buffers (about 17 KB in, 17 KB
     * out) instead of freeing them after every record and allocating them
     * again for the next one (two 17 KB malloc/free pairs a request); the
     * sweep frees an idle connection's (on_sweep). */
    SSL_CTX_clear_mode(t->ctx, SSL_MODE_RELEASE_BUFFERS);
    t->net = net;
    t->auth = o->auth;
    t->handshake_ms = o->handshake_ms;
    uv_timer_init(net->loop, &t->timer);
    uv_idle_init(net->loop, &t->idle);
    uv_timer_init(net->loop, &t->sweep);
    t->timer.data = t->idle.data = t->sweep.data = t;
    t->open_handles = 3;
    /* From here the layer owns t: fence__net_stop releases it. */
    return fence__net_listen_tcp_tr(net, bind, port, &fence__net_tls, t,
                                    tls_ctx_stop, err, cap);
}

/* The listener's counters. */
void fence__tls_stats_get(const fence_net *net, fence_tls_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (net->tr_tcp_tr == &fence__net_tls && net->tr_ctx != NULL)
        *st = ((const fence_tls *)net->tr_ctx)->stats;
}
