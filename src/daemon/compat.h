/* Redis-client compatibility: the connection commands every Redis client
 * sends, answered the same way by fenced and fence-store.
 *
 * Pure code: no sockets, no libuv, no clock (wall time comes through a
 * callback), no globals.  A daemon's dispatcher calls fence_compat_handle()
 * on every parsed request before it looks at its own command table:
 *
 *   FENCE_COMPAT_PASS     not a compat command: dispatch it as usual;
 *   FENCE_COMPAT_REPLIED  answered: send out->ptr[0..out->len) as the
 *                         reply of this request (in request order), and do
 *                         NOT execute the request.
 *
 * Commands handled here (docs/compat.md is the user's view):
 *   HELLO [protover [AUTH user pass] [SETNAME name]]
 *         protover 2 or 3 switches the connection's protocol (c->resp);
 *         none keeps it; anything else: -NOPROTO.  The reply is the
 *         server-info map (a flat array in RESP2).  RESET goes back to 2.
 *   AUTH [user] pass
 *         through ctx->auth; without one (today): Redis' error for a server
 *         without passwords.
 *   CLIENT ID | GETNAME | SETNAME n | SETINFO LIB-NAME|LIB-VER v | INFO |
 *          LIST [TYPE normal] [ID id ...] | HELP
 *   SELECT 0 (other indexes: -ERR DB index is out of range)
 *   ECHO msg, TIME, RESET
 *   COMMAND | COMMAND COUNT | COMMAND LIST | COMMAND INFO [name ...] |
 *   COMMAND DOCS [name ...] | COMMAND HELP
 *         from the daemon's command table (ctx->commands) plus the table of
 *         the commands above (fence_compat_builtin_commands()).
 *   MULTI, EXEC, DISCARD, WATCH, UNWATCH: transactions are REFUSED, on
 *         purpose and all-or-nothing (see "Transactions" below).
 *
 * Transactions.  fenced and fence-store run no MULTI/EXEC blocks.  A client
 * that sends MULTI believes that nothing after it runs before EXEC, and
 * that nothing runs at all if EXEC fails; so MULTI is answered with an
 * error AND the connection enters the "refused transaction" state: every
 * later request up to EXEC or DISCARD is answered with an error and is not
 * executed (fence_compat_handle returns REPLIED for it; only QUIT passes
 * through, and RESET leaves the state).  EXEC then answers
 * -EXECABORT, DISCARD +OK, and the connection is back to normal.  This is
 * exactly the path a Redis server takes for a transaction with a queuing
 * error, so redis-py, ioredis and node-redis report the failure and no
 * command of the block ever ran.  WATCH is refused (-ERR) and UNWATCH is a
 * no-op (+OK).
 *
 * Ownership: out's bytes belong to out until fence_compat_reply_reset or
 * _free; state strings are copied into the fence_compat_conn.  Nothing
 * here keeps a pointer into the request after the call returns.
 */
#ifndef FENCE_COMMON_COMPAT_H
#define FENCE_COMMON_COMPAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"
#include "proto/resp.h"

/* ---- Command tables -------------------------------------------------------- */

/* Argument flags (COMMAND DOCS "flags"). */
#define FENCE_COMPAT_ARG_OPTIONAL 0x1u /* may be left out: "[...]" */
#define FENCE_COMPAT_ARG_MULTIPLE 0x2u /* may repeat: "x [x ...]" */

/* One argument of a command, as COMMAND DOCS describes it (the shape of
 * Redis 7's command-argument maps, which redis-cli turns into hints). */
typedef struct fence_compat_arg {
    const char *name;  /* "lease"; for a token-only argument, the token */
    const char *type;  /* "string", "integer", "key", "pure-token",
                          "block" or "oneof" (Redis' type names) */
    const char *token; /* the literal word before the value ("WAIT"), or
                          NULL */
    unsigned flags;    /* FENCE_COMPAT_ARG_* */
    const struct fence_compat_arg *sub; /* members of a block/oneof */
    size_t n_sub;                       /* entries in sub */
} fence_compat_arg;

