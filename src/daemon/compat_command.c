/* Redis-client compatibility: the command table of this module (HELLO,
 * CLIENT, ...; the rows COMMAND describes next to the daemon's own table),
 * the lookups over the tables, and COMMAND / COMMAND INFO / COMMAND DOCS. */
#include "daemon/compat_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "auth/acl.h"
#include "base/assert.h"

/* ---- The command table of this module ---------------------------------------- */

static const fence_compat_arg hello_auth_block[] = {
    {"username", "string", NULL, 0, NULL, 0},
    {"password", "string", NULL, 0, NULL, 0},
};
static const fence_compat_arg hello_args[] = {
    {"protover", "integer", NULL, FENCE_COMPAT_ARG_OPTIONAL, NULL, 0},
    {"auth", "block", "AUTH", FENCE_COMPAT_ARG_OPTIONAL, hello_auth_block, 2},
    {"clientname", "string", "SETNAME", FENCE_COMPAT_ARG_OPTIONAL, NULL, 0},
};
static const fence_compat_arg auth_args[] = {
    {"username", "string", NULL, FENCE_COMPAT_ARG_OPTIONAL, NULL, 0},
    {"password", "string", NULL, 0, NULL, 0},
};
static const fence_compat_arg one_message[] = {
    {"message", "string", NULL, 0, NULL, 0},
};
static const fence_compat_arg select_args[] = {
    {"index", "integer", NULL, 0, NULL, 0},
};
static const fence_compat_arg watch_args[] = {
    {"key", "key", NULL, FENCE_COMPAT_ARG_MULTIPLE, NULL, 0},
};
static const fence_compat_arg setname_args[] = {
    {"connection-name", "string", NULL, 0, NULL, 0},
};
static const fence_compat_arg setinfo_choice[] = {
    {"libname", "string", "LIB-NAME", 0, NULL, 0},
    {"libver", "string", "LIB-VER", 0, NULL, 0},
};
static const fence_compat_arg setinfo_args[] = {
    {"attr", "oneof", NULL, 0, setinfo_choice, 2},
};
static const fence_compat_arg list_type_choice[] = {
    {"normal", "pure-token", "NORMAL", 0, NULL, 0},
    {"master", "pure-token", "MASTER", 0, NULL, 0},
    {"replica", "pure-token", "REPLICA", 0, NULL, 0},
    {"pubsub", "pure-token", "PUBSUB", 0, NULL, 0},
};
static const fence_compat_arg list_args[] = {
    {"client-type", "oneof", "TYPE", FENCE_COMPAT_ARG_OPTIONAL, list_type_choice, 4},
    {"client-id", "integer", "ID", FENCE_COMPAT_ARG_OPTIONAL | FENCE_COMPAT_ARG_MULTIPLE,
     NULL, 0},
};
static const fence_compat_arg command_names[] = {
    {"command-name", "string", NULL, FENCE_COMPAT_ARG_OPTIONAL | FENCE_COMPAT_ARG_MULTIPLE,
     NULL, 0},
};

/* Every command of this module is in @connection: a logged-in user may
 * always run it (acl_srv.c); what it shows is that user's own (CLIENT LIST
 * lists the user's own connections unless it is @admin). */
#define CONN FENCE_ACL_CAT_CONNECTION
#define FAST_CONN (FENCE_COMPAT_CMD_FAST | FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE)
#define ARGS(a) (a), (sizeof(a) / sizeof((a)[0]))
#define NO_ARGS NULL, 0

