/* Per-user connection limits (maxconns=N, src/auth/acl.h) for a daemon
 * on the shared connection layer; see acl_conns.h. */
#include "daemon/acl_conns.h"

#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "net/conn.h"

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

/* The count of mark in t; with add, a new slot when it has none and there
 * is room.  NULL when absent (and not added). */
static uint32_t *count_of(fence_acl_conns *t, uint64_t mark, bool add)
{
    FENCE_ASSERT(mark != 0);
    uint64_t h = mark * 0x9e3779b97f4a7c15ULL;
    for (uint32_t i = 0; i < FENCE_ACL_CONNS_SLOTS; i++) {
        uint32_t k = (uint32_t)((h >> 40) + i) & (FENCE_ACL_CONNS_SLOTS - 1);
        if (t->slot[k].mark == mark)
            return &t->slot[k].count;
        if (t->slot[k].mark == 0) {
            /* Keep one slot free so that a probe always ends. */
            if (!add || t->n_keys + 1 >= FENCE_ACL_CONNS_SLOTS)
                return NULL;
            t->slot[k].mark = mark;
            t->slot[k].count = 0;
            t->n_keys++;
            return &t->slot[k].count;
        }
    }
    return NULL;
}

/* c leaves the count of the user it was admitted as. */
static void leave(fence_acl_conns *t, uint64_t *mark)
{
    if (*mark == 0)
        return;
    uint32_t *n = count_of(t, *mark, false);
    if (n != NULL) {
        FENCE_ASSERT(*n > 0);
        (*n)--;
    }
    *mark = 0;
}

/* The connections other than c admitted as name (mark want), by a walk:
 * for a user the table has no room for. */
static uint64_t walk_count(fence_net *net, size_t compat_off, size_t mark_off,
                           fence_net_conn *c, uint64_t want, const char *name)
{
    uint64_t n = 0;
    for (fence_net_conn *o = net->conns; o != NULL; o = o->next) {
        if (o == c || *mark_of(o, mark_off) != want)
            continue;
        const fence_compat_conn *oc = compat_of(o, compat_off);
        if (oc->authenticated && strcmp(oc->user, name) == 0)
            n++;
    }
    return n;
}

/* See acl_conns.h. */
bool fence__acl_conns_refused(const fence_acl_srv *s, fence_acl_conns *t, fence_net *net,
                              size_t compat_off, size_t mark_off, fence_net_conn *c)
{
    FENCE_ASSERT(compat_off >= sizeof(fence_net_conn));
    FENCE_ASSERT(mark_off >= sizeof(fence_net_conn));
    uint64_t *mark = mark_of(c, mark_off);
    if (!fence_acl_any_maxconns(s->acl)) {
        leave(t, mark);
        return false;
    }
    fence_compat_conn *cc = compat_of(c, compat_off);
    const fence_acl_user *u = cc->authenticated ? fence__acl_srv_user(s, cc) : NULL;
    fence_acl_limits lim;
    if (u != NULL)
        fence_acl_user_limits(u, &lim);
    if (u == NULL || lim.conns == 0) {
        leave(t, mark); /* logged out, or a user without the rule */
        return false;
    }
    const char *name = fence_acl_user_name(u);
    uint64_t want = mark_for(name);
    if (*mark == want)
        return false; /* admitted at its login */
    leave(t, mark); /* it logged in as someone else */
    uint32_t *n = count_of(t, want, true);
    uint64_t have = n != NULL ? *n : walk_count(net, compat_off, mark_off, c, want, name);
    if (have < lim.conns) {
        if (n != NULL)
            (*n)++;
        *mark = want;
        return false;
    }
    char msg[160];
    snprintf(msg, sizeof(msg), "user '%.64s' has its %u connections open (maxconns); closing",
             name, (unsigned)lim.conns);
    fence__net_reply_error(c, "LIMIT", msg);
    fence__net_close_after_flush(c);
    return true;
}

/* See acl_conns.h. */
void fence__acl_conns_closed(fence_acl_conns *t, uint64_t *mark)
{
    leave(t, mark);
}
