/* fencectl command-line parsing (see args.h). */
#include "fencectl/args.h"

#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/limits.h"

/* Options a subcommand accepts, as bits. */
enum {
    OPT_SERVER = 1u << 0,
    OPT_TIMEOUT = 1u << 1,
    OPT_TTL = 1u << 2,
    OPT_WAIT = 1u << 3,
    OPT_ON_LOST = 1u << 4,
    OPT_GRACE = 1u << 5,
    OPT_LEASE = 1u << 6,
    OPT_ENV = 1u << 7,
    OPT_DURATION = 1u << 8,
    OPT_CONNS = 1u << 9,
    OPT_MODE = 1u << 10,
    OPT_PREFIX = 1u << 11,
    OPT_SIGNED = 1u << 12,
    OPT_TLS = 1u << 13,
    OPT_CACERT = 1u << 14,
    OPT_CERT = 1u << 15,
    OPT_KEY = 1u << 16,
    OPT_SNI = 1u << 17,
    OPT_USER = 1u << 18,
    OPT_PASS = 1u << 19,
    OPT_FORMAT = 1u << 20,
    OPT_SHARED = 1u << 21,
};

/* Connection options: every subcommand that talks to fenced takes them. */
#define OPT_CONNECT (OPT_TLS | OPT_CACERT | OPT_CERT | OPT_KEY | OPT_SNI | OPT_USER | OPT_PASS)
#define OPT_COMMON (OPT_SERVER | OPT_TIMEOUT | OPT_CONNECT)

/* One subcommand: its words, positional arguments and options. */
typedef struct cmd_spec {
    fencectl_cmd cmd;    /* the subcommand */
    const char *word;    /* first word */
    const char *word2;   /* second word (lease ...), or NULL */
    int n_pos;           /* positional arguments required */
    unsigned opts;       /* OPT_* accepted */
} cmd_spec;

static const cmd_spec specs[] = {
    {FENCECTL_LOCK, "lock", NULL, 1, OPT_COMMON | OPT_TTL | OPT_WAIT | OPT_ON_LOST | OPT_GRACE |
                                         OPT_SIGNED | OPT_SHARED},
    {FENCECTL_ACQUIRE, "acquire", NULL, 1, OPT_COMMON | OPT_TTL | OPT_WAIT | OPT_LEASE | OPT_ENV |
                                               OPT_SIGNED},
    {FENCECTL_RELEASE, "release", NULL, 2, OPT_COMMON},
    {FENCECTL_INFO, "info", NULL, 1, OPT_COMMON},
    {FENCECTL_LEASE_GRANT, "lease", "grant", 1, OPT_COMMON},
    {FENCECTL_LEASE_KEEPALIVE, "lease", "keepalive", 1, OPT_COMMON},
    {FENCECTL_LEASE_REVOKE, "lease", "revoke", 1, OPT_COMMON},
    {FENCECTL_LEASE_INFO, "lease", "info", 1, OPT_COMMON},
    {FENCECTL_STATUS, "status", NULL, 0, OPT_COMMON},
    {FENCECTL_BENCH, "bench", NULL, 0, OPT_COMMON | OPT_TTL | OPT_DURATION | OPT_CONNS |
                                         OPT_MODE | OPT_PREFIX | OPT_SIGNED | OPT_FORMAT},
    {FENCECTL_DEMO, "demo", NULL, 0, 0},
};

#define SERVER_HELP \
    "  --server HOST:PORT[,HOST:PORT...]  fenced servers (default $FENCE_SERVER,\n" \
    "                                     else 127.0.0.1:7700)\n" \
    "  --timeout MS                       per-request timeout (default 5000)\n" \
    "  --tls                              TLS to the servers (certificate verified)\n" \
    "  --cacert FILE                      CA file for --tls (default: system CAs)\n" \
    "  --cert FILE --key FILE             client certificate and key (mTLS)\n" \
    "  --sni NAME                         name the server certificate must carry\n" \
    "                                     (default: the host of --server)\n" \
    "  --user NAME                        log in as NAME (AUTH NAME password)\n" \
    "  --pass PASSWORD                    password (prefer $FENCE_PASSWORD: a command\n" \
    "                                     line is visible to other users)\n" \
    "  -h, --help                         this help\n"