static const fence_compat_command client_subs[] = {
    {"CLIENT|GETNAME", 2, FAST_CONN, "connection", "0.1.0", "Returns the name of the connection.",
     NO_ARGS, NULL, 0, CONN},
    {"CLIENT|HELP", 2, FAST_CONN, "connection", "0.1.0", "Returns helpful text about the "
     "different subcommands.", NO_ARGS, NULL, 0, CONN},
    {"CLIENT|ID", 2, FAST_CONN, "connection", "0.1.0", "Returns the unique client ID of the "
     "connection.", NO_ARGS, NULL, 0, CONN},
    {"CLIENT|INFO", 2, FAST_CONN, "connection", "0.1.0", "Returns information about the "
     "connection.", NO_ARGS, NULL, 0, CONN},
    {"CLIENT|LIST", -2, FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE, "connection",
     "0.1.0", "Lists open connections.", ARGS(list_args), NULL, 0, CONN},
    {"CLIENT|SETINFO", 4, FAST_CONN, "connection", "0.1.0", "Sets information specific to "
     "the client library of the connection.", ARGS(setinfo_args), NULL, 0, CONN},
    {"CLIENT|SETNAME", 3, FAST_CONN, "connection", "0.1.0", "Sets the connection name.",
     ARGS(setname_args), NULL, 0, CONN},
};

static const fence_compat_command command_subs[] = {
    {"COMMAND|COUNT", 2, FAST_CONN, "server", "0.1.0", "Returns a count of commands.",
     NO_ARGS, NULL, 0, CONN},
    {"COMMAND|DOCS", -2, FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE, "server", "0.1.0",
     "Returns documentary information about one, multiple or all commands.",
     ARGS(command_names), NULL, 0, CONN},
    {"COMMAND|HELP", 2, FAST_CONN, "server", "0.1.0", "Returns helpful text about the "
     "different subcommands.", NO_ARGS, NULL, 0, CONN},
    {"COMMAND|INFO", -2, FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE, "server", "0.1.0",
     "Returns information about one, multiple or all commands.", ARGS(command_names), NULL, 0, CONN},
    {"COMMAND|LIST", 2, FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE, "server", "0.1.0",
     "Returns a list of command names.", NO_ARGS, NULL, 0, CONN},
};

static const fence_compat_command builtins[] = {
    {"AUTH", -2, FAST_CONN | FENCE_COMPAT_CMD_NOSCRIPT, "connection", "0.1.0",
     "Authenticates the connection (no users or passwords exist yet).", ARGS(auth_args),
     NULL, 0, CONN},
    {"CLIENT", -2, 0, "connection", "0.1.0", "A container for client connection commands.",
     NO_ARGS, ARGS(client_subs), CONN},
    {"COMMAND", -1, FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE, "server", "0.1.0",
     "Returns detailed information about all commands.", NO_ARGS, ARGS(command_subs), CONN},
    {"DISCARD", 1, FAST_CONN | FENCE_COMPAT_CMD_NOSCRIPT, "transactions", "0.1.0",
     "Leaves a refused MULTI block.", NO_ARGS, NULL, 0, CONN},
    {"ECHO", 2, FAST_CONN, "connection", "0.1.0", "Returns the given string.",
     ARGS(one_message), NULL, 0, CONN},
    {"EXEC", 1, FENCE_COMPAT_CMD_NOSCRIPT | FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE,
     "transactions", "0.1.0", "Ends a refused MULTI block with EXECABORT (transactions are "
     "not supported).", NO_ARGS, NULL, 0, CONN},
    {"HELLO", -1, FAST_CONN | FENCE_COMPAT_CMD_NOSCRIPT, "connection", "0.1.0",
     "Handshakes with the server (RESP2 or RESP3).", ARGS(hello_args), NULL, 0, CONN},
    {"MULTI", 1, FAST_CONN | FENCE_COMPAT_CMD_NOSCRIPT, "transactions", "0.1.0",
     "Refused: transactions are not supported; the commands up to EXEC or DISCARD are "
     "refused too.", NO_ARGS, NULL, 0, CONN},
    {"RESET", 1, FAST_CONN | FENCE_COMPAT_CMD_NOSCRIPT, "connection", "0.1.0",
     "Resets the connection.", NO_ARGS, NULL, 0, CONN},
    {"SELECT", 2, FAST_CONN, "connection", "0.1.0",
     "Selects the database (only database 0 exists).", ARGS(select_args), NULL, 0, CONN},
    {"TIME", 1, FAST_CONN, "server", "0.1.0", "Returns the server time.", NO_ARGS, NULL, 0, CONN},
    {"UNWATCH", 1, FAST_CONN | FENCE_COMPAT_CMD_NOSCRIPT, "transactions", "0.1.0",
     "Does nothing (WATCH is not supported).", NO_ARGS, NULL, 0, CONN},
    {"WATCH", -2, FAST_CONN | FENCE_COMPAT_CMD_NOSCRIPT, "transactions", "0.1.0",
     "Refused: transactions are not supported.", ARGS(watch_args), NULL, 0, CONN},
};
#define N_BUILTINS (sizeof(builtins) / sizeof(builtins[0]))

