/* The option table and its three users: flags, config file and --help. */
#include "server/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "server/log.h"

/* How an option's value is stored. */
enum opt_type {
    OPT_U64 = 0, /* decimal integer within [min, max] */
    OPT_STR = 1, /* string of at most cap - 1 bytes */
};

/* One row of the option table. */
typedef struct opt {
    const char *name;   /* flag and directive name, without "--" */
    int type;           /* enum opt_type */
    size_t offset;      /* field in fence_config */
    size_t cap;         /* OPT_STR: size of the char array */
    uint64_t min;       /* OPT_U64: smallest accepted value */
    uint64_t max;       /* OPT_U64: largest accepted value */
    uint64_t def_u64;   /* OPT_U64: default */
    const char *def_str; /* OPT_STR: default */
    const char *arg;    /* placeholder shown by --help */
    const char *help;   /* one-line description for --help */
} opt;

#define U64(n, field, lo, hi, def, a, h)                                    \
    {(n), OPT_U64, offsetof(fence_config, field), 0, (lo), (hi), (def),     \
     NULL, (a), (h)}
#define STR(n, field, def, a, h)                                            \
    {(n), OPT_STR, offsetof(fence_config, field),                           \
     sizeof(((fence_config *)0)->field), 0, 0, 0, (def), (a), (h)}

static const opt options[] = {
    U64("port", port, 1, 65535, 7700, "<port>", "client TCP port"),
    STR("bind", bind, "127.0.0.1", "<addr>", "client TCP address (IPv4 or IPv6)"),
    STR("unix-socket", unix_socket, "", "<path>",
        "also listen on this Unix socket (\"\" for none)"),
    STR("data-dir", data_dir, "./var/fenced", "<dir>",
        "raft log and snapshots (created if missing)"),
    STR("config", config_file, "", "<file>",
        "read directives (\"name value\" a line, # comments) before the flags"),
    U64("lock-delay-ms", lock_delay_ms, 0, FENCE_LOCK_DELAY_MS_MAX, 0, "<ms>",
        "default lock-delay after a lease expires (LOCKDELAY overrides)"),
    U64("node-id", node_id, 1, (1ULL << 62), 1, "<id>", "this server's raft id"),
    U64("raft-port", raft_port, 0, 65535, 0, "<port>",
        "raft transport port (0: single node, no raft network)"),
    STR("peers", peers, "", "<list>",
        "cluster: id=host:client-port/raft-port,... (same on every node)"),
    U64("election-timeout-ms", election_timeout_ms, 50, 60000, 400, "<ms>",
        "raft election timeout (300-500 recommended)"),
    U64("heartbeat-ms", heartbeat_ms, 0, 30000, 0, "<ms>",
        "raft heartbeat (0: election timeout / 10)"),
    U64("snapshot-threshold", snapshot_threshold, 4, 1000000000, 1024, "<n>",
        "log entries between snapshots"),
    U64("snapshot-trailing", snapshot_trailing, 0, 1000000000, 128, "<n>",
        "log entries kept after a snapshot"),
    U64("join", join, 0, 1, 0, "<0|1>",
        "1: this node is being added to a running cluster (CLUSTER.ADD): never bootstrap"),
    U64("max-clients", max_clients, 1, 1000000, FENCE_CONNECTIONS_DEFAULT, "<n>",
        "open client connections"),
    U64("max-leases", max_leases, 1, 100000000, FENCE_LEASES_DEFAULT, "<n>",
        "live leases"),
    U64("max-locks", max_locks, 1, 100000000, FENCE_LOCKS_DEFAULT, "<n>",
        "locks held or waited on"),
    U64("max-waiters", max_waiters, 1, 100000000, FENCE_WAITERS_DEFAULT, "<n>",
        "waiters queued on one lock"),
    U64("max-waits", max_waits, 1, 100000000, FENCE_WAITS_DEFAULT, "<n>",
        "waits queued across all locks"),
    U64("max-dedup", max_dedup, 16, 100000000, FENCE_DEDUP_DEFAULT, "<n>",
        "client request ids (REQID) remembered for retries"),
    U64("max-bulk", max_bulk, 512, FENCE_RBUF_MAX / 2, FENCE_BULK_DEFAULT,
        "<bytes>", "longest bulk string in a request"),
    U64("max-pipeline", max_pipeline, 1, 1000000, FENCE_PIPELINE_DEFAULT, "<n>",
        "unanswered requests per connection (reading pauses when full)"),
    U64("max-obuf", max_obuf, 4096, (1ULL << 34), FENCE_OBUF_DEFAULT, "<bytes>",
        "unsent reply bytes per connection before it is disconnected"),
    STR("log-level", log_level, "info", "<level>", "debug, info, warn or error"),
    STR("log-file", log_file, "", "<file>", "append logs here instead of stderr"),
};
#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

