/* src/net/tls_pump.c: two pumps, a server and a client, over a
 * socketpair driven by a libuv loop: the handshake, a message each way,
 * both send paths (queued write with the sent callback and its tag;
 * uv_try_write through a scratch buffer), discard, and free.  The
 * certificate is made here, in memory (a throwaway P-256 key). */
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <uv.h>

#include "net/tls_pump.h"
#include "../lib/test.h"

/* One side of the exchange. */
typedef struct side {
    fence_tls_pump pump; /* the session */
    uv_pipe_t pipe;      /* its end of the socketpair */
    char *scratch;       /* NULL: always queue (the client); else try first */
    size_t cap;          /* bytes at scratch */
    bool done;           /* handshake finished */
    char got[64];        /* plaintext received */
    size_t got_len;      /* bytes in got */
    int sends_queued;    /* fence__tls_pump_send returned 1 */
    int sends_direct;    /* ... returned 0 with output pending */
    int sent_cbs;        /* sent callbacks, status 0 */
    size_t last_tag;     /* the tag of the last callback */
} side;

static side srv, cli;
static char scratch[64 * 1024];
static int errors;

/* A queued send ended. */
static void on_sent(void *arg, size_t tag, int status)
{
    side *s = arg;
    if (status != 0) {
        errors++;
        return;
    }
    s->sent_cbs++;
    s->last_tag = tag;
}

/* Send what the session produced; count which path it took. */
static void send_out(side *s, size_t tag)
{
    bool had = fence__tls_pump_output(&s->pump) > 0;
    int rc = fence__tls_pump_send(&s->pump, (uv_stream_t *)&s->pipe, s->scratch,
                                  s->cap, on_sent, s, tag);
    if (rc < 0)
        errors++;
    else if (rc == 1)
        s->sends_queued++;
    else if (had)
        s->sends_direct++;
    if (rc >= 0 && fence__tls_pump_output(&s->pump) != 0)
        errors++; /* everything was taken out of the BIO */
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    buf->base = malloc(4096);
    buf->len = buf->base != NULL ? 4096 : 0;
}

/* Drive a side after input: handshake, then read; the server echoes. */
static void drive(side *s)
{
    if (!s->done) {
        int r = SSL_do_handshake(s->pump.ssl);
        send_out(s, 0);
        if (r != 1) {
            if (SSL_get_error(s->pump.ssl, r) != SSL_ERROR_WANT_READ)
                errors++;
            return;
        }
        s->done = true;
        if (s == &cli) { /* the client speaks first */
            if (SSL_write(cli.pump.ssl, "hello", 5) != 5)
                errors++;
            send_out(&cli, 5);
        }
    }
    for (;;) {
        char buf[64];
        int n = SSL_read(s->pump.ssl, buf, sizeof(buf));
        if (n <= 0)
            break;
        if (s->got_len + (size_t)n <= sizeof(s->got)) {
            memcpy(s->got + s->got_len, buf, (size_t)n);
            s->got_len += (size_t)n;
        }
        if (s == &srv) {
            if (SSL_write(srv.pump.ssl, buf, n) != n)
                errors++;
            send_out(&srv, (size_t)n);
        }
    }
    if (cli.got_len == 5) {
        uv_read_stop((uv_stream_t *)&srv.pipe);
        uv_read_stop((uv_stream_t *)&cli.pipe);
    }
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    side *s = st->data;
    if (nread > 0 && fence__tls_pump_feed(&s->pump, buf->base, (size_t)nread) != 0)
        errors++;
    free(buf->base);
    if (nread < 0) {
        uv_read_stop(st);
        return;
    }
    if (nread > 0)
        drive(s);
}

/* A server context with a fresh self-signed certificate. */
static SSL_CTX *server_ctx(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    CHECK(k != NULL);
    CHECK(x != NULL);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_set_pubkey(x, k);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                               (const unsigned char *)"pump-test", -1, -1, 0);
    X509_set_issuer_name(x, n);
    CHECK(X509_sign(x, k, EVP_sha256()) > 0);
    SSL_CTX *c = SSL_CTX_new(TLS_server_method());
    CHECK(c != NULL);
    CHECK(SSL_CTX_use_certificate(c, x) == 1);
    CHECK(SSL_CTX_use_PrivateKey(c, k) == 1);
    X509_free(x);
    EVP_PKEY_free(k);
    return c;
}

