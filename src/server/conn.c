/* Client connections: listeners, bounded reads, request parsing, reply
 * slots in request order, bounded output, closing. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/log.h"
#include "server/server.h"

/* First read buffer size; it doubles up to FENCE_RBUF_MAX as needed. */
#define RBUF_INITIAL (16 * 1024)
/* Grow the read buffer when less than this is free. */
#define RBUF_MIN_FREE 4096
/* An empty read buffer larger than this is freed. */
#define RBUF_SHRINK (64 * 1024)

/* A write in flight: the libuv request and a copy of the bytes. */
typedef struct wreq {
    uv_write_t req; /* libuv request (data = the connection) */
    size_t len;     /* bytes in data */
    char data[];    /* the replies, back to back */
} wreq;

static void conn_process(fence_conn *c);
static void conn_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* ---- Slots ------------------------------------------------------------------ */

/* Append a new slot to c's queue; NULL if memory ran out. */
fence_slot *fence__slot_new(fence_conn *c, uint8_t op)
{
    fence_slot *slot = calloc(1, sizeof(*slot));
    if (slot == NULL)
        return NULL;
    slot->conn = c;
    slot->op = op;
    slot->state = SLOT_NEW;
    if (c->tail != NULL)
        c->tail->next = slot;
    else
        c->head = slot;
    c->tail = slot;
    c->n_slots++;
    return slot;
}

/* Free a slot that is no longer in any queue, table or batch. */
void fence__slot_free(fence_slot *slot)
{
    free(slot->out);
    free(slot);
}

/* Put c on the server's list of connections to flush at the loop check. */
static void conn_mark_dirty(fence_conn *c)
{
    if (c->dirty || c->closing)
        return;
    c->dirty = true;
    c->dirty_next = c->srv->dirty;
    c->srv->dirty = c;
}

/* Make the slot's reply final.  An orphaned slot (its connection closed)
 * is freed instead. */
void fence__slot_reply(fence_slot *slot, const char *bytes, size_t len)
{
    assert(slot->state != SLOT_READY);
    if (slot->conn == NULL) {
        fence__slot_free(slot);
        return;
    }
    char *out = malloc(len ? len : 1);
    if (out == NULL) {
        /* Without memory for the reply the connection cannot stay
         * consistent; drop it (nothing is lost: state is in the log). */
        LOG_ERROR("conn %llu: out of memory for a reply; closing",
                  (unsigned long long)slot->conn->id);
        slot->state = SLOT_READY;
        fence__conn_close(slot->conn);
        return;
    }
    memcpy(out, bytes, len);
    slot->out = out;
    slot->len = len;
    slot->state = SLOT_READY;
    conn_mark_dirty(slot->conn);
}

/* Reply with "-CODE msg". */
void fence__slot_error(fence_slot *slot, const char *code, const char *msg)
{
    char buf[512];
    size_t n = fence_resp_error(buf, sizeof(buf), code, msg);
    if (n > sizeof(buf)) {
        n = fence_resp_error(buf, sizeof(buf), code, "(message too long)");
        assert(n <= sizeof(buf));
    }
    fence__slot_reply(slot, buf, n);
}

/* ---- Output ----------------------------------------------------------------- */

/* A write finished: account for it, and close if that was the last one a
 * closing connection waited for. */
static void conn_write_cb(uv_write_t *req, int status)
{
    wreq *w = (wreq *)req;
    fence_conn *c = req->data;
    assert(c->obuf >= w->len);
    c->obuf -= w->len;
    free(w);
    if (status != 0 && !c->closing) {
        LOG_DEBUG("conn %llu: write failed: %s", (unsigned long long)c->id,
                  uv_strerror(status));
        fence__conn_close(c);
        return;
    }
    if (c->close_after_flush && c->obuf == 0 && c->n_slots == 0 && !c->closing)
        fence__conn_close(c);
}

