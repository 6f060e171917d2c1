/* The RESP daemon skeleton at run time (daemon.h): logging, the layer's
 * limits, the listeners, AUTH/HELLO/CLIENT and the ACL, SIGHUP. */
#include "daemon/daemon.h"

#include <stdio.h>
#include <string.h>

#include "daemon/acl_conns.h"
#include "daemon/acl_srv.h"
#include "base/assert.h"
#include "daemon/compat_net.h"
#include "base/log.h"
#include "daemon/startup_warn.h"
#include "net/tls.h"
#include "base/version.h"

/* Start logging; see daemon.h. */
int fence__daemon_log_start(const fence_daemon_conf *c, const char *prog)
{
    fence__log_format_set(c->log_format);
    int rv = fence__log_open(c->log_level_num, c->log_file);
    if (rv != 0) {
        fprintf(stderr, "%s: log-file %s: cannot open: %s\n", prog, c->log_file, strerror(rv));
        return -1;
    }
    return 0;
}

/* The loud lines about an exposed port; see daemon.h. */
void fence__daemon_startup_warn(const fence_daemon_conf *c, const char *prog)
{
    fence__startup_warn_auth(prog, c->bind, c->acl_file[0] != '\0', fence__daemon_tls_only(c),
                             c->insecure);
}

/* The layer's limits from the shared options; see daemon.h. */
void fence__daemon_net_limits(const fence_daemon_conf *c, fence_net_limits *lim)
{
    lim->max_clients = c->max_clients;
    lim->max_pipeline = (uint32_t)c->max_pipeline;
    lim->max_obuf = c->max_obuf;
    fence__net_guard_limits(lim, c->max_conn_memory, c->idle_timeout_ms, c->request_timeout_ms,
                            c->auth_timeout_ms, c->acl_file[0] != '\0');
}

/* ---- AUTH, HELLO, CLIENT and the ACL ---------------------------------------- */

/* The layer connection whose compat state is cc. */
static fence_net_conn *conn_of(const fence_daemon *d, fence_compat_conn *cc)
{
    return (fence_net_conn *)((char *)cc - d->p.compat_off);
}

/* The compat module's AUTH callback (with --acl-file): check (a failure
 * is counted, logged and slowed down there), and trust the connection
 * (conn_guard.c) once logged in. */
static int auth_cb(void *arg, fence_compat_conn *cc, const fence_resp_arg *user,
                   const fence_resp_arg *pass)
{
    fence_daemon *d = arg;
    return fence__acl_srv_auth(d->p.acl, cc, conn_of(d, cc), user, pass);
}

/* CLIENT LIST: whether the connection of cc sees every connection
 * (@admin, or no --acl-file), not only its own user's. */
static bool sees_all_cb(void *arg, const fence_compat_conn *cc)
{
    fence_daemon *d = arg;
    return fence__acl_srv_admin(d->p.acl, (fence_compat_conn *)cc);
}

/* CLIENT LIST: every open client connection of the daemon. */
static void list_conns(void *arg, fence_compat_emit_fn emit, void *emit_arg)
{
    fence_daemon *d = arg;
    fence__compat_net_list(d->p.net, d->p.compat_off, emit, emit_arg);
}

/* The compat state of the daemon's connection c. */
static fence_compat_conn *compat_of(const fence_daemon *d, fence_net_conn *c)
{
    return (fence_compat_conn *)((char *)c + d->p.compat_off);
}

/* The compat context and the ACL; see daemon.h. */
int fence__daemon_users_init(fence_daemon *d, const fence_daemon_parts *parts)
{
    FENCE_ASSERT(parts->compat_off >= sizeof(fence_net_conn));
    FENCE_ASSERT(parts->quota_off >= sizeof(fence_net_conn));
    d->p = *parts;
    const fence_daemon_conf *c = parts->conf;
    fence_compat_ctx *compat = parts->compat;
    fence__compat_ctx_init(compat, parts->prog, parts->commands, parts->n_commands, list_conns,
                           d);
    char err[512];
    const char *path = c->acl_file[0] != '\0' ? c->acl_file : NULL;
    if (fence__acl_srv_init(parts->acl, path, err, sizeof(err)) != 0) {
        FENCE_LOG_E("acl-file: %s", err);
        return -1;
    }
    fence__acl_srv_set_commands(parts->acl, parts->commands, parts->n_commands);
    compat->sees_all = sees_all_cb;
    if (path != NULL) {
        compat->auth = auth_cb; /* compat->arg is d */
        FENCE_LOG_I("acl: %s loaded (%zu users)", path, fence_acl_count(parts->acl->acl));
    }
    return 0;
}

