/* fence-store: a key/value server that enforces fencing tokens, on LMDB.
 * main() parses the flags, takes the data directory's lock, opens the
 * store and runs the server. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/acl_srv.h"
#include "common/fs.h"
#include "common/startup_warn.h"
#include "common/log.h"
#include "common/version.h"
#include "store/config.h"
#include "store/db.h"
#include "store/server.h"

/* Take an exclusive lock on <dir>/fence-store.lock so that two servers
 * never share a data directory.  Returns the lock's fd or -1. */
static int lock_data_dir(const char *dir)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/fence-store.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        FENCE_LOG_E("cannot open %s: %s", path,
                  strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        FENCE_LOG_E("%s is locked: another fence-store is using %s", path, dir);
        close(fd);
        return -1;
    }
    return fd;
}

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
    fence__log_format_set(cfg.log_format);
    rc = fence__log_open(cfg.log_level_num, cfg.log_file);
    if (rc != 0) {
        fprintf(stderr, "fence-store: log-file %s: cannot open: %s\n",
                cfg.log_file, strerror(rc));
        return 2;
    }
    FENCE_LOG_I("fence-store %s starting", FENCE_VERSION);

    /* The lock first: opening the store replays its write-ahead log. */
    rc = fence__fs_mkdir_p(cfg.data_dir, 0755);
    if (rc != 0) {
        FENCE_LOG_E("cannot create data dir %s: %s", cfg.data_dir, strerror(rc));
        return 1;
    }
    int lock_fd = lock_data_dir(cfg.data_dir);
    if (lock_fd < 0)
        return 1;
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
    fence__startup_warn_auth("fence-store", cfg.bind, cfg.acl_file[0] != '\0',
                             fence__acl_srv_tls_only(cfg.port, cfg.tls_port, cfg.tls_cert,
                                                     cfg.tls_key),
                             cfg.insecure);
    rc = fence__store_server_run(&cfg, db);
    fence__store_db_close(db);
    close(lock_fd);
    return rc;
}
