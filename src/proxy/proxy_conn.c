/* fence-proxy: client connections (accept, the table by H2O socket,
 * close) and the two limits on them: --max-connections (the quietest idle
 * one makes room) and --max-conn-memory (the sweep after every poll). */
#include "proxy/proxy_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/assert.h"
#include "base/log.h"

static bool conn_evictable(fp_conn *c);

/* ---- Connections ----------------------------------------------------- */

/* The bucket of H2O socket sock in srv.chash. */
static size_t conn_bucket(const h2o_socket_t *sock)
{
    uint64_t h = (uint64_t)(uintptr_t)sock;
    h ^= h >> 17;
    h *= 0x9e3779b97f4a7c15ULL;
    return (size_t)(h >> 40) & (FP_CONN_BUCKETS - 1);
}

/* The connection of the client's request, or NULL. */
fp_conn *fence__proxy_conn_of(h2o_req_t *req)
{
    if (req->conn == NULL || req->conn->callbacks->get_socket == NULL)
        return NULL;
    h2o_socket_t *sock = req->conn->callbacks->get_socket(req->conn);
    if (sock == NULL)
        return NULL;
    for (fp_conn *c = srv.chash[conn_bucket(sock)]; c != NULL; c = c->hnext)
        if (c->sock == sock)
            return c;
    return NULL;
}

/* A client connection closed (H2O closed its socket). */
static void on_conn_close(uv_handle_t *h)
{
    fp_conn *c = (fp_conn *)h;
    FENCE_ASSERT(srv.nconns > 0);
    FENCE_ASSERT(c->reqs == 0);
    srv.nconns--;
    if (c->closing) {
        FENCE_ASSERT(srv.nclosing > 0);
        srv.nclosing--;
    }
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        srv.conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    fp_conn **pp = &srv.chash[conn_bucket(c->sock)];
    while (*pp != c)
        pp = &(*pp)->hnext;
    *pp = c->hnext;
    FENCE_ASSERT(srv.conn_mem >= c->mem);
    srv.conn_mem -= c->mem;
    fence_metric_set(srv.metrics.connections, (int64_t)srv.nconns);
    free(c);
}

/* A refused connection closed. */
static void on_refused_close(uv_handle_t *h)
{
    free(h);
}

/* Close c to make room (it has no request at the proxy): a short 503 if
 * it was in the middle of a request (plain HTTP only: nothing else is
 * being written on it), then shutdown(), which H2O reads as the client's
 * end and closes the connection itself. */
