/* libfence: the client handle, opened and closed.  Its connection pool and
 * the request loop are call.c's, the error strings errors.c's; closing
 * stops the keepalive thread (lock.c) first.  Nothing below calls back
 * into this file. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/assert.h"
#include "libfence/internal.h"

/* Fill defaults into a zeroed options struct. */
void fence_client_opts_init(fence_client_opts *opts)
{
    FENCE_ASSERT(opts != NULL);
    memset(opts, 0, sizeof(*opts));
}

/* Copy the TLS and login options and make the TLS context (wire.c); the
 * options' strings then point at the copies.  0, FENCE_ENOMEM or
 * FENCE_EINVAL (errmsg set). */
static int copy_secrets(fence_client *c, const fence_client_opts *opts)
{
    fence__wire_owned *w = &c->wire;
    int rv = fence__wire_owned_init(w, opts->tls, opts->tls_ca_file, opts->tls_cert_file,
                                    opts->tls_key_file, opts->tls_server_name, opts->user,
                                    opts->password);
    c->opts.tls_ca_file = w->ca_file;
    c->opts.tls_cert_file = w->cert_file;
    c->opts.tls_key_file = w->key_file;
    c->opts.tls_server_name = w->server_name;
    c->opts.user = w->user;
    c->opts.password = w->password;
    return rv;
}

/* Create a client; see fence.h. */
int fence_client_open(const fence_client_opts *opts, fence_client **out)
{
    if (opts == NULL || out == NULL)
        return fence__fail(FENCE_EINVAL, "opts and out must not be NULL");
    *out = NULL;
    fence_client *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return fence__fail(FENCE_ENOMEM, "out of memory");
    c->opts = *opts;
    const char *servers = opts->servers;
    if (servers == NULL || servers[0] == '\0')
        servers = getenv("FENCE_SERVER");
    if (servers == NULL || servers[0] == '\0')
        servers = "127.0.0.1:7700";
    c->opts.servers = NULL; /* not kept: the parsed list is */
    if (fence__addr_parse_list(servers, c->addrs, FENCE__ADDRS_MAX,
                               &c->n_addrs) != 0) {
        free(c);
        return fence__fail(FENCE_EINVAL,
                           "bad server list \"%.200s\" (want host:port[,host:port...], "
                           "at most %d)", servers, FENCE__ADDRS_MAX);
    }
    if (c->opts.timeout_ms == 0)
        c->opts.timeout_ms = 5000;
    if (c->opts.connect_timeout_ms == 0)
        c->opts.connect_timeout_ms = 1000;
    if (c->opts.backoff_ms_min == 0)
        c->opts.backoff_ms_min = 20;
    if (c->opts.backoff_ms_max == 0)
        c->opts.backoff_ms_max = 1000;
    if (c->opts.backoff_ms_max < c->opts.backoff_ms_min)
        c->opts.backoff_ms_max = c->opts.backoff_ms_min;
    if (c->opts.pool_max == 0)
        c->opts.pool_max = 64;
    c->rand_state = fence__reqid();
    int rv = copy_secrets(c, opts);
    if (rv != 0) {
        fence__wire_owned_free(&c->wire);
        free(c);
        return rv;
    }

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->pool_cv, &ca);
    pthread_cond_init(&c->ka_cv, &ca);
    pthread_cond_init(&c->ka_done_cv, &ca);
    pthread_condattr_destroy(&ca);
    *out = c;
    return 0;
}

/* Close the client; see fence.h. */
void fence_client_close(fence_client *c)
{
    if (c == NULL)
        return;
    fence__ka_stop(c);
    pthread_mutex_lock(&c->mu);
    while (c->locks != NULL) {
        struct fence_lock *l = c->locks;
        c->locks = l->next;
        free(l->name);
        free(l);
    }
    while (c->idle != NULL) {
        fence__conn *k = c->idle;
        c->idle = k->next;
        fence__conn_drop(k);
        free(k);
    }
    pthread_mutex_unlock(&c->mu);
    fence__conn_drop(&c->ka_conn);
    pthread_cond_destroy(&c->pool_cv);
    pthread_cond_destroy(&c->ka_cv);
    pthread_cond_destroy(&c->ka_done_cv);
    pthread_mutex_destroy(&c->mu);
    fence__wire_owned_free(&c->wire);
    free(c);
}

/* Copy the believed leader's address; see fence.h. */
void fence_client_server(fence_client *c, char *buf, size_t cap)
{
    FENCE_ASSERT(c != NULL);
    pthread_mutex_lock(&c->mu);
    fence__addr_format(&c->addrs[c->leader], buf, cap);
    pthread_mutex_unlock(&c->mu);
}

/* Free memory handed out by the library. */
void fence_free(void *p)
{
    free(p);
}
