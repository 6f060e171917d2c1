/* `fencectl cluster info|add|remove|transfer`: membership commands of a
 * fenced cluster (CLUSTER.* on the server; see docs/cluster.md).
 *
 * libfence has no raw-command call, so this file speaks RESP through
 * libfence's private connection layer (src/libfence/wire.h: TLS and AUTH as
 * for the other commands; fencectl links libfence statically).  Requests go to the first reachable server of the
 * --server list; NOTLEADER <host:port> is followed (a few hops), TRYAGAIN
 * is retried with a short pause until --timeout runs out.  The membership
 * commands are idempotent on the server (a retried ADD of a node already
 * added with the same addresses answers OK), so retrying is safe. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/assert.h"
#include "fencectl/args.h"
#include "fencectl/cli.h"
#include "libfence/wire.h"

/* Most NOTLEADER redirects followed for one request. */
#define REDIRECTS_MAX 8
/* Pause between retries after TRYAGAIN or an unreachable server (ms). */
#define RETRY_PAUSE_MS 100
/* Default overall time for one cluster command (ms). */
#define CLUSTER_TIMEOUT_MS_DEFAULT 15000
/* Longest wait for one reply.  CLUSTER.ADD answers only after raft's
 * catch-up attempt of the new node, which gives up after 5 s: waiting just
 * 5 s raced with that answer (and a retry then met "membership change in
 * progress"), so one try waits well past it. */
#define TRY_TIMEOUT_MS 8000
/* Longest host:port text handled. */
#define ADDR_MAX 128

/* Parsed `fencectl cluster` command line. */
typedef struct cluster_args {
    const char *servers;    /* --server list, else $FENCE_SERVER, else default */
    uint32_t timeout_ms;    /* --timeout: overall deadline of the command */
    const char *verb;       /* info, add, remove, transfer */
    const char *argv[3];    /* the verb's arguments */
    int argc;               /* entries used in argv */
    bool tls;               /* --tls (or a TLS file given) */
    const char *ca;         /* --cacert */
    const char *cert;       /* --cert */
    const char *key;        /* --key */
    fence__wire_cfg wcfg;   /* TLS context, --sni, --user, password */
} cluster_args;

static const char cluster_usage[] =
    "usage: fencectl [--server HOST:PORT[,...]] [--timeout MS] [--tls] [--cacert FILE]\n"
    "                [--cert FILE --key FILE] [--sni NAME] [--user NAME] cluster COMMAND\n"
    "\n"
    "commands:\n"
    "  info                          this node's view: leader, term, indexes, nodes\n"
    "  add ID RAFT-ADDR CLIENT-ADDR  add node ID (started with --join 1) as a voter\n"
    "  remove ID                     remove node ID from the configuration (the leader\n"
    "                                hands leadership on first)\n"
    "  transfer [ID]                 hand leadership to ID (or to the best voter)\n"
    "\n"
    "Requests follow NOTLEADER to the leader and retry TRYAGAIN until --timeout\n"
    "(default 15000 ms).  Addresses are IPv4-address:port.  The password for\n"
    "--user comes from $FENCE_PASSWORD (or --pass).\n"
    "exit status: 0 done, 1 refused by the server, 64 usage, 69 no server reachable\n";

/* Monotonic milliseconds. */
static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Sleep for ms milliseconds. */
static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Whether option o of fencectl cluster takes a value. */
static bool takes_value(const char *o)
{
    static const char *const with_value[] = {"--server", "--timeout", "--cacert", "--cert",
                                             "--key", "--sni", "--user", "--pass"};
    for (size_t i = 0; i < sizeof(with_value) / sizeof(with_value[0]); i++)
        if (strcmp(o, with_value[i]) == 0)
            return true;
    return false;
}

/* See cli.h: the first word that is neither an option nor an option's
 * value is "cluster". */
bool fencectl_is_cluster(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return strcmp(argv[i], "cluster") == 0;
        if (takes_value(argv[i]))
            i++;
    }
    return false;
}