const fence_compat_command *fence_compat_builtin_commands(size_t *n)
{
    FENCE_ASSERT(n != NULL);
    *n = N_BUILTINS;
    return builtins;
}

bool fence_compat_command_arity_ok(const fence_compat_command *row, uint32_t argc)
{
    uint32_t min = (uint32_t)(row->arity < 0 ? -row->arity : row->arity);
    uint32_t max = row->arity > 0 ? (uint32_t)row->arity : row->argc_max;
    return argc >= min && (max == 0 || argc <= max);
}

uint32_t fence_compat_command_keys_end(const fence_compat_command *row,
                                       const fence_resp_msg *m)
{
    uint32_t k = row->acl_key;
    if (k == 0 || k >= m->argc)
        return 0;
    if (row->acl_keys != FENCE_COMPAT_KEYS_REST)
        return k + 1;
    uint32_t end = k;
    for (; end < m->argc; end++) {
        const fence_resp_arg *a = &m->argv[end];
        bool option = false;
        for (size_t i = 0; i < row->n_args && !option; i++) {
            const char *t = row->args[i].token;
            option = t != NULL && strlen(t) == a->len && strncasecmp(t, a->ptr, a->len) == 0;
        }
        if (option)
            break;
    }
    return end;
}

const fence_compat_command *fence_compat_command_find(const fence_compat_command *table,
                                                      size_t n, const char *a, size_t len)
{
    FENCE_ASSERT(table != NULL || n == 0);
    if (len == 0)
        return NULL; /* no command has an empty name */
    /* Every request looks its name up in two or three tables: compare the
     * first letter, folded to lower case (| 0x20 folds ASCII letters and
     * only makes more other bytes equal), before a name's length and its
     * case-insensitive bytes, so a miss costs a load and a compare. */
    unsigned first = (unsigned char)a[0] | 0x20u;
    for (size_t i = 0; i < n; i++) {
        const char *name = table[i].name;
        if (((unsigned char)name[0] | 0x20u) != first)
            continue;
        if (strlen(name) == len && strncasecmp(name, a, len) == 0)
            return &table[i];
    }
    return NULL;
}

/* Find a command of this module by name (NULL if not one). */
const fence_compat_command *fence__compat_builtin_find(const fence_resp_arg *a)
{
    return fence_compat_command_find(builtins, N_BUILTINS, a->ptr, a->len);
}

/* Find a subcommand ("ID" for CLIENT|ID) of cmd by its second word. */
const fence_compat_command *fence__compat_sub_find(const fence_compat_command *cmd,
                                            const fence_resp_arg *a)
{
    size_t prefix = strlen(cmd->name) + 1;
    for (size_t i = 0; i < cmd->n_subs; i++) {
        FENCE_ASSERT(strlen(cmd->subs[i].name) > prefix);
        if (fence__compat_arg_is(a, cmd->subs[i].name + prefix))
            return &cmd->subs[i];
    }
    return NULL;
}

/* ---- COMMAND ------------------------------------------------------------------ */

