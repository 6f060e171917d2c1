/* LOCK.LIST and LEASE.LIST: bounded, paginated views of the applied state
 * (an operator's look inside; answered by any server from its own applied
 * state, like INFO, so not linearizable).
 *
 *   LOCK.LIST [pattern] [COUNT n] [CURSOR c]
 *     -> [next-cursor, [[name, token, lease, remaining_ms, waiters], ...]]
 *   LEASE.LIST [COUNT n] [CURSOR c]
 *     -> [next-cursor, [[id, ttl_ms, remaining_ms, locks_held, waits, owner name,
 *         owner address], ...]]   (owner: owners.c; "" when unknown)
 *
 * Locks come in token order, leases in id order; cursor 0 starts, a reply
 * cursor of 0 ends.  pattern is a glob over the name's bytes (* any run,
 * ? any byte, \ quotes the next byte).  COUNT (1..FENCE_LIST_COUNT_MAX,
 * default FENCE_LIST_COUNT_DEFAULT) bounds the entries returned, and a
 * LOCK.LIST call examines at most FENCE_LIST_VISIT_FACTOR times as many
 * locks, so one call's work is bounded whatever the pattern.
 *
 * With an --acl-file, LOCK.LIST lists only the names the caller's ~patterns
 * cover, and LEASE.LIST only the caller's own leases unless it is @admin
 * (docs/security.md). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/assert.h"
#include "base/limits.h"
#include "server/server.h"

/* Whether glob p[0..pn) matches s[0..sn) (iterative, with one backtrack
 * point: linear in practice, never recursive). */
static bool glob_match(const uint8_t *p, size_t pn, const uint8_t *s, size_t sn)
{
    size_t pi = 0, si = 0, star_p = SIZE_MAX, star_s = 0;
    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            star_p = pi++;
            star_s = si;
        } else if (pi < pn && (p[pi] == '?' ||
                               (p[pi] == '\\' && pi + 1 < pn ? p[pi + 1] == s[si]
                                                             : p[pi] == s[si]))) {
            pi += p[pi] == '\\' && pi + 1 < pn ? 2 : 1;
            si++;
        } else if (star_p != SIZE_MAX) {
            pi = star_p + 1;
            si = ++star_s;
        } else {
            return false;
        }
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

/* The pattern handed to the core's filter. */
typedef struct pattern {
    const uint8_t *p; /* glob bytes, or NULL: every name */
    size_t n;         /* glob length */
    const fence_acl_user *user; /* the caller: only names its ~patterns
                                   cover are listed (NULL: every name) */
} pattern;

/* The core's filter callback: the caller's glob and the user's patterns. */
static bool match_cb(void *ctx, const uint8_t *name, uint16_t len)
{
    const pattern *pt = ctx;
    if (pt->user != NULL && !fence_acl_key_allowed(pt->user, (const char *)name, len))
        return false;
    return pt->p == NULL || glob_match(pt->p, pt->n, name, len);
}

/* Parse [pattern] [COUNT n] [CURSOR c] from argv[1..]; a pattern only when
 * allow_pattern.  Returns 0, or -1 after replying ERR. */
static int parse_args(fence_slot *slot, const fence_resp_msg *m, bool allow_pattern,
                      pattern *pt, uint64_t *count, uint64_t *cursor)
{
    *count = FENCE_LIST_COUNT_DEFAULT;
    *cursor = 0;
    pt->p = NULL;
    pt->n = 0;
    pt->user = NULL;
    uint32_t i = 1;
    for (; i < m->argc; i++) {
        const fence_resp_arg *a = &m->argv[i];
        bool is_count = a->len == 5 && strncasecmp(a->ptr, "COUNT", 5) == 0;
        bool is_cursor = a->len == 6 && strncasecmp(a->ptr, "CURSOR", 6) == 0;
        if ((is_count || is_cursor) && i + 1 < m->argc) {
            const fence_resp_arg *v = &m->argv[++i];
            uint64_t *out = is_count ? count : cursor;
            uint64_t max = is_count ? FENCE_LIST_COUNT_MAX : INT64_MAX;
            if (fence_resp_parse_u64(v->ptr, v->len, max, out) != 0 ||
                (is_count && *out == 0)) {
                fence__slot_error(slot, "ERR", is_count ? "COUNT must be 1..1000"
                                                        : "CURSOR must be a cursor from a reply");
                return -1;
            }
        } else if (allow_pattern && i == 1 && a->len <= FENCE_NAME_MAX * 2) {
            pt->p = (const uint8_t *)a->ptr;
            pt->n = a->len;
        } else {
            fence__slot_error(slot, "ERR", "syntax error");
            return -1;
        }
    }
    return 0;
}

/* Remaining ms until deadline at now, floored at 0. */
static uint64_t left(uint64_t deadline, uint64_t now)
{
    return deadline > now ? deadline - now : 0;
}

