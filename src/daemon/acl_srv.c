/* A daemon's users at run time (acl_srv.h). */
#include "daemon/acl_srv.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "base/assert.h"
#include "net/conn.h"
#include "base/log.h"
#include "ops/metrics.h"

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
    s->fail_log.burst = FENCE_AUTH_LOG_PER_S;
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
    free(s->log);
    s->log = NULL;
    s->log_n = 0;
}

bool fence__acl_srv_admin(const fence_acl_srv *s, fence_compat_conn *cc)
{
    if (!fence__acl_srv_has_file(s))
        return true;
    const fence_acl_user *u = fence__acl_srv_user(s, cc);
    return u != NULL && fence_acl_is_admin(u);
}

void fence__acl_srv_set_commands(fence_acl_srv *s, const fence_compat_command *table, size_t n)
{
    FENCE_ASSERT(table != NULL);
    FENCE_ASSERT(n > 0);
    s->commands = table;
    s->n_commands = n;
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

/* ---- Failed logins ------------------------------------------------------------ */

/* A user name as it may appear in a log line or ACL LOG: its first 64
 * bytes, printable ASCII kept, anything else (and \, ') as \xNN. */
static void name_print(const fence_resp_arg *user, char *buf, size_t cap)
{
    static const char hex[] = "0123456789abcdef";
    const char *p = user != NULL ? user->ptr : "default";
    size_t n = user != NULL ? user->len : strlen("default");
    size_t k = 0;
    FENCE_ASSERT(cap >= 5);
    for (size_t i = 0; i < n && i < 64 && k + 5 < cap; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch >= 0x20 && ch < 0x7f && ch != '\\' && ch != '\'') {
            buf[k++] = (char)ch;
        } else {
            buf[k++] = '\\';
            buf[k++] = 'x';
            buf[k++] = hex[ch >> 4];
            buf[k++] = hex[ch & 15];
        }
    }
    buf[k] = '\0';
}

/* The key of a source address: an IPv4 address as it is, an IPv6 one as
 * its /64 (one host usually holds a whole /64). */
static void addr_key(const char *ip, char *key, size_t cap)
{
    struct in6_addr a6;
    if (strchr(ip, ':') != NULL && inet_pton(AF_INET6, ip, &a6) == 1) {
        char text[INET6_ADDRSTRLEN];
        memset(&a6.s6_addr[8], 0, 8);
        if (inet_ntop(AF_INET6, &a6, text, sizeof(text)) != NULL) {
            snprintf(key, cap, "%s/64", text);
            return;
        }
    }
    snprintf(key, cap, "%s", ip);
}

/* The failure record of address key at loop time now: the existing one
 * (its count forgotten after FENCE_AUTH_FORGET_MS without a failure), or
 * a free one, or one forgotten (no failure within FENCE_AUTH_FORGET_MS and
 * no answer pending).  A live record is never evicted: when every one of
 * the FENCE_AUTH_ADDRS records is live, the address shares the overflow
 * record with every other address that found the table full.  Otherwise
 * whoever controls more than FENCE_AUTH_ADDRS addresses (an IPv6 /48 holds
 * 65,536 /64s) would evict their own records by cycling through them and
 * have every guess answered at the first delay. */
static fence_acl_fail_addr *fail_addr(fence_acl_srv *s, const char *key, uint64_t now)
{
    fence_acl_fail_addr *free_rec = NULL;
    for (size_t i = 0; i < FENCE_AUTH_ADDRS; i++) {
        fence_acl_fail_addr *a = &s->addrs[i];
        bool forgotten = a->key[0] == '\0' ||
                         (now - a->last_ms > FENCE_AUTH_FORGET_MS && a->next_ms <= now);
        if (a->key[0] != '\0' && strcmp(a->key, key) == 0) {
            if (now - a->last_ms > FENCE_AUTH_FORGET_MS)
                a->fails = 0;
            return a;
        }
        if (forgotten && free_rec == NULL)
            free_rec = a;
    }
    fence_acl_fail_addr *a = free_rec;
    if (a == NULL) {
        a = &s->overflow;
        if (a->key[0] == '\0' || now - a->last_ms > FENCE_AUTH_FORGET_MS) {
            uint64_t next = a->next_ms;
            memset(a, 0, sizeof(*a));
            a->next_ms = next;
        }
        snprintf(a->key, sizeof(a->key), "%s", FENCE_AUTH_OVERFLOW_KEY);
        return a;
    }
    memset(a, 0, sizeof(*a));
    snprintf(a->key, sizeof(a->key), "%s", key);
    return a;
}

