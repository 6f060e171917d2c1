/* fence-store: a key/value server that enforces fencing tokens, on LMDB.
 * main() parses the flags, takes the data directory's lock, opens the
 * store and runs the server on the RESP daemon skeleton (daemon/daemon.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "base/fs.h"
#include "base/log.h"
#include "base/version.h"
#include "store/config.h"
#include "store/db.h"
#include "store/server.h"

/* Parse flags, open the store, serve; exit status 0 after a clean stop,
 * 1 on a startup error, 2 on a bad flag. */
int main(int argc, char **argv)
{
    static fence_store_config cfg;
    char err[1300];
    int rc = fence__store_config_load(&cfg, argc, argv, err, sizeof(err));
    if (rc > 0)
        return 0;
    if (rc < 0) {
        fprintf(stderr, "fence-store: %s\n", err);
        return 2;
    }
    if (fence__daemon_log_start(&cfg.daemon, "fence-store") != 0)
        return 2;
    FENCE_LOG_I("fence-store %s starting", FENCE_VERSION);

    /* The lock first: opening the store replays its write-ahead log. */
    rc = fence__fs_mkdir_p(cfg.data_dir, 0755);
    if (rc != 0) {
        FENCE_LOG_E("cannot create data dir %s: %s", cfg.data_dir, strerror(rc));
        return 1;
    }
    int lock_fd = fence__fs_lock_dir_msg(cfg.data_dir, "fence-store.lock", err, sizeof(err));
    if (lock_fd < 0) {
        FENCE_LOG_E("%s", err);
        return 1;
    }
    fence_store_db *db = NULL;
    if (fence__store_db_open(cfg.data_dir, cfg.map_size, cfg.wal_size, cfg.ignore_tokens, &db,
                             err, sizeof(err)) != 0) {
        FENCE_LOG_E("%s", err);
        close(lock_fd);
        return 1;
    }
    fence_store_db_stats st;
    fence__store_db_stats_get(db, &st);
    FENCE_LOG_I("data in %s: %" PRIu64 " keys, %" PRIu64 " fences (map size %"
              PRIu64 " bytes, max value %" PRIu64 " bytes)", cfg.data_dir,
              st.keys, st.fences, cfg.map_size, cfg.max_value);
    if (cfg.ignore_tokens) {
        for (int i = 0; i < 3; i++)
            FENCE_LOG_W("!!! --ignore-tokens: FENCING IS OFF. Every token is "
                      "admitted; stale writers WILL overwrite newer data. "
                      "Control mode for demos and tests only. !!!");
    }
    fence__daemon_startup_warn(&cfg.daemon, "fence-store");
    rc = fence__store_server_run(&cfg, db);
    fence__store_db_close(db);
    close(lock_fd);
    return rc;
}
