/* The plain stream transports of the connection layer (conn.h): TCP and
 * Unix sockets through libuv's stream calls, and their listeners.  They move bytes only; the
 * layer (conn.c) parses, orders replies and decides when to write. */
#include "net/conn.h"

#include <stdlib.h>

#include "base/assert.h"

/* ---- plain stream transport ---------------------------------------------- */

/* A write in flight on a stream: the libuv request and the bytes. */
typedef struct stream_wreq {
    uv_write_t req;        /* libuv request */
    fence_net_conn *c;     /* the connection (valid until its close cb) */
    char *buf;             /* the bytes (owned) */
    size_t len;            /* their count */
} stream_wreq;

/* libuv wants room: the free tail of the read buffer. */
static void stream_alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    fence_net_conn *c = h->data;
    char *p;
    size_t room;
    (void)hint;
    fence__net_conn_rbuf(c, &p, &room);
    /* A zero-length buffer makes libuv report UV_ENOBUFS. */
    *buf = uv_buf_init(p, (unsigned)room);
}

/* Bytes arrived, or EOF, or an error. */
static void stream_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    fence_net_conn *c = st->data;
    (void)buf;
    if (nread > 0)
        fence__net_conn_input(c, (size_t)nread);
    else if (nread < 0)
        fence__net_conn_eof(c, (int)nread);
}

/* Start reading the stream. */
static int stream_read_start(fence_net_conn *c)
{
    return uv_read_start(&c->h.stream, stream_alloc_cb, stream_read_cb);
}

/* Stop reading the stream. */
static int stream_read_stop(fence_net_conn *c)
{
    return uv_read_stop(&c->h.stream);
}

/* A stream write finished. */
static void stream_write_cb(uv_write_t *req, int status)
{
    stream_wreq *w = (stream_wreq *)req;
    fence_net_conn *c = w->c;
    size_t len = w->len;
    free(w->buf);
    free(w);
    fence__net_conn_written(c, len, status);
}

/* Write buf to the stream: first straight to the kernel (uv_try_write,
 * which refuses while earlier bytes are still queued, so order is kept),
 * then queue what it did not take.  A reply the kernel takes whole, the
 * usual case, costs one write(2): no request, no POLLOUT watcher switched
 * on and off (two epoll_ctl calls per reply on the next loop turn). */
static int stream_write(fence_net_conn *c, char *buf, size_t len)
{
    size_t done = 0;
    uv_buf_t b = uv_buf_init(buf, (unsigned)len);
    int n = uv_try_write(&c->h.stream, &b, 1);
    if (n > 0) {
        done = (size_t)n;
        FENCE_ASSERT(done <= len);
        fence__net_conn_written(c, done, 0);
        if (done == len || c->closing) {
            free(buf);
            return 0;
        }
    }
    int rc = UV_ENOMEM;
    stream_wreq *w = malloc(sizeof(*w));
    if (w != NULL) {
        w->c = c;
        w->buf = buf;
        w->len = len - done;
        b = uv_buf_init(buf + done, (unsigned)(len - done));
        rc = uv_write(&w->req, &c->h.stream, &b, 1, stream_write_cb);
    }
    if (rc == 0)
        return 0;
    free(buf);
    free(w);
    if (done == 0)
        return rc;
    /* Part of it went out and was reported: report the rest as failed. */
    fence__net_conn_written(c, len - done, rc);
    return 0;
}

/* Write what the kernel takes of buf now, keeping nothing (conn.h
 * try_write): one write(2), no request, no copy. */
static int stream_try_write(fence_net_conn *c, const char *buf, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    int n = uv_try_write(&c->h.stream, &b, 1);
    return n == UV_EAGAIN ? 0 : n;
}

/* A shutdown request finished: nothing to do. */
static void stream_shutdown_cb(uv_shutdown_t *req, int status)
{
    (void)status;
    free(req);
}

/* Half-close the stream after the queued writes. */
static int stream_shutdown(fence_net_conn *c)
{
    uv_shutdown_t *req = malloc(sizeof(*req));
    if (req == NULL)
        return UV_ENOMEM;
    int rc = uv_shutdown(req, &c->h.stream, stream_shutdown_cb);
    if (rc != 0)
        free(req);
    return rc;
}

/* Bytes libuv holds that the kernel has not taken. */
static size_t stream_queued(fence_net_conn *c)
{
    return uv_stream_get_write_queue_size(&c->h.stream);
}

/* Close the handle; the layer frees the connection afterwards. */
static void stream_close(fence_net_conn *c)
{
    uv_close(&c->h.handle, fence__net_conn_closed);
}

const fence_net_transport fence__net_tcp = {
    "tcp", stream_read_start, stream_read_stop, stream_write,
    stream_shutdown, stream_queued, stream_close, NULL, NULL, stream_try_write,
};

const fence_net_transport fence__net_unix = {
    "unix", stream_read_start, stream_read_stop, stream_write,
    stream_shutdown, stream_queued, stream_close, NULL, NULL, stream_try_write,
};

/* The plain listeners: conn_listen.c's, for these transports. */
int fence__net_listen_tcp(fence_net *net, const char *bind, unsigned port,
                          char *err, size_t cap)
{
    return fence__net_listen_tcp_with(net, bind, port, &fence__net_tcp, err, cap);
}

int fence__net_listen_unix(fence_net *net, const char *path, char *err,
                           size_t cap)
{
    return fence__net_listen_unix_with(net, path, &fence__net_unix, err, cap);
}
