/* fenced's hook into users and permissions (src/common/acl_srv.h): the
 * ACL is loaded before the listeners open, every request passes the gate
 * before the compat module and the command table, and each core command
 * carries its user's owner id (docs/security.md). */
#include <stddef.h>

#include "common/acl_conns.h"
#include "common/acl_srv.h"
#include "server/log.h"
#include "server/commands_table.h"
#include "server/server.h"

/* The fenced connection whose compat state is cc. */
static fence_conn *conn_of(fence_compat_conn *cc)
{
    return (fence_conn *)((char *)cc - offsetof(fence_conn, compat));
}

/* The compat module's AUTH callback: check, and trust the connection. */
static int auth_cb(void *arg, fence_compat_conn *cc, const fence_resp_arg *user,
                   const fence_resp_arg *pass)
{
    fence_server *s = arg;
    return fence__acl_srv_auth(&s->acl, cc, &conn_of(cc)->base, user, pass);
}

/* CLIENT LIST: whether the connection of cc sees every connection. */
static bool sees_all_cb(void *arg, const fence_compat_conn *cc)
{
    fence_server *s = arg;
    return fence__acl_srv_admin(&s->acl, (fence_compat_conn *)cc);
}

/* Load --acl-file (or the default user); after fence__server_compat_init.
 * 0, or -1 after logging why. */
int fence__server_acl_init(fence_server *s)
{
    char err[512];
    const char *path = s->cfg->acl_file[0] != '\0' ? s->cfg->acl_file : NULL;
    if (fence__acl_srv_init(&s->acl, path, err, sizeof(err)) != 0) {
        LOG_ERROR("acl-file: %s", err);
        return -1;
    }
    fence__acl_srv_set_commands(&s->acl, fence__server_commands, fence__server_commands_n);
    s->compat.sees_all = sees_all_cb;
    s->acl.m_auth_failures = s->metrics.auth_failures;
    if (path != NULL) {
        s->compat.auth = auth_cb; /* ctx->arg is s */
        LOG_INFO("acl: %s loaded (%zu users)", path, fence_acl_count(s->acl.acl));
    }
    return 0;
}

/* SIGHUP: read the ACL file again (a bad one keeps the old users). */
void fence__server_acl_reload(fence_server *s)
{
    char err[512];
    if (fence__acl_srv_has_file(&s->acl))
        (void)fence__acl_srv_reload(&s->acl, err, sizeof(err));
}

/* A connection was accepted. */
void fence__server_acl_open(fence_conn *c)
{
    fence__acl_srv_net_open(&c->srv->acl, &c->compat, &c->base);
}

/* The gate; true when it answered m. */
bool fence__server_acl_gate(fence_conn *c, const fence_resp_msg *m)
{
    return fence__acl_srv_net_gate(&c->srv->acl, &c->compat, &c->base, m) ||
           fence__acl_conns_refused(&c->srv->acl, &c->srv->acl_conns, &c->srv->net,
                                    offsetof(fence_conn, compat),
                                    offsetof(fence_conn, quota_mark), &c->base);
}

/* A connection is closing: it leaves its user's maxconns count. */
void fence__server_acl_closed(fence_conn *c)
{
    fence__acl_conns_closed(&c->srv->acl_conns, &c->quota_mark);
}

/* Stamp a core command with the requesting user, and a command that
 * makes a lease or a lock with that user's maxleases/maxlocks (the state
 * machine counts and refuses, core/fsm.h "Quotas"). */
void fence__server_acl_stamp(fence_conn *c, fence_cmd *cmd)
{
    bool admin;
    fence__acl_srv_owner(&c->srv->acl, &c->compat, &cmd->owner, &admin);
    if (admin)
        cmd->flags |= FENCE_CMD_F_ADMIN;
    if ((cmd->type != FENCE_CMD_LEASE_GRANT && cmd->type != FENCE_CMD_LOCK &&
         cmd->type != FENCE_CMD_ACQUIRE) ||
        !fence_acl_any_quota(c->srv->acl.acl))
        return;
    const fence_acl_user *u = fence__acl_srv_user(&c->srv->acl, &c->compat);
    if (u == NULL)
        return;
    fence_acl_limits lim;
    fence_acl_user_limits(u, &lim);
    if (lim.leases == 0 && lim.locks == 0)
        return;
    cmd->flags |= FENCE_CMD_F_QUOTA;
    cmd->quota_leases = lim.leases;
    cmd->quota_locks = lim.locks;
}

/* Whether c may see the cluster's internals (raft addresses, term): always
 * without --acl-file, else only as a user with @admin (docs/security.md). */
bool fence__server_acl_admin(fence_conn *c)
{
    return fence__acl_srv_admin(&c->srv->acl, &c->compat);
}


/* Release the ACL. */
void fence__server_acl_free(fence_server *s)
{
    fence__acl_srv_free(&s->acl);
}
