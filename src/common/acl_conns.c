/* Per-user connection limits (maxconns=N, src/common/acl.h) for a daemon
 * on the shared connection layer; see acl_conns.h. */
#include "common/acl_conns.h"

#include <stdio.h>
#include <string.h>

#include "common/assert.h"
#include "common/conn.h"

/* The compat state and the admission mark of connection c. */
static fence_compat_conn *compat_of(fence_net_conn *c, size_t compat_off)
{
    return (fence_compat_conn *)((char *)c + compat_off);
}
static uint64_t *mark_of(fence_net_conn *c, size_t mark_off)
{
    return (uint64_t *)((char *)c + mark_off);
}

/* The mark of a connection admitted as name: never 0 (0: not admitted). */
static uint64_t mark_for(const char *name)
{
    uint64_t id = fence_acl_owner_id(name);
    return id == UINT64_MAX ? 1 : id + 1;
}

/* See acl_conns.h. */
bool fence__acl_conns_refused(const fence_acl_srv *s, fence_net *net, size_t compat_off,
                              size_t mark_off, fence_net_conn *c)
{
    FENCE_ASSERT(compat_off >= sizeof(fence_net_conn));
    FENCE_ASSERT(mark_off >= sizeof(fence_net_conn));
    if (!fence_acl_any_maxconns(s->acl))
        return false;
    fence_compat_conn *cc = compat_of(c, compat_off);
    uint64_t *mark = mark_of(c, mark_off);
    const fence_acl_user *u = cc->authenticated ? fence__acl_srv_user(s, cc) : NULL;
    if (u == NULL) {
        *mark = 0;
        return false;
    }
    fence_acl_limits lim;
    fence_acl_user_limits(u, &lim);
    const char *name = fence_acl_user_name(u);
    uint64_t want = mark_for(name);
    if (lim.conns == 0) {
        *mark = want;
        return false;
    }
    if (*mark == want)
        return false; /* admitted at its login */
    /* A new login as name: count the other connections admitted as it. */
    uint64_t n = 0;
    for (fence_net_conn *o = net->conns; o != NULL; o = o->next) {
        if (o == c || *mark_of(o, mark_off) != want)
            continue;
        const fence_compat_conn *oc = compat_of(o, compat_off);
        if (oc->authenticated && strcmp(oc->user, name) == 0)
            n++;
    }
    if (n < lim.conns) {
        *mark = want;
        return false;
    }
    char msg[160];
    snprintf(msg, sizeof(msg), "user '%.64s' has its %u connections open (maxconns); closing",
             name, (unsigned)lim.conns);
    fence__net_reply_error(c, "LIMIT", msg);
    fence__net_close_after_flush(c);
    *mark = 0;
    return true;
}