/* Append one status string per flag of f (COMMAND's flags array). */
static void put_cmd_flags(fence_compat_reply *r, unsigned f)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {
        {FENCE_COMPAT_CMD_WRITE, "write"},       {FENCE_COMPAT_CMD_READONLY, "readonly"},
        {FENCE_COMPAT_CMD_FAST, "fast"},         {FENCE_COMPAT_CMD_LOADING, "loading"},
        {FENCE_COMPAT_CMD_STALE, "stale"},       {FENCE_COMPAT_CMD_BLOCKING, "blocking"},
        {FENCE_COMPAT_CMD_NOSCRIPT, "noscript"}, {FENCE_COMPAT_CMD_ADMIN, "admin"},
    };
    int64_t n = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        n += (f & names[i].bit) != 0;
    fence__compat_put_set(r, n);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (f & names[i].bit)
            fence__compat_put_simple(r, names[i].name);
}

/* Append cmd's ACL categories: its own (the table's acl column: @lock,
 * @lease, ...) and those Redis would give a command like it. */
static void put_acl_categories(fence_compat_reply *r, const fence_compat_command *cmd)
{
    const char *cats[6 + 32];
    char own[32][24];
    int64_t n = 0;
    for (uint32_t bit = 1, k = 0; bit != 0; bit <<= 1, k++) {
        const char *name = (cmd->acl & bit) ? fence_acl_category_name(bit) : NULL;
        /* @read, @write, @admin and @connection come below, once. */
        if (name != NULL && bit != FENCE_ACL_CAT_READ && bit != FENCE_ACL_CAT_WRITE &&
            bit != FENCE_ACL_CAT_ADMIN && bit != FENCE_ACL_CAT_CONNECTION) {
            snprintf(own[k], sizeof(own[k]), "@%s", name);
            cats[n++] = own[k];
        }
    }
    if ((cmd->flags & FENCE_COMPAT_CMD_WRITE) || (cmd->acl & FENCE_ACL_CAT_WRITE))
        cats[n++] = "@write";
    if ((cmd->flags & FENCE_COMPAT_CMD_READONLY) || (cmd->acl & FENCE_ACL_CAT_READ))
        cats[n++] = "@read";
    cats[n++] = (cmd->flags & FENCE_COMPAT_CMD_FAST) ? "@fast" : "@slow";
    if (cmd->flags & FENCE_COMPAT_CMD_BLOCKING)
        cats[n++] = "@blocking";
    if ((cmd->flags & FENCE_COMPAT_CMD_ADMIN) || (cmd->acl & FENCE_ACL_CAT_ADMIN))
        cats[n++] = "@admin";
    if (strcmp(cmd->group, "connection") == 0 || (cmd->acl & FENCE_ACL_CAT_CONNECTION))
        cats[n++] = "@connection";
    else if (strcmp(cmd->group, "transactions") == 0)
        cats[n++] = "@transaction";
    FENCE_ASSERT((size_t)n <= sizeof(cats) / sizeof(cats[0]));
    fence__compat_put_set(r, n);
    for (int64_t i = 0; i < n; i++)
        fence__compat_put_simple(r, cats[i]);
}

/* Append COMMAND INFO's 10-element entry for cmd (Redis 7 layout). */
static void put_cmd_info(fence_compat_reply *r, const fence_compat_command *cmd)
{
    fence__compat_put_array(r, 10);
    fence__compat_put_lower(r, cmd->name);
    fence__compat_put_int(r, cmd->arity);
    put_cmd_flags(r, cmd->flags);
    fence__compat_put_int(r, 0); /* first key */
    fence__compat_put_int(r, 0); /* last key */
    fence__compat_put_int(r, 0); /* step */
    put_acl_categories(r, cmd);
    fence__compat_put_array(r, 0); /* tips */
    fence__compat_put_array(r, 0); /* key specs */
    fence__compat_put_array(r, (int64_t)cmd->n_subs);
    for (size_t i = 0; i < cmd->n_subs; i++)
        put_cmd_info(r, &cmd->subs[i]);
}