/* The whole exchange over a socketpair. */
static void test_exchange(void)
{
    SSL_CTX *sctx = server_ctx();
    SSL_CTX *cctx = SSL_CTX_new(TLS_client_method());
    CHECK(cctx != NULL);
    SSL_CTX_set_verify(cctx, SSL_VERIFY_NONE, NULL);
    CHECK(fence__tls_pump_init(&srv.pump, sctx, true) == 0);
    CHECK(fence__tls_pump_init(&cli.pump, cctx, false) == 0);
    CHECK(SSL_is_server(srv.pump.ssl) == 1);
    CHECK(SSL_is_server(cli.pump.ssl) == 0);
    srv.scratch = scratch;
    srv.cap = sizeof(scratch);
    CHECK_EQ_U64(fence__tls_pump_feed(&srv.pump, "", 0), 0);
    CHECK_EQ_U64(fence__tls_pump_input(&srv.pump), 0);

    int fds[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    uv_loop_t *loop = uv_default_loop();
    CHECK(uv_pipe_init(loop, &srv.pipe, 0) == 0);
    CHECK(uv_pipe_init(loop, &cli.pipe, 0) == 0);
    CHECK(uv_pipe_open(&srv.pipe, fds[0]) == 0);
    CHECK(uv_pipe_open(&cli.pipe, fds[1]) == 0);
    srv.pipe.data = &srv;
    cli.pipe.data = &cli;
    uv_read_start((uv_stream_t *)&srv.pipe, alloc_cb, read_cb);
    uv_read_start((uv_stream_t *)&cli.pipe, alloc_cb, read_cb);
    drive(&cli); /* ClientHello */
    uv_run(loop, UV_RUN_DEFAULT);

    CHECK_EQ_I64(errors, 0);
    CHECK(srv.done);
    CHECK(cli.done);
    CHECK_EQ_U64(srv.got_len, 5);
    CHECK(memcmp(srv.got, "hello", 5) == 0);
    CHECK_EQ_U64(cli.got_len, 5);
    CHECK(memcmp(cli.got, "hello", 5) == 0);
    /* The client always queues: every send ended in a callback, the last
     * one with the message's tag. */
    CHECK(cli.sends_queued >= 2);
    CHECK_EQ_I64(cli.sent_cbs, cli.sends_queued);
    CHECK_EQ_U64(cli.last_tag, 5);
    CHECK_EQ_I64(cli.sends_direct, 0);
    /* The server's small outputs went straight to the kernel. */
    CHECK(srv.sends_direct >= 2);
    CHECK_EQ_I64(srv.sent_cbs, srv.sends_queued);
    CHECK_EQ_U64(fence__tls_pump_input(&srv.pump), 0);
    CHECK_EQ_U64(fence__tls_pump_input(&cli.pump), 0);

    /* Discard drops produced ciphertext. */
    CHECK(SSL_write(srv.pump.ssl, "bye", 3) == 3);
    CHECK(fence__tls_pump_output(&srv.pump) > 0);
    CHECK_EQ_U64(fence__tls_pump_output(&srv.pump), BIO_ctrl_pending(srv.pump.wbio));
    fence__tls_pump_discard(&srv.pump);
    CHECK_EQ_U64(fence__tls_pump_output(&srv.pump), 0);
    CHECK_EQ_U64(BIO_ctrl_pending(srv.pump.wbio), 0);

    /* The counts are the BIOs' own pending bytes, also after discards
     * (the server's stream is broken by them, so it only counts now) and
     * with input read in part: a client record fed to the server a byte
     * short of whole, then the last byte. */
    CHECK(SSL_write(srv.pump.ssl, "one", 3) == 3);
    CHECK_EQ_U64(fence__tls_pump_output(&srv.pump), BIO_ctrl_pending(srv.pump.wbio));
    fence__tls_pump_discard(&srv.pump);
    CHECK_EQ_U64(fence__tls_pump_output(&srv.pump), 0);
    CHECK(SSL_write(cli.pump.ssl, "two", 3) == 3);
    size_t rec = fence__tls_pump_output(&cli.pump);
    CHECK(rec > 3);
    CHECK_EQ_U64(rec, BIO_ctrl_pending(cli.pump.wbio));
    char ct[256];
    CHECK(rec <= sizeof(ct));
    CHECK(BIO_read(cli.pump.wbio, ct, (int)rec) == (int)rec);
    CHECK_EQ_U64(fence__tls_pump_output(&cli.pump), 0);
    CHECK_EQ_U64(fence__tls_pump_feed(&srv.pump, ct, rec - 1), 0);
    CHECK_EQ_U64(fence__tls_pump_input(&srv.pump), rec - 1);
    char pt[16];
    CHECK(SSL_read(srv.pump.ssl, pt, sizeof(pt)) <= 0); /* a byte short */
    ERR_clear_error();
    CHECK_EQ_U64(fence__tls_pump_input(&srv.pump), BIO_ctrl_pending(srv.pump.rbio));
    CHECK_EQ_U64(fence__tls_pump_feed(&srv.pump, ct + rec - 1, 1), 0);
    CHECK_EQ_U64(fence__tls_pump_input(&srv.pump), BIO_ctrl_pending(srv.pump.rbio));
    CHECK(SSL_read(srv.pump.ssl, pt, sizeof(pt)) == 3);
    CHECK(memcmp(pt, "two", 3) == 0);
    CHECK_EQ_U64(fence__tls_pump_input(&srv.pump), 0);
    CHECK_EQ_U64(BIO_ctrl_pending(srv.pump.rbio), 0);

    uv_close((uv_handle_t *)&srv.pipe, NULL);
    uv_close((uv_handle_t *)&cli.pipe, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    fence__tls_pump_free(&srv.pump);
    fence__tls_pump_free(&cli.pump);
    CHECK(srv.pump.ssl == NULL);
    CHECK(srv.pump.rbio == NULL);
    CHECK(srv.pump.wbio == NULL);
    fence__tls_pump_free(&srv.pump); /* harmless twice */
    SSL_CTX_free(sctx);
    SSL_CTX_free(cctx);
    CHECK(uv_loop_close(loop) == 0);
}

int main(void)
{
    TEST_RUN(test_exchange);
    return TEST_DONE();
}
