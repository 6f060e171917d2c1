/* fence-store's network side (see server.h).
 *
 * One thread, one libuv loop.  Each connection has a bounded read buffer
 * (--max-value plus FENCE_STORE_RBUF_SLACK) that the RESP parser works on;
 * complete requests are executed in order and their replies gathered into
 * one write per read.  Writes run synchronously: each write command is one
 * LMDB transaction whose commit fsyncs before the reply is queued, so a
 * reply is never sent for a write that is not durable.
 *
 * Hygiene: a protocol error gets an error reply and the connection is
 * closed; a client whose queued replies exceed --obuf-max is disconnected
 * (slow reader); connections beyond --max-clients get "-LIMIT" and are
 * closed. */
#include "store/server.h"

#include <assert.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/limits.h"
#include "proto/resp.h"
#include "store/cmd.h"
#include "store/log.h"

/* Read buffer granularity and the size it shrinks back to when idle. */
#define RBUF_CHUNK (64 * 1024)

struct server;

/* One client connection. */
typedef struct conn {
    uv_tcp_t tcp;             /* the socket (first: handle->data unused) */
    struct server *srv;       /* owning server */
    char *rbuf;               /* bytes read, not yet parsed */
    size_t rlen;              /* bytes in rbuf */
    size_t rcap;              /* capacity of rbuf */
    char *wbuf;               /* replies gathered, not yet handed to libuv */
    size_t wlen;              /* bytes in wbuf */
    size_t wcap;              /* capacity of wbuf */
    size_t out_pending;       /* bytes handed to uv_write, not completed */
    bool closing;             /* uv_close was called */
    bool close_after_write;   /* close once out_pending reaches 0 */
    struct conn *prev, *next; /* the server's list of connections */
} conn;

/* One write handed to libuv; owns its buffer. */
typedef struct write_req {
    uv_write_t req;   /* libuv request */
    conn *c;          /* connection (valid until its close callback) */
    char *buf;        /* the bytes */
    size_t len;       /* their count */
} write_req;

/* The server. */
typedef struct server {
    const fence_store_config *cfg;   /* configuration */
    fence_store_db *db;              /* the store */
    uv_loop_t *loop;           /* the loop */
    uv_tcp_t listener;         /* listening socket */
    uv_signal_t sigint;        /* SIGINT: stop */
    uv_signal_t sigterm;       /* SIGTERM: stop */
    conn *conns;               /* open connections */
    uint64_t nconns;           /* connections in the list */
    uint64_t served_total;     /* connections accepted since start */
    size_t rbuf_max;           /* read buffer bound per connection */
    fence_resp_limits lim;     /* parser limits */
    fence_resp_msg *msg;       /* parser output (large; one for all) */
} server;

/* Free a connection after libuv has closed its handle. */
static void on_conn_closed(uv_handle_t *h)
{
    conn *c = (conn *)h;
    server *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    free(c->rbuf);
    free(c->wbuf);
    free(c);
}

