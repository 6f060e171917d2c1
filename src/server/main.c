/* fenced: the lock service daemon.  Parses the options, starts logging,
 * raft and the listeners, runs the loop until SIGTERM/SIGINT, exits 0.
 * SIGHUP reopens the --log-file (logrotate) and reads the --acl-file and
 * the --token-signing-key again (a bad file keeps what was in force): the
 * listeners, the shared options, AUTH/HELLO/CLIENT, the ACL and SIGHUP are
 * the RESP daemon skeleton's (src/daemon/daemon.h), as in fence-store. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "daemon/acl_srv.h"
#include "daemon/daemon.h"
#include "base/version.h"
#include "server/aio_reap.h"
#include "server/config.h"
#include "base/log.h"
#include "server/server.h"

/* The configuration and the server live for the whole process. */
static fence_config config;
static fence_server server;
/* The token signing key (--token-signing-key), when one is given. */
static fence_signtok_signer signer;
/* SIGHUP (daemon/daemon.h): outside the server, which its init zeroes. */
static fence_daemon_signals signals;

/* Read --token-signing-key again.  A slot points at this one static
 * signer, and the signing thread (signq.h) works from a copy of it taken
 * on the loop thread (this handler's thread) when a grant is applied, so
 * overwriting it here never races a signature: grants applied from now on
 * carry the new key id.  A bad file keeps the old key. */
static void reload_signer(void)
{
    fence_signtok_signer fresh;
    char kerr[1024];
    if (fence_signtok_signer_load(config.token_signing_key, &fresh, kerr, sizeof(kerr)) != 0) {
        FENCE_LOG_E("SIGHUP: token-signing-key not reloaded, key %s stays: %s",
                     signer.key.key_id, kerr);
        fence_signtok_signer_wipe(&fresh);
        return;
    }
    fence_signtok_signer_wipe(&signer);
    signer = fresh;
    fence_signtok_signer_wipe(&fresh);
    FENCE_LOG_I("SIGHUP: token-signing-key reloaded: key %s (%s)", signer.key.key_id,
                fence_signtok_scheme_name(signer.key.scheme));
}

/* SIGHUP, after the skeleton reopened the log and reloaded the ACL
 * (daemon/daemon.h): the signing key, when there is one. */
static void reload_keys(void *arg)
{
    (void)arg;
    if (server.signer != NULL)
        reload_signer();
}

/* Make room for max_clients connections plus the listeners, the raft log
 * and the transport: raise the soft RLIMIT_NOFILE toward the hard limit,
 * and warn when even that is too low (accepts would then fail). */
static void raise_fd_limit(uint64_t max_clients)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_clients + 64;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rlim_t soft = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= want ? want : rl.rlim_max;
    rl.rlim_cur = soft;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0 || soft < want)
        FENCE_LOG_W("open-file limit %llu is below max-clients %llu + 64; "
                    "connections beyond it will be refused by the kernel",
                    (unsigned long long)soft, (unsigned long long)max_clients);
}

/* Entry point: see the file comment. */
int main(int argc, char **argv)
{
    char err[1024];
    int rv = fence__config_load(&config, argc, argv, err, sizeof(err));
    if (rv == 1)
        return 0;
    if (rv != 0) {
        fprintf(stderr, "fenced: %s\n", err);
        return 2;
    }
    if (fence__daemon_log_start(&config.daemon, "fenced") != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit(config.daemon.max_clients);

    if (config.token_signing_key[0] != '\0') {
        char kerr[1024];
        if (fence_signtok_signer_load(config.token_signing_key, &signer, kerr,
                                      sizeof(kerr)) != 0) {
            FENCE_LOG_E("token-signing-key: %s", kerr);
            return 2;
        }
        FENCE_LOG_I("signing grants asked for with SIGNED: key %s (%s)", signer.key.key_id,
                    fence_signtok_scheme_name(signer.key.scheme));
    }
    const char *note = fence_fsm_build_note();
    if (note != NULL)
        FENCE_LOG_W("%s", note);
    if (fence__aio_reap_start() != 0)
        FENCE_LOG_W("cannot start the io_destroy thread: each snapshot stalls the loop "
                    "while raft closes a log segment (server/aio_reap.h)");
    uv_loop_t *loop = uv_default_loop();
    fence__daemon_signals_start(&signals, &server.daemon, loop, reload_keys, NULL);
    /* Before anything listens: say what is exposed. */
    fence__daemon_startup_warn(&config.daemon, "fenced");
    const fence_peer *self = fence__config_peer(&config, config.node_id);
    if (config.daemon.insecure && config.n_peers > 1 && self != NULL &&
        config.peer_tls_cert[0] == '\0' && !fence__acl_srv_is_loopback(self->host))
        for (int i = 0; i < 3; i++)
            FENCE_LOG_W("!!! --insecure: the raft port %s:%u is NOT on a loopback address and has "
                        "NO MUTUAL TLS: anyone who can reach it can speak raft to this node. "
                        "Give --peer-tls-cert, --peer-tls-key and --peer-tls-ca. !!!",
                        self->host, (unsigned)self->raft_port);
    if (fence__server_init(&server, loop, &config) != 0) {
        FENCE_LOG_E("start-up failed");
        return 1;
    }
    if (config.token_signing_key[0] != '\0')
        server.signer = &signer; /* before uv_run: no request has been read */
    FENCE_LOG_I("fenced %s started: node %llu, data-dir %s", FENCE_VERSION,
                (unsigned long long)config.node_id, config.data_dir);
    uv_run(loop, UV_RUN_DEFAULT);
    fence__daemon_signals_close(&signals);
    uv_run(loop, UV_RUN_NOWAIT);
    fence__server_free(&server);
    uv_loop_close(loop);
    return server.exit_code;
}