static const char usage_top[] =
    "usage: fencectl [--server HOST:PORT[,...]] COMMAND [ARGS] [--help]\n"
    "\n"
    "Client of fenced, the lock service whose locks carry fencing tokens.\n"
    "\n"
    "commands:\n"
    "  lock NAME [opts] -- CMD [ARGS]  run CMD holding lock NAME (keepalive, token in env)\n"
    "  acquire NAME [opts]             acquire and print TOKEN LEASE (no keepalive)\n"
    "  release NAME TOKEN              release the lock held with TOKEN\n"
    "  info NAME                       show who holds lock NAME\n"
    "  lease grant|keepalive|revoke|info  create, renew, revoke or show a lease\n"
    "  status                          server INFO, pretty\n"
    "  top [opts]                      live view: role, rates, leases, busiest locks\n"
    "  bench [opts]                    acquire+release throughput and latency\n"
    "  demo [ARGS]                     run fence-demo (the pause scenario)\n"
    "  cluster info|add|remove|transfer  cluster membership (fencectl cluster --help)\n"
    "  keygen DIR [opts]               make a token signing key (fencectl keygen --help)\n"
    "  elect NAME VALUE -- CMD         run CMD while leading election NAME (fencectl elect --help)\n"
    "  elect --observe NAME            print each leader of election NAME as it changes\n"
    "  sem NAME N -- CMD               run CMD holding one of N slots of semaphore NAME\n"
    "  sem --info NAME                 show the slots of semaphore NAME (fencectl sem --help)\n"
    "  multi NAME... -- CMD            run CMD holding every NAME at once, one token (multi --help)\n"
    "\n"
    "Run `fencectl COMMAND --help` for a command's options.\n"
    "exit codes: 0 ok, 1 error, 64 usage, 69 server unreachable,\n"
    "  75 not acquired within --wait, 79 lease lost, 126/127 CMD not runnable/found.\n";

static const char usage_lock[] =
    "usage: fencectl lock NAME [--ttl MS] [--wait MS] [--on-lost term|kill|ignore]\n"
    "                [--grace MS] [--signed] [--shared] -- CMD [ARGS...]\n"
    "\n"
    "Acquire lock NAME, run CMD in its own process group with FENCE_TOKEN,\n"
    "FENCE_LOCK, FENCE_LEASE and FENCE_SERVER set, renew the lease every ttl/3\n"
    "while CMD runs, release when CMD exits, and exit with CMD's status\n"
    "(128+N if killed by signal N).  If the lease is lost, or renewals fail until\n"
    "--grace before valid-until, CMD's process group gets SIGTERM and, --grace\n"
    "later, SIGKILL (so it is gone before the server can let the lease go), and\n"
    "fencectl exits 79.  Pass $FENCE_TOKEN to your resource: only its check is\n"
    "safety.\n"
    "\n"
    "  --ttl MS                 lease TTL (default 10000)\n"
    "  --wait MS                wait in the queue up to MS (default 30000; 0: try once)\n"
    "  --on-lost term|kill|ignore  what to do to CMD on lease loss (default term)\n"
    "  --grace MS               SIGTERM to SIGKILL (default ttl/4)\n"
    "  --signed                 ask for a signed token (the server needs a signing\n"
    "                           key) and set FENCE_SIGNED_TOKEN too\n"
    "  --shared                 a shared (read) lock: other --shared holders run at\n"
    "                           once with the same token; a writer waits for them\n"
    SERVER_HELP;

static const char usage_acquire[] =
    "usage: fencectl acquire NAME [--ttl MS] [--wait MS] [--lease ID] [--env] [--signed]\n"
    "\n"
    "Acquire lock NAME and print \"TOKEN LEASE\".  Without --lease the lock gets a\n"
    "dedicated lease (ACQUIRE) that `fencectl release` revokes; nothing keeps it\n"
    "alive: renew it with `fencectl lease keepalive LEASE` within the TTL.\n"
    "With --lease ID the lock is taken under that existing lease.\n"
    "\n"
    "  --ttl MS      lease TTL (default 10000)\n"
    "  --wait MS     wait in the queue up to MS (default 30000; 0: try once)\n"
    "  --lease ID    lock under an existing lease\n"
    "  --env         print FENCE_TOKEN=.. FENCE_LEASE=.. FENCE_LOCK=.. for eval\n"
    "  --signed      ask for a signed token: print \"TOKEN LEASE SIGNED_TOKEN\"\n"
    "                (--env: FENCE_SIGNED_TOKEN=.. too)\n"
    SERVER_HELP;