/* Append one argument map of COMMAND DOCS (as a flat array in RESP2). */
static void put_arg_doc(fence_compat_reply *r, const fence_compat_arg *a)
{
    int64_t fields = 2 + (a->token != NULL) + (a->flags != 0) + (a->n_sub > 0);
    fence__compat_put_map(r, fields);
    fence__compat_put_str(r, "name");
    fence__compat_put_str(r, a->name);
    fence__compat_put_str(r, "type");
    fence__compat_put_str(r, a->type);
    if (a->token != NULL) {
        fence__compat_put_str(r, "token");
        fence__compat_put_str(r, a->token);
    }
    if (a->flags != 0) {
        fence__compat_put_str(r, "flags");
        int64_t n = ((a->flags & FENCE_COMPAT_ARG_OPTIONAL) != 0) +
                    ((a->flags & FENCE_COMPAT_ARG_MULTIPLE) != 0);
        fence__compat_put_array(r, n);
        /* redis-cli 7 requires status strings here. */
        if (a->flags & FENCE_COMPAT_ARG_OPTIONAL)
            fence__compat_put_simple(r, "optional");
        if (a->flags & FENCE_COMPAT_ARG_MULTIPLE)
            fence__compat_put_simple(r, "multiple");
    }
    if (a->n_sub > 0) {
        fence__compat_put_str(r, "arguments");
        fence__compat_put_array(r, (int64_t)a->n_sub);
        for (size_t i = 0; i < a->n_sub; i++)
            put_arg_doc(r, &a->sub[i]);
    }
}

/* Append COMMAND DOCS' map for cmd (flat array in RESP2). */
static void put_cmd_doc(fence_compat_reply *r, const fence_compat_command *cmd)
{
    int64_t fields = 3 + (cmd->n_args > 0) + (cmd->n_subs > 0);
    fence__compat_put_map(r, fields);
    fence__compat_put_str(r, "summary");
    fence__compat_put_str(r, cmd->summary);
    fence__compat_put_str(r, "since");
    fence__compat_put_str(r, cmd->since);
    fence__compat_put_str(r, "group");
    fence__compat_put_str(r, cmd->group);
    if (cmd->n_args > 0) {
        fence__compat_put_str(r, "arguments");
        fence__compat_put_array(r, (int64_t)cmd->n_args);
        for (size_t i = 0; i < cmd->n_args; i++)
            put_arg_doc(r, &cmd->args[i]);
    }
    if (cmd->n_subs > 0) {
        fence__compat_put_str(r, "subcommands");
        fence__compat_put_map(r, (int64_t)cmd->n_subs);
        for (size_t i = 0; i < cmd->n_subs; i++) {
            fence__compat_put_lower(r, cmd->subs[i].name);
            put_cmd_doc(r, &cmd->subs[i]);
        }
    }
}

/* The i-th command of the daemon's table followed by this module's. */
static const fence_compat_command *cmd_at(const fence_compat_ctx *ctx, size_t i)
{
    if (i < ctx->n_commands)
        return &ctx->commands[i];
    FENCE_ASSERT(i - ctx->n_commands < N_BUILTINS);
    return &builtins[i - ctx->n_commands];
}

/* Every command COMMAND knows. */
static size_t cmd_count(const fence_compat_ctx *ctx)
{
    return ctx->n_commands + N_BUILTINS;
}

/* Find a command of either table by name (a "x|y" subcommand name too). */
static const fence_compat_command *cmd_lookup(const fence_compat_ctx *ctx,
                                              const fence_resp_arg *a)
{
    const char *bar = memchr(a->ptr, '|', a->len);
    fence_resp_arg top = {a->ptr, bar ? (size_t)(bar - a->ptr) : a->len};
    for (size_t i = 0; i < cmd_count(ctx); i++) {
        const fence_compat_command *c = cmd_at(ctx, i);
        if (!fence__compat_arg_is(&top, c->name))
            continue;
        if (bar == NULL)
            return c;
        fence_resp_arg sub = {bar + 1, a->len - top.len - 1};
        return fence__compat_sub_find(c, &sub);
    }
    return NULL;
}