/* Parse the whole command line (options anywhere, then the words
 * "cluster", the verb and its arguments) into *a.  Returns 0, 1 for --help
 * (usage printed), or FENCECTL_EXIT_USAGE after printing the reason. */
static int parse_cluster_args(int argc, char **argv, cluster_args *a)
{
    memset(a, 0, sizeof(*a));
    a->timeout_ms = CLUSTER_TIMEOUT_MS_DEFAULT;
    const char *words[6];
    int n_words = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-') {
            if (n_words == (int)(sizeof(words) / sizeof(words[0]))) {
                fprintf(stderr, "fencectl: cluster: too many arguments\n");
                return FENCECTL_EXIT_USAGE;
            }
            words[n_words++] = argv[i];
            continue;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(cluster_usage, stdout);
            return 1;
        }
        if (strcmp(argv[i], "--tls") == 0) {
            a->tls = true;
            continue;
        }
        if (!takes_value(argv[i])) {
            fprintf(stderr, "fencectl: cluster: unknown option '%s'\n", argv[i]);
            return FENCECTL_EXIT_USAGE;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "fencectl: cluster: %s needs a value\n", argv[i]);
            return FENCECTL_EXIT_USAGE;
        }
        const char *o = argv[i];
        if (strcmp(o, "--server") == 0) {
            a->servers = argv[++i];
        } else if (strcmp(o, "--cacert") == 0) {
            a->ca = argv[++i];
        } else if (strcmp(o, "--cert") == 0) {
            a->cert = argv[++i];
        } else if (strcmp(o, "--key") == 0) {
            a->key = argv[++i];
        } else if (strcmp(o, "--sni") == 0) {
            a->wcfg.server_name = argv[++i];
        } else if (strcmp(o, "--user") == 0) {
            a->wcfg.user = argv[++i];
        } else if (strcmp(o, "--pass") == 0) {
            a->wcfg.password = argv[++i];
        } else {
            uint64_t v;
            if (!fencectl_parse_ms(argv[++i], 3600000, &v) || v == 0) {
                fprintf(stderr, "fencectl: cluster: --timeout must be 1..3600000 ms\n");
                return FENCECTL_EXIT_USAGE;
            }
            a->timeout_ms = (uint32_t)v;
        }
    }
    FENCE_ASSERT(n_words >= 1);
    FENCE_ASSERT(strcmp(words[0], "cluster") == 0);
    if (n_words < 2) {
        fputs(cluster_usage, stderr);
        return FENCECTL_EXIT_USAGE;
    }
    a->verb = words[1];
    int want_min, want_max;
    if (strcmp(a->verb, "info") == 0)
        want_min = want_max = 0;
    else if (strcmp(a->verb, "add") == 0)
        want_min = want_max = 3;
    else if (strcmp(a->verb, "remove") == 0)
        want_min = want_max = 1;
    else if (strcmp(a->verb, "transfer") == 0)
        want_min = 0, want_max = 1;
    else {
        fprintf(stderr, "fencectl: cluster: unknown command '%s'\n%s", a->verb,
                cluster_usage);
        return FENCECTL_EXIT_USAGE;
    }
    int n = n_words - 2;
    if (n < want_min || n > want_max) {
        fprintf(stderr, "fencectl: cluster %s: wrong number of arguments\n%s", a->verb,
                cluster_usage);
        return FENCECTL_EXIT_USAGE;
    }
    for (int k = 0; k < n; k++) {
        uint64_t v;
        bool is_id = k == 0;
        if (is_id && !fencectl_parse_ms(words[2 + k], UINT64_MAX, &v)) {
            fprintf(stderr, "fencectl: cluster %s: '%s' is not a node id\n", a->verb,
                    words[2 + k]);
            return FENCECTL_EXIT_USAGE;
        }
        a->argv[k] = words[2 + k];
    }
    a->argc = n;
    if (a->servers == NULL)
        a->servers = getenv("FENCE_SERVER");
    if (a->servers == NULL || a->servers[0] == '\0')
        a->servers = "127.0.0.1:7700";
    if (a->wcfg.password == NULL) {
        const char *env = getenv("FENCE_PASSWORD");
        if (env != NULL && env[0] != '\0')
            a->wcfg.password = env;
    }
    if (a->wcfg.user != NULL && a->wcfg.password == NULL) {
        fprintf(stderr, "fencectl: cluster: --user needs a password ($FENCE_PASSWORD)\n");
        return FENCECTL_EXIT_USAGE;
    }
    if (a->tls || a->ca != NULL || a->cert != NULL) {
        char err[256];
        a->wcfg.tls = fence__wire_tls_ctx(a->ca, a->cert, a->key, err, sizeof(err));
        if (a->wcfg.tls == NULL) {
            fprintf(stderr, "fencectl: cluster: %s\n", err);
            return FENCECTL_EXIT_USAGE;
        }
    }
    return 0;
}

