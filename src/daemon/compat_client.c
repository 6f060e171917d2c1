/* Redis-client compatibility: CLIENT (ID, GETNAME, SETNAME, SETINFO,
 * INFO, LIST, HELP).  CLIENT LIST walks the daemon's connections through
 * its callback and shows a user that is not @admin its own only. */
#include "daemon/compat_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"

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
    fence__compat_putf(t,
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
        fence__compat_put_bulk(r, st->text.ptr, st->text.len);
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
        if (fence__compat_arg_is(&m->argv[i], "TYPE") && i + 1 < m->argc) {
            const fence_resp_arg *t = &m->argv[i + 1];
            if (fence__compat_arg_is(t, "normal"))
                ;
            else if (fence__compat_arg_is(t, "master") || fence__compat_arg_is(t, "replica") || fence__compat_arg_is(t, "slave") ||
                     fence__compat_arg_is(t, "pubsub"))
                st.none = true;
            else {
                fence__compat_put_errorf(r, "ERR", "Unknown client type '%s'", fence__compat_word_print(t, w, sizeof(w)));
                return;
            }
            i += 2;
        } else if (fence__compat_arg_is(&m->argv[i], "ID") && i + 1 < m->argc) {
            for (i++; i < m->argc; i++) {
                int64_t id;
                if (fence__compat_parse_i64(&m->argv[i], &id) != 0 || id <= 0) {
                    fence__compat_put_error(r, "ERR", "Invalid client ID");
                    return;
                }
                FENCE_ASSERT(st.n_ids < FENCE_ARGS_MAX);
                st.ids[st.n_ids++] = (uint64_t)id;
            }
        } else {
            fence__compat_put_error(r, "ERR", "syntax error");
            return;
        }
    }
    reply_list(ctx, c, &st, r);
}

/* CLIENT <subcommand> ... */
void fence__compat_do_client(const fence_compat_ctx *ctx, fence_compat_conn *c,
                      const fence_resp_msg *m, fence_compat_reply *r)
{
    const fence_compat_command *sub = fence__compat_sub_find(fence__compat_builtin_find(&m->argv[0]), &m->argv[1]);
    char w[48];
    if (sub == NULL) {
        fence__compat_put_errorf(r, "ERR", "unknown subcommand '%s'. Try CLIENT HELP.",
                   fence__compat_word_print(&m->argv[1], w, sizeof(w)));
        return;
    }
    if (!fence_compat_command_arity_ok(sub, m->argc)) {
        char lname[64];
        snprintf(lname, sizeof(lname), "client|%s", fence__compat_word_lower(&m->argv[1], w, sizeof(w)));
        fence__compat_put_arity_error(r, lname);
        return;
    }
    if (fence__compat_arg_is(&m->argv[1], "ID")) {
        fence__compat_put_int(r, (int64_t)c->id);
    } else if (fence__compat_arg_is(&m->argv[1], "GETNAME")) {
        if (c->name[0] == '\0')
            fence__compat_put_nil(r);
        else
            fence__compat_put_str(r, c->name);
    } else if (fence__compat_arg_is(&m->argv[1], "SETNAME")) {
        const fence_resp_arg *a = &m->argv[2];
        if (!fence__compat_name_ok(a)) {
            fence__compat_put_error(r, "ERR", "Client names cannot contain spaces, newlines or special "
                                "characters.");
            return;
        }
        if (a->len > FENCE_COMPAT_NAME_MAX) {
            fence__compat_put_errorf(r, "ERR", "client name is longer than %d bytes",
                       FENCE_COMPAT_NAME_MAX);
            return;
        }
        fence__compat_copy_name(c->name, sizeof(c->name), a);
        fence__compat_put_simple(r, "OK");
    } else if (fence__compat_arg_is(&m->argv[1], "SETINFO")) {
        const fence_resp_arg *attr = &m->argv[2];
        const fence_resp_arg *v = &m->argv[3];
        char *dst;
        const char *what;
        if (fence__compat_arg_is(attr, "LIB-NAME")) {
            dst = c->lib_name;
            what = "lib-name";
        } else if (fence__compat_arg_is(attr, "LIB-VER")) {
            dst = c->lib_ver;
            what = "lib-ver";
        } else {
            fence__compat_put_errorf(r, "ERR", "Unrecognized option '%s'", fence__compat_word_print(attr, w, sizeof(w)));
            return;
        }
        if (!fence__compat_name_ok(v)) {
            fence__compat_put_errorf(r, "ERR", "%s cannot contain spaces, newlines or special characters.",
                       what);
            return;
        }
        if (v->len > FENCE_COMPAT_LIB_MAX) {
            fence__compat_put_errorf(r, "ERR", "%s is longer than %d bytes", what, FENCE_COMPAT_LIB_MAX);
            return;
        }
        fence__compat_copy_name(dst, FENCE_COMPAT_LIB_MAX + 1, v);
        fence__compat_put_simple(r, "OK");
    } else if (fence__compat_arg_is(&m->argv[1], "INFO")) {
        struct list_state st;
        memset(&st, 0, sizeof(st));
        fence_compat_reply_init(&st.text);
        st.only = c->id;
        reply_list(ctx, c, &st, r);
    } else if (fence__compat_arg_is(&m->argv[1], "LIST")) {
        do_client_list(ctx, c, m, r);
    } else {
        FENCE_ASSERT(fence__compat_arg_is(&m->argv[1], "HELP"));
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
        fence__compat_put_array(r, (int64_t)(sizeof(help) / sizeof(help[0])));
        for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
            fence__compat_put_simple(r, help[i]);
    }
}
