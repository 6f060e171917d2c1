/* Who owns a lease: the client name (CLIENT SETNAME) and peer address of
 * the connection that was granted it, recorded by the leader when it
 * answers LEASE.GRANT or ACQUIRE.  Server-side only (not in the state
 * machine, not replicated): a new leader knows no owners of older leases,
 * and LEASE.LIST shows "" for them.
 *
 * Lease ids only grow, so records are appended in id order and found by
 * binary search.  The array is compacted (records of leases no longer
 * live dropped) whenever it holds twice the live leases, so it stays
 * within about twice --max-leases.  A record is 16 bytes: the name and
 * address live in a tag shared by every lease granted to one connection
 * under one client name (refcounted: the records and the connection). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "server/server.h"

/* The record of lease id, or NULL. */
static const fence_owner *find(const fence_owners *o, uint64_t id)
{
    size_t lo = 0, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->v[mid].lease < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->n && o->v[lo].lease == id ? &o->v[lo] : NULL;
}

/* Drop one reference to t; the last one frees it. */
static void tag_unref(fence_owner_tag *t)
{
    if (t == NULL)
        return;
    FENCE_ASSERT(t->refs > 0);
    if (--t->refs == 0)
        free(t);
}

/* Drop the records of leases that are no longer live. */
static void compact(fence_server *s)
{
    fence_owners *o = &s->owners;
    uint64_t now = fence__leader_now(s->leader);
    size_t k = 0;
    for (size_t i = 0; i < o->n; i++) {
        fence_fsm_lease_state ls;
        if (fence_fsm_lease_info(s->fsm, o->v[i].lease, now, &ls) == 0)
            o->v[k++] = o->v[i];
        else
            tag_unref(o->v[i].tag);
    }
    o->n = k;
}

/* The peer address of c as "ip:port" ("unix" for a Unix socket). */
static void peer_text(fence_conn *c, char *out, size_t cap)
{
    snprintf(out, cap, "unix");
    if (c->base.h.handle.type != UV_TCP) /* TCP or TLS over TCP: an address */
        return;
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    if (uv_tcp_getpeername(&c->base.h.tcp, (struct sockaddr *)&ss, &len) != 0)
        return;
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        port = ntohs(a->sin_port);
        snprintf(out, cap, "%s:%d", ip, port);
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
        snprintf(out, cap, "[%s]:%d", ip, port);
    }
}

/* The tag for c's grants under its current client name: the one it used
 * last, or a new one (NULL when out of memory). */
static fence_owner_tag *conn_tag(fence_conn *c)
{
    fence_owner_tag *t = c->owner;
    if (t != NULL && strcmp(t->name, c->compat.name) == 0)
        return t;
    fence_owner_tag *n = malloc(sizeof(*n));
    if (n == NULL)
        return NULL;
    n->refs = 1; /* the connection's */
    snprintf(n->name, sizeof(n->name), "%s", c->compat.name);
    if (t != NULL) /* renamed: same peer */
        memcpy(n->addr, t->addr, sizeof(n->addr));
    else
        peer_text(c, n->addr, sizeof(n->addr));
    tag_unref(t);
    c->owner = n;
    return n;
}

/* Record that c was granted lease id (a LEASE.GRANT or ACQUIRE reply). */
void fence__owner_record(fence_conn *c, uint64_t id)
{
    fence_server *s = c->srv;
    fence_owners *o = &s->owners;
    if (id == 0 || find(o, id) != NULL)
        return; /* a retried grant (REQID) answers the same lease */
    if (o->n > 0 && o->v[o->n - 1].lease > id)
        return; /* older than the newest record: cannot happen on one leader */
    fence_fsm_stats st;
    fence_fsm_stats_get(s->fsm, &st);
    if (o->n >= 2 * st.leases + 64)
        compact(s);
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        fence_owner *v = realloc(o->v, cap * sizeof(*v));
        if (v == NULL)
            return; /* an owner is a convenience: go without */
        o->v = v;
        o->cap = cap;
    }
    fence_owner_tag *t = conn_tag(c);
    if (t == NULL)
        return;
    t->refs++;
    o->v[o->n].lease = id;
    o->v[o->n].tag = t;
    o->n++;
}

/* The owner of lease id, or NULL when unknown (see the head comment). */
const fence_owner *fence__owner_find(fence_server *s, uint64_t id)
{
    return find(&s->owners, id);
}

/* c is closing: the records keep its tag alive as long as they need it. */
void fence__owner_conn_closed(fence_conn *c)
{
    tag_unref(c->owner);
    c->owner = NULL;
}

/* Free the records. */
void fence__owners_free(fence_server *s)
{
    for (size_t i = 0; i < s->owners.n; i++)
        tag_unref(s->owners.v[i].tag);
    free(s->owners.v);
    memset(&s->owners, 0, sizeof(s->owners));
}
