/* fence-store's command table (see commands_table.h): one row per command,
 * from which cmd.c parses (op, arity, argc_max, the usage text from the
 * argument names), the ACL gate checks (acl, acl_key), COMMAND / COMMAND
 * DOCS answer and the metrics are labelled.  Arity follows Redis'
 * convention (the name counts). */
#include "store/commands_table.h"

#include "auth/acl.h"
#include "store/cmd.h"

/* ACL categories (the acl column).  acl_key is the fence argument: FGET
 * names a key, and the store checks the fence the key is bound to itself
 * (docs/security.md). */
#define STORE FENCE_ACL_CAT_STORE
#define FENCE FENCE_ACL_CAT_FENCE
#define R FENCE_ACL_CAT_READ
#define W FENCE_ACL_CAT_WRITE
#define CONN FENCE_ACL_CAT_CONNECTION

#define ARGS(a) (a), (sizeof(a) / sizeof((a)[0]))
#define NO_ARGS NULL, 0

/* A write: one LMDB transaction, fsynced before the reply. */
#define WRITE (FENCE_COMPAT_CMD_WRITE)
#define READ (FENCE_COMPAT_CMD_READONLY | FENCE_COMPAT_CMD_FAST)
#define LOCAL (FENCE_COMPAT_CMD_FAST | FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE)

static const fence_compat_arg fset_args[] = {
    {"fence", "string", NULL, 0, NULL, 0},
    {"token", "integer", NULL, 0, NULL, 0},
    {"key", "key", NULL, 0, NULL, 0},
    {"value", "string", NULL, 0, NULL, 0},
};
static const fence_compat_arg fkey_args[] = {
    {"fence", "string", NULL, 0, NULL, 0},
    {"token", "integer", NULL, 0, NULL, 0},
    {"key", "key", NULL, 0, NULL, 0},
};
static const fence_compat_arg key_arg[] = {
    {"key", "key", NULL, 0, NULL, 0},
};
static const fence_compat_arg fence_arg[] = {
    {"fence", "string", NULL, 0, NULL, 0},
};
static const fence_compat_arg admit_args[] = {
    {"fence", "string", NULL, 0, NULL, 0},
    {"token", "integer", NULL, 0, NULL, 0},
};
static const fence_compat_arg ping_args[] = {
    {"message", "string", NULL, FENCE_COMPAT_ARG_OPTIONAL, NULL, 0},
};
static const fence_compat_arg info_args[] = {
    {"section", "string", NULL, FENCE_COMPAT_ARG_OPTIONAL, NULL, 0},
};

const fence_compat_command fence__store_commands[] = {
    {"FSET", 5, WRITE, "store", "0.1.0",
     "Sets key to value if token is not older than the fence's mark.", ARGS(fset_args),
     NULL, 0,
     STORE | W, 1, 5, FENCE_STORE_OP_FSET},
    {"FDEL", 4, WRITE, "store", "0.1.0",
     "Deletes key if token is not older than the fence's mark; replies 1 or 0.",
     ARGS(fkey_args), NULL, 0,
     STORE | W, 1, 4, FENCE_STORE_OP_FDEL},
    {"FINCR", 4, WRITE, "store", "0.1.0",
     "Increments the integer at key if token is not older than the fence's mark.",
     ARGS(fkey_args), NULL, 0,
     STORE | W, 1, 4, FENCE_STORE_OP_FINCR},
    {"FGET", 2, READ, "store", "0.1.0", "Replies the value of key, or nil.", ARGS(key_arg),
     NULL, 0,
     STORE | R, 0, 2, FENCE_STORE_OP_FGET},
    {"FENCE.HIGH", 2, READ, "fence", "0.1.0",
     "Replies the highest token admitted for the fence (0 if none).", ARGS(fence_arg), NULL,
     0,
     FENCE | R, 1, 2, FENCE_STORE_OP_FENCE_HIGH},
    {"FENCE.ADMIT", 3, WRITE, "fence", "0.1.0",
     "Raises the fence's mark to token (admit-before-read), or STALE.", ARGS(admit_args),
     NULL, 0,
     FENCE | W, 1, 3, FENCE_STORE_OP_FENCE_ADMIT},
    {"PING", -1, LOCAL, "connection", "0.1.0", "Liveness check: PONG, or the message.",
     ARGS(ping_args), NULL, 0,
     CONN, 0, 2, FENCE_STORE_OP_PING},
    {"INFO", -1, LOCAL, "server", "0.1.0", "Store counters, one name:value a line.",
     ARGS(info_args), NULL, 0,
     CONN | R, 0, 2, FENCE_STORE_OP_INFO},
    {"QUIT", 1, LOCAL, "connection", "0.1.0",
     "Closes the connection after the earlier replies.", NO_ARGS, NULL, 0,
     CONN, 0, 1, FENCE_STORE_OP_QUIT},
};

const size_t fence__store_commands_n =
    sizeof(fence__store_commands) / sizeof(fence__store_commands[0]);