/* Send every ready reply at the head of c's queue as one write. */
static void conn_flush(fence_conn *c)
{
    size_t total = 0;
    uint32_t n = 0;
    if (c->closing)
        return;
    for (fence_slot *s = c->head; s != NULL && s->state == SLOT_READY; s = s->next) {
        total += s->len;
        n++;
    }
    if (n > 0) {
        wreq *w = malloc(sizeof(*w) + total);
        if (w == NULL) {
            LOG_ERROR("conn %llu: out of memory for output; closing",
                      (unsigned long long)c->id);
            fence__conn_close(c);
            return;
        }
        size_t off = 0;
        while (n-- > 0) {
            fence_slot *s = c->head;
            memcpy(w->data + off, s->out, s->len);
            off += s->len;
            c->head = s->next;
            if (c->head == NULL)
                c->tail = NULL;
            c->n_slots--;
            fence__slot_free(s);
        }
        w->len = total;
        w->req.data = c;
        uv_buf_t b = uv_buf_init(w->data, (unsigned)total);
        int rv = uv_write(&w->req, &c->h.stream, &b, 1, conn_write_cb);
        if (rv != 0) {
            free(w);
            LOG_DEBUG("conn %llu: write: %s", (unsigned long long)c->id,
                      uv_strerror(rv));
            fence__conn_close(c);
            return;
        }
        c->obuf += total;
        /* uv_write hands what the kernel takes over at once; the rest waits
         * in libuv's queue.  That backlog is what a slow reader grows. */
        size_t queued = uv_stream_get_write_queue_size(&c->h.stream);
        if (queued > c->srv->cfg->max_obuf) {
            LOG_WARN("conn %llu: %zu reply bytes unsent (max-obuf %llu); "
                     "disconnecting a slow reader", (unsigned long long)c->id,
                     queued, (unsigned long long)c->srv->cfg->max_obuf);
            c->srv->stat_slow_closed++;
            fence__conn_close(c);
            return;
        }
    }
    if (c->close_after_flush) {
        if (c->obuf == 0 && c->n_slots == 0)
            fence__conn_close(c);
        return;
    }
    /* Room in the pipeline again: parse what is buffered, read more. */
    if (c->n_slots < c->srv->cfg->max_pipeline)
        conn_process(c);
}

/* Flush every connection that got replies during this loop turn. */
void fence__conns_flush(fence_server *s)
{
    while (s->dirty != NULL) {
        fence_conn *c = s->dirty;
        s->dirty = c->dirty_next;
        c->dirty_next = NULL;
        c->dirty = false;
        conn_flush(c);
    }
}

/* ---- Closing ---------------------------------------------------------------- */

/* The handle is closed: release the connection's memory. */
static void conn_close_cb(uv_handle_t *h)
{
    fence_conn *c = h->data;
    free(c->rbuf);
    free(c);
}

/* Close c: the leader module forgets its requests (cancelling its waits
 * through the log), its slots are freed or orphaned, it is unlinked, and
 * the handle closed.  Safe to call more than once. */
void fence__conn_close(fence_conn *c)
{
    fence_server *s = c->srv;
    if (c->closing)
        return;
    c->closing = true;
    LOG_DEBUG("conn %llu: closed", (unsigned long long)c->id);
    fence__server_conn_closed(s, c);
    fence_slot *slot = c->head;
    while (slot != NULL) {
        fence_slot *next = slot->next;
        slot->next = NULL;
        switch (slot->state) {
        case SLOT_BATCH:
            slot->conn = NULL; /* cluster.c frees it when it replies */
            break;
        default:
            fence__slot_free(slot);
            break;
        }
        slot = next;
    }
    c->head = c->tail = NULL;
    c->n_slots = 0;
    if (c->dirty) {
        fence_conn **pp = &s->dirty;
        while (*pp != c)
            pp = &(*pp)->dirty_next;
        *pp = c->dirty_next;
        c->dirty = false;
    }
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    s->n_conns--;
    uv_close(&c->h.handle, conn_close_cb);
}

/* Close every connection (shutdown). */
void fence__conns_close_all(fence_server *s)
{
    while (s->conns != NULL)
        fence__conn_close(s->conns);
}

