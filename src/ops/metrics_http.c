/* The metrics HTTP endpoint: /metrics and /health, served by libmicrohttpd
 * from its own internal polling thread, so no HTTP byte is ever parsed or
 * written on a daemon's event loop.  We bind the listening socket ourselves
 * (so a failure names the address and errno, and port 0 works), then hand
 * it to libmicrohttpd with a connection limit, a short idle timeout and a
 * limit per remote address (FENCE_METRIC_HTTP_*, limits.h), so that idle
 * sockets cannot lock /health out.  The daemons bind it to --metrics-bind
 * (loopback by default), not to their client address.  See
 * docs/metrics.md for why libmicrohttpd rather than H2O. */
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/limits.h"
#include "ops/metrics.h"

/* Open connections of one remote address (per-address limit). */
typedef struct peer_count {
    uint8_t key[16];   /* IPv4 address, or IPv6 /64 (zero padded) */
    uint8_t len;       /* bytes of key in use; 0: free slot */
    unsigned n;        /* open connections */
} peer_count;

/* A running endpoint. */
struct fence_metrics_http {
    struct MHD_Daemon *mhd;         /* libmicrohttpd's daemon (owns the thread) */
    peer_count *peers;              /* per-address counts, max_conns slots
                                     * (touched on the HTTP thread only) */
    unsigned max_conns;             /* connection limit */
    int fd;                         /* the listening socket */
    int port;                       /* the port bound */
    fence_metrics *metrics;         /* what /metrics renders */
    fence_metrics_health_fn health; /* /health's answer, or NULL */
    void *health_arg;               /* passed to health */
};

/* A marker for "this request's first call was seen" (libmicrohttpd calls
 * the handler once for the headers, then again for any body, then for the
 * end; we answer at the last). */
static int request_marker;

/* Queue a response with body bytes (copied) and a content type. */
static enum MHD_Result respond(struct MHD_Connection *c, unsigned status,
                               const char *type, const char *body, size_t len) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /metrics: render the registry into a buffer libmicrohttpd frees. */
static enum MHD_Result serve_metrics(fence_metrics_http *h, struct MHD_Connection *c) {
    fence_metrics_text text = {0};
    if (fence_metrics_render(h->metrics, &text) != 0) {
        free(text.buf);
        static const char oom[] = "out of memory\n";
        return respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain", oom, sizeof(oom) - 1);
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(text.len, text.buf, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(text.buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            "text/plain; version=0.0.4; charset=utf-8");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* GET /health: 200 "ok ..." when the daemon says it can serve writes, else
 * 503 with its reason. */
static enum MHD_Result serve_health(fence_metrics_http *h, struct MHD_Connection *c) {
    char reason[256] = "ok";
    bool ok = true;
    if (h->health != NULL) {
        reason[0] = '\0';
        ok = h->health(h->health_arg, reason, sizeof(reason));
        reason[sizeof(reason) - 1] = '\0';
    }
    char body[300];
    int n = snprintf(body, sizeof(body), "%s%s%s\n", ok ? "ok" : "unavailable",
                     reason[0] != '\0' ? ": " : "", reason);
    if (n < 0 || (size_t)n >= sizeof(body))
        n = (int)sizeof(body) - 1;
    return respond(c, ok ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain", body,
                   (size_t)n);
}

/* libmicrohttpd's request handler (runs on its thread). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
    (void)version;
    (void)upload_data;
    fence_metrics_http *h = cls;
    if (*req_cls == NULL) {
        *req_cls = &request_marker;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        *upload_data_size = 0; /* a body is read and dropped, bounded by MHD */
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
        static const char msg[] = "method not allowed\n";
        return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", msg, sizeof(msg) - 1);
    }
    if (strcmp(url, "/metrics") == 0)
        return serve_metrics(h, c);
    if (strcmp(url, "/health") == 0)
        return serve_health(h, c);
    static const char msg[] = "not found (try /metrics or /health)\n";
    return respond(c, MHD_HTTP_NOT_FOUND, "text/plain", msg, sizeof(msg) - 1);
}

/* The per-address key of a socket address: false for loopback (not
 * limited) and for anything that is not IP. */
static bool peer_key(const struct sockaddr *sa, uint8_t key[16], uint8_t *len)
{
    memset(key, 0, 16);
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        memcpy(key, &a->sin_addr, 4);
        *len = 4;
        return key[0] != 127;
    }
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
            return false;
        if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
            memcpy(key, &a->sin6_addr.s6_addr[12], 4);
            *len = 4;
            return key[0] != 127;
        }
        memcpy(key, &a->sin6_addr, 8);
        *len = 8;
        return true;
    }
    return false;
}

/* The slot of key, or (add) a free one; NULL when none. */
static peer_count *peer_find(fence_metrics_http *h, const uint8_t key[16], uint8_t len, bool add)
{
    peer_count *free_slot = NULL;
    for (unsigned i = 0; i < h->max_conns; i++) {
        peer_count *p = &h->peers[i];
        if (p->len == len && memcmp(p->key, key, 16) == 0)
            return p;
        if (p->len == 0 && free_slot == NULL)
            free_slot = p;
    }
    if (!add || free_slot == NULL)
        return NULL;
    memcpy(free_slot->key, key, 16);
    free_slot->len = len;
    free_slot->n = 0;
    return free_slot;
}

