/* fence-store's option table and the checks across fields (see config.h). */
#include "store/config.h"

#include <stdio.h>
#include <string.h>

#include "daemon/acl_srv.h"
#include "base/assert.h"
#include "daemon/daemon.h"
#include "base/limits.h"
#include "base/log.h"
#include "base/options.h"
#include "net/tls.h"
#include "base/version.h"

#define T fence_store_config

static const fence_opt opts[] = {
    FENCE_DAEMON_OPT_ROWS(T, 7710, FENCE_STORE_CLIENTS_MAX, FENCE_STORE_CLIENTS_DEFAULT,
                          64 * 1024, 1024ull * 1024 * 1024, FENCE_OPT_F_LOGDIGIT,
                          "may admit any token"),
    FENCE_OPT_STR_REQ_ROW(T, "data-dir", data_dir, "var/fence-store", "<dir>",
                          "directory for the LMDB files (created if missing)"),
    FENCE_OPT_STR_ROW(T, "token-verify-keys", token_verify_keys, "", "<file>",
                      "verify.keys file: accept only signed tokens fenced "
                      "signed for the fence (-BADTOKEN otherwise; read "
                      "again on SIGHUP); \"\" for plain tokens"),
    FENCE_OPT_SIZE_ROW(T, "max-value", max_value, 1, FENCE_STORE_VALUE_MAX,
                       FENCE_STORE_VALUE_DEFAULT, "<bytes>",
                       "largest value FSET accepts"),
    FENCE_OPT_SIZE_ROW(T, "map-size", map_size, 1024 * 1024,
                       1024ull * 1024 * 1024 * 1024, 1024ull * 1024 * 1024,
                       "<bytes>",
                       "LMDB map size: the most data the store can hold; "
                       "writes beyond it get -FULL"),
    FENCE_OPT_SIZE_ROW(T, "wal-size", wal_size, FENCE_STORE_WAL_FILE_MIN,
                       1024ull * 1024 * 1024, FENCE_STORE_WAL_FILE_DEFAULT,
                       "<bytes>",
                       "bytes per write-ahead log file (two, created "
                       "zero-filled in the data dir; at most an eighth of "
                       "the free space); a full file starts a checkpoint"),
    FENCE_OPT_BOOL_ROW(T, "ignore-tokens", ignore_tokens, 0,
                       "CONTROL MODE, UNSAFE: admit every token (lease "
                       "only, no fencing); for demos and the torture "
                       "harness's control run"),
};

#undef T

static const fence_opts_spec spec = {
    "fence-store",
    FENCE_VERSION,
    "A key/value server that enforces fencing tokens: a write with token T "
    "for\nfence F is admitted iff T >= the highest token admitted for F, and "
    "a key\nbelongs to the fence that first wrote it.  Speaks RESP "
    "(redis-cli works).\nCommands: FSET FDEL FINCR FGET FENCE.HIGH "
    "FENCE.ADMIT PING INFO.\nEvery option can also be a directive in the "
    "--config file; flags win.\n",
    NULL,
    opts,
    sizeof(opts) / sizeof(opts[0]),
};

/* Check relationships between fields; fill the derived ones. */
static int validate(fence_store_config *cfg, char *err, size_t cap)
{
    FENCE_ASSERT(cfg->data_dir[0] != '\0');
    if (fence__daemon_conf_check(&cfg->daemon, err, cap) != 0)
        return -1;
    if (cfg->daemon.max_obuf < cfg->max_value + 4096) {
        snprintf(err, cap,
                 "max-obuf: %llu must exceed max-value %llu by at least 4096, "
                 "or a client could never read its largest value",
                 (unsigned long long)cfg->daemon.max_obuf,
                 (unsigned long long)cfg->max_value);
        return -1;
    }
    if (cfg->map_size < cfg->max_value * 4) {
        snprintf(err, cap,
                 "map-size: %llu must be at least four times max-value %llu",
                 (unsigned long long)cfg->map_size,
                 (unsigned long long)cfg->max_value);
        return -1;
    }
    return 0;
}

/* Defaults, file, flags, validation. */
int fence__store_config_load(fence_store_config *cfg, int argc, char **argv,
                             char *err, size_t cap)
{
    int rc = fence__opts_load(&spec, cfg, argc, argv, err, cap);
    if (rc == FENCE_OPTS_HELP) {
        fence__opts_help(&spec, stdout);
        return FENCE_STORE_CONFIG_HELP;
    }
    if (rc == FENCE_OPTS_VERSION) {
        fence__opts_version(&spec, stdout);
        return FENCE_STORE_CONFIG_VERSION;
    }
    if (rc != 0)
        return -1;
    return validate(cfg, err, cap);
}

/* Defaults, text, validation. */
int fence__store_config_load_text(fence_store_config *cfg, const char *text,
                                  size_t len, char *err, size_t cap)
{
    fence__opts_defaults(&spec, cfg);
    if (fence__opts_parse_text(&spec, cfg, text, len, "text", err, cap) != 0)
        return -1;
    return validate(cfg, err, cap);
}