/* Find an option by name (exact, case-sensitive), or NULL. */
static const opt *opt_find(const char *name, size_t len)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strlen(options[i].name) == len &&
            memcmp(options[i].name, name, len) == 0)
            return &options[i];
    return NULL;
}

/* Parse value into the option's field; on failure write a sentence into err
 * and return -1. */
static int opt_set(fence_config *cfg, const opt *o, const char *value,
                   char *err, size_t err_cap)
{
    char *field = (char *)cfg + o->offset;
    if (o->type == OPT_STR) {
        size_t n = strlen(value);
        if (n >= o->cap) {
            snprintf(err, err_cap, "%s: value longer than %zu bytes", o->name,
                     o->cap - 1);
            return -1;
        }
        memcpy(field, value, n + 1);
        return 0;
    }
    uint64_t v = 0;
    const char *p = value;
    if (*p == '\0') {
        snprintf(err, err_cap, "%s: missing value", o->name);
        return -1;
    }
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > (UINT64_MAX - 9) / 10) {
            snprintf(err, err_cap, "%s: '%s' is not a number in %llu..%llu",
                     o->name, value, (unsigned long long)o->min,
                     (unsigned long long)o->max);
            return -1;
        }
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < o->min || v > o->max) {
        snprintf(err, err_cap, "%s: %llu is out of range %llu..%llu", o->name,
                 (unsigned long long)v, (unsigned long long)o->min,
                 (unsigned long long)o->max);
        return -1;
    }
    memcpy(field, &v, sizeof(v));
    return 0;
}

/* Put every option's default into cfg. */
static void config_defaults(fence_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt *o = &options[i];
        char *field = (char *)cfg + o->offset;
        if (o->type == OPT_U64)
            memcpy(field, &o->def_u64, sizeof(uint64_t));
        else
            snprintf(field, o->cap, "%s", o->def_str);
    }
}

/* Parse config text: each non-empty, non-comment line is "name value"
 * (value: the rest of the line, trimmed; may be empty for strings).  The
 * first bad line is reported as "fname:line: message".  The text need not
 * be NUL-terminated; a NUL byte in it is an error. */
static int config_parse_text(fence_config *cfg, const char *text, size_t len,
                             const char *fname, char *err, size_t err_cap)
{
    char line[FENCE_CONFIG_LINE_MAX];
    char msg[512];
    unsigned lineno = 0;
    size_t pos = 0;
    while (pos < len) {
        lineno++;
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
        if (n >= sizeof(line)) {
            snprintf(err, err_cap, "%s:%u: line longer than %d bytes", fname, lineno,
                     FENCE_CONFIG_LINE_MAX - 1);
            return -1;
        }
        if (memchr(text + pos, '\0', n) != NULL) {
            snprintf(err, err_cap, "%s:%u: NUL byte in line", fname, lineno);
            return -1;
        }
        memcpy(line, text + pos, n);
        line[n] = '\0';
        pos += n + (nl ? 1 : 0);
        while (n > 0 && isspace((unsigned char)line[n - 1]))
            line[--n] = '\0';
        char *p = line;
        while (*p && isspace((unsigned char)*p))
            p++;
        if (*p == '\0' || *p == '#')
            continue;
        char *name = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        size_t name_len = (size_t)(p - name);
        while (*p && isspace((unsigned char)*p))
            p++;
        const opt *o = opt_find(name, name_len);
        if (o == NULL || strcmp(o->name, "config") == 0) {
            snprintf(err, err_cap, "%s:%u: unknown directive '%.*s'", fname, lineno,
                     (int)(name_len > 64 ? 64 : name_len), name);
            return -1;
        }
        if (opt_set(cfg, o, p, msg, sizeof(msg)) != 0) {
            snprintf(err, err_cap, "%s:%u: %s", fname, lineno, msg);
            return -1;
        }
    }
    return 0;
}

/* Read the whole config file (at most FENCE_CONFIG_FILE_MAX bytes) and
 * parse it. */
static int config_read_file(fence_config *cfg, const char *path, char *err,
                            size_t err_cap)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(err, err_cap, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    char *text = malloc(FENCE_CONFIG_FILE_MAX + 1);
    if (text == NULL) {
        fclose(f);
        snprintf(err, err_cap, "%s: out of memory", path);
        return -1;
    }
    size_t len = fread(text, 1, FENCE_CONFIG_FILE_MAX + 1, f);
    int rc = 0;
    if (ferror(f)) {
        snprintf(err, err_cap, "%s: read error", path);
        rc = -1;
    } else if (len > FENCE_CONFIG_FILE_MAX) {
        snprintf(err, err_cap, "%s: larger than %d bytes", path, FENCE_CONFIG_FILE_MAX);
        rc = -1;
    } else {
        rc = config_parse_text(cfg, text, len, path, err, err_cap);
    }
    free(text);
    fclose(f);
    return rc;
}