/* libmicrohttpd asks whether to accept a connection from addr: not when
 * that remote address already holds FENCE_METRIC_HTTP_PER_IP. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
    fence_metrics_http *h = cls;
    uint8_t key[16], len;
    (void)addrlen;
    if (!peer_key(addr, key, &len))
        return MHD_YES;
    const peer_count *p = peer_find(h, key, len, false);
    return p == NULL || p->n < FENCE_METRIC_HTTP_PER_IP ? MHD_YES : MHD_NO;
}

/* A connection started or closed: keep the per-address counts (the slot
 * is remembered in the connection's socket context). */
static void on_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode toe)
{
    fence_metrics_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        uint8_t key[16], len;
        *socket_context = NULL;
        if (ci == NULL || ci->client_addr == NULL || !peer_key(ci->client_addr, key, &len))
            return;
        peer_count *p = peer_find(h, key, len, true);
        if (p != NULL) {
            p->n++;
            *socket_context = p;
        }
    } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        peer_count *p = *socket_context;
        if (p != NULL) {
            FENCE_ASSERT(p->n > 0);
            if (--p->n == 0)
                p->len = 0;
        }
        *socket_context = NULL;
    }
}

/* Bind and listen on bind:port; returns the socket or -1 with the reason
 * in errbuf.  *v6 tells whether it is an IPv6 socket, *bound the port. */
static int listen_on(const char *bind_addr, int port, bool *v6, int *bound, char *errbuf,
                     size_t errcap) {
    char port_s[16];
    snprintf(port_s, sizeof(port_s), "%d", port);
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(bind_addr, port_s, &hints, &ai);
    if (rc != 0) {
        snprintf(errbuf, errcap, "%s:%d: %s", bind_addr, port, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto out_errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (ai->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, FENCE_METRIC_HTTP_BACKLOG) != 0)
        goto out_close;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        goto out_close;
    *v6 = ss.ss_family == AF_INET6;
    *bound = *v6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                 : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    freeaddrinfo(ai);
    return fd;

out_close:
    rc = errno;
    close(fd);
    errno = rc;
out_errno:
    snprintf(errbuf, errcap, "%s:%d: %s", bind_addr, port, strerror(errno));
    freeaddrinfo(ai);
    return -1;
}

/* Start the endpoint (see metrics.h). */
int fence_metrics_http_start(const fence_metrics_http_opts *opts, fence_metrics_http **out,
                             char *errbuf, size_t errcap) {
    FENCE_ASSERT(opts != NULL);
    FENCE_ASSERT(opts->metrics != NULL);
    FENCE_ASSERT(out != NULL);
    if (opts->port < 0 || opts->port > 65535) {
        snprintf(errbuf, errcap, "metrics port %d out of range", opts->port);
        return -1;
    }
    fence_metrics_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        snprintf(errbuf, errcap, "out of memory");
        return -1;
    }
    h->metrics = opts->metrics;
    h->health = opts->health;
    h->health_arg = opts->health_arg;
    bool v6 = false;
    h->fd = listen_on(opts->bind != NULL ? opts->bind : "127.0.0.1", opts->port, &v6,
                      &h->port, errbuf, errcap);
    if (h->fd < 0)
        goto out_free;
    unsigned conns = opts->max_conns != 0 ? opts->max_conns : FENCE_METRIC_HTTP_CONNS_DEFAULT;
    unsigned timeout = opts->timeout_s != 0 ? opts->timeout_s : FENCE_METRIC_HTTP_TIMEOUT_S;
    h->max_conns = conns;
    h->peers = calloc(conns, sizeof(*h->peers));
    if (h->peers == NULL) {
        snprintf(errbuf, errcap, "out of memory");
        goto out_close;
    }
    unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | (v6 ? MHD_USE_IPv6 : 0);
    /* The HTTP thread inherits this thread's signal mask: block everything
     * while it is created, so the daemon's signals (SIGTERM, SIGINT) are
     * always taken by the event loop's thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    h->mhd = MHD_start_daemon(flags, 0, on_accept, h, on_request, h,
                              MHD_OPTION_LISTEN_SOCKET, (MHD_socket)h->fd,
                              MHD_OPTION_CONNECTION_LIMIT, conns,
                              MHD_OPTION_CONNECTION_TIMEOUT, timeout,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)FENCE_METRIC_HTTP_CONN_MEMORY,
                              MHD_OPTION_NOTIFY_CONNECTION, on_notify, h,
                              MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (h->mhd == NULL) {
        snprintf(errbuf, errcap, "metrics endpoint on port %d: libmicrohttpd did not start",
                 h->port);
        goto out_close;
    }
    *out = h;
    return 0;

out_close:
    close(h->fd);
out_free:
    free(h->peers);
    free(h);
    return -1;
}

/* The port bound. */
int fence_metrics_http_port(const fence_metrics_http *h) {
    return h->port;
}

/* Stop and free. */
void fence_metrics_http_stop(fence_metrics_http *h) {
    if (h == NULL)
        return;
    /* Quiescing hands the listening socket back (MHD would otherwise close
     * it in stop), so it is closed exactly once, here. */
    MHD_socket fd = MHD_quiesce_daemon(h->mhd);
    MHD_stop_daemon(h->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
    free(h->peers);
    free(h);
}
