/* fencectl: the command-line client of fenced (see docs/fencectl.1). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fencectl/cli.h"
#include "libfence/internal.h"
#include "base/version.h"

/* Print a failed call and return its exit code. */
static int fail(const char *what, int rc)
{
    const char *msg = fence_client_errmsg(NULL);
    fprintf(stderr, "fencectl: %s: %s%s%s\n", what, fence_strerror(rc),
            msg[0] ? ": " : "", msg);
    return fencectl_exit_code(rc);
}

/* Print a value for a shell, single-quoted. */
static void print_quoted(const char *s)
{
    putchar('\'');
    for (; *s; s++) {
        if (*s == '\'')
            fputs("'\\''", stdout);
        else
            putchar(*s);
    }
    putchar('\'');
}

/* acquire: ACQUIRE (dedicated lease) or LOCK under --lease. */
static int cmd_acquire(const fencectl_args *a, fence_client *c)
{
    uint64_t token = 0, lease = a->lease;
    char stok[FENCE_SIGNED_TOKEN_BUF_SIZE] = "";
    int rc;
    fencectl_tell_reconnects(c);
    fencectl_say_waiting(c, a->name, a->wait_ms);
    if (a->lease_set && a->signed_token)
        rc = fence_lease_lock_signed(c, a->lease, a->name, a->wait_ms, &token, stok,
                                     sizeof(stok));
    else if (a->lease_set)
        rc = fence_lease_lock(c, a->lease, a->name, a->wait_ms, &token);
    else if (a->signed_token)
        rc = fence_lock_acquire_raw_signed(c, a->name, a->ttl_ms, a->wait_ms, &token,
                                           &lease, stok, sizeof(stok));
    else
        rc = fence_lock_acquire_raw(c, a->name, a->ttl_ms, a->wait_ms, &token, &lease);
    if (rc != 0)
        return fail("acquire", rc);
    if (a->env_format) {
        printf("FENCE_TOKEN=%" PRIu64 "\nFENCE_LEASE=%" PRIu64 "\nFENCE_LOCK=", token, lease);
        print_quoted(a->name);
        printf("\n");
        if (stok[0] != '\0')
            printf("FENCE_SIGNED_TOKEN=%s\n", stok); /* printable, no quotes */
    } else if (stok[0] != '\0') {
        printf("%" PRIu64 " %" PRIu64 " %s\n", token, lease, stok);
    } else {
        printf("%" PRIu64 " %" PRIu64 "\n", token, lease);
    }
    return 0;
}

/* release: UNLOCK by token. */
static int cmd_release(const fencectl_args *a, fence_client *c)
{
    bool released = false;
    int rc = fence_token_unlock(c, a->name, a->token, &released);
    if (rc != 0)
        return fail("release", rc);
    if (!released) {
        fprintf(stderr, "fencectl: release: token %" PRIu64 " does not hold \"%s\"\n",
                a->token, a->name);
        return FENCECTL_EXIT_ERROR;
    }
    printf("released\n");
    return 0;
}

/* info: LOCK.INFO. */
static int cmd_info(const fencectl_args *a, fence_client *c)
{
    fence_lock_info li;
    int rc = fence_lock_info_get(c, a->name, &li);
    if (rc != 0)
        return fail("info", rc);
    if (!li.held)
        printf("free\n");
    else
        printf("token=%" PRIu64 " lease=%" PRIu64 " remaining_ms=%" PRIu64
               " waiters=%" PRIu64 "\n", li.token, li.lease, li.remaining_ms, li.waiters);
    return 0;
}

/* lease grant|keepalive|revoke|info. */
static int cmd_lease(const fencectl_args *a, fence_client *c)
{
    int rc;
    uint64_t v = 0;
    switch (a->cmd) {
    case FENCECTL_LEASE_GRANT:
        rc = fence_lease_grant(c, a->ttl_ms, &v);
        if (rc != 0)
            return fail("lease grant", rc);
        printf("%" PRIu64 "\n", v);
        return 0;
    case FENCECTL_LEASE_KEEPALIVE:
        rc = fence_lease_keepalive(c, a->lease, &v);
        if (rc != 0)
            return fail("lease keepalive", rc);
        printf("%" PRIu64 "\n", v);
        return 0;
    case FENCECTL_LEASE_REVOKE:
        rc = fence_lease_revoke(c, a->lease);
        if (rc != 0)
            return fail("lease revoke", rc);
        printf("revoked\n");
        return 0;
    default: {
        fence_lease_info li;
        rc = fence_lease_info_get(c, a->lease, &li);
        if (rc != 0)
            return fail("lease info", rc);
        printf("ttl_ms=%" PRIu64 " remaining_ms=%" PRIu64 " locks_held=%" PRIu64 "\n",
               li.ttl_ms, li.remaining_ms, li.locks_held);
        return 0;
    }
    }
}

