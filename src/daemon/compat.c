/* Redis-client compatibility commands (see compat.h for the contract and
 * docs/compat.md for the user's view).
 *
 * Every reply is built in a fence_compat_reply with the src/proto encoders;
 * the texts follow Redis' wording where clients match on it (redis-py maps
 * some error sentences to exception classes, so those are copied exactly).
 * This file holds the entry point, HELLO, AUTH, SELECT, ECHO, TIME, RESET
 * and the refused transactions; compat_int.h says which file holds the
 * rest.
 */
#include "daemon/compat.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "daemon/compat_int.h"

/* Redis' own texts, matched by clients (redis-py's exception table). */
#define MSG_NOPASS                                                          \
    "AUTH <password> called without any password configured for the "      \
    "default user. Are you sure your configuration is correct?"
#define MSG_WRONGPASS "invalid username-password pair or user is disabled."
#define MSG_EXECABORT "Transaction discarded because of previous errors."

/* ---- Connection state --------------------------------------------------------- */

void fence_compat_conn_init(fence_compat_conn *c, uint64_t id)
{
    FENCE_ASSERT(c != NULL);
    FENCE_ASSERT(id > 0);
    memset(c, 0, sizeof(*c));
    c->id = id;
    c->resp = 2;
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
            fence__compat_put_error(r, "ERR", MSG_NOPASS);
        else
            fence__compat_put_error(r, "ERR", "AUTH <username> <password> called, but this server has no "
                                "users or passwords configured");
        return -1;
    }
    /* A user name no user can have is still a failed login for the
     * callback to count (and slow down). */
    bool bad_name = user != NULL && (user->len > FENCE_COMPAT_NAME_MAX || !fence__compat_name_ok(user));
    if (ctx->auth(ctx->arg, c, user, pass) != 0 || bad_name) {
        fence__compat_put_error(r, "WRONGPASS", MSG_WRONGPASS);
        return -1;
    }
    c->authenticated = true;
    if (user != NULL)
        fence__compat_copy_name(c->user, sizeof(c->user), user);
    else
        strcpy(c->user, "default");
    return 0;
}

/* AUTH [user] pass. */
static void do_auth(const fence_compat_ctx *ctx, fence_compat_conn *c,
                    const fence_resp_msg *m, fence_compat_reply *r)
{
    if (m->argc > 3) {
        fence__compat_put_error(r, "ERR", "syntax error");
        return;
    }
    const fence_resp_arg *user = m->argc == 3 ? &m->argv[1] : NULL;
    if (check_auth(ctx, c, user, &m->argv[m->argc - 1], r) == 0)
        fence__compat_put_simple(r, "OK");
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
        if (fence__compat_parse_i64(&m->argv[1], &ver) != 0) {
            fence__compat_put_error(r, "ERR", "Protocol version is not an integer or out of range");
            return;
        }
        if (ver != 2 && ver != 3) {
            fence__compat_put_error(r, "NOPROTO", "unsupported protocol version (this server speaks "
                                    "RESP2 and RESP3: HELLO 2 or HELLO 3)");
            return;
        }
    }
    /* Parse every option first: a bad one changes nothing. */
    const fence_resp_arg *user = NULL, *pass = NULL, *name = NULL;
    for (uint32_t i = 2; i < m->argc; i++) {
        uint32_t more = m->argc - i - 1;
        if (fence__compat_arg_is(&m->argv[i], "AUTH") && more >= 2) {
            user = &m->argv[i + 1];
            pass = &m->argv[i + 2];
            i += 2;
        } else if (fence__compat_arg_is(&m->argv[i], "SETNAME") && more >= 1) {
            name = &m->argv[i + 1];
            i += 1;
        } else {
            fence__compat_put_errorf(r, "ERR", "Syntax error in HELLO option '%s'",
                       fence__compat_word_print(&m->argv[i], w, sizeof(w)));
            return;
        }
    }
    if (name != NULL && (!fence__compat_name_ok(name) || name->len > FENCE_COMPAT_NAME_MAX)) {
        fence__compat_put_error(r, "ERR", "Client names cannot contain spaces, newlines or special "
                            "characters.");
        return;
    }
    /* A refused AUTH leaves the protocol and the name as they were (Redis
     * does the same), and its error is the same bytes in both protocols. */
    if (user != NULL && check_auth(ctx, c, user, pass, r) != 0)
        return;
    if (name != NULL)
        fence__compat_copy_name(c->name, sizeof(c->name), name);
    c->resp = (uint8_t)ver;
    r->resp = c->resp;
    fence__compat_put_map(r, 7);
    fence__compat_put_str(r, "server");
    fence__compat_put_str(r, ctx->server);
    fence__compat_put_str(r, "version");
    fence__compat_put_str(r, ctx->version);
    fence__compat_put_str(r, "proto");
    fence__compat_put_int(r, c->resp);
    fence__compat_put_str(r, "id");
    fence__compat_put_int(r, (int64_t)c->id);
    fence__compat_put_str(r, "mode");
    fence__compat_put_str(r, "standalone");
    fence__compat_put_str(r, "role");
    fence__compat_put_str(r, "master");
    fence__compat_put_str(r, "modules");
    fence__compat_put_array(r, 0);
}