/* Split "host:port" into host (cap bytes) and port.  Returns true on success. */
static bool split_addr(const char *s, size_t len, char *host, size_t cap, int *port)
{
    const char *colon = NULL;
    for (size_t i = 0; i < len; i++)
        if (s[i] == ':')
            colon = s + i;
    if (colon == NULL || colon == s || (size_t)(colon - s) >= cap)
        return false;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (end != s + len || p < 1 || p > 65535)
        return false;
    *port = (int)p;
    return true;
}

/* Send the command to addr; returns the reply (caller frees) or NULL when
 * the server cannot be reached or refuses the login (*login_refused; the
 * reason in err). */
static redisReply *send_to(const char *addr, const cluster_args *a, const char *cmd,
                           uint32_t timeout_ms, char *err, size_t errcap, bool *login_refused)
{
    *login_refused = false;
    char host[ADDR_MAX];
    int port;
    if (!split_addr(addr, strlen(addr), host, sizeof(host), &port)) {
        snprintf(err, errcap, "bad server address '%s'", addr);
        return NULL;
    }
    fence__addr fa;
    memset(&fa, 0, sizeof(fa));
    if (strlen(host) >= sizeof(fa.host)) {
        snprintf(err, errcap, "bad server address '%s'", addr);
        return NULL;
    }
    memcpy(fa.host, host, strlen(host) + 1);
    fa.port = port;
    fence__wire *w = NULL;
    bool refused;
    char why[200];
    int rv = fence__wire_open(&fa, &a->wcfg, timeout_ms, &w, &refused, why, sizeof(why));
    if (rv != 0) {
        /* A long address and reason are cut, and say so. */
        if (snprintf(err, errcap, "%s: %s", addr, why) >= (int)errcap && errcap > 4)
            memcpy(err + errcap - 4, "...", 4);
        *login_refused = rv == FENCE_EAUTH;
        return NULL;
    }
    const char *argv[4];
    size_t lens[4];
    argv[0] = cmd;
    for (int i = 0; i < a->argc; i++)
        argv[i + 1] = a->argv[i];
    for (int i = 0; i <= a->argc; i++)
        lens[i] = strlen(argv[i]);
    bool timed_out;
    redisReply *r = fence__wire_command(w, timeout_ms, a->argc + 1, argv, lens, &timed_out);
    if (r == NULL)
        snprintf(err, errcap, "%s: %s", addr,
                 fence__wire_errstr(w)[0] ? fence__wire_errstr(w) : "no reply");
    fence__wire_close(w);
    return r;
}

/* Whether the error reply starts with the given code word. */
static bool err_is(const redisReply *r, const char *code)
{
    size_t n = strlen(code);
    return r->type == REDIS_REPLY_ERROR && r->len >= n && strncmp(r->str, code, n) == 0 &&
           (r->len == n || r->str[n] == ' ');
}

/* Run the cluster command against the servers, following redirects and
 * retrying TRYAGAIN.  Prints the result; returns the exit code. */
