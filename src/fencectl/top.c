/* `fencectl top`: a live view of one fenced server, refreshed like top(1):
 * role and leader, term, health, grants/s and hand-offs/s (from INFO's
 * counters between two refreshes), leases, held locks, waiters, expiries
 * with locks, and the most contended locks (LOCK.LIST, most waiters
 * first).  On a terminal each frame replaces the last; otherwise frames
 * are printed one after another (for scripts and tests).
 *
 *   fencectl top [--server HOST:PORT] [--interval MS] [--iterations N]
 *                [--locks N]
 *
 * Speaks RESP through hiredis (libfence has no raw-command call), to the
 * first server of the list; a server that does not answer is shown as
 * unreachable and tried again at the next refresh. */
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fencectl/args.h"
#include "fencectl/cli.h"
#include "base/assert.h"

/* Lock rows shown at most, and LOCK.LIST pages read per refresh. */
#define TOP_LOCKS_MAX 50
#define TOP_PAGES_MAX 10

/* The options of `fencectl top`. */
typedef struct top_args {
    char host[128];        /* server host */
    int port;              /* server port */
    unsigned interval_ms;  /* refresh period */
    unsigned iterations;   /* frames to print, 0: until interrupted */
    unsigned locks;        /* lock rows */
} top_args;

/* One contended lock. */
typedef struct top_lock {
    char name[64];         /* printable prefix of the name */
    uint64_t token;        /* holder's token */
    uint64_t lease;        /* holder lease */
    uint64_t waiters;      /* queued waiters */
} top_lock;

/* Counters kept from the previous frame (rates). */
typedef struct top_prev {
    bool have;             /* a previous frame exists */
    double t;              /* its time (s) */
    uint64_t grants;       /* its grants counter */
    uint64_t handoffs;     /* its hand-offs counter */
} top_prev;

static const char top_usage[] =
    "usage: fencectl top [--server HOST:PORT] [--interval MS] [--iterations N] [--locks N]\n"
    "\n"
    "A live view of one fenced server: role, leader, term, health, grants/s,\n"
    "leases, locks, waiters, lease expiries with locks, and the most contended\n"
    "locks.  Refreshes every --interval ms (default 1000) until interrupted, or\n"
    "--iterations times.  --locks rows (default 10).\n";

/* Whether the command line's first word is "top". */
bool fencectl_is_top(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return strcmp(argv[i], "top") == 0;
        if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "--timeout") == 0 ||
            strcmp(argv[i], "--interval") == 0 || strcmp(argv[i], "--iterations") == 0 ||
            strcmp(argv[i], "--locks") == 0)
            i++;
    }
    return false;
}

/* Monotonic seconds. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Parse an unsigned option value in [lo, hi]; -1 when it is not one. */
static long parse_num(const char *s, long lo, long hi)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    return v;
}

/* Parse the command line; 0, 1 for --help, or FENCECTL_EXIT_USAGE. */
static int parse_top_args(int argc, char **argv, top_args *a)
{
    memset(a, 0, sizeof(*a));
    const char *server = getenv("FENCE_SERVER");
    a->interval_ms = 1000;
    a->locks = 10;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (strcmp(o, "top") == 0)
            continue;
        if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
            fputs(top_usage, stdout);
            return 1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "fencectl: top: unknown option or missing value '%s'\n", o);
            return FENCECTL_EXIT_USAGE;
        }
        const char *v = argv[++i];
        long n = 0;
        if (strcmp(o, "--server") == 0) {
            server = v;
        } else if (strcmp(o, "--timeout") == 0) {
            /* accepted for symmetry with the other commands */
        } else if (strcmp(o, "--interval") == 0 && (n = parse_num(v, 50, 3600000)) > 0) {
            a->interval_ms = (unsigned)n;
        } else if (strcmp(o, "--iterations") == 0 && (n = parse_num(v, 0, 1000000)) >= 0) {
            a->iterations = (unsigned)n;
        } else if (strcmp(o, "--locks") == 0 && (n = parse_num(v, 0, TOP_LOCKS_MAX)) >= 0) {
            a->locks = (unsigned)n;
        } else {
            fprintf(stderr, "fencectl: top: bad option or value: %s %s\n", o, v);
            return FENCECTL_EXIT_USAGE;
        }
    }
    if (server == NULL || server[0] == '\0')
        server = "127.0.0.1:7700";
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%.*s", (int)strcspn(server, ","), server);
    char *c = strrchr(tmp, ':');
    if (c == NULL || (size_t)(c - tmp) >= sizeof(a->host) ||
        (a->port = (int)parse_num(c + 1, 1, 65535)) <= 0) {
        fprintf(stderr, "fencectl: top: --server wants HOST:PORT, not '%s'\n", server);
        return FENCECTL_EXIT_USAGE;
    }
    *c = '\0';
    memcpy(a->host, tmp, (size_t)(c - tmp) + 1);
    return 0;
}