static const char usage_release[] =
    "usage: fencectl release NAME TOKEN\n"
    "\n"
    "Release lock NAME if TOKEN holds it (its dedicated lease, if any, is revoked).\n"
    "Exits 0 if it was released, 1 if TOKEN did not hold it.\n"
    "\n"
    SERVER_HELP;

static const char usage_info[] =
    "usage: fencectl info NAME\n"
    "\n"
    "Show lock NAME: free, or its token, lease, remaining ms and waiters.\n"
    "\n"
    SERVER_HELP;

static const char usage_lease[] =
    "usage: fencectl lease grant TTL_MS | keepalive ID | revoke ID | info ID\n"
    "\n"
    "  grant TTL_MS    create a lease, print its id\n"
    "  keepalive ID    renew a lease, print its TTL (exit 79 if it is gone)\n"
    "  revoke ID       revoke a lease and release its locks\n"
    "  info ID         print ttl_ms, remaining_ms, locks_held (exit 79 if gone)\n"
    "\n"
    SERVER_HELP;

static const char usage_status[] =
    "usage: fencectl status\n"
    "\n"
    "Print the server's INFO, aligned.\n"
    "\n"
    SERVER_HELP;

static const char usage_bench[] =
    "usage: fencectl bench [--duration S] [--conns N,N,...] [--mode M] [--ttl MS]\n"
    "                      [--prefix NAME] [--signed] [--format table|tsv]\n"
    "\n"
    "For each connection count, run acquire+release cycles for --duration seconds,\n"
    "uncontended (a lock per connection) and contended (all on one lock), and\n"
    "print cycles/s, acquire latency p50/p99/p999, and in the contended case\n"
    "the fewest and most cycles any one client completed (fairness).\n"
    "\n"
    "  --duration S   seconds per cell (default 3)\n"
    "  --conns LIST   connection counts (default 1,8,64)\n"
    "  --mode M       both|uncontended|contended|shared (default both; shared:\n"
    "                 every connection takes one lock shared, outside both)\n"
    "  --ttl MS       lease TTL of each acquire (default 10000)\n"
    "  --prefix NAME  lock name prefix (default bench.<pid>)\n"
    "  --signed       ask for signed grants (the server needs a signing key)\n"
    "  --format F     table (default) or tsv: a header line, then one line per\n"
    "                 cell, tab-separated, latencies in microseconds, with max\n"
    SERVER_HELP;

static const char usage_demo[] =
    "usage: fencectl demo [ARGS...]\n"
    "\n"
    "Run fence-demo (installed next to fencectl) with ARGS: the pause scenario,\n"
    "with and without fencing.  `fencectl demo --help` shows fence-demo's help.\n";

/* Return the usage text of cmd. */
const char *fencectl_usage(fencectl_cmd cmd)
{
    switch (cmd) {
    case FENCECTL_LOCK:
        return usage_lock;
    case FENCECTL_ACQUIRE:
        return usage_acquire;
    case FENCECTL_RELEASE:
        return usage_release;
    case FENCECTL_INFO:
        return usage_info;
    case FENCECTL_LEASE_GRANT:
    case FENCECTL_LEASE_KEEPALIVE:
    case FENCECTL_LEASE_REVOKE:
    case FENCECTL_LEASE_INFO:
        return usage_lease;
    case FENCECTL_STATUS:
        return usage_status;
    case FENCECTL_BENCH:
        return usage_bench;
    case FENCECTL_DEMO:
        return usage_demo;
    case FENCECTL_NONE:
    case FENCECTL_CMD_COUNT_:
        break;
    }
    return usage_top;
}

/* Parse a decimal number of at most 20 digits, 0..max. */
bool fencectl_parse_ms(const char *s, uint64_t max, uint64_t *out)
{
    if (s == NULL || s[0] == '\0' || strlen(s) > 20)
        return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    if (v > max)
        return false;
    *out = v;
    return true;
}

/* Parse a comma-separated list of connection counts. */
bool fencectl_parse_conns(const char *s, uint32_t *out, size_t cap, size_t *n)
{
    size_t count = 0;
    const char *p = s;
    if (s == NULL || s[0] == '\0')
        return false;
    for (;;) {
        char buf[16];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof(buf) || count == cap)
            return false;
        memcpy(buf, p, len);
        buf[len] = '\0';
        uint64_t v;
        if (!fencectl_parse_ms(buf, 4096, &v) || v == 0)
            return false;
        out[count++] = (uint32_t)v;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    *n = count;
    return true;
}

