/* A daemon's users (src/common/acl.h) at run time, shared by fenced and
 * fence-store: the current ACL, its reload (ACL LOAD, SIGHUP), the AUTH
 * check behind the compat module's callback, and the gate every request
 * passes before anything else runs.
 *
 * The gate, for request m of a connection whose compat state is cc:
 *   - not logged in: AUTH, HELLO, PING and QUIT pass (the compat module
 *     or the daemon answers them); everything else gets
 *     -NOAUTH Authentication required.
 *   - logged in (cc->authenticated, cc->user names a user of the CURRENT
 *     ACL that is on; a user removed or turned off by a reload is logged
 *     out): PING, QUIT and the compat commands (CLIENT, HELLO, ...) pass;
 *     ACL WHOAMI|USERS|LIST|LOAD is answered here (USERS, LIST, LOAD need
 *     @admin); a daemon command needs its categories (the acl column
 *     of the daemon's command table, set_commands) -> else -NOPERM User <u> has no permissions
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

#include "common/acl.h"
#include "common/compat.h"
#include "proto/resp.h"

/* The users of one daemon. */
typedef struct fence_acl_srv {
    fence_acl *acl;      /* the ACL in force (never NULL once started) */
    const char *path;    /* --acl-file (borrowed from the config), or NULL */
    uint64_t loads;      /* successful loads since start (1 after start) */
    const fence_compat_command *commands; /* the daemon's command table: the
                            one its dispatch uses (set_commands) */
    size_t n_commands;   /* rows in commands */
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

/* The compat module's AUTH callback (ctx->auth with ctx->arg pointing to a
 * daemon that passes its fence_acl_srv here): 0 when the credentials are
 * good. */
int fence__acl_srv_auth(fence_acl_srv *s, const fence_resp_arg *user,
                        const fence_resp_arg *pass);

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

/* ---- For a daemon on the shared connection layer (src/common/conn.h) ---- */

struct fence_net_conn;

/* At accept of c (compat state cc): log in as "default" when that user is
 * nopass (fence__acl_srv_conn_open) and trust c then (conn_guard.c). */
void fence__acl_srv_net_open(const fence_acl_srv *s, fence_compat_conn *cc,
                             struct fence_net_conn *c);

/* Log connection c in as user name (NUL-terminated), when that user exists
 * and is on; no password is checked.  For a verified TLS client
 * certificate: at accept, a daemon calls it with the certificate's CN
 * (fence__net_conn_peer_cn(c), src/common/conn.h, NULL without mTLS), as
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
