/* fenced's hook into users and permissions (src/daemon/acl_srv.h): the
 * skeleton (src/daemon/daemon.h) loads the ACL before the listeners open,
 * sets the AUTH and CLIENT LIST callbacks and reloads on SIGHUP; here
 * every request passes the gate before the compat module and the command
 * table, and each core command carries its user's owner id
 * (docs/security.md). */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "daemon/acl_srv.h"
#include "server/server.h"

/* The gate and the user's maxconns (the skeleton's); true when it
 * answered m. */
bool fence__server_acl_gate(fence_conn *c, const fence_resp_msg *m)
{
    return fence__daemon_acl_gate(&c->srv->daemon, &c->base, m);
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
         cmd->type != FENCE_CMD_ACQUIRE && cmd->type != FENCE_CMD_SEM_ACQUIRE &&
         cmd->type != FENCE_CMD_LOCK_MULTI) ||
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

/* Whether c's user may hold the slot fences name#0..name#(n-1) of a
 * semaphore (SEM.ACQUIRE): the table's key check covers name only, and a
 * semaphore claims its slot names from every other user (core/sem.c), so a
 * user limited to ~jobs may not claim jobs#0.. as well.  Without an ACL,
 * or for a user whose patterns allow them all, true. */
bool fence__server_acl_slots_ok(fence_conn *c, const uint8_t *name, uint16_t len, uint32_t n)
{
    if (c->srv->acl.acl == NULL)
        return true;
    const fence_acl_user *u = fence__acl_srv_user(&c->srv->acl, &c->compat);
    if (u == NULL)
        return false;
    char buf[FENCE_NAME_MAX + 8];
    if (len > FENCE_NAME_MAX)
        return false;
    memcpy(buf, name, len);
    for (uint32_t i = 0; i < n; i++) {
        int k = snprintf(buf + len, sizeof(buf) - len, "#%u", (unsigned)i);
        if (k <= 0 || !fence_acl_key_allowed(u, buf, len + (size_t)k))
            return false;
    }
    return true;
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