/* Command flags (COMMAND's flags array). */
#define FENCE_COMPAT_CMD_WRITE 0x01u    /* changes state ("write") */
#define FENCE_COMPAT_CMD_READONLY 0x02u /* reads state ("readonly") */
#define FENCE_COMPAT_CMD_FAST 0x04u     /* O(1) and never waits ("fast") */
#define FENCE_COMPAT_CMD_LOADING 0x08u  /* allowed while starting ("loading") */
#define FENCE_COMPAT_CMD_STALE 0x10u    /* answered without a leader ("stale") */
#define FENCE_COMPAT_CMD_BLOCKING 0x20u /* may wait (LOCK ... WAIT) ("blocking") */
#define FENCE_COMPAT_CMD_NOSCRIPT 0x40u /* ("noscript") */
#define FENCE_COMPAT_CMD_ADMIN 0x80u    /* operator command ("admin") */

/* One row of a daemon's command table: the ONE description of a command
 * (Redis's commands.def is the model), from which everything else is
 * derived: the daemon's dispatch (name, arity, argc_max, op), the ACL check
 * (acl, acl_key: src/daemon/acl_srv.c), COMMAND / COMMAND INFO / COMMAND DOCS
 * (this module) and the per-command metric labels (the name).  A command
 * that is not in its daemon's table cannot be dispatched, so it cannot miss
 * the ACL check either; tests/unit/test_cmdtab.c walks every table and
 * fails on a row without ACL categories, a duplicate name, or arity bounds
 * that disagree. */
typedef struct fence_compat_command {
    const char *name;    /* upper case, as documented ("LEASE.GRANT") */
    int arity;           /* Redis convention, the name included: N exactly
                            N words, -N at least N */
    unsigned flags;      /* FENCE_COMPAT_CMD_* */
    const char *group;   /* COMMAND DOCS group ("fenced", "connection") */
    const char *since;   /* version that added it ("0.1.0") */
    const char *summary; /* one line, no CR/LF */
    const fence_compat_arg *args; /* arguments after the name */
    size_t n_args;                /* entries in args */
    const struct fence_compat_command *subs; /* subcommands (CLIENT ID) */
    size_t n_subs;                           /* entries in subs */
    uint32_t acl;        /* ACL categories (FENCE_ACL_CAT_*, auth/acl.h):
                            never 0 */
    uint8_t acl_key;     /* index of the argument the user's ~patterns
                            check (LOCK's name, FSET's fence), 0: none */
    uint8_t argc_max;    /* most words, the name included (the parser's
                            bound; = arity for a fixed arity); 0 in the
                            tables this module answers itself */
    uint8_t op;          /* the daemon's opcode for its dispatch */
    uint8_t acl_keys;    /* FENCE_COMPAT_KEYS_ONE (0): the argument acl_key
                            is the one key; FENCE_COMPAT_KEYS_REST: every
                            argument from acl_key on is a key, up to the
                            first that is one of the row's option tokens
                            (LOCK.MULTI's names before WAIT / REQID) */
} fence_compat_command;

#define FENCE_COMPAT_KEYS_ONE 0
#define FENCE_COMPAT_KEYS_REST 1

/* One past the last key argument of request m for row (acl_key 0: 0; the
 * keys are argv[acl_key..end)); never above m->argc.  For
 * FENCE_COMPAT_KEYS_REST the keys end at the first argument that equals,
 * ignoring case, the token of one of the row's arguments. */
uint32_t fence_compat_command_keys_end(const fence_compat_command *row,
                                       const fence_resp_msg *m);

/* Whether argc words (the name included) fit row's arity and, when it is
 * not 0, argc_max. */
bool fence_compat_command_arity_ok(const fence_compat_command *row, uint32_t argc);

/* The row of table[0..n) named a[0..len) (case-insensitive), or NULL. */
const fence_compat_command *fence_compat_command_find(const fence_compat_command *table,
                                                      size_t n, const char *a, size_t len);

/* The table of the commands this module answers (HELLO, CLIENT, ...), for
 * COMMAND; *n receives its length. */
const fence_compat_command *fence_compat_builtin_commands(size_t *n);

/* ---- Per-connection state ------------------------------------------------- */

/* Transaction state of a connection. */
enum fence_compat_tx {
    FENCE_COMPAT_TX_NONE = 0, /* normal */
    FENCE_COMPAT_TX_REFUSED,  /* after MULTI: everything is refused until
                                 EXEC or DISCARD */
};

/* What this module remembers about one client connection.  The daemon
 * embeds one in each connection, calls fence_compat_conn_init at accept
 * and passes it to every fence_compat_handle call of that connection. */
