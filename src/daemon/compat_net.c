/* CLIENT LIST over the shared connection layer (see compat_net.h). */
#include "daemon/compat_net.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <netinet/in.h>

#include "base/assert.h"
#include "base/version.h"

/* "ip:port" of a socket address into out ("?:0" when unknown). */
static void addr_text(const struct sockaddr_storage *ss, int ok, char *out,
                      size_t cap)
{
    char ip[64] = "?";
    unsigned port = 0;
    if (ok == 0 && ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        uv_ip4_name(a, ip, sizeof(ip));
        port = ntohs(a->sin_port);
    } else if (ok == 0 && ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        uv_ip6_name(a, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
    }
    snprintf(out, cap, "%s:%u", ip, port);
}

/* Walk net's connections; see compat_net.h. */
void fence__compat_net_list(fence_net *net, size_t compat_off,
                            fence_compat_emit_fn emit, void *emit_arg)
{
    FENCE_ASSERT(compat_off >= sizeof(fence_net_conn));
    for (fence_net_conn *c = net->conns; c != NULL; c = c->next) {
        char addr[128], laddr[128];
        fence_compat_client_info ci;
        memset(&ci, 0, sizeof(ci));
        ci.conn = (const fence_compat_conn *)((const char *)c + compat_off);
        ci.fd = -1;
        /* Any transport over TCP (plain or TLS) has a peer address; only
         * Unix-socket connections show the socket's path. */
        if (c->h.handle.type == UV_TCP) {
            struct sockaddr_storage ss;
            int len = (int)sizeof(ss);
            int rc = uv_tcp_getpeername(&c->h.tcp, (struct sockaddr *)&ss, &len);
            addr_text(&ss, rc, addr, sizeof(addr));
            len = (int)sizeof(ss);
            rc = uv_tcp_getsockname(&c->h.tcp, (struct sockaddr *)&ss, &len);
            addr_text(&ss, rc, laddr, sizeof(laddr));
        } else {
            snprintf(addr, sizeof(addr), "%s:0",
                     net->pipe_open ? net->pipe_path : "unix");
            snprintf(laddr, sizeof(laddr), "%s:0",
                     net->pipe_open ? net->pipe_path : "unix");
        }
        uv_os_fd_t fd;
        if (uv_fileno(&c->h.handle, &fd) == 0)
            ci.fd = (int)fd;
        ci.addr = addr;
        ci.laddr = laddr;
        ci.qbuf = c->rlen;
        ci.obuf = c->wlen + c->out_pending;
        emit(emit_arg, &ci);
    }
}

/* Wall clock for TIME; see compat_net.h. */
uint64_t fence__compat_wall_us(void *arg)
{
    struct timeval tv;
    (void)arg;
    gettimeofday(&tv, NULL);
    return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
}

/* The context every daemon gives the module; see compat_net.h. */
void fence__compat_ctx_init(fence_compat_ctx *ctx, const char *server,
                            const fence_compat_command *commands,
                            size_t n_commands,
                            void (*list)(void *, fence_compat_emit_fn, void *),
                            void *arg)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->server = server;
    ctx->version = FENCE_VERSION;
    ctx->commands = commands;
    ctx->n_commands = n_commands;
    ctx->list = list;
    ctx->wall_us = fence__compat_wall_us;
    ctx->auth = NULL; /* set by the daemon when an --acl-file is loaded */
    ctx->arg = arg;
}

/* Answer a compat command on c; see compat_net.h. */
bool fence__compat_net_handle(const fence_compat_ctx *ctx, fence_compat_conn *cc,
                              fence_net_conn *c, const fence_resp_msg *m)
{
    fence_compat_reply out;
    fence_compat_reply_init(&out);
    int rc = fence_compat_handle(ctx, cc, m, &out);
    if (rc == FENCE_COMPAT_REPLIED)
        fence__net_reply(c, out.ptr, out.len);
    fence_compat_reply_free(&out);
    return rc == FENCE_COMPAT_REPLIED;
}
