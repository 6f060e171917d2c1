/* fence-store configuration: one option table (src/base/options.h)
 * drives the flags, the --config file and --help; the whole struct is then
 * validated. */
#ifndef FENCE_STORE_CONFIG_H
#define FENCE_STORE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/daemon.h"

/* Everything fence-store can be told. */
typedef struct fence_store_config {
    fence_daemon_conf daemon; /* the options every RESP daemon has
                               * (daemon/daemon.h) */
    char data_dir[1024];     /* directory of the LMDB environment */
    char token_verify_keys[1024]; /* verify.keys: accept only signed tokens
                              * that verify (docs/security.md); "" for none */
    uint64_t max_value;      /* largest value in bytes */
    uint64_t map_size;       /* LMDB map size in bytes (database ceiling) */
    uint64_t wal_size;       /* bytes per write-ahead log file (when
                              * created) */
    bool ignore_tokens;      /* control mode: admit every token */
} fence_store_config;

/* fence__store_config_load's results besides 0 and -1. */
#define FENCE_STORE_CONFIG_HELP 1    /* --help: printed, exit 0 */
#define FENCE_STORE_CONFIG_VERSION 2 /* --version: printed, exit 0 */

/* Defaults, then the --config file, then the flags in argv, then
 * validation.  Returns 0, FENCE_STORE_CONFIG_HELP or _VERSION (the text
 * went to stdout), or -1 with a message ("--flag: ..." or
 * "file:line: ...") in err. */
int fence__store_config_load(fence_store_config *cfg, int argc, char **argv,
                             char *err, size_t cap);

/* The same over config text (no flags, no file): for the tests. */
int fence__store_config_load_text(fence_store_config *cfg, const char *text,
                                  size_t len, char *err, size_t cap);

#endif /* FENCE_STORE_CONFIG_H */
