/* libFuzzer target: the fenced config-file parser and validator
 * (src/server/config.c, fence__config_load_text), including the --peers
 * list parser.  Any input must be either refused with a message or give a
 * configuration that satisfies every invariant the daemon relies on. */
#include <string.h>

#include "fuzz.h"
#include "server/config.h"

/* Check one input.  Properties: no crash or sanitizer report; an error
 * has a non-empty, NUL-terminated message; a success has terminated
 * strings, a heartbeat below the election timeout, 1..FENCE_PEERS_MAX
 * peers with distinct ids and non-zero ports, and this node among them. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static fence_config cfg; /* large; fully re-initialized every call */
    char err[512];
    memset(err, 0x55, sizeof(err));
    int rc = fence__config_load_text(&cfg, (const char *)data, size, err, sizeof(err));
    if (rc != 0) {
        FUZZ_CHECK(rc == -1);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(err[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(memchr(cfg.daemon.bind, '\0', sizeof(cfg.daemon.bind)) != NULL);
    FUZZ_CHECK(memchr(cfg.data_dir, '\0', sizeof(cfg.data_dir)) != NULL);
    FUZZ_CHECK(memchr(cfg.peers, '\0', sizeof(cfg.peers)) != NULL);
    FUZZ_CHECK(memchr(cfg.daemon.log_file, '\0', sizeof(cfg.daemon.log_file)) != NULL);
    FUZZ_CHECK(cfg.data_dir[0] != '\0');
    FUZZ_CHECK(cfg.daemon.port <= 65535 && cfg.daemon.tls_port <= 65535);
    FUZZ_CHECK(cfg.daemon.port != 0 || cfg.daemon.tls_port != 0 || cfg.daemon.unix_socket[0] != '\0');
    FUZZ_CHECK(cfg.daemon.tls_port == 0 || cfg.daemon.tls_port != cfg.daemon.port);
    FUZZ_CHECK(cfg.daemon.tls_port == 0 || (cfg.daemon.tls_cert[0] != '\0' && cfg.daemon.tls_key[0] != '\0'));
    FUZZ_CHECK(cfg.heartbeat_ms > 0 && cfg.heartbeat_ms < cfg.election_timeout_ms);
    FUZZ_CHECK(cfg.daemon.log_level_num >= 0 && cfg.daemon.log_level_num <= 3);
    FUZZ_CHECK(cfg.n_peers >= 1 && cfg.n_peers <= FENCE_PEERS_MAX);
    for (unsigned i = 0; i < cfg.n_peers; i++) {
        FUZZ_CHECK(cfg.peer[i].id >= 1);
        FUZZ_CHECK(memchr(cfg.peer[i].host, '\0', sizeof(cfg.peer[i].host)) != NULL);
        for (unsigned j = i + 1; j < cfg.n_peers; j++)
            FUZZ_CHECK(cfg.peer[i].id != cfg.peer[j].id);
    }
    const fence_peer *self = fence__config_peer(&cfg, cfg.node_id);
    FUZZ_CHECK(self != NULL);
    /* The port clients are sent to: the plain one, else the TLS one. */
    FUZZ_CHECK(self->client_port == (cfg.daemon.port != 0 ? cfg.daemon.port : cfg.daemon.tls_port));
    if (cfg.peers[0] != '\0') {
        FUZZ_CHECK(self->raft_port == cfg.raft_port);
        for (unsigned i = 0; i < cfg.n_peers; i++)
            FUZZ_CHECK(cfg.peer[i].client_port >= 1 && cfg.peer[i].raft_port >= 1);
    }
    return 0;
}