/* LOCK.LIST. */
void fence__list_locks(fence_server *s, fence_slot *slot, const fence_resp_msg *m)
{
    pattern pt;
    uint64_t count, cursor;
    if (parse_args(slot, m, true, &pt, &count, &cursor) != 0)
        return;
    fence_fsm_lock_entry *e = malloc(count * sizeof(*e));
    if (e == NULL) {
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    /* A user sees the names its ~patterns cover, as LOCK.INFO would let it
     * (an administrator too: its patterns are its patterns). */
    if (fence__acl_srv_has_file(&s->acl) && slot->conn != NULL)
        pt.user = fence__acl_srv_user(&s->acl, &slot->conn->compat);
    uint64_t next = 0;
    size_t n = fence_fsm_locks_list(s->fsm, cursor, count * FENCE_LIST_VISIT_FACTOR,
                                    pt.p != NULL || pt.user != NULL ? match_cb : NULL, &pt, e,
                                    count, &next);
    uint64_t now = fence__leader_now(s->leader);
    /* Size first, then encode into one buffer. */
    size_t need = fence_resp_array(NULL, 0, 2) + fence_resp_uint(NULL, 0, next) +
                  fence_resp_array(NULL, 0, (int64_t)n);
    for (size_t i = 0; i < n; i++)
        need += fence_resp_array(NULL, 0, 5) +
                fence_resp_bulk(NULL, 0, (const char *)e[i].name, e[i].name_len) + 4 * 24;
    char *buf = malloc(need);
    if (buf == NULL) {
        free(e);
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    size_t off = fence_resp_array(buf, need, 2);
    off += fence_resp_uint(buf + off, need - off, next);
    off += fence_resp_array(buf + off, need - off, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        off += fence_resp_array(buf + off, need - off, 5);
        off += fence_resp_bulk(buf + off, need - off, (const char *)e[i].name, e[i].name_len);
        off += fence_resp_uint(buf + off, need - off, e[i].token);
        off += fence_resp_uint(buf + off, need - off, e[i].lease);
        off += fence_resp_uint(buf + off, need - off, left(e[i].deadline_ms, now));
        off += fence_resp_uint(buf + off, need - off, e[i].waiters);
    }
    FENCE_ASSERT(off <= need);
    fence__slot_reply(slot, buf, off);
    free(buf);
    free(e);
}

/* LEASE.LIST. */
void fence__list_leases(fence_server *s, fence_slot *slot, const fence_resp_msg *m)
{
    pattern pt;
    uint64_t count, cursor;
    if (parse_args(slot, m, false, &pt, &count, &cursor) != 0)
        return;
    fence_fsm_lease_entry *e = malloc(count * sizeof(*e));
    size_t need = 64 + count * (16 + 5 * 24 + 2 * 16 + FENCE_COMPAT_NAME_MAX + 64);
    char *buf = malloc(need);
    if (e == NULL || buf == NULL) {
        free(e);
        free(buf);
        fence__slot_error(slot, "ERR", "out of memory");
        return;
    }
    uint64_t next = 0;
    size_t n = fence_fsm_leases_list(s->fsm, cursor, e, count, &next);
    /* A user that is not @admin sees its own leases only (their owners'
     * names and addresses are other users' business).  The page may then
     * hold fewer than COUNT entries; the cursor still moves on. */
    if (slot->conn != NULL && !fence__acl_srv_admin(&s->acl, &slot->conn->compat)) {
        uint64_t me;
        bool admin;
        fence__acl_srv_owner(&s->acl, &slot->conn->compat, &me, &admin);
        size_t kept = 0;
        for (size_t i = 0; i < n; i++)
            if (e[i].owner == me)
                e[kept++] = e[i];
        n = kept;
    }
    uint64_t now = fence__leader_now(s->leader);
    size_t off = fence_resp_array(buf, need, 2);
    off += fence_resp_uint(buf + off, need - off, next);
    off += fence_resp_array(buf + off, need - off, (int64_t)n);
    for (size_t i = 0; i < n; i++) {
        const fence_owner *ow = fence__owner_find(s, e[i].id);
        const char *oname = ow != NULL ? ow->tag->name : "";
        const char *oaddr = ow != NULL ? ow->tag->addr : "";
        off += fence_resp_array(buf + off, need - off, 7);
        off += fence_resp_uint(buf + off, need - off, e[i].id);
        off += fence_resp_uint(buf + off, need - off, e[i].ttl_ms);
        off += fence_resp_uint(buf + off, need - off, left(e[i].deadline_ms, now));
        off += fence_resp_uint(buf + off, need - off, e[i].locks_held);
        off += fence_resp_uint(buf + off, need - off, e[i].waits);
        off += fence_resp_bulk(buf + off, need - off, oname, strlen(oname));
        off += fence_resp_bulk(buf + off, need - off, oaddr, strlen(oaddr));
    }
    FENCE_ASSERT(off <= need);
    fence__slot_reply(slot, buf, off);
    free(buf);
    free(e);
}
