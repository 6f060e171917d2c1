/* fencectl's helpers that its commands share (cli.h): exit codes, the
 * server list and client options, opening a client, and the notices on
 * stderr.  main.c, lockcmd.c and bench.c call them; this file calls none
 * of those. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fencectl/cli.h"
#include "libfence/internal.h"

/* Map library errors to the documented exit codes. */
int fencectl_exit_code(int rc)
{
    switch (rc) {
    case FENCE_OK:
        return FENCECTL_EXIT_OK;
    case FENCE_EUNREACHABLE:
    case FENCE_ETIMEOUT:
    case FENCE_EIO:
    case FENCE_ENOTLEADER:
    case FENCE_ETRYAGAIN:
        return FENCECTL_EXIT_UNREACHABLE;
    case FENCE_EBUSY:
        return FENCECTL_EXIT_NOT_ACQUIRED;
    case FENCE_ENOLEASE:
    case FENCE_ELEASELOST:
        return FENCECTL_EXIT_LEASE_LOST;
    case FENCE_EINVAL:
        return FENCECTL_EXIT_USAGE;
    default:
        return FENCECTL_EXIT_ERROR;
    }
}

/* The server list: --server, else $FENCE_SERVER, else the default. */
const char *fencectl_servers(const fencectl_args *a)
{
    if (a->servers != NULL)
        return a->servers;
    const char *env = getenv("FENCE_SERVER");
    if (env != NULL && env[0] != '\0')
        return env;
    return "127.0.0.1:7700";
}

/* Fill the client options from the command line (and $FENCE_PASSWORD when
 * --pass is not given). */
void fencectl_client_opts(const fencectl_args *a, fence_client_opts *o)
{
    fence_client_opts_init(o);
    o->servers = fencectl_servers(a);
    o->timeout_ms = a->timeout_ms;
    o->tls = a->tls || a->tls_ca != NULL || a->tls_cert != NULL;
    o->tls_ca_file = a->tls_ca;
    o->tls_cert_file = a->tls_cert;
    o->tls_key_file = a->tls_key;
    o->tls_server_name = a->tls_server_name;
    o->user = a->user;
    o->password = a->password;
    if (o->password == NULL) {
        const char *env = getenv("FENCE_PASSWORD");
        if (env != NULL && env[0] != '\0')
            o->password = env;
    }
}

/* Open the client or exit with a usage error. */
fence_client *fencectl_open(const fencectl_args *a)
{
    fence_client_opts o;
    fencectl_client_opts(a, &o);
    fence_client *c = NULL;
    int rc = fence_client_open(&o, &c);
    if (rc != 0) {
        fprintf(stderr, "fencectl: %s\n", fence_client_errmsg(NULL));
        exit(FENCECTL_EXIT_USAGE);
    }
    return c;
}

/* libfence's reconnect notice, to stderr. */
static void say_notice(void *arg, const char *msg)
{
    (void)arg;
    fprintf(stderr, "fencectl: %s\n", msg);
}

void fencectl_tell_reconnects(fence_client *c)
{
    fence__client_set_notice(c, say_notice, NULL);
}

void fencectl_say_waiting(fence_client *c, const char *name, uint32_t wait_ms)
{
    if (wait_ms == 0 || !isatty(2))
        return;
    fence_lock_info info;
    if (fence_lock_info_get(c, name, &info) != 0 || !info.held)
        return;
    fprintf(stderr, "fencectl: waiting for lock %s held by lease %" PRIu64 " (up to %" PRIu32
            " ms)\n", name, info.lease, wait_ms);
}

void fencectl_catch_signals(const int *sigs, size_t n, void (*handler)(int),
                            sigset_t *old_mask)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < n; i++)
        sigaddset(&set, sigs[i]);
    sigprocmask(SIG_BLOCK, &set, old_mask);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < n; i++)
        sigaction(sigs[i], &sa, NULL);
}

bool fencectl_is_verb(int argc, char **argv, const char *verb)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return strcmp(argv[i], verb) == 0;
        if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "--timeout") == 0)
            i++;
    }
    return false;
}

void fencectl_default_signals(const int *sigs, size_t n, const sigset_t *old_mask)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (size_t i = 0; i < n; i++)
        sigaction(sigs[i], &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
}
