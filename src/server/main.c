/* fenced: the lock service daemon.  Parses the options, starts logging,
 * raft and the listeners, runs the loop until SIGTERM/SIGINT, exits 0.
 * SIGHUP reopens the --log-file (logrotate) and reloads the --acl-file (a
 * bad file keeps the old users). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "common/version.h"
#include "server/aio_reap.h"
#include "server/config.h"
#include "server/log.h"
#include "server/server.h"

/* The configuration and the server live for the whole process. */
static fence_config config;
static fence_server server;
/* The token signing key (--token-signing-key), when one is given. */
static fence_signtok_signer signer;
/* SIGHUP: reopen the log file, reload the ACL file (unreferenced: it never
 * keeps the loop up). */
static uv_signal_t sighup;

/* logrotate moved the log file: write to a fresh one at the same path;
 * and read the --acl-file again. */
static void on_sighup(uv_signal_t *sig, int signum)
{
    (void)sig;
    (void)signum;
    if (fence__log_reopen() == 0)
        LOG_INFO("SIGHUP: log file reopened");
    fence__server_acl_reload(&server);
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
        LOG_WARN("open-file limit %llu is below max-clients %llu + 64; "
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
    fence__log_format_set(config.log_format);
    rv = fence__log_open(config.log_level_num, config.log_file);
    if (rv != 0) {
        fprintf(stderr, "fenced: log-file %s: cannot open: %s\n", config.log_file,
                strerror(rv));
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit(config.max_clients);

    if (config.token_signing_key[0] != '\0') {
        char kerr[1024];
        if (fence_signtok_signer_load(config.token_signing_key, &signer, kerr,
                                      sizeof(kerr)) != 0) {
            LOG_ERROR("token-signing-key: %s", kerr);
            return 2;
        }
        LOG_INFO("signing grants asked for with SIGNED: key %s (%s)", signer.key.key_id,
                 fence_signtok_scheme_name(signer.key.scheme));
    }
    const char *note = fence_fsm_build_note();
    if (note != NULL)
        LOG_WARN("%s", note);
    if (fence__aio_reap_start() != 0)
        LOG_WARN("cannot start the io_destroy thread: each snapshot stalls the loop "
                 "while raft closes a log segment (server/aio_reap.h)");
    uv_loop_t *loop = uv_default_loop();
    uv_signal_init(loop, &sighup);
    uv_signal_start(&sighup, on_sighup, SIGHUP);
    uv_unref((uv_handle_t *)&sighup);
    if (fence__server_init(&server, loop, &config) != 0) {
        LOG_ERROR("start-up failed");
        return 1;
    }
    if (config.token_signing_key[0] != '\0')
        server.signer = &signer; /* before uv_run: no request has been read */
    LOG_INFO("fenced %s started: node %llu, data-dir %s", FENCE_VERSION,
             (unsigned long long)config.node_id, config.data_dir);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&sighup, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    fence__server_free(&server);
    uv_loop_close(loop);
    return server.exit_code;
}
