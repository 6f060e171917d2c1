/* fenced's option table (the engine is src/base/options.c: flags,
 * config file and --help), the --peers parser and the checks across
 * fields. */
#include "server/config.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "daemon/acl_srv.h"
#include "base/assert.h"
#include "daemon/daemon.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/num.h"
#include "base/options.h"
#include "net/tls.h"
#include "base/version.h"

#define T fence_config
#define U64(n, field, lo, hi, def, a, h) \
    FENCE_OPT_U64_ROW(T, (n), field, (lo), (hi), (def), (a), (h))
#define STR(n, field, def, a, h) FENCE_OPT_STR_ROW(T, (n), field, (def), (a), (h))

/* The option table: flags, config-file directives and --help. */
static const fence_opt options[] = {
    FENCE_DAEMON_OPT_ROWS(T, 7700, 1000000, FENCE_CONNECTIONS_DEFAULT, 4096, (1ULL << 34), 0,
                          "may own every lock"),
    FENCE_OPT_STR_REQ_ROW(T, "data-dir", data_dir, "./var/fenced", "<dir>",
                          "raft log and snapshots (created if missing; one fenced per directory)"),
    STR("token-signing-key", token_signing_key, "", "<file>",
        "sign grants asked for with SIGNED (fencectl keygen; same file on every node; "
        "read again on SIGHUP)"),
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
        "least log entries between snapshots (scales up with the live "
        "objects)"),
    /* At least 1: libraft 0.15 takes a snapshot put with 0 trailing
     * entries for an InstallSnapshot and moves the next append index back
     * to the snapshot's, so entries appended while a forked snapshot was
     * encoded (acknowledged ones) were dropped and a restart reissued
     * their lease ids and tokens (docs/cluster.md, libraft pitfalls). */
    U64("snapshot-trailing", snapshot_trailing, 1, 1000000000, 128, "<n>",
        "log entries kept after a snapshot (at least 1)"),
    U64("snapshot-log-ratio", snapshot_log_ratio, 0, 1000, 2, "<n>",
        "the log between snapshots may grow to n times the last snapshot's "
        "bytes (raises the threshold; 0: off)"),
    U64("snapshot-fork", snapshot_fork, 0, 1, 1, "<0|1>",
        "1: a forked child encodes each snapshot (the loop only forks); "
        "0: the loop encodes it"),
    U64("join", join, 0, 1, 0, "<0|1>",
        "1: this node is being added to a running cluster (CLUSTER.ADD): never bootstrap"),
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
    STR("peer-tls-cert", peer_tls_cert, "", "<file>",
        "raft transport mutual TLS: this node's certificate (PEM, signed by peer-tls-ca)"),
    STR("peer-tls-key", peer_tls_key, "", "<file>", "raft transport mutual TLS: its key (PEM)"),
    STR("peer-tls-ca", peer_tls_ca, "", "<file>",
        "raft transport mutual TLS: the cluster CA every node's certificate is signed by"),
    U64("peer-tls-check-id", peer_tls_check_id, 0, 1, 1, "<0|1>",
        "1: a peer's certificate CN must be node-<its raft id>"),
};

#undef U64
#undef STR
#undef T

static const fence_opts_spec spec = {
    "fenced",
    FENCE_VERSION,
    "fenced: a lock service with leases, FIFO locks and fencing tokens.\n"
    "Every option can also be a directive in the --config file\n"
    "(\"name value\", one a line, '#' starts a comment); flags win.\n",
    "Signals: SIGTERM and SIGINT stop cleanly; SIGHUP reopens the --log-file\n"
    "and reloads the --acl-file and --token-signing-key (a bad file keeps\n"
    "the old users or key).\n"
    "\nTest-only environment: FENCED_TEST_FAIL_APPEND=N makes the Nth raft\n"
    "log append report a disk error (the daemon must abort).\n",
    options,
    sizeof(options) / sizeof(options[0]),
};