static int run(const cluster_args *a)
{
    char cmd[32];
    snprintf(cmd, sizeof(cmd), "CLUSTER.%s", a->verb);
    for (char *p = cmd; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 32);
    uint64_t deadline = now_ms() + a->timeout_ms;
    char list[1024];
    if (strlen(a->servers) >= sizeof(list)) {
        fprintf(stderr, "fencectl: cluster: --server list too long\n");
        return FENCECTL_EXIT_USAGE;
    }
    char err[256] = "no server given";
    char last_err[512] = "";
    char tls_err[512] = "";
    bool reached = false;
    for (;;) {
        memcpy(list, a->servers, strlen(a->servers) + 1);
        char *save = NULL;
        for (char *tok = strtok_r(list, ",", &save); tok != NULL;
             tok = strtok_r(NULL, ",", &save)) {
            char addr[ADDR_MAX];
            snprintf(addr, sizeof(addr), "%s", tok);
            for (int hop = 0; hop <= REDIRECTS_MAX; hop++) {
                uint64_t now = now_ms();
                uint32_t left = now < deadline ? (uint32_t)(deadline - now) : 1;
                bool login_refused;
                redisReply *r = send_to(addr, a, cmd, left < TRY_TIMEOUT_MS ? left : TRY_TIMEOUT_MS, err,
                                        sizeof(err), &login_refused);
                if (r == NULL && login_refused) {
                    fprintf(stderr, "fencectl: cluster %s: %s\n", a->verb, err);
                    return FENCECTL_EXIT_ERROR;
                }
                if (r == NULL) {
                    /* A TLS failure says more than the timeout a later try
                     * may end in under load: keep the first one to report. */
                    if (tls_err[0] == '\0' && strstr(err, "TLS") != NULL)
                        snprintf(tls_err, sizeof(tls_err), "%s", err);
                    break; /* next server */
                }
                reached = true;
                if (err_is(r, "NOTLEADER") && r->len > 10 && r->len - 10 < sizeof(addr)) {
                    snprintf(addr, sizeof(addr), "%.*s", (int)(r->len - 10), r->str + 10);
                    freeReplyObject(r);
                    continue; /* follow the redirect */
                }
                if (err_is(r, "TRYAGAIN") || err_is(r, "NOTLEADER")) {
                    snprintf(last_err, sizeof(last_err), "%s", r->str);
                    freeReplyObject(r);
                    break;
                }
                int rc = FENCECTL_EXIT_OK;
                if (r->type == REDIS_REPLY_ERROR) {
                    fprintf(stderr, "fencectl: cluster %s: %s\n", a->verb, r->str);
                    rc = FENCECTL_EXIT_ERROR;
                } else if (r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) {
                    for (size_t i = 0; i < r->len; i++)
                        if (r->str[i] != '\r')
                            putchar(r->str[i]);
                    if (r->len == 0 || r->str[r->len - 1] != '\n')
                        putchar('\n');
                } else {
                    fprintf(stderr, "fencectl: cluster %s: unexpected reply type %d\n",
                            a->verb, r->type);
                    rc = FENCECTL_EXIT_ERROR;
                }
                freeReplyObject(r);
                return rc;
            }
        }
        if (now_ms() >= deadline)
            break;
        sleep_ms(RETRY_PAUSE_MS);
    }
    if (reached && last_err[0] != '\0') {
        fprintf(stderr, "fencectl: cluster %s: gave up after %u ms: %s\n", a->verb,
                a->timeout_ms, last_err);
        return FENCECTL_EXIT_UNREACHABLE;
    }
    fprintf(stderr, "fencectl: cluster %s: no server reachable (%s)\n", a->verb,
            tls_err[0] != '\0' ? tls_err : err);
    return FENCECTL_EXIT_UNREACHABLE;
}

/* Entry point of `fencectl [opts] cluster ...`; argv is the whole command
 * line (fencectl_is_cluster(argc, argv) is true). */
int fencectl_cmd_cluster(int argc, char **argv)
{
    cluster_args a;
    int rv = parse_cluster_args(argc, argv, &a);
    if (rv == 1)
        return FENCECTL_EXIT_OK;
    if (rv != 0)
        return rv;
    int rc = run(&a);
    SSL_CTX_free(a.wcfg.tls);
    fflush(stdout);
    return rc;
}