typedef struct fence_compat_conn {
    uint64_t id;   /* client id (CLIENT ID), unique per daemon run, > 0 */
    char name[FENCE_COMPAT_NAME_MAX + 1];    /* CLIENT SETNAME, "" if none */
    char lib_name[FENCE_COMPAT_LIB_MAX + 1]; /* CLIENT SETINFO LIB-NAME */
    char lib_ver[FENCE_COMPAT_LIB_MAX + 1];  /* CLIENT SETINFO LIB-VER */
    uint32_t db;       /* selected database: always 0 */
    uint8_t resp;      /* protocol version: 2 (the default) or 3 after
                          HELLO 3; the daemon encodes its own replies
                          for it (nulls, maps) */
    uint8_t tx;        /* enum fence_compat_tx */
    uint32_t tx_refused; /* requests refused since the refused MULTI */
    bool authenticated;  /* set by ctx->auth succeeding (unused today) */
    char user[FENCE_COMPAT_NAME_MAX + 1]; /* user ctx->auth accepted, or "" */
} fence_compat_conn;

/* Fresh state for connection id (> 0). */
void fence_compat_conn_init(fence_compat_conn *c, uint64_t id);

/* ---- The daemon's side ---------------------------------------------------- */

/* One connection as CLIENT LIST shows it; the daemon fills one per open
 * connection in its list callback.  Strings are borrowed for the call. */
typedef struct fence_compat_client_info {
    const fence_compat_conn *conn; /* that connection's compat state */
    const char *addr;   /* peer "ip:port" (or "/path:0" for Unix sockets) */
    const char *laddr;  /* local "ip:port" */
    int fd;             /* socket descriptor, -1 if unknown */
    uint64_t age_s;     /* seconds since accept */
    uint64_t idle_s;    /* seconds since its last request */
    uint64_t qbuf;      /* bytes in its read buffer */
    uint64_t obuf;      /* reply bytes queued for it */
    const char *cmd;    /* last command name, lower case, or NULL */
} fence_compat_client_info;

/* Called by the daemon's list callback once per connection. */
typedef void (*fence_compat_emit_fn)(void *emit_arg,
                                     const fence_compat_client_info *info);

/* Called for AUTH and HELLO ... AUTH.  user is NULL for the one-argument
 * form.  Returns 0 when the credentials are good (the module then records
 * the user), -1 to refuse them (the reply is -WRONGPASS). */
typedef int (*fence_compat_auth_fn)(void *arg, fence_compat_conn *c,
                                    const fence_resp_arg *user,
                                    const fence_resp_arg *pass);

/* What a daemon tells this module, once at start. */
typedef struct fence_compat_ctx {
    const char *server;  /* "fenced" or "fence-store" (HELLO "server") */
    const char *version; /* the daemon's version ("0.1.0") */
    const fence_compat_command *commands; /* the daemon's own commands */
    size_t n_commands;                    /* entries in commands */
    /* Every open connection, for CLIENT LIST / CLIENT INFO: call
     * emit(emit_arg, &info) once per connection (the calling one too).
     * NULL: the list holds the calling connection only, without address. */
    void (*list)(void *arg, fence_compat_emit_fn emit, void *emit_arg);
    /* Wall-clock time in microseconds since the epoch, for TIME.  NULL:
     * TIME answers an error. */
    uint64_t (*wall_us)(void *arg);
    /* Credentials check, set when an --acl-file is loaded (the daemons'
     * ACL set-up, acl_srv.h); NULL: AUTH gets Redis' answer for a server
     * without a password. */
    fence_compat_auth_fn auth;
    /* Whether connection c may see every connection in CLIENT LIST (an
     * @admin user); otherwise it sees only the connections logged in as
     * its own user.  NULL: everyone sees every connection. */
    bool (*sees_all)(void *arg, const fence_compat_conn *c);
    void *arg; /* passed to list, wall_us, auth and sees_all */
} fence_compat_ctx;

/* ---- Replies ---------------------------------------------------------------- */

/* Room in a reply before it moves to the heap (most replies fit). */
#define FENCE_COMPAT_REPLY_INLINE 256

/* A reply being built: bytes in inline_buf, or on the heap once larger,
 * never more than FENCE_COMPAT_REPLY_MAX. */