/* ---- Input ------------------------------------------------------------------ */

/* Give libuv the free tail of the read buffer, growing it (up to
 * FENCE_RBUF_MAX) when little is left. */
static void conn_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    fence_conn *c = h->data;
    (void)suggested;
    if (c->rcap - c->rlen < RBUF_MIN_FREE && c->rcap < FENCE_RBUF_MAX) {
        size_t cap = c->rcap ? c->rcap * 2 : RBUF_INITIAL;
        if (cap > FENCE_RBUF_MAX)
            cap = FENCE_RBUF_MAX;
        char *nb = realloc(c->rbuf, cap);
        if (nb != NULL) {
            c->rbuf = nb;
            c->rcap = cap;
        }
    }
    /* A zero-length buffer makes libuv report UV_ENOBUFS. */
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

/* Stop reading (pipeline full, or closing after an error). */
static void conn_pause(fence_conn *c)
{
    if (c->reading) {
        uv_read_stop(&c->h.stream);
        c->reading = false;
    }
}

/* Resume reading when there is room for more requests. */
static void conn_resume(fence_conn *c)
{
    if (!c->reading && !c->closing && !c->close_after_flush) {
        if (uv_read_start(&c->h.stream, conn_alloc_cb, conn_read_cb) == 0)
            c->reading = true;
    }
}

/* Queue a final error reply, then close once it is sent. */
static void conn_fail(fence_conn *c, const char *code, const char *msg)
{
    fence_slot *slot = fence__slot_new(c, OP_PING);
    conn_pause(c);
    c->close_after_flush = true;
    c->rlen = 0;
    if (slot == NULL) {
        fence__conn_close(c);
        return;
    }
    fence__slot_error(slot, code, msg);
}

/* Parse and dispatch every complete request in the read buffer while the
 * pipeline has room; pause reading when it is full. */
static void conn_process(fence_conn *c)
{
    fence_server *s = c->srv;
    size_t off = 0;
    while (off < c->rlen && !c->closing && !c->close_after_flush) {
        if (c->n_slots >= s->cfg->max_pipeline) {
            conn_pause(c);
            break;
        }
        ssize_t n = fence_resp_parse(c->rbuf + off, c->rlen - off, &s->resp_lim,
                                     s->msg);
        if (n == FENCE_RESP_PARTIAL) {
            if (off == 0 && c->rlen == FENCE_RBUF_MAX) {
                conn_fail(c, "ERR", "Protocol error: request larger than the read buffer");
                return;
            }
            break;
        }
        if (n < 0) {
            LOG_DEBUG("conn %llu: %s", (unsigned long long)c->id,
                      s->msg->error ? s->msg->error : "protocol error");
            /* The parser's text already starts with "Protocol error". */
            conn_fail(c, "ERR", s->msg->error ? s->msg->error : "Protocol error");
            return;
        }
        assert((size_t)n <= c->rlen - off);
        off += (size_t)n;
        if (s->msg->argc == 0)
            continue;
        s->stat_commands++;
        fence__cmd_dispatch(c, s->msg);
    }
    if (c->closing)
        return;
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    if (c->rlen == 0 && c->rcap > RBUF_SHRINK) {
        /* A big request has passed: give its memory back. */
        free(c->rbuf);
        c->rbuf = NULL;
        c->rcap = 0;
    }
    if (c->n_slots < s->cfg->max_pipeline)
        conn_resume(c);
}

/* Bytes arrived (or EOF / an error). */
static void conn_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    fence_conn *c = st->data;
    (void)buf;
    if (nread == 0)
        return;
    if (nread < 0) {
        if (nread == UV_ENOBUFS) {
            conn_fail(c, "ERR", "Protocol error: request larger than the read buffer");
            return;
        }
        if (nread != UV_EOF)
            LOG_DEBUG("conn %llu: read: %s", (unsigned long long)c->id,
                      uv_strerror((int)nread));
        fence__conn_close(c);
        return;
    }
    c->rlen += (size_t)nread;
    assert(c->rlen <= c->rcap);
    conn_process(c);
}

