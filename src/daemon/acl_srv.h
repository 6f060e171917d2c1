/* A daemon's users (src/auth/acl.h) at run time, shared by fenced and
 * fence-store: the current ACL, its reload (ACL LOAD, SIGHUP), the AUTH
 * check behind the compat module's callback, and the gate every request
 * passes before anything else runs.
 *
 * The gate, for request m of a connection whose compat state is cc:
 *   - not logged in: AUTH, HELLO ... AUTH user pass, PING and QUIT pass
 *     (the compat module or the daemon answers them); a HELLO without
 *     AUTH and everything else get -NOAUTH (nothing about the server is
 *     said before login).  The connection layer keeps such a connection
 *     to small requests meanwhile (FENCE_PRELOGIN_*, conn.h).
 *   - logged in (cc->authenticated, cc->user names a user of the CURRENT
 *     ACL that is on; a user removed or turned off by a reload is logged
 *     out): PING, QUIT and the compat commands (CLIENT, HELLO, ...) pass;
 *     ACL WHOAMI|USERS|LIST|LOAD|LOG is answered here (USERS, LIST, LOAD
 *     need @admin; LOG [count|RESET], Redis's view of the failed logins,
 *     needs @admin whatever the rules say); a daemon command needs its
 *     categories (the acl column of the daemon's command table,
 *     set_commands) -> else -NOPERM User <u> has no permissions
 *     to run the '<cmd>' command; its lock/fence name argument needs a
 *     matching ~pattern -> else -NOPERM No permissions to access a key.
 * A command the daemon's table does not have passes, and the daemon's
 * dispatch, which finds commands in the same table, answers it as unknown:
 * no command can run without its row, and no row lacks categories
 * (tests/unit/test_cmdtab.c).
 *
 * Without --acl-file the ACL is fence_acl_new_default() (default user,
 * nopass, +@all ~*): every connection starts logged in as "default", and
 * the daemon keeps the compat module's AUTH answer for a server without
 * passwords (it leaves ctx->auth NULL: fence__acl_srv_has_file() is false).
 */
#ifndef FENCE_COMMON_ACL_SRV_H
#define FENCE_COMMON_ACL_SRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/acl.h"
#include "daemon/compat.h"
#include "base/limits.h"
#include "base/log.h"
#include "proto/resp.h"

struct fence_metric;

/* The key of the record shared by the addresses beyond FENCE_AUTH_ADDRS. */
#define FENCE_AUTH_OVERFLOW_KEY "(addresses beyond the table)"

/* Recent failed logins from one source address (an IPv4 address, or an
 * IPv6 /64), for the delay that grows per address. */
typedef struct fence_acl_fail_addr {
    char key[64];      /* the address ("" : free) */
    uint32_t fails;    /* failures within FENCE_AUTH_FORGET_MS of each other */
    uint64_t last_ms;  /* loop time of the last one */
    uint64_t next_ms;  /* loop time before which no answer to a failure from
                        * this address leaves (they are answered in turn) */
} fence_acl_fail_addr;

/* One ACL LOG entry: failed logins of one user name from one address
 * (Redis groups similar entries the same way). */
typedef struct fence_acl_log_entry {
    uint64_t id;          /* entry-id, from 0 */
    uint64_t count;       /* failures grouped here */
    uint64_t created_ms;  /* wall-clock ms of the first */
    uint64_t updated_ms;  /* wall-clock ms of the last */
    char user[4 * 64 + 1]; /* the name tried, non-printable bytes as \xNN */
    char addr[64];        /* source address key (as fence_acl_fail_addr) */
    char client[160];     /* client-info of the last one */
} fence_acl_log_entry;

/* The users of one daemon. */
typedef struct fence_acl_srv {
    fence_acl *acl;      /* the ACL in force (never NULL once started) */
    const char *path;    /* --acl-file (borrowed from the config), or NULL */
    uint64_t loads;      /* successful loads since start (1 after start) */
    const fence_compat_command *commands; /* the daemon's command table: the
                            one its dispatch uses (set_commands) */
    size_t n_commands;   /* rows in commands */
    /* Failed logins (acl_srv.c): */
    struct fence_metric *m_auth_failures; /* <daemon>_auth_failures_total,
                                           * set by the daemon, or NULL */
    uint64_t stat_auth_failures; /* failed logins since start */
    fence_log_limit fail_log;    /* rate limit of their log lines */
    fence_acl_fail_addr addrs[FENCE_AUTH_ADDRS]; /* per source address */
    fence_acl_fail_addr overflow; /* shared by the addresses that found
                                   * every record of addrs live */
    fence_acl_log_entry *log;    /* ACL LOG ring (FENCE_ACL_LOG_MAX, calloc
                                  * at the first entry), or NULL */
    size_t log_n;                /* entries in it */
    size_t log_head;             /* index of the newest */
    uint64_t log_next_id;        /* entry-id of the next new entry */
} fence_acl_srv;

/* A reply the gate built (heap, freed by fence__acl_out_free). */
typedef struct fence_acl_out {
    char *ptr;   /* bytes, or NULL */
    size_t len;  /* bytes in ptr */
    size_t cap;  /* room in ptr */
    bool failed; /* out of memory: the reply is an -ERR instead */
} fence_acl_out;

/* Load path (NULL: the default ACL).  0, or -1 with err set
 * ("users.acl:3: reason"); no password ever appears in err. */
int fence__acl_srv_init(fence_acl_srv *s, const char *path, char *err, size_t err_len);

/* Release the ACL. */
void fence__acl_srv_free(fence_acl_srv *s);