/* Set defaults. */
static void args_init(fencectl_args *a)
{
    memset(a, 0, sizeof(*a));
    a->ttl_ms = 10000;
    a->wait_ms = 30000;
    a->on_lost = FENCECTL_ON_LOST_TERM;
    a->duration_ms = 3000;
    a->conns[0] = 1;
    a->conns[1] = 8;
    a->conns[2] = 64;
    a->n_conns = 3;
    a->bench_mode = FENCECTL_BENCH_BOTH;
}

/* Format a usage error into err and return FENCECTL_EXIT_USAGE. */
static int usage_err(char *err, size_t errcap, const char *fmt, const char *arg)
{
    snprintf(err, errcap, fmt, arg ? arg : "");
    return FENCECTL_EXIT_USAGE;
}

/* Handle one option (name without the leading dashes, value possibly
 * NULL); *used_value says whether value was consumed. */
static int take_option(fencectl_args *a, unsigned allowed, const char *opt,
                       const char *value, bool *used_value, char *err,
                       size_t errcap)
{
    static const struct {
        const char *name;
        unsigned bit;
        bool has_arg;
    } table[] = {
        {"server", OPT_SERVER, true},     {"timeout", OPT_TIMEOUT, true},
        {"ttl", OPT_TTL, true},           {"wait", OPT_WAIT, true},
        {"on-lost", OPT_ON_LOST, true},   {"grace", OPT_GRACE, true},
        {"lease", OPT_LEASE, true},       {"env", OPT_ENV, false},
        {"duration", OPT_DURATION, true}, {"conns", OPT_CONNS, true},
        {"mode", OPT_MODE, true},         {"prefix", OPT_PREFIX, true},
        {"signed", OPT_SIGNED, false},    {"tls", OPT_TLS, false},
        {"cacert", OPT_CACERT, true},     {"cert", OPT_CERT, true},
        {"key", OPT_KEY, true},           {"sni", OPT_SNI, true},
        {"user", OPT_USER, true},         {"pass", OPT_PASS, true},
        {"format", OPT_FORMAT, true},     {"shared", OPT_SHARED, false},
    };
    size_t i;
    for (i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(table[i].name, opt) == 0)
            break;
    if (i == sizeof(table) / sizeof(table[0]) || !(allowed & table[i].bit))
        return usage_err(err, errcap, "unknown option --%s (see --help)", opt);
    *used_value = table[i].has_arg;
    if (table[i].has_arg && value == NULL)
        return usage_err(err, errcap, "option --%s needs a value", opt);
    uint64_t v;
    switch (table[i].bit) {
    case OPT_SERVER:
        if (value[0] == '\0')
            return usage_err(err, errcap, "--server needs HOST:PORT%s", NULL);
        a->servers = value;
        break;
    case OPT_TIMEOUT:
        if (!fencectl_parse_ms(value, 3600 * 1000, &v) || v == 0)
            return usage_err(err, errcap, "--timeout wants 1..3600000 ms, not \"%s\"", value);
        a->timeout_ms = (uint32_t)v;
        break;
    case OPT_TTL:
        if (!fencectl_parse_ms(value, FENCE_TTL_MS_MAX, &v) || v < FENCE_TTL_MS_MIN)
            return usage_err(err, errcap, "--ttl wants 10..604800000 ms, not \"%s\"", value);
        a->ttl_ms = (uint32_t)v;
        break;
    case OPT_WAIT:
        if (!fencectl_parse_ms(value, FENCE_WAIT_MS_MAX, &v))
            return usage_err(err, errcap, "--wait wants 0..86400000 ms, not \"%s\"", value);
        a->wait_ms = (uint32_t)v;
        a->wait_set = true;
        break;
    case OPT_ON_LOST:
        if (strcmp(value, "term") == 0)
            a->on_lost = FENCECTL_ON_LOST_TERM;
        else if (strcmp(value, "kill") == 0)
            a->on_lost = FENCECTL_ON_LOST_KILL;
        else if (strcmp(value, "ignore") == 0)
            a->on_lost = FENCECTL_ON_LOST_IGNORE;
        else
            return usage_err(err, errcap, "--on-lost wants term, kill or ignore, not \"%s\"",
                             value);
        break;
    case OPT_GRACE:
        if (!fencectl_parse_ms(value, FENCE_TTL_MS_MAX, &v))
            return usage_err(err, errcap, "--grace wants ms, not \"%s\"", value);
        a->grace_ms = (uint32_t)v;
        a->grace_set = true;
        break;
    case OPT_LEASE:
        if (!fencectl_parse_ms(value, UINT64_MAX, &v) || v == 0)
            return usage_err(err, errcap, "--lease wants a lease id, not \"%s\"", value);
        a->lease = v;
        a->lease_set = true;
        break;
    case OPT_ENV:
        a->env_format = true;
        break;
    case OPT_SHARED:
        a->shared = true;
        break;
    case OPT_SIGNED:
        a->signed_token = true;
        break;
    case OPT_TLS:
        a->tls = true;
        break;
    case OPT_CACERT:
        a->tls_ca = value;
        break;
    case OPT_CERT:
        a->tls_cert = value;
        break;
    case OPT_KEY:
        a->tls_key = value;
        break;
    case OPT_SNI:
        a->tls_server_name = value;
        break;
    case OPT_USER:
        if (value[0] == '\0')
            return usage_err(err, errcap, "--user needs a name%s", NULL);
        a->user = value;
        break;
    case OPT_PASS:
        a->password = value;
        break;
    case OPT_DURATION:
        if (!fencectl_parse_ms(value, 3600, &v) || v == 0)
            return usage_err(err, errcap, "--duration wants 1..3600 seconds, not \"%s\"", value);
        a->duration_ms = (uint32_t)v * 1000;
        break;
    case OPT_CONNS:
        if (!fencectl_parse_conns(value, a->conns, FENCECTL_CONNS_MAX, &a->n_conns))
            return usage_err(err, errcap, "--conns wants a list like 1,8,64 (each 1..4096), "
                             "not \"%s\"", value);
        break;
    case OPT_MODE:
        if (strcmp(value, "both") == 0)
            a->bench_mode = FENCECTL_BENCH_BOTH;
        else if (strcmp(value, "uncontended") == 0)
            a->bench_mode = FENCECTL_BENCH_UNCONTENDED;
        else if (strcmp(value, "contended") == 0)
            a->bench_mode = FENCECTL_BENCH_CONTENDED;
        else if (strcmp(value, "shared") == 0)
            a->bench_mode = FENCECTL_BENCH_SHARED;
        else
            return usage_err(err, errcap, "--mode wants both, uncontended, contended or "
                             "shared, not \"%s\"", value);
        break;
    case OPT_FORMAT:
        if (strcmp(value, "table") == 0)
            a->bench_tsv = false;
        else if (strcmp(value, "tsv") == 0)
            a->bench_tsv = true;
        else
            return usage_err(err, errcap, "--format wants table or tsv, not \"%s\"", value);
        break;
    case OPT_PREFIX:
        if (value[0] == '\0' || strlen(value) > FENCE_NAME_MAX - 16)
            return usage_err(err, errcap, "--prefix wants 1..240 bytes%s", NULL);
        a->bench_prefix = value;
        break;
    default:
        FENCE_ASSERT(0);
    }
    return 0;
}