/* A connection was accepted; see daemon.h. */
void fence__daemon_conn_open(fence_daemon *d, fence_net_conn *c)
{
    fence_compat_conn_init(compat_of(d, c), c->id);
    fence__acl_srv_net_open(d->p.acl, compat_of(d, c), c);
}

/* The gate and maxconns; see daemon.h. */
bool fence__daemon_acl_gate(fence_daemon *d, fence_net_conn *c, const fence_resp_msg *m)
{
    return fence__acl_srv_net_gate(d->p.acl, compat_of(d, c), c, m) ||
           fence__acl_conns_refused(d->p.acl, d->p.acl_conns, d->p.net, d->p.compat_off,
                                    d->p.quota_off, c);
}

/* The compat commands; see daemon.h. */
bool fence__daemon_compat(fence_daemon *d, fence_net_conn *c, const fence_resp_msg *m)
{
    return fence__compat_net_handle(d->p.compat, compat_of(d, c), c, m);
}

/* A connection is closing; see daemon.h. */
void fence__daemon_conn_closed(fence_daemon *d, fence_net_conn *c)
{
    fence__acl_conns_closed(d->p.acl_conns, (uint64_t *)((char *)c + d->p.quota_off));
}

/* ---- Listeners ---------------------------------------------------------------- */

/* Open the listeners; see daemon.h. */
int fence__daemon_listen(fence_daemon *d)
{
    const fence_daemon_conf *c = d->p.conf;
    fence_net *net = d->p.net;
    char err[1400];
    if (c->port != 0) {
        if (fence__net_listen_tcp(net, c->bind, (unsigned)c->port, err, sizeof(err)) != 0) {
            FENCE_LOG_E("%s", err);
            return -1;
        }
        FENCE_LOG_I("listening on %s:%llu", c->bind, (unsigned long long)c->port);
    }
    if (c->tls_port != 0) {
        fence_tls_opts o = {c->tls_cert, c->tls_key, c->tls_ca, c->tls_auth,
                            c->tls_handshake_ms};
        if (fence__tls_listen(net, &o, c->bind, (unsigned)c->tls_port, err,
                              sizeof(err)) != 0) {
            FENCE_LOG_E("%s", err);
            return -1;
        }
        FENCE_LOG_I("listening for TLS on %s:%llu (client certificates: %s)", c->bind,
                    (unsigned long long)c->tls_port, fence__tls_auth_name(c->tls_auth));
    }
    if (c->unix_socket[0] != '\0') {
        if (fence__net_listen_unix(net, c->unix_socket, err, sizeof(err)) != 0) {
            FENCE_LOG_E("%s", err);
            return -1;
        }
        FENCE_LOG_I("listening on unix socket %s", c->unix_socket);
    }
    return 0;
}

/* ---- Signals ------------------------------------------------------------------ */

/* SIGHUP: logrotate moved the log file, write to a fresh one at the same
 * path; read the ACL file again (a bad one keeps the old users), then the
 * daemon's keys. */
void fence__daemon_sighup(fence_daemon_signals *sg)
{
    if (fence__log_reopen() == 0)
        FENCE_LOG_I("SIGHUP: log file reopened");
    char err[512];
    fence_daemon *d = sg->d;
    if (d->p.acl != NULL && fence__acl_srv_has_file(d->p.acl))
        (void)fence__acl_srv_reload(d->p.acl, err, sizeof(err)); /* it logs */
    if (sg->reload != NULL)
        sg->reload(sg->reload_arg);
}

/* The SIGHUP handle's callback. */
static void on_sighup(uv_signal_t *sig, int signum)
{
    (void)signum;
    fence__daemon_sighup(sig->data);
}

/* Start SIGHUP; see daemon.h. */
void fence__daemon_signals_start(fence_daemon_signals *sg, fence_daemon *d, uv_loop_t *loop,
                                 fence_daemon_reload_fn reload, void *arg)
{
    FENCE_ASSERT(!sg->on);
    sg->d = d;
    sg->reload = reload;
    sg->reload_arg = arg;
    uv_signal_init(loop, &sg->sighup);
    sg->sighup.data = sg;
    uv_signal_start(&sg->sighup, on_sighup, SIGHUP);
    uv_unref((uv_handle_t *)&sg->sighup);
    sg->on = true;
}

/* Close SIGHUP; see daemon.h. */
void fence__daemon_signals_close(fence_daemon_signals *sg)
{
    if (!sg->on)
        return;
    uv_close((uv_handle_t *)&sg->sighup, NULL);
    sg->on = false;
}
