/* Redis-client compatibility commands (see compat.h for the contract and
 * docs/compat.md for the user's view).
 *
 * Every reply is built in a fence_compat_reply with the src/proto encoders;
 * the texts follow Redis' wording where clients match on it (redis-py maps
 * some error sentences to exception classes, so those are copied exactly).
 */
#include "common/compat.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/acl.h"
#include "common/assert.h"

/* The Redis protocol level our replies follow (INFO redis_version). */
#define COMPAT_REDIS_VERSION "7.0.0"

/* Redis' own texts, matched by clients (redis-py's exception table). */
#define MSG_NOPASS                                                          \
    "AUTH <password> called without any password configured for the "      \
    "default user. Are you sure your configuration is correct?"
#define MSG_WRONGPASS "invalid username-password pair or user is disabled."
#define MSG_EXECABORT "Transaction discarded because of previous errors."

/* ---- Reply buffer ---------------------------------------------------------- */

void fence_compat_reply_init(fence_compat_reply *r)
{
    FENCE_ASSERT(r != NULL);
    r->ptr = r->inline_buf;
    r->len = 0;
    r->cap = sizeof(r->inline_buf);
    r->failed = false;
    r->resp = 2;
}

void fence_compat_reply_reset(fence_compat_reply *r)
{
    FENCE_ASSERT(r != NULL);
    FENCE_ASSERT(r->ptr != NULL);
    r->len = 0;
    r->failed = false;
}

void fence_compat_reply_free(fence_compat_reply *r)
{
    FENCE_ASSERT(r != NULL);
    if (r->ptr != r->inline_buf)
        free(r->ptr);
    fence_compat_reply_init(r);
}

/* Make room for n more bytes: false (and failed set) when that would pass
 * FENCE_COMPAT_REPLY_MAX or memory is short. */
static bool reserve(fence_compat_reply *r, size_t n)
{
    FENCE_ASSERT(r->len <= r->cap);
    if (r->failed)
        return false;
    if (n <= r->cap - r->len)
        return true;
    if (n > FENCE_COMPAT_REPLY_MAX - r->len) {
        r->failed = true;
        return false;
    }
    size_t want = r->len + n;
    size_t cap = r->cap * 2;
    while (cap < want)
        cap *= 2;
    if (cap > FENCE_COMPAT_REPLY_MAX)
        cap = FENCE_COMPAT_REPLY_MAX;
    char *p;
    if (r->ptr == r->inline_buf) {
        p = malloc(cap);
        if (p != NULL)
            memcpy(p, r->inline_buf, r->len);
    } else {
        p = realloc(r->ptr, cap);
    }
    if (p == NULL) {
        r->failed = true;
        return false;
    }
    r->ptr = p;
    r->cap = cap;
    return true;
}

/* Append raw bytes. */
static void put(fence_compat_reply *r, const char *p, size_t n)
{
    if (n == 0 || !reserve(r, n))
        return;
    memcpy(r->ptr + r->len, p, n);
    r->len += n;
}

/* Append a NUL-terminated string as raw bytes. */
static void puts_raw(fence_compat_reply *r, const char *s)
{
    put(r, s, strlen(s));
}

/* Append printf-formatted raw text (lines of CLIENT LIST, INFO fields). */
__attribute__((format(printf, 2, 3)))
static void putf(fence_compat_reply *r, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    FENCE_ASSERT(n >= 0);
    /* Every caller bounds its fields, so a line always fits. */
    FENCE_ASSERT((size_t)n < sizeof(buf));
    put(r, buf, (size_t)n);
}

/* The encoders write at most this much for a header, integer or status. */
#define SMALL_MAX 64

/* Append "+s". */
static void put_simple(fence_compat_reply *r, const char *s)
{
    size_t need = fence_resp_simple(NULL, 0, s);
    if (!reserve(r, need))
        return;
    fence_resp_simple(r->ptr + r->len, need, s);
    r->len += need;
}

/* Append "-CODE msg". */
static void put_error(fence_compat_reply *r, const char *code, const char *msg)
{
    size_t need = fence_resp_error(NULL, 0, code, msg);
    if (!reserve(r, need))
        return;
    fence_resp_error(r->ptr + r->len, need, code, msg);
    r->len += need;
}

/* Append "-CODE <formatted text>". */
__attribute__((format(printf, 3, 4)))
static void put_errorf(fence_compat_reply *r, const char *code, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    FENCE_ASSERT(n >= 0);
    put_error(r, code, buf);
}

/* Append ":v". */
static void put_int(fence_compat_reply *r, int64_t v)
{
    char buf[SMALL_MAX];
    size_t n = fence_resp_int(buf, sizeof(buf), v);
    FENCE_ASSERT(n <= sizeof(buf));
    put(r, buf, n);
}

/* Append "*n". */
static void put_array(fence_compat_reply *r, int64_t n)
{
    char buf[SMALL_MAX];
    size_t len = fence_resp_array(buf, sizeof(buf), n);
    FENCE_ASSERT(len <= sizeof(buf));
    put(r, buf, len);
}

/* Append "$-1" (RESP2) or "_" (RESP3). */
static void put_nil(fence_compat_reply *r)
{
    char buf[SMALL_MAX];
    size_t len = fence_resp_nil_v(buf, sizeof(buf), r->resp);
    FENCE_ASSERT(len <= sizeof(buf));
    put(r, buf, len);
}