/* Close a connection (idempotent). */
static void conn_close(conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* Make room for n more bytes in wbuf; false if out of memory. */
static bool wbuf_reserve(conn *c, size_t n)
{
    if (c->wcap - c->wlen >= n)
        return true;
    size_t cap = c->wcap ? c->wcap : 4096;
    while (cap - c->wlen < n)
        cap *= 2;
    char *p = realloc(c->wbuf, cap);
    if (p == NULL)
        return false;
    c->wbuf = p;
    c->wcap = cap;
    return true;
}

/* Append an encoded reply (snprintf-style encoder) to wbuf. */
#define REPLY(c, enc, ...)                                                     \
    do {                                                                       \
        size_t need_ = enc(NULL, 0, __VA_ARGS__);                              \
        if (!wbuf_reserve((c), need_)) {                                       \
            FENCE_STORE_LOG(FENCE_STORE_LOG_ERROR,                             \
                            "out of memory for a reply");                      \
            conn_close(c);                                                     \
            break;                                                             \
        }                                                                      \
        size_t got_ =                                                          \
            enc((c)->wbuf + (c)->wlen, (c)->wcap - (c)->wlen, __VA_ARGS__);    \
        assert(got_ == need_);                                                 \
        (c)->wlen += got_;                                                     \
    } while (0)

/* Append "+s". */
static void reply_simple(conn *c, const char *s)
{
    REPLY(c, fence_resp_simple, s);
}

/* Append "-CODE msg". */
static void reply_error(conn *c, const char *code, const char *msg)
{
    REPLY(c, fence_resp_error, code, msg);
}

/* Append ":v". */
static void reply_int(conn *c, int64_t v)
{
    REPLY(c, fence_resp_int, v);
}

/* Append a bulk string, or nil if p is NULL. */
static void reply_bulk(conn *c, const char *p, size_t n)
{
    if (p != NULL) {
        REPLY(c, fence_resp_bulk, p, n);
        return;
    }
    size_t need = fence_resp_nil(NULL, 0);
    if (!wbuf_reserve(c, need)) {
        conn_close(c);
        return;
    }
    c->wlen += fence_resp_nil(c->wbuf + c->wlen, c->wcap - c->wlen);
}

/* Write callback: release the buffer, then close if that was asked for. */
static void on_written(uv_write_t *req, int status)
{
    write_req *w = (write_req *)req;
    conn *c = w->c;
    assert(c->out_pending >= w->len);
    c->out_pending -= w->len;
    free(w->buf);
    free(w);
    if (status < 0) {
        if (status != UV_ECANCELED)
            FENCE_STORE_LOG(FENCE_STORE_LOG_DEBUG, "write to client failed: %s",
                      uv_strerror(status));
        conn_close(c);
        return;
    }
    if (c->close_after_write && c->out_pending == 0)
        conn_close(c);
}

/* Send the gathered replies: as much as the socket takes right now
 * (uv_try_write, only when nothing is queued, so order is kept), the rest
 * handed to libuv (ownership of wbuf moves to the write request).  Thus
 * out_pending counts only bytes the client has not taken yet, which is what
 * the slow-reader limit is about. */
static void flush_replies(conn *c)
{
    if (c->closing)
        return;
    if (c->wlen > 0 && c->out_pending == 0) {
        uv_buf_t b = uv_buf_init(c->wbuf, (unsigned)c->wlen);
        int n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (n > 0) {
            memmove(c->wbuf, c->wbuf + n, c->wlen - (size_t)n);
            c->wlen -= (size_t)n;
        } else if (n != UV_EAGAIN) {
            FENCE_STORE_LOG(FENCE_STORE_LOG_DEBUG, "write to client failed: %s",
                      uv_strerror(n));
            conn_close(c);
            return;
        }
    }
    if (c->wlen == 0) {
        if (c->close_after_write && c->out_pending == 0)
            conn_close(c);
        return;
    }
    write_req *w = malloc(sizeof(*w));
    if (w == NULL) {
        FENCE_STORE_LOG(FENCE_STORE_LOG_ERROR, "out of memory for a write");
        conn_close(c);
        return;
    }
    w->c = c;
    w->buf = c->wbuf;
    w->len = c->wlen;
    c->wbuf = NULL;
    c->wlen = c->wcap = 0;
    uv_buf_t b = uv_buf_init(w->buf, (unsigned)w->len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    if (rc != 0) {
        free(w->buf);
        free(w);
        conn_close(c);
        return;
    }
    c->out_pending += w->len;
}

/* Append the reply for a FGET value (called inside the read txn). */
static void on_value(void *ctx, const char *p, size_t n)
{
    reply_bulk(ctx, p, n);
}

/* Build the INFO text. */
static void reply_info(conn *c)
{
    server *s = c->srv;
    fence_store_db_stats st;
    fence__store_db_stats_get(s->db, &st);
    char text[1024];
    int n = snprintf(text, sizeof(text),
                     "# fence-store\r\n"
                     "keys:%" PRIu64 "\r\n"
                     "fences:%" PRIu64 "\r\n"
                     "admitted:%" PRIu64 "\r\n"
                     "rejected_stale:%" PRIu64 "\r\n"
                     "ignore_tokens:%d\r\n"
                     "connected_clients:%" PRIu64 "\r\n"
                     "max_clients:%" PRIu64 "\r\n"
                     "max_value:%" PRIu64 "\r\n"
                     "map_size:%" PRIu64 "\r\n"
                     "map_used:%" PRIu64 "\r\n"
                     "tcp_port:%" PRIu64 "\r\n",
                     st.keys, st.fences, st.admitted, st.rejected_stale,
                     s->cfg->ignore_tokens ? 1 : 0, s->nconns,
                     s->cfg->max_clients, s->cfg->max_value, st.map_size,
                     st.map_used, s->cfg->port);
    assert(n > 0 && (size_t)n < sizeof(text));
    reply_bulk(c, text, (size_t)n);
}

/* Execute one checked command and append its reply. */
static void execute(conn *c, const fence_store_cmd *cmd)
{
    server *s = c->srv;
    char msg[256];
    switch (cmd->op) {
    case FENCE_STORE_OP_FSET:
    case FENCE_STORE_OP_FDEL:
    case FENCE_STORE_OP_FINCR:
    case FENCE_STORE_OP_FENCE_ADMIT: {
        fence_store_write_out out;
        fence_store_result r = fence__store_db_write(s->db, cmd, &out);
        switch (r) {
        case FENCE_STORE_OK:
            if (cmd->op == FENCE_STORE_OP_FDEL ||
                cmd->op == FENCE_STORE_OP_FINCR)
                reply_int(c, out.number);
            else
                reply_simple(c, "OK");
            break;
        case FENCE_STORE_STALE:
            snprintf(msg, sizeof(msg),
                     "%" PRIu64 " %" PRIu64 " token %" PRIu64
                     " is older than the highest token admitted for this "
                     "fence (%" PRIu64 "); nothing was written",
                     cmd->token, out.high, cmd->token, out.high);
            reply_error(c, "STALE", msg);
            break;
        case FENCE_STORE_FULL:
            snprintf(msg, sizeof(msg),
                     "the store is full (LMDB map of %" PRIu64
                     " bytes); nothing was written; restart with a larger "
                     "--map-size", s->cfg->map_size);
            reply_error(c, "FULL", msg);
            break;
        case FENCE_STORE_NOTINT:
            reply_error(c, "ERR", "value is not an integer; nothing was "
                                  "written");
            break;
        case FENCE_STORE_OVERFLOW:
            reply_error(c, "ERR", "increment would overflow; nothing was "
                                  "written");
            break;
        }
        break;
    }
    case FENCE_STORE_OP_FGET:
        fence__store_db_get(s->db, cmd->key, cmd->key_len, on_value, c);
        break;
    case FENCE_STORE_OP_FENCE_HIGH: {
        uint64_t h = fence__store_db_high(s->db, cmd->fence, cmd->fence_len);
        assert(h <= FENCE_STORE_TOKEN_MAX);
        reply_int(c, (int64_t)h);
        break;
    }
    case FENCE_STORE_OP_PING:
        if (cmd->value)
            reply_bulk(c, cmd->value, cmd->value_len);
        else
            reply_simple(c, "PONG");
        break;
    case FENCE_STORE_OP_INFO:
        reply_info(c);
        break;
    case FENCE_STORE_OP_QUIT:
        reply_simple(c, "OK");
        c->close_after_write = true;
        break;
    case FENCE_STORE_OP_COMMAND:
        REPLY(c, fence_resp_array, 0);
        break;
    }
}

/* Parse and run every complete request in rbuf, in order. */
static void process(conn *c)
{
    server *s = c->srv;
    size_t off = 0;
    while (!c->closing && !c->close_after_write && off < c->rlen) {
        ssize_t n = fence_resp_parse(c->rbuf + off, c->rlen - off, &s->lim,
                                     s->msg);
        if (n == FENCE_RESP_PARTIAL)
            break;
        if (n < 0) {
            char msg[256];
            if (n == FENCE_RESP_ETOOBIG) {
                snprintf(msg, sizeof(msg),
                         "%s (this fence-store accepts values up to %" PRIu64
                         " bytes, --max-value); nothing was written; closing",
                         s->msg->error, s->cfg->max_value);
                reply_error(c, "LIMIT", msg);
            } else {
                snprintf(msg, sizeof(msg), "Protocol error: %s; closing",
                         s->msg->error);
                reply_error(c, "ERR", msg);
            }
            FENCE_STORE_LOG(FENCE_STORE_LOG_DEBUG, "client protocol error: %s",
                      s->msg->error);
            c->close_after_write = true;
            off = c->rlen;
            break;
        }
        off += (size_t)n;
        if (s->msg->argc == 0)
            continue;
        fence_store_cmd cmd;
        const char *code;
        char err[256];
        if (fence__store_cmd_parse(s->msg, s->cfg->max_value, &cmd, &code, err,
                            sizeof(err)) != 0)
            reply_error(c, code, err);
        else
            execute(c, &cmd);
        if (c->wlen >= RBUF_CHUNK)
            flush_replies(c); /* keep only what the client has not taken */
        if (c->closing)
            return;
        if (c->out_pending + c->wlen > s->cfg->obuf_max) {
            FENCE_STORE_LOG(FENCE_STORE_LOG_WARN,
                      "disconnecting a slow reader: %zu reply bytes queued "
                      "(--obuf-max %" PRIu64 ")",
                      c->out_pending + c->wlen, s->cfg->obuf_max);
            conn_close(c);
            return;
        }
    }
    if (c->closing)
        return;
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    if (c->rlen == s->rbuf_max && !c->close_after_write) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "request exceeds %zu bytes (--max-value %" PRIu64
                 " plus room for the other arguments); closing",
                 s->rbuf_max, s->cfg->max_value);
        reply_error(c, "LIMIT", msg);
        c->close_after_write = true;
    }
    if (c->rlen == 0 && c->rcap > RBUF_CHUNK) {
        free(c->rbuf); /* give back the room a large value needed */
        c->rbuf = NULL;
        c->rcap = 0;
    }
    flush_replies(c);
}