/* Parse the whole command line; see args.h. */
int fencectl_parse(int argc, char **argv, fencectl_args *out, char *err,
                   size_t errcap)
{
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(err != NULL);
    args_init(out);
    err[0] = '\0';
    int i = 1;
    const cmd_spec *spec = NULL;
    const char *pos[2] = {NULL, NULL};
    int n_pos = 0;

    /* Top-level options before the subcommand. */
    while (i < argc && argv[i][0] == '-') {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            out->help = true;
            return 0;
        }
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0')
            return usage_err(err, errcap, "unknown option %s", a);
        char name[32];
        const char *eq = strchr(a + 2, '=');
        size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        if (nlen >= sizeof(name))
            return usage_err(err, errcap, "unknown option %s", a);
        memcpy(name, a + 2, nlen);
        name[nlen] = '\0';
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
        bool used = false;
        int rv = take_option(out, OPT_COMMON, name, value, &used, err, errcap);
        if (rv != 0)
            return rv;
        i += (used && !eq) ? 2 : 1;
    }
    if (i >= argc) {
        out->help = true;
        return usage_err(err, errcap, "no command given%s", NULL);
    }
    const char *w = argv[i++];
    for (size_t k = 0; k < sizeof(specs) / sizeof(specs[0]); k++) {
        if (strcmp(specs[k].word, w) != 0)
            continue;
        if (specs[k].word2 == NULL) {
            spec = &specs[k];
            break;
        }
        if (i < argc && strcmp(specs[k].word2, argv[i]) == 0) {
            spec = &specs[k];
            break;
        }
    }
    if (spec == NULL) {
        if (strcmp(w, "lease") == 0) {
            out->cmd = FENCECTL_LEASE_GRANT;
            if (i < argc && (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)) {
                out->help = true;
                return 0;
            }
            return usage_err(err, errcap, "lease wants grant, keepalive, revoke or info%s",
                             NULL);
        }
        return usage_err(err, errcap, "unknown command \"%s\" (see fencectl --help)", w);
    }
    if (spec->word2 != NULL)
        i++;
    out->cmd = spec->cmd;

    if (spec->cmd == FENCECTL_DEMO) {
        /* Everything after "demo" goes to fence-demo untouched. */
        out->rest_argv = argv + i;
        out->rest_argc = argc - i;
        return 0;
    }

    for (; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            out->help = true;
            return 0;
        }
        if (strncmp(a, "--", 2) == 0) {
            char name[32];
            const char *eq = strchr(a + 2, '=');
            size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
            if (nlen >= sizeof(name))
                return usage_err(err, errcap, "unknown option %s (see --help)", a);
            memcpy(name, a + 2, nlen);
            name[nlen] = '\0';
            const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[i + 1] : NULL);
            bool used = false;
            int rv = take_option(out, spec->opts, name, value, &used, err, errcap);
            if (rv != 0)
                return rv;
            if (used && !eq)
                i++;
            continue;
        }
        if (a[0] == '-' && a[1] != '\0')
            return usage_err(err, errcap, "unknown option %s (see --help)", a);
        if (n_pos == spec->n_pos)
            return usage_err(err, errcap, spec->cmd == FENCECTL_LOCK
                                              ? "unexpected argument \"%s\" (put CMD after --)"
                                              : "unexpected argument \"%s\"", a);
        pos[n_pos++] = a;
    }
    if (n_pos < spec->n_pos)
        return usage_err(err, errcap, "missing argument (see fencectl %s --help)", spec->word);

    uint64_t v;
    switch (spec->cmd) {
    case FENCECTL_LOCK:
        if (i >= argc)
            return usage_err(err, errcap, "lock needs a command after --%s", NULL);
        out->cmd_argv = argv + i;
        out->cmd_argc = argc - i;
        /* fall through: the name is checked below */
        /* FALLTHROUGH */
    case FENCECTL_ACQUIRE:
    case FENCECTL_INFO:
    case FENCECTL_RELEASE:
        out->name = pos[0];
        if (strlen(out->name) == 0 || strlen(out->name) > FENCE_NAME_MAX)
            return usage_err(err, errcap, "lock names are 1..256 bytes%s", NULL);
        if (spec->cmd == FENCECTL_RELEASE) {
            if (!fencectl_parse_ms(pos[1], UINT64_MAX, &v) || v == 0)
                return usage_err(err, errcap, "TOKEN must be a positive integer, not \"%s\"",
                                 pos[1]);
            out->token = v;
        }
        break;
    case FENCECTL_LEASE_GRANT:
        if (!fencectl_parse_ms(pos[0], FENCE_TTL_MS_MAX, &v) || v < FENCE_TTL_MS_MIN)
            return usage_err(err, errcap, "TTL_MS wants 10..604800000, not \"%s\"", pos[0]);
        out->ttl_ms = (uint32_t)v;
        break;
    case FENCECTL_LEASE_KEEPALIVE:
    case FENCECTL_LEASE_REVOKE:
    case FENCECTL_LEASE_INFO:
        if (!fencectl_parse_ms(pos[0], UINT64_MAX, &v) || v == 0)
            return usage_err(err, errcap, "lease ID must be a positive integer, not \"%s\"",
                             pos[0]);
        out->lease = v;
        break;
    default:
        break;
    }
    if (i < argc && spec->cmd != FENCECTL_LOCK)
        return usage_err(err, errcap, "unexpected argument \"%s\"", argv[i]);
    if (out->cmd == FENCECTL_LOCK && !out->grace_set)
        out->grace_ms = out->ttl_ms / 4;
    return 0;
}