/* The value of "key:" in INFO text, copied into out (cap bytes); "" when
 * absent. */
static const char *info_get(const char *text, const char *key, char *out, size_t cap)
{
    size_t kl = strlen(key);
    out[0] = '\0';
    for (const char *p = text; p != NULL && *p;) {
        if (strncmp(p, key, kl) == 0 && p[kl] == ':') {
            size_t n = strcspn(p + kl + 1, "\r\n");
            snprintf(out, cap, "%.*s", (int)n, p + kl + 1);
            return out;
        }
        p = strchr(p, '\n');
        if (p != NULL)
            p++;
    }
    return out;
}

/* The integer value of "key:" in INFO text (0 when absent). */
static uint64_t info_u64(const char *text, const char *key)
{
    char buf[32];
    return strtoull(info_get(text, key, buf, sizeof(buf)), NULL, 10);
}

/* Insert l into the rows (most waiters first), keeping at most cap. */
static void rows_add(top_lock *rows, unsigned *n, unsigned cap, const top_lock *l)
{
    if (cap == 0 || l->waiters == 0)
        return;
    unsigned i = *n < cap ? (*n)++ : cap;
    if (i == cap) {
        if (rows[cap - 1].waiters >= l->waiters)
            return;
        i = cap - 1;
    }
    while (i > 0 && rows[i - 1].waiters < l->waiters) {
        rows[i] = rows[i - 1];
        i--;
    }
    rows[i] = *l;
}

/* Read up to TOP_PAGES_MAX pages of LOCK.LIST into the contended rows. */
static void read_locks(redisContext *rc, top_lock *rows, unsigned *n, unsigned cap)
{
    unsigned long long cursor = 0;
    for (int page = 0; page < TOP_PAGES_MAX; page++) {
        redisReply *r = redisCommand(rc, "LOCK.LIST COUNT 1000 CURSOR %llu", cursor);
        if (r == NULL)
            return;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            return;
        }
        cursor = (unsigned long long)r->element[0]->integer;
        const redisReply *list = r->element[1];
        for (size_t i = 0; i < list->elements; i++) {
            const redisReply *e = list->element[i];
            if (e->type != REDIS_REPLY_ARRAY || e->elements != 5)
                continue;
            top_lock l;
            memset(&l, 0, sizeof(l));
            size_t k = 0;
            for (size_t j = 0; j < e->element[0]->len && k + 5 < sizeof(l.name); j++) {
                unsigned char ch = (unsigned char)e->element[0]->str[j];
                if (ch >= 0x20 && ch < 0x7f) {
                    l.name[k++] = (char)ch;
                } else {
                    k += (size_t)snprintf(l.name + k, sizeof(l.name) - k, "\\x%02x", ch);
                }
            }
            l.token = (uint64_t)e->element[1]->integer;
            l.lease = (uint64_t)e->element[2]->integer;
            l.waiters = (uint64_t)e->element[4]->integer;
            rows_add(rows, n, cap, &l);
        }
        freeReplyObject(r);
        if (cursor == 0)
            return;
    }
}