/* ---- Listeners -------------------------------------------------------------- */

/* Accept one client on a listener (TCP or Unix), refusing it politely when
 * max-clients are already connected. */
static void on_connection(uv_stream_t *server, int status)
{
    fence_server *s = server->data;
    if (status != 0) {
        LOG_WARN("accept: %s", uv_strerror(status));
        return;
    }
    fence_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        LOG_ERROR("accept: out of memory");
        return;
    }
    c->srv = s;
    c->id = ++s->next_conn_id;
    fence__leader_conn_init(&c->lconn);
    if (server->type == UV_TCP)
        uv_tcp_init(s->loop, &c->h.tcp);
    else
        uv_pipe_init(s->loop, &c->h.pipe, 0);
    c->h.handle.data = c;
    c->next = s->conns;
    if (s->conns != NULL)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;
    if (uv_accept(server, &c->h.stream) != 0) {
        fence__conn_close(c);
        return;
    }
    if (server->type == UV_TCP)
        uv_tcp_nodelay(&c->h.tcp, 1);
    if (s->stopping) {
        fence__conn_close(c);
        return;
    }
    if (s->n_conns > s->cfg->max_clients) {
        s->stat_rejected_conns++;
        conn_fail(c, "LIMIT", "max number of clients reached (max-clients)");
        return;
    }
    LOG_DEBUG("conn %llu: accepted", (unsigned long long)c->id);
    conn_resume(c);
}

/* Open the TCP listener and, if configured, the Unix-socket listener. */
int fence__listen(fence_server *s)
{
    struct sockaddr_storage addr;
    int rv;
    if (strchr(s->cfg->bind, ':') != NULL)
        rv = uv_ip6_addr(s->cfg->bind, (int)s->cfg->port, (struct sockaddr_in6 *)&addr);
    else
        rv = uv_ip4_addr(s->cfg->bind, (int)s->cfg->port, (struct sockaddr_in *)&addr);
    if (rv != 0) {
        LOG_ERROR("bind %s: not an IP address", s->cfg->bind);
        return -1;
    }
    uv_tcp_init(s->loop, &s->tcp);
    s->tcp.data = s;
    s->tcp_open = true;
    rv = uv_tcp_bind(&s->tcp, (const struct sockaddr *)&addr, 0);
    if (rv == 0)
        rv = uv_listen((uv_stream_t *)&s->tcp, 511, on_connection);
    if (rv != 0) {
        LOG_ERROR("listen on %s:%llu: %s", s->cfg->bind,
                  (unsigned long long)s->cfg->port, uv_strerror(rv));
        return -1;
    }
    LOG_INFO("listening on %s:%llu", s->cfg->bind, (unsigned long long)s->cfg->port);
    if (s->cfg->unix_socket[0] != '\0') {
        uv_pipe_init(s->loop, &s->pipe, 0);
        s->pipe.data = s;
        s->pipe_open = true;
        struct stat st;
        if (lstat(s->cfg->unix_socket, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(s->cfg->unix_socket); /* a stale socket from a crash */
        rv = uv_pipe_bind(&s->pipe, s->cfg->unix_socket);
        if (rv == 0)
            rv = uv_listen((uv_stream_t *)&s->pipe, 511, on_connection);
        if (rv != 0) {
            LOG_ERROR("listen on unix socket %s: %s", s->cfg->unix_socket,
                      uv_strerror(rv));
            return -1;
        }
        LOG_INFO("listening on unix socket %s", s->cfg->unix_socket);
    }
    return 0;
}

/* Close the listeners (shutdown). */
void fence__listen_close(fence_server *s)
{
    if (s->tcp_open && !uv_is_closing((uv_handle_t *)&s->tcp))
        uv_close((uv_handle_t *)&s->tcp, NULL);
    if (s->pipe_open && !uv_is_closing((uv_handle_t *)&s->pipe)) {
        uv_close((uv_handle_t *)&s->pipe, NULL);
        unlink(s->cfg->unix_socket);
    }
}