/* The daemon's command table (its dispatch's own, borrowed for the
 * process's life), whose acl and acl_key columns the gate checks.  Call
 * once after init, before any request. */
void fence__acl_srv_set_commands(fence_acl_srv *s, const fence_compat_command *table, size_t n);

/* The rows of the ACL command's subcommands (ACL|WHOAMI ...), which the
 * gate answers; *n receives the count.  For COMMAND and the table test. */
const fence_compat_command *fence__acl_srv_subcommands(size_t *n);

/* Whether the daemon runs with an --acl-file. */
bool fence__acl_srv_has_file(const fence_acl_srv *s);

/* Read the file again (ACL LOAD, SIGHUP).  On success the new ACL is in
 * force (connections keep their user by name); on failure the old one
 * stays and err says why.  Logs either way.  Without a file: 0, no-op. */
int fence__acl_srv_reload(fence_acl_srv *s, char *err, size_t err_len);

/* At accept: log the connection in as "default" when that user exists, is
 * on and nopass (always so without a file). */
void fence__acl_srv_conn_open(const fence_acl_srv *s, fence_compat_conn *cc);

struct fence_net_conn;

/* The compat module's AUTH callback (ctx->auth with ctx->arg pointing to a
 * daemon that passes its fence_acl_srv here, with the connection c whose
 * compat state cc is, or NULL): 0 when the credentials are good (c is
 * trusted then).  A failure is counted (stat_auth_failures and the
 * m_auth_failures metric), logged with the user name and source address
 * (never the password; at most FENCE_AUTH_LOG_PER_S lines a second),
 * entered in the ACL LOG, and slows c down: its answer (the -WRONGPASS the
 * compat module writes next) is held for a delay that doubles with each
 * failure on c or from its address (FENCE_AUTH_*, limits.h), and c is
 * closed after it once it failed FENCE_AUTH_FAILS_MAX times. */
int fence__acl_srv_auth(fence_acl_srv *s, fence_compat_conn *cc, struct fence_net_conn *c,
                        const fence_resp_arg *user, const fence_resp_arg *pass);

/* The user connection cc is logged in as in the current ACL, or NULL
 * (valid until the next reload).  A connection not logged in (a new one,
 * or after RESET or a reload that removed its user) is logged in as
 * "default" when that user is on and nopass. */
const fence_acl_user *fence__acl_srv_user(const fence_acl_srv *s, fence_compat_conn *cc);

/* The gate (see the file comment).  Returns true when it answered m (the
 * reply is in out; m must not run), false when m goes on. */
bool fence__acl_srv_gate(fence_acl_srv *s, fence_compat_conn *cc, const fence_resp_msg *m,
                         fence_acl_out *out);

/* Safe defaults: refuse to serve clients on bind address host (an IP
 * literal; anything else is left to the listener) that is not loopback
 * when no --acl-file is given or the clients are not TLS-only (tls_only:
 * a TLS port with a certificate and key, and the plain port off; see
 * fence__acl_srv_tls_only), unless insecure (--insecure).  Returns 0, or
 * -1 with err set. */
int fence__acl_srv_check_bind(const char *host, bool has_acl_file, bool tls_only,
                              bool insecure, char *err, size_t err_len);

/* Whether host is a loopback address: 127.0.0.0/8, ::1, or the name
 * "localhost".  Another name is not (it may resolve anywhere). */
bool fence__acl_srv_is_loopback(const char *host);

/* Whether a daemon's clients reach it by TLS only: tls_port on with cert
 * and key files named, and the plain TCP port (port) off. */
bool fence__acl_srv_tls_only(uint64_t port, uint64_t tls_port, const char *cert,
                             const char *key);

/* Whether the user of cc may see and act on everything (other users'
 * leases in LEASE.LIST, their connections in CLIENT LIST, the cluster's
 * internals): always without --acl-file, else only a user with @admin. */
bool fence__acl_srv_admin(const fence_acl_srv *s, fence_compat_conn *cc);

/* Free out's bytes. */
void fence__acl_out_free(fence_acl_out *out);

/* ---- For a daemon on the shared connection layer (src/net/conn.h) ---- */

/* At accept of c (compat state cc): log in as "default" when that user is
 * nopass (fence__acl_srv_conn_open) and trust c then (conn_guard.c). */
void fence__acl_srv_net_open(const fence_acl_srv *s, fence_compat_conn *cc,
                             struct fence_net_conn *c);

/* Log connection c in as user name (NUL-terminated), when that user exists
 * and is on; no password is checked.  For a verified TLS client
 * certificate: at accept, a daemon calls it with the certificate's CN
 * (fence__net_conn_peer_cn(c), src/net/conn.h, NULL without mTLS), as
 * etcd maps a client certificate's CN to a user.  Returns whether c is now
 * logged in as name. */
bool fence__acl_srv_login_as(const fence_acl_srv *s, fence_compat_conn *cc,
                             struct fence_net_conn *c, const char *name);

/* The gate for request m of c: true when it answered (the reply is queued
 * in order on c; m must not run).  Keeps c's trust in step with its
 * login. */
bool fence__acl_srv_net_gate(fence_acl_srv *s, fence_compat_conn *cc,
                             struct fence_net_conn *c, const fence_resp_msg *m);

/* The owner id and admin flag for the core command of a request of cc
 * (fence_cmd.owner, FENCE_CMD_F_ADMIN; src/core/fsm.h). */
void fence__acl_srv_owner(const fence_acl_srv *s, fence_compat_conn *cc, uint64_t *owner,
                          bool *admin);

#endif /* FENCE_COMMON_ACL_SRV_H */