/* libuv wants a buffer: room at the end of rbuf, growing it up to the
 * bound (process() closes a connection whose buffer is full). */
static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)hint;
    conn *c = (conn *)h;
    size_t max = c->srv->rbuf_max;
    if (c->rcap - c->rlen < RBUF_CHUNK && c->rcap < max) {
        size_t cap = c->rcap + RBUF_CHUNK * (c->rcap / RBUF_CHUNK + 1);
        if (cap > max)
            cap = max;
        char *p = realloc(c->rbuf, cap);
        if (p != NULL) {
            c->rbuf = p;
            c->rcap = cap;
        }
    }
    *buf = uv_buf_init(c->rbuf + c->rlen, (unsigned)(c->rcap - c->rlen));
}

/* Bytes arrived (or EOF / an error). */
static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    conn *c = (conn *)st;
    if (nread == UV_EOF) {
        /* The client is done sending (maybe only half-closed): finish
         * sending the replies it is owed, then close. */
        uv_read_stop(st);
        c->close_after_write = true;
        flush_replies(c);
        return;
    }
    if (nread < 0) {
        FENCE_STORE_LOG(FENCE_STORE_LOG_DEBUG, "client read error: %s",
                        uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    if (nread == 0 || c->close_after_write)
        return; /* EAGAIN, or input after a fatal error: ignored */
    c->rlen += (size_t)nread;
    assert(c->rlen <= c->rcap);
    process(c);
}

/* A client connected: accept it, or refuse it with -LIMIT when full. */
static void on_connection(uv_stream_t *l, int status)
{
    server *s = l->data;
    if (status < 0) {
        FENCE_STORE_LOG(FENCE_STORE_LOG_WARN, "accept failed: %s",
                        uv_strerror(status));
        return;
    }
    conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        FENCE_STORE_LOG(FENCE_STORE_LOG_ERROR,
                        "out of memory for a connection");
        return;
    }
    c->srv = s;
    uv_tcp_init(s->loop, &c->tcp);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    if (uv_accept(l, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    s->served_total++;
    uv_tcp_nodelay(&c->tcp, 1);
    if (s->nconns > s->cfg->max_clients) {
        char msg[128];
        snprintf(msg, sizeof(msg), "max clients (%" PRIu64 ") reached",
                 s->cfg->max_clients);
        reply_error(c, "LIMIT", msg);
        c->close_after_write = true;
        flush_replies(c);
        FENCE_STORE_LOG(FENCE_STORE_LOG_WARN, "refused a client: %s", msg);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

/* SIGINT/SIGTERM: stop accepting, close everything, let the loop end. */
static void on_signal(uv_signal_t *sig, int signum)
{
    server *s = sig->data;
    FENCE_STORE_LOG(FENCE_STORE_LOG_INFO, "signal %d: stopping", signum);
    uv_close((uv_handle_t *)&s->listener, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    for (conn *c = s->conns; c; c = c->next)
        conn_close(c);
}

/* Set up and run the loop; see server.h. */
int fence__store_server_run(const fence_store_config *cfg, fence_store_db *db)
{
    static server srv;
    server *s = &srv;
    s->cfg = cfg;
    s->db = db;
    s->loop = uv_default_loop();
    fence_resp_limits_default(&s->lim);
    s->lim.args_max = 16;
    s->lim.bulk_max = cfg->max_value;
    s->rbuf_max = (size_t)cfg->max_value + FENCE_STORE_RBUF_SLACK;
    s->msg = malloc(sizeof(*s->msg));
    if (s->msg == NULL) {
        FENCE_STORE_LOG(FENCE_STORE_LOG_ERROR, "out of memory");
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);

    struct sockaddr_storage addr;
    int rc = uv_ip4_addr(cfg->bind, (int)cfg->port,
                         (struct sockaddr_in *)&addr);
    if (rc != 0)
        rc = uv_ip6_addr(cfg->bind, (int)cfg->port,
                         (struct sockaddr_in6 *)&addr);
    if (rc != 0) {
        FENCE_STORE_LOG(FENCE_STORE_LOG_ERROR,
                        "--bind '%s' is not an IPv4 or IPv6 "
                        "address",
                        cfg->bind);
        free(s->msg);
        return 1;
    }
    uv_tcp_init(s->loop, &s->listener);
    s->listener.data = s;
    rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, 511, on_connection);
    if (rc != 0) {
        FENCE_STORE_LOG(FENCE_STORE_LOG_ERROR,
                        "cannot listen on %s:%" PRIu64 ": %s", cfg->bind,
                        cfg->port, uv_strerror(rc));
        uv_close((uv_handle_t *)&s->listener, NULL);
        uv_run(s->loop, UV_RUN_DEFAULT);
        free(s->msg);
        return 1;
    }
    uv_signal_init(s->loop, &s->sigint);
    uv_signal_init(s->loop, &s->sigterm);
    s->sigint.data = s->sigterm.data = s;
    uv_signal_start(&s->sigint, on_signal, SIGINT);
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    FENCE_STORE_LOG(FENCE_STORE_LOG_INFO,
                    "fence-store listening on %s:%" PRIu64, cfg->bind,
                    cfg->port);
    uv_run(s->loop, UV_RUN_DEFAULT);
    uv_loop_close(s->loop);
    free(s->msg);
    FENCE_STORE_LOG(FENCE_STORE_LOG_INFO, "fence-store stopped");
    return 0;
}