/* Parse a decimal number in [min, max] from *pp up to a byte not a digit;
 * advances *pp.  0 on success. */
static int peers_num(const char **pp, const char *end, uint64_t min, uint64_t max,
                     uint64_t *out)
{
    const char *p = *pp;
    uint64_t v = 0;
    if (p == end || !isdigit((unsigned char)*p))
        return -1;
    for (; p < end && isdigit((unsigned char)*p); p++) {
        if (v > (max - (uint64_t)(*p - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v < min)
        return -1;
    *pp = p;
    *out = v;
    return 0;
}

/* Parse one "id=host:client-port/raft-port" item (not NUL-terminated). */
static int parse_peer(const char *p, const char *end, fence_peer *pe)
{
    uint64_t id, cport, rport;
    if (peers_num(&p, end, 1, 1ULL << 62, &id) != 0 || p == end || *p++ != '=')
        return -1;
    const char *host = p;
    while (p < end && *p != ':')
        p++;
    size_t hlen = (size_t)(p - host);
    if (hlen == 0 || hlen >= sizeof(pe->host) || p == end)
        return -1;
    memcpy(pe->host, host, hlen);
    pe->host[hlen] = '\0';
    struct in_addr a;
    if (inet_pton(AF_INET, pe->host, &a) != 1) /* raft_uv_tcp wants IPv4 */
        return -1;
    p++;
    if (peers_num(&p, end, 1, 65535, &cport) != 0 || p == end || *p++ != '/')
        return -1;
    if (peers_num(&p, end, 1, 65535, &rport) != 0 || p != end)
        return -1;
    pe->id = id;
    pe->client_port = (uint16_t)cport;
    pe->raft_port = (uint16_t)rport;
    return 0;
}

/* Parse "1=127.0.0.1:7701/7801,2=..." into cfg->peer[]. */
static int parse_peers(fence_config *cfg, char *err, size_t err_cap)
{
    const char *p = cfg->peers;
    cfg->n_peers = 0;
    while (*p) {
        if (cfg->n_peers == FENCE_PEERS_MAX) {
            snprintf(err, err_cap, "peers: more than %d servers", FENCE_PEERS_MAX);
            return -1;
        }
        const char *end = strchr(p, ',');
        if (end == NULL)
            end = p + strlen(p);
        fence_peer *pe = &cfg->peer[cfg->n_peers];
        if (parse_peer(p, end, pe) != 0) {
            snprintf(err, err_cap,
                     "peers: '%.*s' is not id=IPv4:client-port/raft-port",
                     (int)((end - p) > 80 ? 80 : (end - p)), p);
            return -1;
        }
        for (unsigned i = 0; i < cfg->n_peers; i++)
            if (cfg->peer[i].id == pe->id) {
                snprintf(err, err_cap, "peers: id %llu listed twice",
                         (unsigned long long)pe->id);
                return -1;
            }
        cfg->n_peers++;
        p = end;
        if (*p == ',') {
            p++;
            if (*p == '\0') {
                snprintf(err, err_cap, "peers: trailing comma");
                return -1;
            }
        }
    }
    return 0;
}

/* Check the whole struct, fill derived fields, and refuse combinations
 * that cannot work. */
static int config_validate(fence_config *cfg, char *err, size_t err_cap)
{
    cfg->log_level_num = fence__log_level_parse(cfg->log_level);
    if (cfg->log_level_num < 0) {
        snprintf(err, err_cap, "log-level: '%s' is not debug, info, warn or error",
                 cfg->log_level);
        return -1;
    }
    if (cfg->data_dir[0] == '\0') {
        snprintf(err, err_cap, "data-dir: must not be empty");
        return -1;
    }
    if (cfg->bind[0] == '\0') {
        snprintf(err, err_cap, "bind: must not be empty");
        return -1;
    }
    if (cfg->heartbeat_ms == 0)
        cfg->heartbeat_ms = cfg->election_timeout_ms / 10;
    if (cfg->heartbeat_ms == 0 || cfg->heartbeat_ms >= cfg->election_timeout_ms) {
        snprintf(err, err_cap,
                 "heartbeat-ms: %llu must be above 0 and below election-timeout-ms %llu",
                 (unsigned long long)cfg->heartbeat_ms,
                 (unsigned long long)cfg->election_timeout_ms);
        return -1;
    }
    if (parse_peers(cfg, err, err_cap) != 0)
        return -1;
    if (cfg->n_peers == 0) {
        /* A cluster of one: this node alone. */
        cfg->n_peers = 1;
        cfg->peer[0].id = cfg->node_id;
        snprintf(cfg->peer[0].host, sizeof(cfg->peer[0].host), "%s",
                 strchr(cfg->bind, ':') ? "127.0.0.1" : cfg->bind);
        cfg->peer[0].client_port = (uint16_t)cfg->port;
        cfg->peer[0].raft_port = (uint16_t)cfg->raft_port;
        return 0;
    }
    const fence_peer *self = fence__config_peer(cfg, cfg->node_id);
    if (self == NULL) {
        snprintf(err, err_cap, "peers: node-id %llu is not in the list",
                 (unsigned long long)cfg->node_id);
        return -1;
    }
    if (cfg->raft_port == 0)
        cfg->raft_port = self->raft_port;
    if (cfg->raft_port != self->raft_port) {
        snprintf(err, err_cap, "raft-port: %llu differs from %u in peers",
                 (unsigned long long)cfg->raft_port, self->raft_port);
        return -1;
    }
    if (cfg->port != self->client_port) {
        snprintf(err, err_cap, "port: %llu differs from client port %u in peers",
                 (unsigned long long)cfg->port, self->client_port);
        return -1;
    }
    return 0;
}

/* Load defaults, file, flags; validate.  See config.h. */
int fence__config_load(fence_config *cfg, int argc, char **argv, char *err,
                       size_t err_cap)
{
    char msg[512];
    config_defaults(cfg);

    /* First pass: --help and --config, so the file comes before the flags. */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fence__config_help(argv[0]);
            return 1;
        }
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            snprintf(cfg->config_file, sizeof(cfg->config_file), "%s", argv[i + 1]);
        else if (strncmp(argv[i], "--config=", 9) == 0)
            snprintf(cfg->config_file, sizeof(cfg->config_file), "%s", argv[i] + 9);
    }
    if (cfg->config_file[0] != '\0' &&
        config_read_file(cfg, cfg->config_file, err, err_cap) != 0)
        return -1;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            snprintf(err, err_cap, "unexpected argument '%s' (see --help)", a);
            return -1;
        }
        a += 2;
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        const opt *o = opt_find(a, name_len);
        if (o == NULL) {
            snprintf(err, err_cap, "unknown option '%s' (see --help)", argv[i]);
            return -1;
        }
        const char *value;
        if (eq != NULL) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc) {
                snprintf(err, err_cap, "--%s: missing value", o->name);
                return -1;
            }
            value = argv[++i];
        }
        if (opt_set(cfg, o, value, msg, sizeof(msg)) != 0) {
            snprintf(err, err_cap, "--%s", msg);
            return -1;
        }
    }
    return config_validate(cfg, err, err_cap);
}

