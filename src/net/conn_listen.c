/* The connection layer's listeners (conn.h): TCP, TCP for another transport
 * (TLS), and a Unix socket, each for the transport it is given (the plain
 * ones come from conn_stream.c, TLS from tls.c); each hands accepted clients to
 * fence__net_on_connection (conn.c), which conn.c hands down at init as
 * net->on_connection. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "base/assert.h"
#include "net/conn.h"

/* Bind and listen on TCP bind:port with the listener handle tcp. */
static int listen_tcp(fence_net *net, uv_tcp_t *tcp, bool *open,
                      const char *bind, unsigned port, char *err, size_t cap)
{
    struct sockaddr_storage addr;
    int rv;
    if (strchr(bind, ':') != NULL)
        rv = uv_ip6_addr(bind, (int)port, (struct sockaddr_in6 *)&addr);
    else
        rv = uv_ip4_addr(bind, (int)port, (struct sockaddr_in *)&addr);
    if (rv != 0) {
        snprintf(err, cap, "bind %s: not an IP address", bind);
        return -1;
    }
    uv_tcp_init(net->loop, tcp);
    tcp->data = net;
    *open = true;
    rv = uv_tcp_bind(tcp, (const struct sockaddr *)&addr, 0);
    if (rv == 0)
        rv = uv_listen((uv_stream_t *)tcp, 511, net->on_connection);
    if (rv != 0) {
        snprintf(err, cap, "listen on %s:%u: %s", bind, port, uv_strerror(rv));
        return -1;
    }
    return 0;
}

/* Listen on TCP for connections of the plain transport tr. */
int fence__net_listen_tcp_with(fence_net *net, const char *bind, unsigned port,
                               const fence_net_transport *tr, char *err, size_t cap)
{
    net->tcp_tr = tr;
    return listen_tcp(net, &net->tcp, &net->tcp_open, bind, port, err, cap);
}

/* Listen on TCP for connections of another transport. */
int fence__net_listen_tcp_tr(fence_net *net, const char *bind, unsigned port,
                             const fence_net_transport *tr, void *ctx,
                             void (*ctx_stop)(void *ctx), char *err,
                             size_t cap)
{
    FENCE_ASSERT(tr != NULL);
    FENCE_ASSERT(!net->tr_tcp_open);
    net->tr_tcp_tr = tr;
    net->tr_ctx = ctx;
    net->tr_ctx_stop = ctx_stop;
    return listen_tcp(net, &net->tr_tcp, &net->tr_tcp_open, bind, port, err,
                      cap);
}

/* Listen on a Unix socket for connections of the plain transport tr. */
int fence__net_listen_unix_with(fence_net *net, const char *path,
                                const fence_net_transport *tr, char *err, size_t cap)
{
    if (strlen(path) >= sizeof(net->pipe_path)) {
        snprintf(err, cap, "unix socket %s: path too long", path);
        return -1;
    }
    net->pipe_tr = tr;
    uv_pipe_init(net->loop, &net->pipe, 0);
    net->pipe.data = net;
    net->pipe_open = true;
    snprintf(net->pipe_path, sizeof(net->pipe_path), "%s", path);
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
        unlink(path); /* a stale socket from a crash */
    int rv = uv_pipe_bind(&net->pipe, path);
    if (rv == 0)
        rv = uv_listen((uv_stream_t *)&net->pipe, 511, net->on_connection);
    if (rv != 0) {
        snprintf(err, cap, "listen on unix socket %s: %s", path,
                 uv_strerror(rv));
        net->pipe_path[0] = '\0'; /* not ours to unlink */
        return -1;
    }
    return 0;
}

/* Close the listeners. */
void fence__net_close_listeners(fence_net *net)
{
    net->stopping = true;
    if (net->tcp_open && !uv_is_closing((uv_handle_t *)&net->tcp))
        uv_close((uv_handle_t *)&net->tcp, NULL);
    if (net->tr_tcp_open && !uv_is_closing((uv_handle_t *)&net->tr_tcp))
        uv_close((uv_handle_t *)&net->tr_tcp, NULL);
    if (net->pipe_open && !uv_is_closing((uv_handle_t *)&net->pipe)) {
        uv_close((uv_handle_t *)&net->pipe, NULL);
        if (net->pipe_path[0] != '\0')
            unlink(net->pipe_path);
    }
}