static void conn_evict(fp_conn *c, const char *why)
{
    FENCE_ASSERT(conn_evictable(c));
    c->closing = true;
    srv.nclosing++;

    uv_os_fd_t fd;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return;
    if (c->sock->ssl == NULL && c->sock->input != NULL && c->sock->input->bytes != NULL &&
        c->sock->input->size > 0) {
        char msg[256];
        int n = snprintf(msg, sizeof(msg),
                         "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                         "Content-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
                         "Content-Length: %zu\r\n\r\nBUSY %s; nothing was forwarded\n",
                         strlen(why) + 28, why);
        if (n > 0 && (size_t)n < sizeof(msg))
            (void)send(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    /* An abortive close: when H2O closes the socket the client gets a
     * reset at once, instead of a zero window on an orphaned socket that
     * a client in the middle of a body would wait on for a minute. */
    struct linger lg = {1, 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    shutdown(fd, SHUT_RDWR);
}

/* Whether c may be closed to make room: no request of it at the proxy,
 * and H2O waiting for its input (so it sees the shutdown at once), not
 * sending it a response. */
static bool conn_evictable(fp_conn *c)
{
    return !c->closing && c->reqs == 0 && c->sock->input != NULL &&
           h2o_socket_is_reading(c->sock) && !h2o_socket_is_writing(c->sock);
}

/* The connection to close to make room for a new one: the one without a
 * request at the proxy that has been quiet longest (idle keep-alive,
 * never sent anything, or trickling a request), or NULL. */
static fp_conn *conn_idlest(void)
{
    fp_conn *best = NULL;
    for (fp_conn *c = srv.conns; c != NULL; c = c->next) {
        if (!conn_evictable(c))
            continue;
        if (best == NULL || c->active_ms < best->active_ms ||
            (c->active_ms == best->active_ms && c->opened_ms < best->opened_ms))
            best = c;
    }
    return best;
}

/* After every poll: account the connections' read buffers (request heads
 * and bodies H2O is reading) and, over --max-conn-memory, close the
 * connections holding the most that have no request at the proxy yet. */
void fence__proxy_on_sweep(uv_check_t *h)
{
    (void)h;
    uint64_t now = uv_now(&srv.loop), mem = 0;
    for (fp_conn *c = srv.conns; c != NULL; c = c->next) {
        h2o_buffer_t *in = c->sock->input; /* NULL once H2O disposed of it */
        c->mem = in != NULL && in->bytes != NULL ? in->capacity : 0;
        mem += c->mem;
        size_t seen = c->sock->bytes_read + (in != NULL ? in->size : 0);
        if (seen != c->last_read) {
            c->last_read = seen;
            c->active_ms = now;
        }
    }
    srv.conn_mem = mem;
    fence_metric_set(srv.pm.memory, (int64_t)(mem + srv.req_mem));
    uint64_t max = srv.cfg->max_conn_memory;
    if (max == 0)
        return;
    uint64_t total = mem + srv.req_mem;
    while (total > max) {
        fp_conn *big = NULL;
        for (fp_conn *c = srv.conns; c != NULL; c = c->next)
            if (c->mem > 0 && conn_evictable(c) && (big == NULL || c->mem > big->mem))
                big = c;
        if (big == NULL)
            break;
        srv.evicted_mem++;
        fence_series_inc(fence_metric_with(srv.pm.evicted, "memory", 6));
        FENCE_LOG_D("closing a connection reading %zu bytes: connections and requests hold %" PRIu64
                    " bytes (--max-conn-memory %" PRIu64 ")",
                    big->mem, total, max);
        conn_evict(big, "the proxy's memory budget (--max-conn-memory) is used up");
        total -= big->mem;
    }
}

/* A client connects: hand it to H2O.  At --max-connections, the quietest
 * connection without a request at the proxy is closed to make room; only
 * when there is none is the new one refused. */
void fence__proxy_on_accept(uv_stream_t *listener, int status)
{
    if (status != 0)
        return;
    fp_conn *c = malloc(sizeof(*c));
    if (c == NULL)
        return;
    memset(c, 0, sizeof(*c));
    uv_tcp_init(listener->loop, &c->tcp);
    if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, on_refused_close);
        return;
    }
    if (srv.nconns - srv.nclosing >= srv.cfg->max_connections) {
        fp_conn *v = conn_idlest();
        if (v == NULL) {
            FENCE_LOG_W("refusing a connection: %" PRIu64
                        " open, each with a request (--max-connections)",
                        srv.nconns);
            uv_close((uv_handle_t *)&c->tcp, on_refused_close);
            return;
        }
        srv.evicted_idle++;
        fence_series_inc(fence_metric_with(srv.pm.evicted, "room", 4));
        FENCE_LOG_D("closing the quietest connection (idle %" PRIu64
                    " ms) to make room (--max-connections)",
                    uv_now(&srv.loop) - v->active_ms);
        conn_evict(v, "connection closed to make room (--max-connections)");
    }
    srv.nconns++;
    fence_metric_set(srv.metrics.connections, (int64_t)srv.nconns);
    uv_tcp_nodelay(&c->tcp, 1);
    if (srv.cfg->max_conn_memory > 0) {
        /* What one loop turn can read from a connection is what its
         * kernel buffer holds: keep that small, so that the budget (checked
         * after every turn) is passed by little. */
        int rcv = FENCE_PROXY_CONN_RCVBUF;
        uv_os_fd_t fd;
        if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) == 0)
            (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
    }
    c->opened_ms = c->active_ms = uv_now(&srv.loop);
    c->sock = h2o_uv_socket_create((uv_stream_t *)&c->tcp, on_conn_close);
    c->next = srv.conns;
    if (srv.conns != NULL)
        srv.conns->prev = c;
    srv.conns = c;
    size_t b = conn_bucket(c->sock);
    c->hnext = srv.chash[b];
    srv.chash[b] = c;
    h2o_accept(&srv.accept_ctx, c->sock);
}