/* status: INFO with the keys aligned; "# Section" lines kept as headings. */
static int cmd_status(const fencectl_args *a, fence_client *c)
{
    char *text = NULL;
    int rc = fence_server_info(c, &text);
    if (rc != 0)
        return fail("status", rc);
    char buf[64];
    fence_client_server(c, buf, sizeof(buf));
    printf("server %s\n", buf);
    (void)a;
    size_t width = 0;
    for (char *line = text; *line;) {
        size_t len = strcspn(line, "\r\n");
        char *colon = memchr(line, ':', len);
        if (colon != NULL && line[0] != '#' && (size_t)(colon - line) > width)
            width = (size_t)(colon - line);
        line += len;
        line += strspn(line, "\r\n");
    }
    for (char *line = text; *line;) {
        size_t len = strcspn(line, "\r\n");
        char *colon = memchr(line, ':', len);
        if (len == 0) {
        } else if (line[0] == '#' || colon == NULL) {
            printf("%.*s\n", (int)len, line);
        } else {
            int klen = (int)(colon - line);
            printf("  %-*.*s  %.*s\n", (int)width, klen, line, (int)(len - (size_t)klen - 1),
                   colon + 1);
        }
        line += len;
        line += strspn(line, "\r\n");
    }
    /* Without quorum (or a ready leader) the server still answers INFO;
     * the exit status says it cannot serve writes. */
    const char *h = strstr(text, "\nhealthy:0");
    int rv = FENCECTL_EXIT_OK;
    if (h != NULL) {
        const char *w = strstr(text, "\nhealth:");
        int wl = w != NULL ? (int)strcspn(w + 8, "\r\n") : 0;
        fprintf(stderr, "fencectl: status: this server cannot serve writes: %.*s\n", wl,
                w != NULL ? w + 8 : "");
        rv = FENCECTL_EXIT_UNREACHABLE;
    }
    fence_free(text);
    return rv;
}

/* demo: exec fence-demo from the directory of this executable. */
static int cmd_demo(const fencectl_args *a)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        fprintf(stderr, "fencectl: demo: cannot find my own path: %s\n", strerror(errno));
        return FENCECTL_EXIT_ERROR;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash == NULL)
        return FENCECTL_EXIT_ERROR;
    char path[PATH_MAX + 16];
    snprintf(path, sizeof(path), "%.*s/fence-demo", (int)(slash - self), self);
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "fencectl: demo: %s does not exist; fence-demo is built with the "
                "torture tools (make build/fence-demo, or make) and must sit next to "
                "fencectl\n", path);
        return FENCECTL_EXIT_NOT_FOUND;
    }
    char **argv = calloc((size_t)a->rest_argc + 2, sizeof(char *));
    if (argv == NULL)
        return FENCECTL_EXIT_ERROR;
    argv[0] = path;
    for (int i = 0; i < a->rest_argc; i++)
        argv[i + 1] = a->rest_argv[i];
    if (a->servers != NULL)
        setenv("FENCE_SERVER", a->servers, 1);
    execv(path, argv);
    fprintf(stderr, "fencectl: demo: cannot run %s: %s\n", path, strerror(errno));
    free(argv);
    return FENCECTL_EXIT_CANNOT_EXEC;
}

/* Parse the command line, print help or run the subcommand, and exit with
 * its documented exit code. */
int main(int argc, char **argv)
{
    fencectl_args a;
    char err[256];
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("fencectl %s\n", FENCE_VERSION);
        return 0;
    }
    if (fencectl_is_cluster(argc, argv)) /* src/fencectl/cluster.c */
        return fencectl_cmd_cluster(argc, argv);
    if (fencectl_is_keygen(argc, argv)) /* src/fencectl/keygen.c */
        return fencectl_cmd_keygen(argc, argv);
    if (fencectl_is_top(argc, argv)) /* src/fencectl/top.c */
        return fencectl_cmd_top(argc, argv);
    if (fencectl_is_elect(argc, argv)) /* src/fencectl/electcmd.c */
        return fencectl_cmd_elect(argc, argv);
    if (fencectl_is_sem(argc, argv)) /* src/fencectl/semcmd.c */
        return fencectl_cmd_sem(argc, argv);
    if (fencectl_is_multi(argc, argv)) /* src/fencectl/multicmd.c */
        return fencectl_cmd_multi(argc, argv);
    int rv = fencectl_parse(argc, argv, &a, err, sizeof(err));
    if (rv != 0) {
        fprintf(stderr, "fencectl: %s\n", err);
        if (a.help)
            fputs(fencectl_usage(a.cmd), stderr);
        return rv;
    }
    if (a.help) {
        fputs(fencectl_usage(a.cmd), stdout);
        return 0;
    }
    switch (a.cmd) {
    case FENCECTL_LOCK:
        return fencectl_cmd_lock(&a);
    case FENCECTL_BENCH:
        return fencectl_cmd_bench(&a);
    case FENCECTL_DEMO:
        return cmd_demo(&a);
    default:
        break;
    }
    fence_client *c = fencectl_open(&a);
    switch (a.cmd) {
    case FENCECTL_ACQUIRE:
        rv = cmd_acquire(&a, c);
        break;
    case FENCECTL_RELEASE:
        rv = cmd_release(&a, c);
        break;
    case FENCECTL_INFO:
        rv = cmd_info(&a, c);
        break;
    case FENCECTL_STATUS:
        rv = cmd_status(&a, c);
        break;
    default:
        rv = cmd_lease(&a, c);
        break;
    }
    fence_client_close(c);
    fflush(stdout);
    return rv;
}