/* Append a map header of n pairs ("*2n" in RESP2, "%n" in RESP3). */
static void put_map(fence_compat_reply *r, int64_t n)
{
    char buf[SMALL_MAX];
    size_t len = fence_resp_map_v(buf, sizeof(buf), n, r->resp);
    FENCE_ASSERT(len <= sizeof(buf));
    put(r, buf, len);
}

/* Append a set header of n elements ("*n" in RESP2, "~n" in RESP3). */
static void put_set(fence_compat_reply *r, int64_t n)
{
    char buf[SMALL_MAX];
    size_t len = fence_resp_set_v(buf, sizeof(buf), n, r->resp);
    FENCE_ASSERT(len <= sizeof(buf));
    put(r, buf, len);
}

/* Append a bulk string of n bytes. */
static void put_bulk(fence_compat_reply *r, const char *p, size_t n)
{
    size_t need = fence_resp_bulk(NULL, 0, p, n);
    if (!reserve(r, need))
        return;
    fence_resp_bulk(r->ptr + r->len, need, p, n);
    r->len += need;
}

/* Append a bulk string holding s. */
static void put_str(fence_compat_reply *r, const char *s)
{
    put_bulk(r, s, strlen(s));
}

/* Append a bulk string holding s in lower case (command names). */
static void put_lower(fence_compat_reply *r, const char *s)
{
    char buf[FENCE_NAME_MAX];
    size_t n = strlen(s);
    FENCE_ASSERT(n < sizeof(buf));
    for (size_t i = 0; i < n; i++)
        buf[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] + 32) : s[i];
    put_bulk(r, buf, n);
}

/* If building the reply failed, replace it by a short error (which always
 * fits the inline buffer, so it cannot fail again). */
static void finish(fence_compat_reply *r)
{
    if (!r->failed)
        return;
    r->len = 0;
    r->failed = false;
    put_error(r, "ERR", "reply too large or out of memory");
    FENCE_ASSERT(!r->failed);
    r->failed = true;
}

/* ---- Small helpers ---------------------------------------------------------- */

/* Whether argument a equals word, ignoring case. */
static bool arg_is(const fence_resp_arg *a, const char *word)
{
    return strlen(word) == a->len && strncasecmp(word, a->ptr, a->len) == 0;
}

/* Copy a command word into buf as lower case, truncated, for messages. */
static const char *word_lower(const fence_resp_arg *a, char *buf, size_t cap)
{
    FENCE_ASSERT(cap > 0);
    size_t n = a->len < cap - 1 ? a->len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        char ch = a->ptr[i];
        if (ch >= 'A' && ch <= 'Z')
            ch = (char)(ch + 32);
        else if ((unsigned char)ch < 0x20 || (unsigned char)ch > 0x7e)
            ch = '?';
        buf[i] = ch;
    }
    buf[n] = '\0';
    return buf;
}

/* Copy a word into buf as is (non-printable bytes as '?'), for messages. */
static const char *word_print(const fence_resp_arg *a, char *buf, size_t cap)
{
    FENCE_ASSERT(cap > 0);
    size_t n = a->len < cap - 1 ? a->len : cap - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)a->ptr[i];
        buf[i] = (ch < 0x20 || ch > 0x7e) ? '?' : (char)ch;
    }
    buf[n] = '\0';
    return buf;
}

/* Reply Redis' arity error for command name (e.g. "client|setname"). */
static void put_arity_error(fence_compat_reply *r, const char *name)
{
    put_errorf(r, "ERR", "wrong number of arguments for '%s' command", name);
}

/* Whether a name (client name, lib-name/lib-ver) is acceptable: printable
 * ASCII without spaces, as Redis requires. */
static bool name_ok(const fence_resp_arg *a)
{
    for (size_t i = 0; i < a->len; i++)
        if (a->ptr[i] < '!' || a->ptr[i] > '~')
            return false;
    return true;
}

/* Copy a validated name into dst (capacity cap including the NUL). */
static void copy_name(char *dst, size_t cap, const fence_resp_arg *a)
{
    FENCE_ASSERT(a->len < cap);
    memcpy(dst, a->ptr, a->len);
    dst[a->len] = '\0';
}

/* Parse a signed decimal for SELECT/HELLO/CLIENT LIST ID: 0 and *out on
 * success, -1 when it is not an integer. */
static int parse_i64(const fence_resp_arg *a, int64_t *out)
{
    if (a->len == 0)
        return -1;
    bool neg = a->ptr[0] == '-';
    uint64_t v;
    if (fence_resp_parse_u64(a->ptr + neg, a->len - neg,
                             neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &v) != 0)
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* ---- Connection state --------------------------------------------------------- */

void fence_compat_conn_init(fence_compat_conn *c, uint64_t id)
{
    FENCE_ASSERT(c != NULL);
    FENCE_ASSERT(id > 0);
    memset(c, 0, sizeof(*c));
    c->id = id;
    c->resp = 2;
}

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
    for (size_t i = 0; i < n; i++)
        if (strlen(table[i].name) == len && strncasecmp(table[i].name, a, len) == 0)
            return &table[i];
    return NULL;
}