/* Parse one "id=host:client-port/raft-port" item (not NUL-terminated). */
static int parse_peer(const char *p, const char *end, fence_peer *pe)
{
    uint64_t id, cport, rport;
    if (fence__num_scan_u64(&p, end, 1, 1ULL << 62, &id) != 0 || p == end || *p++ != '=')
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
    if (fence__num_scan_u64(&p, end, 1, 65535, &cport) != 0 || p == end || *p++ != '/')
        return -1;
    if (fence__num_scan_u64(&p, end, 1, 65535, &rport) != 0 || p != end)
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

/* The raft mTLS files come together: all three or none. */
static int check_peer_tls(const fence_config *cfg, char *err, size_t err_cap)
{
    int set = (cfg->peer_tls_cert[0] != '\0') + (cfg->peer_tls_key[0] != '\0') +
              (cfg->peer_tls_ca[0] != '\0');
    if (set != 0 && set != 3) {
        snprintf(err, err_cap, "%s",
                 "peer-tls-cert, peer-tls-key and peer-tls-ca go together");
        return -1;
    }
    return 0;
}

/* Check the whole struct, fill derived fields, and refuse combinations
 * that cannot work. */
static int config_validate(fence_config *cfg, char *err, size_t err_cap)
{
    FENCE_ASSERT(cfg->data_dir[0] != '\0');
    if (fence__daemon_conf_check(&cfg->daemon, err, err_cap) != 0)
        return -1;
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
    if (check_peer_tls(cfg, err, err_cap) != 0)
        return -1;
    /* The port clients are sent to (NOTLEADER): the plain one, else TLS. */
    const fence_daemon_conf *d = &cfg->daemon;
    uint64_t client_port = d->port != 0 ? d->port : d->tls_port;
    if (cfg->n_peers == 0) {
        /* A cluster of one: this node alone. */
        cfg->n_peers = 1;
        cfg->peer[0].id = cfg->node_id;
        snprintf(cfg->peer[0].host, sizeof(cfg->peer[0].host), "%s",
                 strchr(d->bind, ':') ? "127.0.0.1" : d->bind);
        cfg->peer[0].client_port = (uint16_t)client_port;
        cfg->peer[0].raft_port = (uint16_t)cfg->raft_port;
        return 0;
    }
    const fence_peer *self = fence__config_peer(cfg, cfg->node_id);
    if (self == NULL) {
        snprintf(err, err_cap, "peers: node-id %llu is not in the list",
                 (unsigned long long)cfg->node_id);
        return -1;
    }
    if (!d->insecure && cfg->peer_tls_cert[0] == '\0' && !fence__acl_srv_is_loopback(self->host)) {
        snprintf(err, err_cap,
                 "peers: this node's raft port %s:%u is not on a loopback address and the "
                 "raft transport has no mutual TLS: anyone who can reach it could join the "
                 "log; give peer-tls-cert, peer-tls-key and peer-tls-ca, or --insecure "
                 "(docs/security.md)",
                 self->host, self->raft_port);
        return -1;
    }
    if (cfg->raft_port == 0)
        cfg->raft_port = self->raft_port;
    if (cfg->raft_port != self->raft_port) {
        snprintf(err, err_cap, "raft-port: %llu differs from %u in peers",
                 (unsigned long long)cfg->raft_port, self->raft_port);
        return -1;
    }
    if (client_port != self->client_port) {
        snprintf(err, err_cap, "%s: %llu differs from client port %u in peers",
                 d->port != 0 ? "port" : "tls-port",
                 (unsigned long long)client_port, self->client_port);
        return -1;
    }
    return 0;
}

/* Load defaults, file, flags; validate.  See config.h. */
int fence__config_load(fence_config *cfg, int argc, char **argv, char *err,
                       size_t err_cap)
{
    int rc = fence__opts_load(&spec, cfg, argc, argv, err, err_cap);
    if (rc == FENCE_OPTS_HELP) {
        fence__opts_help(&spec, stdout);
        return 1;
    }
    if (rc == FENCE_OPTS_VERSION) {
        fence__opts_version(&spec, stdout);
        return 1;
    }
    if (rc != 0)
        return -1;
    return config_validate(cfg, err, err_cap);
}

/* Defaults, then config text, then validation: the config file path of
 * fence__config_load without the file (for the fuzzer and tests). */
int fence__config_load_text(fence_config *cfg, const char *text, size_t len,
                            char *err, size_t err_cap)
{
    fence__opts_defaults(&spec, cfg);
    if (fence__opts_parse_text(&spec, cfg, text, len, "text", err, err_cap) != 0)
        return -1;
    return config_validate(cfg, err, err_cap);
}

/* Print usage and every option with its bounds and default. */
void fence__config_help(const char *prog)
{
    (void)prog;
    fence__opts_help(&spec, stdout);
}

/* Look up a peer by raft id. */
const fence_peer *fence__config_peer(const fence_config *cfg, uint64_t id)
{
    for (unsigned i = 0; i < cfg->n_peers; i++)
        if (cfg->peer[i].id == id)
            return &cfg->peer[i];
    return NULL;
}
