/* A daemon's users at run time (acl_srv.h). */
#include "common/acl_srv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/assert.h"
#include "common/conn.h"
#include "common/log.h"

/* Room for n more bytes in out; NULL (and out->failed) when memory ran out. */
static char *out_room(fence_acl_out *out, size_t n)
{
    if (out->failed)
        return NULL;
    if (out->len + n > out->cap) {
        size_t cap = out->cap ? out->cap : 256;
        while (cap < out->len + n)
            cap *= 2;
        char *p = realloc(out->ptr, cap);
        if (p == NULL) {
            out->failed = true;
            return NULL;
        }
        out->ptr = p;
        out->cap = cap;
    }
    return out->ptr + out->len;
}

/* Append a simple string, an error, a bulk string or an array header. */
static void out_simple(fence_acl_out *out, const char *s)
{
    size_t need = fence_resp_simple(NULL, 0, s);
    char *p = out_room(out, need);
    if (p != NULL)
        out->len += fence_resp_simple(p, need, s);
}
static void out_error(fence_acl_out *out, const char *code, const char *msg)
{
    size_t need = fence_resp_error(NULL, 0, code, msg);
    char *p = out_room(out, need);
    if (p != NULL)
        out->len += fence_resp_error(p, need, code, msg);
}
static void out_bulk(fence_acl_out *out, const char *s, size_t n)
{
    size_t need = fence_resp_bulk(NULL, 0, s, n);
    char *p = out_room(out, need);
    if (p != NULL)
        out->len += fence_resp_bulk(p, need, s, n);
}
static void out_array(fence_acl_out *out, int64_t n)
{
    size_t need = fence_resp_array(NULL, 0, n);
    char *p = out_room(out, need);
    if (p != NULL)
        out->len += fence_resp_array(p, need, n);
}

/* When memory ran out while building, replace the reply by a short error
 * (written into the fixed buffer that always fits). */
static void out_finish(fence_acl_out *out)
{
    if (!out->failed)
        return;
    static const char oom[] = "-ERR out of memory\r\n";
    free(out->ptr);
    out->ptr = malloc(sizeof(oom));
    if (out->ptr == NULL) {
        out->len = out->cap = 0;
        return;
    }
    memcpy(out->ptr, oom, sizeof(oom) - 1);
    out->len = sizeof(oom) - 1;
    out->cap = sizeof(oom);
}

void fence__acl_out_free(fence_acl_out *out)
{
    free(out->ptr);
    memset(out, 0, sizeof(*out));
}