/* FENCE_AUTH_DELAY_MS doubled for each of n - 1 earlier failures, at most
 * FENCE_AUTH_DELAY_MAX_MS. */
static uint64_t fail_delay(uint32_t n)
{
    uint64_t d = FENCE_AUTH_DELAY_MS;
    for (uint32_t i = 1; i < n && d < FENCE_AUTH_DELAY_MAX_MS; i++)
        d *= 2;
    return d < FENCE_AUTH_DELAY_MAX_MS ? d : FENCE_AUTH_DELAY_MAX_MS;
}

/* Wall-clock milliseconds (ACL LOG's timestamps). */
static uint64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Enter a failure in the ACL LOG: into the newest entry of the same user
 * and address updated within FENCE_ACL_LOG_GROUP_MS, else a new entry
 * (the oldest goes when it is full).  Out of memory: not entered. */
static void log_add(fence_acl_srv *s, const char *user, const char *key, const char *client)
{
    uint64_t now = wall_ms();
    if (s->log == NULL) {
        s->log = calloc(FENCE_ACL_LOG_MAX, sizeof(*s->log));
        if (s->log == NULL)
            return;
    }
    for (size_t i = 0; i < s->log_n; i++) {
        fence_acl_log_entry *e = &s->log[(s->log_head + FENCE_ACL_LOG_MAX - i) % FENCE_ACL_LOG_MAX];
        if (strcmp(e->user, user) == 0 && strcmp(e->addr, key) == 0 &&
            now - e->updated_ms <= FENCE_ACL_LOG_GROUP_MS) {
            e->count++;
            e->updated_ms = now;
            snprintf(e->client, sizeof(e->client), "%s", client);
            return;
        }
    }
    if (s->log_n > 0)
        s->log_head = (s->log_head + 1) % FENCE_ACL_LOG_MAX;
    if (s->log_n < FENCE_ACL_LOG_MAX)
        s->log_n++;
    fence_acl_log_entry *e = &s->log[s->log_head];
    memset(e, 0, sizeof(*e));
    e->id = s->log_next_id++;
    e->count = 1;
    e->created_ms = e->updated_ms = now;
    snprintf(e->user, sizeof(e->user), "%s", user);
    snprintf(e->addr, sizeof(e->addr), "%s", key);
    snprintf(e->client, sizeof(e->client), "%s", client);
}

/* A failed login of c as user: count, log, ACL LOG, and the delayed answer
 * (see fence__acl_srv_auth in acl_srv.h). */
static void auth_failed(fence_acl_srv *s, fence_compat_conn *cc, fence_net_conn *c,
                        const fence_resp_arg *user)
{
    char name[4 * 64 + 1], peer[96] = "?", ip[64] = "?", key[64], client[160];
    s->stat_auth_failures++;
    if (s->m_auth_failures != NULL)
        fence_metric_inc(s->m_auth_failures);
    name_print(user, name, sizeof(name));
    if (c != NULL)
        fence__net_conn_peer(c, peer, sizeof(peer), ip, sizeof(ip));
    addr_key(ip, key, sizeof(key));
    snprintf(client, sizeof(client), "id=%" PRIu64 " addr=%.64s name=%.40s", cc->id, peer, cc->name);
    log_add(s, name, key, client);
    unsigned long dropped;
    if (c == NULL) {
        if (fence__log_limit_take(&s->fail_log, &dropped))
            FENCE_LOG_W("acl: failed login as user '%s'", name);
        return;
    }
    uint64_t now = uv_now(c->net->loop);
    fence_acl_fail_addr *a = fail_addr(s, key, now);
    a->fails++;
    a->last_ms = now;
    c->auth_failures++;
    /* The answer waits for the connection's delay, and for its turn among
     * the failures from its address: one address gets one answer per
     * address delay, however many connections it opens. */
    uint32_t n = c->auth_failures > a->fails ? c->auth_failures : a->fails;
    uint64_t until = now + fail_delay(n);
    uint64_t turn = (a->next_ms > now ? a->next_ms : now) + fail_delay(a->fails);
    a->next_ms = turn;
    if (turn > until)
        until = turn;
    bool close = c->auth_failures >= FENCE_AUTH_FAILS_MAX;
    bool drop = until - now > 4 * FENCE_AUTH_DELAY_MAX_MS;
    if (fence__log_limit_take(&s->fail_log, &dropped)) {
        char more[80] = "";
        if (dropped > 0)
            snprintf(more, sizeof(more), " (%lu failed logins before it not logged)", dropped);
        FENCE_LOG_W("acl: failed login as user '%s' from %s (conn %" PRIu64 ": failure %" PRIu32
                    " of %d; %" PRIu32 " from %s within %d s); answered in %" PRIu64 " ms%s%s",
                    name, peer, c->id, c->auth_failures, FENCE_AUTH_FAILS_MAX, a->fails, key,
                    FENCE_AUTH_FORGET_MS / 1000, drop ? (uint64_t)0 : until - now,
                    drop ? "; closed at once (too many from this address)"
                         : close ? "; then closed" : "",
                    more);
    }
    if (drop) {
        fence__net_conn_close(c);
        return;
    }
    fence__net_conn_hold(c, until - now);
    if (close)
        fence__net_close_after_flush(c);
}