/* COMMAND [COUNT | LIST | INFO [name ...] | DOCS [name ...] | HELP]. */
void fence__compat_do_command(const fence_compat_ctx *ctx, const fence_resp_msg *m,
                       fence_compat_reply *r)
{
    size_t n = cmd_count(ctx);
    if (m->argc == 1) {
        fence__compat_put_array(r, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            put_cmd_info(r, cmd_at(ctx, i));
        return;
    }
    const fence_compat_command *sub = fence__compat_sub_find(fence__compat_builtin_find(&m->argv[0]), &m->argv[1]);
    char w[48];
    if (sub == NULL) {
        fence__compat_put_errorf(r, "ERR", "unknown subcommand '%s'. Try COMMAND HELP.",
                   fence__compat_word_print(&m->argv[1], w, sizeof(w)));
        return;
    }
    if (!fence_compat_command_arity_ok(sub, m->argc)) {
        char lname[64];
        snprintf(lname, sizeof(lname), "command|%s", fence__compat_word_lower(&m->argv[1], w, sizeof(w)));
        fence__compat_put_arity_error(r, lname);
        return;
    }
    if (fence__compat_arg_is(&m->argv[1], "COUNT")) {
        fence__compat_put_int(r, (int64_t)n);
    } else if (fence__compat_arg_is(&m->argv[1], "LIST")) {
        fence__compat_put_array(r, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            fence__compat_put_lower(r, cmd_at(ctx, i)->name);
    } else if (fence__compat_arg_is(&m->argv[1], "INFO")) {
        if (m->argc == 2) {
            fence__compat_put_array(r, (int64_t)n);
            for (size_t i = 0; i < n; i++)
                put_cmd_info(r, cmd_at(ctx, i));
            return;
        }
        fence__compat_put_array(r, (int64_t)m->argc - 2);
        for (uint32_t i = 2; i < m->argc; i++) {
            const fence_compat_command *c = cmd_lookup(ctx, &m->argv[i]);
            if (c == NULL)
                fence__compat_put_nil(r);
            else
                put_cmd_info(r, c);
        }
    } else if (fence__compat_arg_is(&m->argv[1], "DOCS")) {
        if (m->argc == 2) {
            fence__compat_put_map(r, (int64_t)n);
            for (size_t i = 0; i < n; i++) {
                fence__compat_put_lower(r, cmd_at(ctx, i)->name);
                put_cmd_doc(r, cmd_at(ctx, i));
            }
            return;
        }
        /* Unknown names are left out, as Redis does. */
        int64_t found = 0;
        for (uint32_t i = 2; i < m->argc; i++)
            found += cmd_lookup(ctx, &m->argv[i]) != NULL;
        fence__compat_put_map(r, found);
        for (uint32_t i = 2; i < m->argc; i++) {
            const fence_compat_command *c = cmd_lookup(ctx, &m->argv[i]);
            if (c != NULL) {
                fence__compat_put_lower(r, c->name);
                put_cmd_doc(r, c);
            }
        }
    } else {
        FENCE_ASSERT(fence__compat_arg_is(&m->argv[1], "HELP"));
        static const char *const help[] = {
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)", "    Return details about all commands.",
            "COUNT", "    Return the total number of commands.",
            "LIST", "    Return a list of all command names.",
            "INFO [<command-name> ...]", "    Return details about the named commands.",
            "DOCS [<command-name> ...]", "    Return documentation about the named commands.",
            "HELP", "    Print this help.",
        };
        fence__compat_put_array(r, (int64_t)(sizeof(help) / sizeof(help[0])));
        for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
            fence__compat_put_simple(r, help[i]);
    }
}