typedef struct fence_compat_reply {
    char *ptr;   /* the reply bytes (inline_buf or heap) */
    size_t len;  /* bytes written */
    size_t cap;  /* bytes ptr can hold */
    bool failed; /* out of memory or over the limit: the reply was
                    replaced by an -ERR (ptr/len hold that error) */
    uint8_t resp; /* the protocol it is encoded for (2 or 3): maps, sets,
                     nulls; fence_compat_handle sets it from the
                     connection, init sets 2 */
    char inline_buf[FENCE_COMPAT_REPLY_INLINE]; /* small replies */
} fence_compat_reply;

/* Empty reply (no allocation). */
void fence_compat_reply_init(fence_compat_reply *r);
/* Empty it again, keeping any heap buffer for reuse. */
void fence_compat_reply_reset(fence_compat_reply *r);
/* Release its heap buffer; r may be reused after fence_compat_reply_init. */
void fence_compat_reply_free(fence_compat_reply *r);

/* ---- The entry point -------------------------------------------------------- */

#define FENCE_COMPAT_PASS 0    /* not mine: the daemon dispatches it */
#define FENCE_COMPAT_REPLIED 1 /* answered in out: do not execute it */

/* Look at one parsed request of connection c (m->argc > 0).  Returns
 * FENCE_COMPAT_PASS, leaving out empty and c unchanged, or
 * FENCE_COMPAT_REPLIED with exactly one reply in out (reset first),
 * encoded for c->resp as it is after the command (HELLO 3's own reply is
 * RESP3).
 * Never fails otherwise: an allocation failure gives an -ERR reply. */
int fence_compat_handle(const fence_compat_ctx *ctx, fence_compat_conn *c,
                        const fence_resp_msg *m, fence_compat_reply *out);

/* ---- INFO ------------------------------------------------------------------- */

/* Builder for INFO's bulk text ("# Section\r\nkey:value\r\n", a blank
 * line between sections, as Redis writes it).  Appends to a reply buffer
 * (raw text, not yet RESP-framed); fence_compat_info_finish frames it. */
typedef struct fence_compat_info {
    fence_compat_reply text; /* the text so far */
    const fence_resp_msg *req; /* the INFO request (its section names) */
    bool in_section;         /* the current section is wanted */
    bool any;                /* a section was written */
} fence_compat_info;

/* Start INFO text for request m ("INFO [section ...]"; NULL: all). */
void fence_compat_info_begin(fence_compat_info *b, const fence_resp_msg *m);
/* Whether INFO's request asks for section name ("server", ...): no
 * argument, "default", "all" and "everything" ask for every section;
 * names compare without case. */
bool fence_compat_info_wants(const fence_compat_info *b, const char *name);
/* Open section name (e.g. "Server"); its fields are written only when
 * fence_compat_info_wants says so.  Returns whether it is wanted. */
bool fence_compat_info_section(fence_compat_info *b, const char *name);
/* One "key:value" line in the current section (skipped when the section
 * is unwanted).  CR and LF in value become spaces. */
void fence_compat_info_str(fence_compat_info *b, const char *key, const char *value);
void fence_compat_info_u64(fence_compat_info *b, const char *key, uint64_t v);
void fence_compat_info_i64(fence_compat_info *b, const char *key, int64_t v);
/* Lines the daemon formatted itself ("key:value\r\n" each), appended to
 * the current section when it is wanted. */
void fence_compat_info_lines(fence_compat_info *b, const char *text, size_t n);

/* The fields every Redis client may look for, that a daemon writes at the
 * top of INFO: # Server (redis_version: the Redis protocol level these
 * replies follow, 7.0.0; <server>_version; mode:standalone; process_id,
 * tcp_port, uptime_in_seconds) and # Clients (connected_clients,
 * maxclients), # Persistence's loading:0 (ioredis waits for it). */
typedef struct fence_compat_info_std {
    uint64_t process_id;       /* getpid() */
    uint64_t tcp_port;         /* client port */
    uint64_t uptime_s;         /* seconds since start */
    uint64_t connected_clients; /* open client connections */
    uint64_t max_clients;      /* configured limit */
    bool loading;              /* still starting (fenced: replaying its log) */
} fence_compat_info_std;
void fence_compat_info_standard(fence_compat_info *b, const fence_compat_ctx *ctx,
                                const fence_compat_info_std *std);

/* Frame the text as one RESP bulk string into out (reset first) and free
 * the builder.  Returns 0, or -1 (out holds an -ERR) when memory failed. */
int fence_compat_info_finish(fence_compat_info *b, fence_compat_reply *out);

#endif /* FENCE_COMMON_COMPAT_H */