/* Find a command of this module by name (NULL if not one). */
static const fence_compat_command *builtin_find(const fence_resp_arg *a)
{
    return fence_compat_command_find(builtins, N_BUILTINS, a->ptr, a->len);
}

/* Find a subcommand ("ID" for CLIENT|ID) of cmd by its second word. */
static const fence_compat_command *sub_find(const fence_compat_command *cmd,
                                            const fence_resp_arg *a)
{
    size_t prefix = strlen(cmd->name) + 1;
    for (size_t i = 0; i < cmd->n_subs; i++) {
        FENCE_ASSERT(strlen(cmd->subs[i].name) > prefix);
        if (arg_is(a, cmd->subs[i].name + prefix))
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
    put_set(r, n);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (f & names[i].bit)
            put_simple(r, names[i].name);
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
    put_set(r, n);
    for (int64_t i = 0; i < n; i++)
        put_simple(r, cats[i]);
}

/* Append COMMAND INFO's 10-element entry for cmd (Redis 7 layout). */
static void put_cmd_info(fence_compat_reply *r, const fence_compat_command *cmd)
{
    put_array(r, 10);
    put_lower(r, cmd->name);
    put_int(r, cmd->arity);
    put_cmd_flags(r, cmd->flags);
    put_int(r, 0); /* first key */
    put_int(r, 0); /* last key */
    put_int(r, 0); /* step */
    put_acl_categories(r, cmd);
    put_array(r, 0); /* tips */
    put_array(r, 0); /* key specs */
    put_array(r, (int64_t)cmd->n_subs);
    for (size_t i = 0; i < cmd->n_subs; i++)
        put_cmd_info(r, &cmd->subs[i]);
}

/* Append one argument map of COMMAND DOCS (as a flat array in RESP2). */
static void put_arg_doc(fence_compat_reply *r, const fence_compat_arg *a)
{
    int64_t fields = 2 + (a->token != NULL) + (a->flags != 0) + (a->n_sub > 0);
    put_map(r, fields);
    put_str(r, "name");
    put_str(r, a->name);
    put_str(r, "type");
    put_str(r, a->type);
    if (a->token != NULL) {
        put_str(r, "token");
        put_str(r, a->token);
    }
    if (a->flags != 0) {
        put_str(r, "flags");
        int64_t n = ((a->flags & FENCE_COMPAT_ARG_OPTIONAL) != 0) +
                    ((a->flags & FENCE_COMPAT_ARG_MULTIPLE) != 0);
        put_array(r, n);
        /* redis-cli 7 requires status strings here. */
        if (a->flags & FENCE_COMPAT_ARG_OPTIONAL)
            put_simple(r, "optional");
        if (a->flags & FENCE_COMPAT_ARG_MULTIPLE)
            put_simple(r, "multiple");
    }
    if (a->n_sub > 0) {
        put_str(r, "arguments");
        put_array(r, (int64_t)a->n_sub);
        for (size_t i = 0; i < a->n_sub; i++)
            put_arg_doc(r, &a->sub[i]);
    }
}

/* Append COMMAND DOCS' map for cmd (flat array in RESP2). */
static void put_cmd_doc(fence_compat_reply *r, const fence_compat_command *cmd)
{
    int64_t fields = 3 + (cmd->n_args > 0) + (cmd->n_subs > 0);
    put_map(r, fields);
    put_str(r, "summary");
    put_str(r, cmd->summary);
    put_str(r, "since");
    put_str(r, cmd->since);
    put_str(r, "group");
    put_str(r, cmd->group);
    if (cmd->n_args > 0) {
        put_str(r, "arguments");
        put_array(r, (int64_t)cmd->n_args);
        for (size_t i = 0; i < cmd->n_args; i++)
            put_arg_doc(r, &cmd->args[i]);
    }
    if (cmd->n_subs > 0) {
        put_str(r, "subcommands");
        put_map(r, (int64_t)cmd->n_subs);
        for (size_t i = 0; i < cmd->n_subs; i++) {
            put_lower(r, cmd->subs[i].name);
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
        if (!arg_is(&top, c->name))
            continue;
        if (bar == NULL)
            return c;
        fence_resp_arg sub = {bar + 1, a->len - top.len - 1};
        return sub_find(c, &sub);
    }
    return NULL;
}

/* COMMAND [COUNT | LIST | INFO [name ...] | DOCS [name ...] | HELP]. */
static void do_command(const fence_compat_ctx *ctx, const fence_resp_msg *m,
                       fence_compat_reply *r)
{
    size_t n = cmd_count(ctx);
    if (m->argc == 1) {
        put_array(r, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            put_cmd_info(r, cmd_at(ctx, i));
        return;
    }
    const fence_compat_command *sub = sub_find(builtin_find(&m->argv[0]), &m->argv[1]);
    char w[48];
    if (sub == NULL) {
        put_errorf(r, "ERR", "unknown subcommand '%s'. Try COMMAND HELP.",
                   word_print(&m->argv[1], w, sizeof(w)));
        return;
    }
    if (!fence_compat_command_arity_ok(sub, m->argc)) {
        char lname[64];
        snprintf(lname, sizeof(lname), "command|%s", word_lower(&m->argv[1], w, sizeof(w)));
        put_arity_error(r, lname);
        return;
    }
    if (arg_is(&m->argv[1], "COUNT")) {
        put_int(r, (int64_t)n);
    } else if (arg_is(&m->argv[1], "LIST")) {
        put_array(r, (int64_t)n);
        for (size_t i = 0; i < n; i++)
            put_lower(r, cmd_at(ctx, i)->name);
    } else if (arg_is(&m->argv[1], "INFO")) {
        if (m->argc == 2) {
            put_array(r, (int64_t)n);
            for (size_t i = 0; i < n; i++)
                put_cmd_info(r, cmd_at(ctx, i));
            return;
        }
        put_array(r, (int64_t)m->argc - 2);
        for (uint32_t i = 2; i < m->argc; i++) {
            const fence_compat_command *c = cmd_lookup(ctx, &m->argv[i]);
            if (c == NULL)
                put_nil(r);
            else
                put_cmd_info(r, c);
        }
    } else if (arg_is(&m->argv[1], "DOCS")) {
        if (m->argc == 2) {
            put_map(r, (int64_t)n);
            for (size_t i = 0; i < n; i++) {
                put_lower(r, cmd_at(ctx, i)->name);
                put_cmd_doc(r, cmd_at(ctx, i));
            }
            return;
        }
        /* Unknown names are left out, as Redis does. */
        int64_t found = 0;
        for (uint32_t i = 2; i < m->argc; i++)
            found += cmd_lookup(ctx, &m->argv[i]) != NULL;
        put_map(r, found);
        for (uint32_t i = 2; i < m->argc; i++) {
            const fence_compat_command *c = cmd_lookup(ctx, &m->argv[i]);
            if (c != NULL) {
                put_lower(r, c->name);
                put_cmd_doc(r, c);
            }
        }
    } else {
        FENCE_ASSERT(arg_is(&m->argv[1], "HELP"));
        static const char *const help[] = {
            "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "(no subcommand)", "    Return details about all commands.",
            "COUNT", "    Return the total number of commands.",
            "LIST", "    Return a list of all command names.",
            "INFO [<command-name> ...]", "    Return details about the named commands.",
            "DOCS [<command-name> ...]", "    Return documentation about the named commands.",
            "HELP", "    Print this help.",
        };
        put_array(r, (int64_t)(sizeof(help) / sizeof(help[0])));
        for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
            put_simple(r, help[i]);
    }
}

/* ---- CLIENT ------------------------------------------------------------------- */

/* What CLIENT LIST / CLIENT INFO collect through the daemon's callback. */
struct list_state {
    fence_compat_reply text;  /* the lines so far */
    uint64_t ids[FENCE_ARGS_MAX]; /* ID filter */
    size_t n_ids;             /* entries in ids; 0: no ID filter */
    bool none;                /* a TYPE that no connection has */
    uint64_t only;            /* CLIENT INFO: this id only; 0: all */
    size_t lines;             /* lines written */
    const fence_compat_conn *viewer; /* the connection asking */
    bool all;                 /* it may see every connection (@admin) */
};

/* Whether a and b are logged in as the same user. */
static bool same_user(const fence_compat_conn *a, const fence_compat_conn *b)
{
    return a->authenticated && b->authenticated && strcmp(a->user, b->user) == 0;
}

/* Append the CLIENT LIST line of one connection (Redis' field names). */
static void put_client_line(fence_compat_reply *t, const fence_compat_client_info *ci)
{
    const fence_compat_conn *c = ci->conn;
    putf(t,
         "id=%" PRIu64 " addr=%.64s laddr=%.64s fd=%d name=%s age=%" PRIu64
         " idle=%" PRIu64 " flags=%s db=%u sub=0 psub=0 ssub=0 multi=%" PRId64
         " qbuf=%" PRIu64 " obl=0 oll=0 omem=%" PRIu64 " events=r cmd=%.40s user=%s"
         " redir=-1 resp=%u lib-name=%s lib-ver=%s\n",
         c->id, ci->addr ? ci->addr : "", ci->laddr ? ci->laddr : "", ci->fd, c->name,
         ci->age_s, ci->idle_s, c->tx == FENCE_COMPAT_TX_REFUSED ? "x" : "N", c->db,
         c->tx == FENCE_COMPAT_TX_REFUSED ? (int64_t)c->tx_refused : (int64_t)-1, ci->qbuf,
         ci->obuf, ci->cmd ? ci->cmd : "NULL", c->user[0] ? c->user : "default",
         (unsigned)c->resp, c->lib_name, c->lib_ver);
}

/* The daemon's callback target: filter, then append the line. */
static void list_emit(void *arg, const fence_compat_client_info *ci)
{
    struct list_state *st = arg;
    FENCE_ASSERT(ci != NULL);
    FENCE_ASSERT(ci->conn != NULL);
    if (st->none)
        return;
    if (st->only != 0 && ci->conn->id != st->only)
        return;
    /* A user that is not @admin sees its own connections only: names,
     * addresses and commands of other users' clients are theirs. */
    if (!st->all && ci->conn != st->viewer && !same_user(ci->conn, st->viewer))
        return;
    if (st->n_ids > 0) {
        bool hit = false;
        for (size_t i = 0; i < st->n_ids && !hit; i++)
            hit = st->ids[i] == ci->conn->id;
        if (!hit)
            return;
    }
    put_client_line(&st->text, ci);
    st->lines++;
}

/* Run the daemon's list callback (or list c alone) and reply the text as
 * one bulk string. */
static void reply_list(const fence_compat_ctx *ctx, const fence_compat_conn *c,
                       struct list_state *st, fence_compat_reply *r)
{
    st->viewer = c;
    st->all = ctx->sees_all == NULL || ctx->sees_all(ctx->arg, c);
    if (ctx->list != NULL) {
        ctx->list(ctx->arg, list_emit, st);
    } else {
        fence_compat_client_info self = {.conn = c, .fd = -1};
        list_emit(st, &self);
    }
    if (st->text.failed)
        r->failed = true;
    else
        put_bulk(r, st->text.ptr, st->text.len);
    fence_compat_reply_free(&st->text);
}

/* CLIENT LIST [TYPE t] [ID id ...]. */
static void do_client_list(const fence_compat_ctx *ctx, const fence_compat_conn *c,
                           const fence_resp_msg *m, fence_compat_reply *r)
{
    struct list_state st;
    memset(&st, 0, sizeof(st));
    fence_compat_reply_init(&st.text);
    char w[48];
    uint32_t i = 2;
    while (i < m->argc) {
        if (arg_is(&m->argv[i], "TYPE") && i + 1 < m->argc) {
            const fence_resp_arg *t = &m->argv[i + 1];
            if (arg_is(t, "normal"))
                ;
            else if (arg_is(t, "master") || arg_is(t, "replica") || arg_is(t, "slave") ||
                     arg_is(t, "pubsub"))
                st.none = true;
            else {
                put_errorf(r, "ERR", "Unknown client type '%s'", word_print(t, w, sizeof(w)));
                return;
            }
            i += 2;
        } else if (arg_is(&m->argv[i], "ID") && i + 1 < m->argc) {
            for (i++; i < m->argc; i++) {
                int64_t id;
                if (parse_i64(&m->argv[i], &id) != 0 || id <= 0) {
                    put_error(r, "ERR", "Invalid client ID");
                    return;
                }
                FENCE_ASSERT(st.n_ids < FENCE_ARGS_MAX);
                st.ids[st.n_ids++] = (uint64_t)id;
            }
        } else {
            put_error(r, "ERR", "syntax error");
            return;
        }
    }
    reply_list(ctx, c, &st, r);
}

/* CLIENT <subcommand> ... */
static void do_client(const fence_compat_ctx *ctx, fence_compat_conn *c,
                      const fence_resp_msg *m, fence_compat_reply *r)
{
    const fence_compat_command *sub = sub_find(builtin_find(&m->argv[0]), &m->argv[1]);
    char w[48];
    if (sub == NULL) {
        put_errorf(r, "ERR", "unknown subcommand '%s'. Try CLIENT HELP.",
                   word_print(&m->argv[1], w, sizeof(w)));
        return;
    }
    if (!fence_compat_command_arity_ok(sub, m->argc)) {
        char lname[64];
        snprintf(lname, sizeof(lname), "client|%s", word_lower(&m->argv[1], w, sizeof(w)));
        put_arity_error(r, lname);
        return;
    }
    if (arg_is(&m->argv[1], "ID")) {
        put_int(r, (int64_t)c->id);
    } else if (arg_is(&m->argv[1], "GETNAME")) {
        if (c->name[0] == '\0')
            put_nil(r);
        else
            put_str(r, c->name);
    } else if (arg_is(&m->argv[1], "SETNAME")) {
        const fence_resp_arg *a = &m->argv[2];
        if (!name_ok(a)) {
            put_error(r, "ERR", "Client names cannot contain spaces, newlines or special "
                                "characters.");
            return;
        }
        if (a->len > FENCE_COMPAT_NAME_MAX) {
            put_errorf(r, "ERR", "client name is longer than %d bytes",
                       FENCE_COMPAT_NAME_MAX);
            return;
        }
        copy_name(c->name, sizeof(c->name), a);
        put_simple(r, "OK");
    } else if (arg_is(&m->argv[1], "SETINFO")) {
        const fence_resp_arg *attr = &m->argv[2];
        const fence_resp_arg *v = &m->argv[3];
        char *dst;
        const char *what;
        if (arg_is(attr, "LIB-NAME")) {
            dst = c->lib_name;
            what = "lib-name";
        } else if (arg_is(attr, "LIB-VER")) {
            dst = c->lib_ver;
            what = "lib-ver";
        } else {
            put_errorf(r, "ERR", "Unrecognized option '%s'", word_print(attr, w, sizeof(w)));
            return;
        }
        if (!name_ok(v)) {
            put_errorf(r, "ERR", "%s cannot contain spaces, newlines or special characters.",
                       what);
            return;
        }
        if (v->len > FENCE_COMPAT_LIB_MAX) {
            put_errorf(r, "ERR", "%s is longer than %d bytes", what, FENCE_COMPAT_LIB_MAX);
            return;
        }
        copy_name(dst, FENCE_COMPAT_LIB_MAX + 1, v);
        put_simple(r, "OK");
    } else if (arg_is(&m->argv[1], "INFO")) {
        struct list_state st;
        memset(&st, 0, sizeof(st));
        fence_compat_reply_init(&st.text);
        st.only = c->id;
        reply_list(ctx, c, &st, r);
    } else if (arg_is(&m->argv[1], "LIST")) {
        do_client_list(ctx, c, m, r);
    } else {
        FENCE_ASSERT(arg_is(&m->argv[1], "HELP"));
        static const char *const help[] = {
            "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "GETNAME", "    Return the name of the current connection.",
            "ID", "    Return the ID of the current connection.",
            "INFO", "    Return information about the current client connection.",
            "LIST [TYPE <normal|master|replica|pubsub>] [ID <id> [<id> ...]]",
            "    Return information about client connections.",
            "SETINFO <LIB-NAME|LIB-VER> <value>",
            "    Set client library name or version (shown by CLIENT LIST).",
            "SETNAME <name>", "    Assign the name <name> to the current connection.",
            "HELP", "    Print this help.",
        };
        put_array(r, (int64_t)(sizeof(help) / sizeof(help[0])));
        for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
            put_simple(r, help[i]);
    }
}

/* ---- HELLO, AUTH ---------------------------------------------------------------- */

/* Check credentials through ctx->auth: 0 on success (state updated), or -1
 * with the error reply written. */
static int check_auth(const fence_compat_ctx *ctx, fence_compat_conn *c,
                      const fence_resp_arg *user, const fence_resp_arg *pass,
                      fence_compat_reply *r)
{
    if (ctx->auth == NULL) {
        if (user == NULL)
            put_error(r, "ERR", MSG_NOPASS);
        else
            put_error(r, "ERR", "AUTH <username> <password> called, but this server has no "
                                "users or passwords configured");
        return -1;
    }
    /* A user name no user can have is still a failed login for the
     * callback to count (and slow down). */
    bool bad_name = user != NULL && (user->len > FENCE_COMPAT_NAME_MAX || !name_ok(user));
    if (ctx->auth(ctx->arg, c, user, pass) != 0 || bad_name) {
        put_error(r, "WRONGPASS", MSG_WRONGPASS);
        return -1;
    }
    c->authenticated = true;
    if (user != NULL)
        copy_name(c->user, sizeof(c->user), user);
    else
        strcpy(c->user, "default");
    return 0;
}

/* AUTH [user] pass. */
static void do_auth(const fence_compat_ctx *ctx, fence_compat_conn *c,
                    const fence_resp_msg *m, fence_compat_reply *r)
{
    if (m->argc > 3) {
        put_error(r, "ERR", "syntax error");
        return;
    }
    const fence_resp_arg *user = m->argc == 3 ? &m->argv[1] : NULL;
    if (check_auth(ctx, c, user, &m->argv[m->argc - 1], r) == 0)
        put_simple(r, "OK");
}

/* HELLO [protover [AUTH user pass] [SETNAME name]]: protover 2 or 3
 * switches the connection's protocol, none keeps it; the reply is the
 * server-info map in the protocol in force after the command. */
static void do_hello(const fence_compat_ctx *ctx, fence_compat_conn *c,
                     const fence_resp_msg *m, fence_compat_reply *r)
{
    char w[48];
    int64_t ver = c->resp;
    if (m->argc >= 2) {
        if (parse_i64(&m->argv[1], &ver) != 0) {
            put_error(r, "ERR", "Protocol version is not an integer or out of range");
            return;
        }
        if (ver != 2 && ver != 3) {
            put_error(r, "NOPROTO", "unsupported protocol version (this server speaks "
                                    "RESP2 and RESP3: HELLO 2 or HELLO 3)");
            return;
        }
    }
    /* Parse every option first: a bad one changes nothing. */
    const fence_resp_arg *user = NULL, *pass = NULL, *name = NULL;
    for (uint32_t i = 2; i < m->argc; i++) {
        uint32_t more = m->argc - i - 1;
        if (arg_is(&m->argv[i], "AUTH") && more >= 2) {
            user = &m->argv[i + 1];
            pass = &m->argv[i + 2];
            i += 2;
        } else if (arg_is(&m->argv[i], "SETNAME") && more >= 1) {
            name = &m->argv[i + 1];
            i += 1;
        } else {
            put_errorf(r, "ERR", "Syntax error in HELLO option '%s'",
                       word_print(&m->argv[i], w, sizeof(w)));
            return;
        }
    }
    if (name != NULL && (!name_ok(name) || name->len > FENCE_COMPAT_NAME_MAX)) {
        put_error(r, "ERR", "Client names cannot contain spaces, newlines or special "
                            "characters.");
        return;
    }
    /* A refused AUTH leaves the protocol and the name as they were (Redis
     * does the same), and its error is the same bytes in both protocols. */
    if (user != NULL && check_auth(ctx, c, user, pass, r) != 0)
        return;
    if (name != NULL)
        copy_name(c->name, sizeof(c->name), name);
    c->resp = (uint8_t)ver;
    r->resp = c->resp;
    put_map(r, 7);
    put_str(r, "server");
    put_str(r, ctx->server);
    put_str(r, "version");
    put_str(r, ctx->version);
    put_str(r, "proto");
    put_int(r, c->resp);
    put_str(r, "id");
    put_int(r, (int64_t)c->id);
    put_str(r, "mode");
    put_str(r, "standalone");
    put_str(r, "role");
    put_str(r, "master");
    put_str(r, "modules");
    put_array(r, 0);
}

/* ---- Transactions ------------------------------------------------------------------ */

/* A request that arrives while the connection is in a refused MULTI:
 * answer it without running it. */
static int tx_refused_step(const fence_compat_ctx *ctx, fence_compat_conn *c,
                           const fence_resp_msg *m, fence_compat_reply *r)
{
    (void)ctx;
    const fence_resp_arg *name = &m->argv[0];
    if (arg_is(name, "EXEC")) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s (MULTI is refused: this server runs no transactions; "
                 "none of the %" PRIu32 " commands after MULTI was executed)",
                 MSG_EXECABORT, c->tx_refused);
        c->tx = FENCE_COMPAT_TX_NONE;
        c->tx_refused = 0;
        put_error(r, "EXECABORT", msg);
    } else if (arg_is(name, "DISCARD")) {
        c->tx = FENCE_COMPAT_TX_NONE;
        c->tx_refused = 0;
        put_simple(r, "OK");
    } else if (arg_is(name, "MULTI")) {
        put_error(r, "ERR", "MULTI calls can not be nested");
    } else if (arg_is(name, "WATCH")) {
        put_error(r, "ERR", "WATCH inside MULTI is not allowed");
    } else if (arg_is(name, "QUIT")) {
        return FENCE_COMPAT_PASS;
    } else if (arg_is(name, "RESET")) {
        return -1; /* the caller runs RESET */
    } else {
        if (c->tx_refused < UINT32_MAX)
            c->tx_refused++;
        put_error(r, "ERR", "not executed: this connection is in a refused MULTI (this server "
                            "runs no transactions); send EXEC or DISCARD to leave it");
    }
    return FENCE_COMPAT_REPLIED;
}

/* ---- The entry point ------------------------------------------------------------------ */

int fence_compat_handle(const fence_compat_ctx *ctx, fence_compat_conn *c,
                        const fence_resp_msg *m, fence_compat_reply *out)
{
    FENCE_ASSERT(ctx != NULL);
    FENCE_ASSERT(ctx->server != NULL);
    FENCE_ASSERT(ctx->version != NULL);
    FENCE_ASSERT(c != NULL);
    FENCE_ASSERT(c->id > 0);
    FENCE_ASSERT(m != NULL);
    FENCE_ASSERT(m->argc > 0);
    FENCE_ASSERT(out != NULL);
    FENCE_ASSERT(c->resp == 2 || c->resp == 3);
    fence_compat_reply_reset(out);
    out->resp = c->resp;

    if (c->tx == FENCE_COMPAT_TX_REFUSED) {
        int rc = tx_refused_step(ctx, c, m, out);
        if (rc >= 0) {
            finish(out);
            return rc;
        }
    }
    const fence_compat_command *cmd = builtin_find(&m->argv[0]);
    if (cmd == NULL)
        return FENCE_COMPAT_PASS;
    char lname[32];
    if (!fence_compat_command_arity_ok(cmd, m->argc)) {
        put_arity_error(out, word_lower(&m->argv[0], lname, sizeof(lname)));
        finish(out);
        return FENCE_COMPAT_REPLIED;
    }
    const char *n = cmd->name;
    if (strcmp(n, "HELLO") == 0) {
        do_hello(ctx, c, m, out);
    } else if (strcmp(n, "AUTH") == 0) {
        do_auth(ctx, c, m, out);
    } else if (strcmp(n, "CLIENT") == 0) {
        do_client(ctx, c, m, out);
    } else if (strcmp(n, "COMMAND") == 0) {
        do_command(ctx, m, out);
    } else if (strcmp(n, "SELECT") == 0) {
        int64_t db;
        if (parse_i64(&m->argv[1], &db) != 0)
            put_error(out, "ERR", "value is not an integer or out of range");
        else if (db != 0)
            put_error(out, "ERR", "DB index is out of range (this server has only "
                                  "database 0)");
        else
            put_simple(out, "OK");
    } else if (strcmp(n, "ECHO") == 0) {
        put_bulk(out, m->argv[1].ptr, m->argv[1].len);
    } else if (strcmp(n, "TIME") == 0) {
        if (ctx->wall_us == NULL) {
            put_error(out, "ERR", "TIME is not available on this server");
        } else {
            uint64_t us = ctx->wall_us(ctx->arg);
            char s[24], u[8];
            int ns = snprintf(s, sizeof(s), "%" PRIu64, us / 1000000);
            int nu = snprintf(u, sizeof(u), "%" PRIu64, us % 1000000);
            FENCE_ASSERT(ns > 0 && nu > 0);
            put_array(out, 2);
            put_bulk(out, s, (size_t)ns);
            put_bulk(out, u, (size_t)nu);
        }
    } else if (strcmp(n, "RESET") == 0) {
        c->tx = FENCE_COMPAT_TX_NONE;
        c->tx_refused = 0;
        c->name[0] = '\0';
        c->db = 0;
        c->resp = 2;
        out->resp = 2;
        c->authenticated = false;
        c->user[0] = '\0';
        put_simple(out, "RESET");
    } else if (strcmp(n, "MULTI") == 0) {
        c->tx = FENCE_COMPAT_TX_REFUSED;
        c->tx_refused = 0;
        put_error(out, "ERR", "MULTI is refused: this server runs no transactions; every "
                              "command up to EXEC or DISCARD will be refused, not executed");
    } else if (strcmp(n, "EXEC") == 0) {
        put_error(out, "ERR", "EXEC without MULTI");
    } else if (strcmp(n, "DISCARD") == 0) {
        put_error(out, "ERR", "DISCARD without MULTI");
    } else if (strcmp(n, "WATCH") == 0) {
        put_error(out, "ERR", "WATCH is not supported: this server runs no transactions");
    } else {
        FENCE_ASSERT(strcmp(n, "UNWATCH") == 0);
        put_simple(out, "OK");
    }
    finish(out);
    FENCE_ASSERT(out->len > 0);
    return FENCE_COMPAT_REPLIED;
}

/* ---- INFO ----------------------------------------------------------------------------- */

void fence_compat_info_begin(fence_compat_info *b, const fence_resp_msg *m)
{
    FENCE_ASSERT(b != NULL);
    fence_compat_reply_init(&b->text);
    b->req = m;
    b->in_section = false;
    b->any = false;
}

bool fence_compat_info_wants(const fence_compat_info *b, const char *name)
{
    FENCE_ASSERT(b != NULL);
    FENCE_ASSERT(name != NULL);
    if (b->req == NULL || b->req->argc < 2)
        return true;
    for (uint32_t i = 1; i < b->req->argc; i++) {
        const fence_resp_arg *a = &b->req->argv[i];
        if (arg_is(a, "all") || arg_is(a, "default") || arg_is(a, "everything") ||
            arg_is(a, name))
            return true;
    }
    return false;
}

bool fence_compat_info_section(fence_compat_info *b, const char *name)
{
    b->in_section = fence_compat_info_wants(b, name);
    if (!b->in_section)
        return false;
    if (b->any)
        puts_raw(&b->text, "\r\n");
    putf(&b->text, "# %.64s\r\n", name);
    b->any = true;
    return true;
}

void fence_compat_info_str(fence_compat_info *b, const char *key, const char *value)
{
    FENCE_ASSERT(key != NULL);
    FENCE_ASSERT(value != NULL);
    if (!b->in_section)
        return;
    puts_raw(&b->text, key);
    puts_raw(&b->text, ":");
    size_t start = b->text.len;
    puts_raw(&b->text, value);
    if (!b->text.failed)
        for (size_t i = start; i < b->text.len; i++)
            if (b->text.ptr[i] == '\r' || b->text.ptr[i] == '\n')
                b->text.ptr[i] = ' ';
    puts_raw(&b->text, "\r\n");
}

void fence_compat_info_u64(fence_compat_info *b, const char *key, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    fence_compat_info_str(b, key, buf);
}

void fence_compat_info_i64(fence_compat_info *b, const char *key, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    fence_compat_info_str(b, key, buf);
}

void fence_compat_info_lines(fence_compat_info *b, const char *text, size_t n)
{
    FENCE_ASSERT(text != NULL || n == 0);
    if (b->in_section)
        put(&b->text, text, n);
}

void fence_compat_info_standard(fence_compat_info *b, const fence_compat_ctx *ctx,
                                const fence_compat_info_std *std)
{
    FENCE_ASSERT(ctx != NULL);
    FENCE_ASSERT(std != NULL);
    if (fence_compat_info_section(b, "Server")) {
        char key[64];
        fence_compat_info_str(b, "redis_version", COMPAT_REDIS_VERSION);
        /* "fence-store" becomes fence_store_version. */
        snprintf(key, sizeof(key), "%.40s_version", ctx->server);
        for (char *p = key; *p; p++)
            if (*p == '-')
                *p = '_';
        fence_compat_info_str(b, key, ctx->version);
        fence_compat_info_str(b, "server_name", ctx->server);
        fence_compat_info_str(b, "redis_mode", "standalone");
        fence_compat_info_u64(b, "process_id", std->process_id);
        fence_compat_info_u64(b, "tcp_port", std->tcp_port);
        fence_compat_info_u64(b, "uptime_in_seconds", std->uptime_s);
    }
    if (fence_compat_info_section(b, "Clients")) {
        fence_compat_info_u64(b, "connected_clients", std->connected_clients);
        fence_compat_info_u64(b, "maxclients", std->max_clients);
    }
    if (fence_compat_info_section(b, "Persistence"))
        fence_compat_info_u64(b, "loading", std->loading ? 1 : 0);
}

int fence_compat_info_finish(fence_compat_info *b, fence_compat_reply *out)
{
    FENCE_ASSERT(b != NULL);
    FENCE_ASSERT(out != NULL);
    fence_compat_reply_reset(out);
    if (b->text.failed)
        out->failed = true;
    else
        put_bulk(out, b->text.ptr, b->text.len);
    fence_compat_reply_free(&b->text);
    finish(out);
    return out->failed ? -1 : 0;
}