/* Defaults, then config text, then validation: the config file path of
 * fence__config_load without the file (for the fuzzer and tests). */
int fence__config_load_text(fence_config *cfg, const char *text, size_t len,
                            char *err, size_t err_cap)
{
    config_defaults(cfg);
    if (config_parse_text(cfg, text, len, "text", err, err_cap) != 0)
        return -1;
    return config_validate(cfg, err, err_cap);
}

/* Print usage and every option with its bounds and default. */
void fence__config_help(const char *prog)
{
    printf("usage: %s [--option value | --option=value]...\n\n"
           "fenced: a lock service with leases, FIFO locks and fencing tokens.\n"
           "Every option can also be a directive in the --config file\n"
           "(\"name value\", one a line, '#' starts a comment); flags win.\n\n",
           prog);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const opt *o = &options[i];
        char left[64];
        snprintf(left, sizeof(left), "--%s %s", o->name, o->arg);
        printf("  %-30s %s\n", left, o->help);
        if (o->type == OPT_U64)
            printf("  %-30s   range %llu..%llu, default %llu\n", "",
                   (unsigned long long)o->min, (unsigned long long)o->max,
                   (unsigned long long)o->def_u64);
        else
            printf("  %-30s   default \"%s\"\n", "", o->def_str);
    }
    printf("\n  --help                         this text\n"
           "\nTest-only environment: FENCED_TEST_FAIL_APPEND=N makes the Nth raft\n"
           "log append report a disk error (the daemon must abort).\n");
}

/* Look up a peer by raft id. */
const fence_peer *fence__config_peer(const fence_config *cfg, uint64_t id)
{
    for (unsigned i = 0; i < cfg->n_peers; i++)
        if (cfg->peer[i].id == id)
            return &cfg->peer[i];
    return NULL;
}