/* Print one frame; false when the server could not be reached. */
static bool frame(const top_args *a, top_prev *prev, bool tty)
{
    struct timeval tv = {2, 0};
    redisContext *rc = redisConnectWithTimeout(a->host, a->port, tv);
    if (tty)
        fputs("\033[H\033[2J", stdout);
    if (rc == NULL || rc->err) {
        printf("fencectl top: %s:%d unreachable%s%s\n", a->host, a->port, rc ? ": " : "",
               rc ? rc->errstr : "");
        if (rc != NULL)
            redisFree(rc);
        fflush(stdout);
        return false;
    }
    redisSetTimeout(rc, tv);
    redisReply *r = redisCommand(rc, "INFO");
    if (r == NULL || r->type != REDIS_REPLY_STRING) {
        printf("fencectl top: %s:%d: no INFO reply\n", a->host, a->port);
        if (r != NULL)
            freeReplyObject(r);
        redisFree(rc);
        fflush(stdout);
        return false;
    }
    const char *info = r->str;
    double t = now_s();
    uint64_t grants = info_u64(info, "grants");
    uint64_t handoffs = info_u64(info, "handoffs");
    double gps = 0, hps = 0;
    if (prev->have && t > prev->t) {
        gps = (double)(grants - prev->grants) / (t - prev->t);
        hps = (double)(handoffs - prev->handoffs) / (t - prev->t);
    }
    prev->have = true;
    prev->t = t;
    prev->grants = grants;
    prev->handoffs = handoffs;
    char role[32], leader[96], health[128];
    info_get(info, "role", role, sizeof(role));
    info_get(info, "leader", leader, sizeof(leader));
    info_get(info, "health", health, sizeof(health));
    printf("fenced %s:%d  role %s  leader %s  term %" PRIu64 "  health: %s\n", a->host,
           a->port, role, leader[0] ? leader : "(none)", info_u64(info, "term"), health);
    printf("grants/s %.1f  hand-offs/s %.1f  grants %" PRIu64 "  last token %" PRIu64 "\n",
           gps, hps, grants, info_u64(info, "last_token"));
    printf("leases %" PRIu64 "  locks held %" PRIu64 "  waiters %" PRIu64
           "  connections %" PRIu64 "\n",
           info_u64(info, "leases"), info_u64(info, "locks"), info_u64(info, "waiters"),
           info_u64(info, "connections"));
    printf("lease expiries %" PRIu64 "  with locks %" PRIu64 "  revocations %" PRIu64 "\n",
           info_u64(info, "lease_expirations"), info_u64(info, "lease_expirations_with_locks"),
           info_u64(info, "revocations"));
    freeReplyObject(r);
    top_lock rows[TOP_LOCKS_MAX];
    unsigned n = 0;
    read_locks(rc, rows, &n, a->locks);
    if (a->locks > 0) {
        printf("\n%-40s %8s %12s %10s\n", "most contended locks", "waiters", "token", "lease");
        for (unsigned i = 0; i < n; i++)
            printf("%-40s %8" PRIu64 " %12" PRIu64 " %10" PRIu64 "\n", rows[i].name,
                   rows[i].waiters, rows[i].token, rows[i].lease);
        if (n == 0)
            printf("(no lock has waiters)\n");
    }
    if (!tty)
        printf("--\n");
    fflush(stdout);
    redisFree(rc);
    return true;
}

/* Run `fencectl top`; returns the exit code (69 when the last frame could
 * not reach the server). */
int fencectl_cmd_top(int argc, char **argv)
{
    top_args a;
    int rv = parse_top_args(argc, argv, &a);
    if (rv == 1)
        return FENCECTL_EXIT_OK;
    if (rv != 0)
        return rv;
    bool tty = isatty(STDOUT_FILENO) == 1;
    top_prev prev;
    memset(&prev, 0, sizeof(prev));
    bool ok = true;
    for (unsigned i = 0; a.iterations == 0 || i < a.iterations; i++) {
        if (i > 0)
            usleep(a.interval_ms * 1000u);
        ok = frame(&a, &prev, tty);
    }
    return ok ? FENCECTL_EXIT_OK : FENCECTL_EXIT_UNREACHABLE;
}