int fence__acl_srv_auth(fence_acl_srv *s, fence_compat_conn *cc, fence_net_conn *c,
                        const fence_resp_arg *user, const fence_resp_arg *pass)
{
    const fence_acl_user *u =
        fence_acl_auth(s->acl, user ? user->ptr : NULL, user ? user->len : 0, pass->ptr,
                       pass->len);
    if (u == NULL) {
        auth_failed(s, cc, c, user);
        return -1;
    }
    if (c != NULL)
        fence__net_conn_trust(c, true);
    return 0;
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

/* The ACL command's subcommands: the gate answers ACL itself, so this is
 * its row of the command table (categories decide who may run each). */
#define ACL_LOCAL (FENCE_COMPAT_CMD_LOADING | FENCE_COMPAT_CMD_STALE)
static const fence_compat_command acl_subs[] = {
    {"ACL|WHOAMI", 2, ACL_LOCAL | FENCE_COMPAT_CMD_FAST, "server", "0.1.0",
     "Returns the user this connection is logged in as.", NULL, 0, NULL, 0,
     FENCE_ACL_CAT_CONNECTION, 0, 2, 0},
    {"ACL|USERS", 2, ACL_LOCAL | FENCE_COMPAT_CMD_ADMIN, "server", "0.1.0",
     "Lists every user name.", NULL, 0, NULL, 0, FENCE_ACL_CAT_ADMIN | FENCE_ACL_CAT_READ, 0,
     2, 0},
    {"ACL|LIST", 2, ACL_LOCAL | FENCE_COMPAT_CMD_ADMIN, "server", "0.1.0",
     "Lists every user's rules, passwords as SHA-256 only.", NULL, 0, NULL, 0,
     FENCE_ACL_CAT_ADMIN | FENCE_ACL_CAT_READ, 0, 2, 0},
    {"ACL|LOAD", 2, ACL_LOCAL | FENCE_COMPAT_CMD_ADMIN, "server", "0.1.0",
     "Reads the --acl-file again; a bad file changes nothing.", NULL, 0, NULL, 0,
     FENCE_ACL_CAT_ADMIN | FENCE_ACL_CAT_WRITE, 0, 2, 0},
    {"ACL|LOG", -2, ACL_LOCAL | FENCE_COMPAT_CMD_ADMIN, "server", "0.1.0",
     "Lists the failed logins, newest first, or RESET forgets them.", NULL, 0, NULL, 0,
     FENCE_ACL_CAT_ADMIN | FENCE_ACL_CAT_READ, 0, 3, 0},
    {"ACL|HELP", 2, ACL_LOCAL | FENCE_COMPAT_CMD_FAST, "server", "0.1.0",
     "Returns helpful text about the subcommands.", NULL, 0, NULL, 0,
     FENCE_ACL_CAT_CONNECTION, 0, 2, 0},
};
#define N_ACL_SUBS (sizeof(acl_subs) / sizeof(acl_subs[0]))

const fence_compat_command *fence__acl_srv_subcommands(size_t *n)
{
    *n = N_ACL_SUBS;
    return acl_subs;
}

/* The row of ACL subcommand sub (upper case), or NULL. */
static const fence_compat_command *acl_sub_find(const char *sub)
{
    for (size_t i = 0; i < N_ACL_SUBS; i++)
        if (strcmp(acl_subs[i].name + 4, sub) == 0)
            return &acl_subs[i];
    return NULL;
}

/* Append an integer reply. */
static void out_int(fence_acl_out *out, int64_t v)
{
    size_t need = fence_resp_int(NULL, 0, v);
    char *p = out_room(out, need);
    if (p != NULL)
        out->len += fence_resp_int(p, need, v);
}

/* Append a bulk string of a NUL-terminated text. */
static void out_str(fence_acl_out *out, const char *s)
{
    out_bulk(out, s, strlen(s));
}

/* ACL LOG [count | RESET] for user u (@admin only, whatever its rules
 * allow: the entries name other users and their addresses).  The reply
 * has Redis's shape: newest first, each entry a flat map of count, reason,
 * context, object, username, age-seconds, client-info, entry-id,
 * timestamp-created, timestamp-last-updated. */
static void acl_log(fence_acl_srv *s, const fence_acl_user *u, const fence_resp_msg *m,
                    fence_acl_out *out)
{
    if (!fence_acl_is_admin(u)) {
        char msg[256];
        snprintf(msg, sizeof(msg), "User %s has no permissions to run the 'acl|log' command",
                 fence_acl_user_name(u));
        out_error(out, "NOPERM", msg);
        return;
    }
    uint64_t count = 10;
    if (m->argc == 3) {
        const fence_resp_arg *a = &m->argv[2];
        if (a->len == 5 && strncasecmp(a->ptr, "RESET", 5) == 0) {
            s->log_n = 0;
            s->log_head = 0;
            out_simple(out, "OK");
            return;
        }
        if (fence_resp_parse_u64(a->ptr, a->len, UINT64_MAX, &count) != 0) {
            out_error(out, "ERR", "value is out of range, must be positive");
            return;
        }
    }
    if (count > s->log_n)
        count = s->log_n;
    uint64_t now = wall_ms();
    out_array(out, (int64_t)count);
    for (uint64_t i = 0; i < count; i++) {
        const fence_acl_log_entry *e =
            &s->log[(s->log_head + FENCE_ACL_LOG_MAX - (size_t)i) % FENCE_ACL_LOG_MAX];
        char age[32];
        uint64_t ms = now > e->created_ms ? now - e->created_ms : 0;
        snprintf(age, sizeof(age), "%" PRIu64 ".%03u", ms / 1000, (unsigned)(ms % 1000));
        out_array(out, 20);
        out_str(out, "count");
        out_int(out, (int64_t)e->count);
        out_str(out, "reason");
        out_str(out, "auth");
        out_str(out, "context");
        out_str(out, "toplevel");
        out_str(out, "object");
        out_str(out, "AUTH");
        out_str(out, "username");
        out_str(out, e->user);
        out_str(out, "age-seconds");
        out_str(out, age);
        out_str(out, "client-info");
        out_str(out, e->client);
        out_str(out, "entry-id");
        out_int(out, (int64_t)e->id);
        out_str(out, "timestamp-created");
        out_int(out, (int64_t)e->created_ms);
        out_str(out, "timestamp-last-updated");
        out_int(out, (int64_t)e->updated_ms);
    }
}

/* ACL WHOAMI | USERS | LIST | LOAD | LOG | HELP for logged-in user u. */
static void acl_command(fence_acl_srv *s, const fence_acl_user *u, const fence_resp_msg *m,
                        fence_acl_out *out)
{
    char sub[16];
    if (m->argc < 2 || !word_upper(&m->argv[1], sub, sizeof(sub))) {
        out_error(out, "ERR", "unknown subcommand or wrong number of arguments for 'acl'. "
                              "Try ACL HELP.");
        return;
    }
    const fence_compat_command *row = acl_sub_find(sub);
    bool is_log = row != NULL && strcmp(sub, "LOG") == 0;
    if (row == NULL || !fence_compat_command_arity_ok(row, m->argc)) {
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
            "LOG [<count> | RESET] -- the newest failed logins, or clear them (@admin).",
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
    if (is_log) {
        acl_log(s, u, m, out);
        return;
    }
    if (!fence_acl_cmd_allowed(u, "ACL", row->acl)) {
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
    /* The daemon's own command table is the one its dispatch uses, so a
     * command it can run is a row here, with its categories: nothing gets
     * past this check by being missing from a list. */
    FENCE_ASSERT(s->commands != NULL);
    const fence_compat_command *row =
        fence_compat_command_find(s->commands, s->n_commands, m->argv[0].ptr, m->argv[0].len);
    if (row == NULL)
        return false; /* compat commands (@connection, always a logged-in
                         user's: they show only its own), or unknown ones,
                         which the same table makes the dispatch refuse */
    FENCE_ASSERT(row->acl != 0);
    if (!fence_acl_cmd_allowed(u, row->name, row->acl)) {
        noperm_cmd(out, u, name);
        out_finish(out);
        return true;
    }
    /* Every key of the request (one, or LOCK.MULTI's names: the table's
     * key form decides which arguments they are). */
    uint32_t end = fence_compat_command_keys_end(row, m);
    for (uint32_t k = row->acl_key; k < end; k++) {
        if (!fence_acl_key_allowed(u, m->argv[k].ptr, m->argv[k].len)) {
            out_error(out, "NOPERM", "No permissions to access a key");
            out_finish(out);
            return true;
        }
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