/* ---- Transactions ------------------------------------------------------------------ */

/* A request that arrives while the connection is in a refused MULTI:
 * answer it without running it. */
static int tx_refused_step(const fence_compat_ctx *ctx, fence_compat_conn *c,
                           const fence_resp_msg *m, fence_compat_reply *r)
{
    (void)ctx;
    const fence_resp_arg *name = &m->argv[0];
    if (fence__compat_arg_is(name, "EXEC")) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s (MULTI is refused: this server runs no transactions; "
                 "none of the %" PRIu32 " commands after MULTI was executed)",
                 MSG_EXECABORT, c->tx_refused);
        c->tx = FENCE_COMPAT_TX_NONE;
        c->tx_refused = 0;
        fence__compat_put_error(r, "EXECABORT", msg);
    } else if (fence__compat_arg_is(name, "DISCARD")) {
        c->tx = FENCE_COMPAT_TX_NONE;
        c->tx_refused = 0;
        fence__compat_put_simple(r, "OK");
    } else if (fence__compat_arg_is(name, "MULTI")) {
        fence__compat_put_error(r, "ERR", "MULTI calls can not be nested");
    } else if (fence__compat_arg_is(name, "WATCH")) {
        fence__compat_put_error(r, "ERR", "WATCH inside MULTI is not allowed");
    } else if (fence__compat_arg_is(name, "QUIT")) {
        return FENCE_COMPAT_PASS;
    } else if (fence__compat_arg_is(name, "RESET")) {
        return -1; /* the caller runs RESET */
    } else {
        if (c->tx_refused < UINT32_MAX)
            c->tx_refused++;
        fence__compat_put_error(r, "ERR", "not executed: this connection is in a refused MULTI (this server "
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
            fence__compat_finish(out);
            return rc;
        }
    }
    const fence_compat_command *cmd = fence__compat_builtin_find(&m->argv[0]);
    if (cmd == NULL)
        return FENCE_COMPAT_PASS;
    char lname[32];
    if (!fence_compat_command_arity_ok(cmd, m->argc)) {
        fence__compat_put_arity_error(out, fence__compat_word_lower(&m->argv[0], lname, sizeof(lname)));
        fence__compat_finish(out);
        return FENCE_COMPAT_REPLIED;
    }
    const char *n = cmd->name;
    if (strcmp(n, "HELLO") == 0) {
        do_hello(ctx, c, m, out);
    } else if (strcmp(n, "AUTH") == 0) {
        do_auth(ctx, c, m, out);
    } else if (strcmp(n, "CLIENT") == 0) {
        fence__compat_do_client(ctx, c, m, out);
    } else if (strcmp(n, "COMMAND") == 0) {
        fence__compat_do_command(ctx, m, out);
    } else if (strcmp(n, "SELECT") == 0) {
        int64_t db;
        if (fence__compat_parse_i64(&m->argv[1], &db) != 0)
            fence__compat_put_error(out, "ERR", "value is not an integer or out of range");
        else if (db != 0)
            fence__compat_put_error(out, "ERR", "DB index is out of range (this server has only "
                                  "database 0)");
        else
            fence__compat_put_simple(out, "OK");
    } else if (strcmp(n, "ECHO") == 0) {
        fence__compat_put_bulk(out, m->argv[1].ptr, m->argv[1].len);
    } else if (strcmp(n, "TIME") == 0) {
        if (ctx->wall_us == NULL) {
            fence__compat_put_error(out, "ERR", "TIME is not available on this server");
        } else {
            uint64_t us = ctx->wall_us(ctx->arg);
            char s[24], u[8];
            int ns = snprintf(s, sizeof(s), "%" PRIu64, us / 1000000);
            int nu = snprintf(u, sizeof(u), "%" PRIu64, us % 1000000);
            FENCE_ASSERT(ns > 0 && nu > 0);
            fence__compat_put_array(out, 2);
            fence__compat_put_bulk(out, s, (size_t)ns);
            fence__compat_put_bulk(out, u, (size_t)nu);
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
        fence__compat_put_simple(out, "RESET");
    } else if (strcmp(n, "MULTI") == 0) {
        c->tx = FENCE_COMPAT_TX_REFUSED;
        c->tx_refused = 0;
        fence__compat_put_error(out, "ERR", "MULTI is refused: this server runs no transactions; every "
                              "command up to EXEC or DISCARD will be refused, not executed");
    } else if (strcmp(n, "EXEC") == 0) {
        fence__compat_put_error(out, "ERR", "EXEC without MULTI");
    } else if (strcmp(n, "DISCARD") == 0) {
        fence__compat_put_error(out, "ERR", "DISCARD without MULTI");
    } else if (strcmp(n, "WATCH") == 0) {
        fence__compat_put_error(out, "ERR", "WATCH is not supported: this server runs no transactions");
    } else {
        FENCE_ASSERT(strcmp(n, "UNWATCH") == 0);
        fence__compat_put_simple(out, "OK");
    }
    fence__compat_finish(out);
    FENCE_ASSERT(out->len > 0);
    return FENCE_COMPAT_REPLIED;
}