int fence__acl_srv_init(fence_acl_srv *s, const char *path, char *err, size_t err_len)
{
    memset(s, 0, sizeof(*s));
    s->path = path;
    if (path == NULL) {
        s->acl = fence_acl_new_default();
        if (s->acl == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
    } else if (fence_acl_load_file(path, &s->acl, err, err_len) != 0) {
        return -1;
    }
    s->loads = 1;
    FENCE_ASSERT(s->acl != NULL);
    return 0;
}

void fence__acl_srv_free(fence_acl_srv *s)
{
    fence_acl_free(s->acl);
    s->acl = NULL;
}

bool fence__acl_srv_has_file(const fence_acl_srv *s)
{
    return s->path != NULL;
}

int fence__acl_srv_reload(fence_acl_srv *s, char *err, size_t err_len)
{
    FENCE_ASSERT(s->acl != NULL);
    if (s->path == NULL) {
        if (err_len > 0)
            snprintf(err, err_len, "no --acl-file: nothing to load");
        return -1;
    }
    fence_acl *next = NULL;
    if (fence_acl_load_file(s->path, &next, err, err_len) != 0) {
        FENCE_LOG_W("acl: reload refused, the old users stay: %s", err);
        return -1;
    }
    fence_acl_free(s->acl);
    s->acl = next;
    s->loads++;
    FENCE_LOG_I("acl: %s loaded (%zu users)", s->path, fence_acl_count(s->acl));
    return 0;
}

void fence__acl_srv_conn_open(const fence_acl_srv *s, fence_compat_conn *cc)
{
    const fence_acl_user *u = fence_acl_auto_user(s->acl);
    if (u == NULL)
        return;
    cc->authenticated = true;
    snprintf(cc->user, sizeof(cc->user), "%s", fence_acl_user_name(u));
}

int fence__acl_srv_auth(fence_acl_srv *s, const fence_resp_arg *user,
                        const fence_resp_arg *pass)
{
    const fence_acl_user *u =
        fence_acl_auth(s->acl, user ? user->ptr : NULL, user ? user->len : 0, pass->ptr,
                       pass->len);
    return u != NULL ? 0 : -1;
}

const fence_acl_user *fence__acl_srv_user(const fence_acl_srv *s, fence_compat_conn *cc)
{
    if (!cc->authenticated) {
        /* RESET logged it out; as in Redis, a connection that is not
         * logged in is "default" when that user needs no password. */
        fence__acl_srv_conn_open(s, cc);
        if (!cc->authenticated)
            return NULL;
    }
    const fence_acl_user *u = fence_acl_find(s->acl, cc->user, strlen(cc->user));
    if (u == NULL || !fence_acl_user_on(u)) {
        /* Removed or turned off by a reload: logged out. */
        cc->authenticated = false;
        cc->user[0] = '\0';
        return NULL;
    }
    return u;
}

/* Copy argument a, upper-cased, into buf (size n); false when too long or
 * when it holds a NUL byte (no command name does). */
static bool word_upper(const fence_resp_arg *a, char *buf, size_t n)
{
    if (a->len >= n)
        return false;
    for (size_t i = 0; i < a->len; i++) {
        char c = a->ptr[i];
        if (c == '\0')
            return false;
        buf[i] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
    }
    buf[a->len] = '\0';
    return true;
}

/* Lower-case copy of an upper-case name, for error texts. */
static void lower(const char *s, char *buf, size_t n)
{
    size_t i = 0;
    for (; s[i] != '\0' && i + 1 < n; i++)
        buf[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
    buf[i] = '\0';
}

/* -NOPERM for command name. */
static void noperm_cmd(fence_acl_out *out, const fence_acl_user *u, const char *name)
{
    char lname[40], msg[256];
    lower(name, lname, sizeof(lname));
    snprintf(msg, sizeof(msg), "User %s has no permissions to run the '%s' command",
             fence_acl_user_name(u), lname);
    out_error(out, "NOPERM", msg);
}

/* ACL WHOAMI | USERS | LIST | LOAD | HELP for logged-in user u. */
static void acl_command(fence_acl_srv *s, const fence_acl_user *u, const fence_resp_msg *m,
                        fence_acl_out *out)
{
    char sub[16];
    if (m->argc < 2 || !word_upper(&m->argv[1], sub, sizeof(sub))) {
        out_error(out, "ERR", "unknown subcommand or wrong number of arguments for 'acl'. "
                              "Try ACL HELP.");
        return;
    }
    uint32_t cats = fence_acl_command_cats("ACL", sub);
    bool known = strcmp(sub, "WHOAMI") == 0 || strcmp(sub, "USERS") == 0 ||
                 strcmp(sub, "LIST") == 0 || strcmp(sub, "LOAD") == 0 ||
                 strcmp(sub, "HELP") == 0;
    if (!known || m->argc != 2) {
        char msg[96];
        char lsub[16];
        lower(sub, lsub, sizeof(lsub));
        snprintf(msg, sizeof(msg),
                 "unknown subcommand or wrong number of arguments for '%s'. Try ACL HELP.",
                 lsub);
        out_error(out, "ERR", msg);
        return;
    }
    if (strcmp(sub, "HELP") == 0) {
        static const char *help[] = {
            "ACL <subcommand>. Subcommands are:",
            "WHOAMI -- the user this connection is logged in as.",
            "USERS -- every user name (@admin).",
            "LIST -- every user's rules, passwords as SHA-256 only (@admin).",
            "LOAD -- read the --acl-file again; a bad file changes nothing (@admin).",
        };
        out_array(out, (int64_t)(sizeof(help) / sizeof(help[0])));
        for (size_t i = 0; i < sizeof(help) / sizeof(help[0]); i++)
            out_simple(out, help[i]);
        return;
    }
    if (strcmp(sub, "WHOAMI") == 0) {
        const char *n = fence_acl_user_name(u);
        out_bulk(out, n, strlen(n));
        return;
    }
    if (!fence_acl_cmd_allowed(u, "ACL", cats)) {
        char msg[256];
        char lsub[16];
        lower(sub, lsub, sizeof(lsub));
        snprintf(msg, sizeof(msg), "User %s has no permissions to run the 'acl|%s' command",
                 fence_acl_user_name(u), lsub);
        out_error(out, "NOPERM", msg);
        return;
    }
    if (strcmp(sub, "USERS") == 0) {
        size_t n = fence_acl_count(s->acl);
        out_array(out, (int64_t)n);
        for (size_t i = 0; i < n; i++) {
            const char *name = fence_acl_user_name(fence_acl_user_at(s->acl, i));
            out_bulk(out, name, strlen(name));
        }
    } else if (strcmp(sub, "LIST") == 0) {
        size_t n = fence_acl_count(s->acl);
        out_array(out, (int64_t)n);
        for (size_t i = 0; i < n; i++) {
            const fence_acl_user *v = fence_acl_user_at(s->acl, i);
            size_t need = fence_acl_user_describe(v, NULL, 0) + 1;
            char *line = malloc(need);
            if (line == NULL) {
                out->failed = true;
                return;
            }
            fence_acl_user_describe(v, line, need);
            out_bulk(out, line, need - 1);
            free(line);
        }
    } else {
        char err[512];
        if (fence__acl_srv_reload(s, err, sizeof(err)) != 0)
            out_error(out, "ERR", err);
        else
            out_simple(out, "OK");
    }
}

/* Whether HELLO request m carries an AUTH option (HELLO protover AUTH u p
 * ...); the compat module parses and checks the rest. */
static bool hello_has_auth(const fence_resp_msg *m)
{
    for (uint32_t i = 2; i + 2 < m->argc; i++) {
        const fence_resp_arg *a = &m->argv[i];
        if (a->len == 4 && strncasecmp(a->ptr, "AUTH", 4) == 0)
            return true;
    }
    return false;
}

bool fence__acl_srv_gate(fence_acl_srv *s, fence_compat_conn *cc, const fence_resp_msg *m,
                         fence_acl_out *out)
{
    FENCE_ASSERT(m->argc > 0);
    memset(out, 0, sizeof(*out));
    char name[FENCE_ACL_CMD_MAX + 1];
    bool named = word_upper(&m->argv[0], name, sizeof(name));
    bool free_cmd = named && (strcmp(name, "PING") == 0 || strcmp(name, "QUIT") == 0);
    const fence_acl_user *u = fence__acl_srv_user(s, cc);
    if (u == NULL) {
        if (free_cmd || (named && strcmp(name, "AUTH") == 0))
            return false;
        if (named && strcmp(name, "HELLO") == 0) {
            /* Only a HELLO that logs in is answered: the server's name and
             * version are for users (Redis answers the same with
             * requirepass). */
            if (hello_has_auth(m))
                return false;
            out_error(out, "NOAUTH", "HELLO must be called with the client already "
                                     "authenticated, otherwise the HELLO <proto> AUTH <user> "
                                     "<pass> option can be used to authenticate the client and "
                                     "select the RESP protocol version at the same time");
            out_finish(out);
            return true;
        }
        out_error(out, "NOAUTH", "Authentication required.");
        out_finish(out);
        return true;
    }
    if (!named || free_cmd)
        return false;
    if (strcmp(name, "ACL") == 0) {
        acl_command(s, u, m, out);
        out_finish(out);
        return true;
    }
    uint32_t cats = fence_acl_command_cats(name, NULL);
    if (cats == 0)
        return false; /* compat commands, and unknown ones (the daemon answers) */
    if (!fence_acl_cmd_allowed(u, name, cats)) {
        noperm_cmd(out, u, name);
        out_finish(out);
        return true;
    }
    uint32_t k = fence_acl_command_key(name);
    if (k != 0 && k < m->argc &&
        !fence_acl_key_allowed(u, m->argv[k].ptr, m->argv[k].len)) {
        out_error(out, "NOPERM", "No permissions to access a key");
        out_finish(out);
        return true;
    }
    return false;
}

void fence__acl_srv_net_open(const fence_acl_srv *s, fence_compat_conn *cc, fence_net_conn *c)
{
    fence__acl_srv_conn_open(s, cc);
    fence__net_conn_trust(c, cc->authenticated);
}

bool fence__acl_srv_net_gate(fence_acl_srv *s, fence_compat_conn *cc, fence_net_conn *c,
                             const fence_resp_msg *m)
{
    /* A verified client certificate naming a user that is on logs the
     * connection in as that user (etcd's rule).  Checked here, at each
     * request while not logged in, because requests only arrive once the
     * TLS handshake is done; the CN is NULL without one. */
    if (!cc->authenticated && fence__acl_srv_has_file(s))
        (void)fence__acl_srv_login_as(s, cc, c, fence__net_conn_peer_cn(c));
    fence_acl_out out;
    bool answered = fence__acl_srv_gate(s, cc, m, &out);
    if (answered)
        fence__net_reply(c, out.ptr, out.len);
    fence__acl_out_free(&out);
    fence__net_conn_trust(c, cc->authenticated);
    return answered;
}

void fence__acl_srv_owner(const fence_acl_srv *s, fence_compat_conn *cc, uint64_t *owner,
                          bool *admin)
{
    const fence_acl_user *u = fence__acl_srv_user(s, cc);
    /* The gate let the request through, so u exists; be safe anyway. */
    *owner = u != NULL ? fence_acl_owner_id(fence_acl_user_name(u)) : UINT64_MAX;
    *admin = u != NULL && fence_acl_is_admin(u);
}

bool fence__acl_srv_login_as(const fence_acl_srv *s, fence_compat_conn *cc, fence_net_conn *c,
                             const char *name)
{
    if (name == NULL || strlen(name) >= sizeof(cc->user))
        return false;
    const fence_acl_user *u = fence_acl_find(s->acl, name, strlen(name));
    if (u == NULL || !fence_acl_user_on(u))
        return false;
    cc->authenticated = true;
    snprintf(cc->user, sizeof(cc->user), "%s", fence_acl_user_name(u));
    fence__net_conn_trust(c, true);
    return true;
}
