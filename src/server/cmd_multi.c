/* LOCK.MULTI and ACQUIRE.MULTI (docs/protocol.md): the arguments of an
 * atomic multi-lock into one FENCE_CMD_LOCK_MULTI.
 *
 *   LOCK.MULTI lease name [name ...] [WAIT ms] [REQID id] [SIGNED]
 *   ACQUIRE.MULTI ttl_ms name [name ...] [WAIT ms] [LOCKDELAY ms] [REQID id] [SIGNED]
 *
 * The names run from the third word up to the first option word (WAIT,
 * LOCKDELAY, REQID, SIGNED, any case): the same rule the ACL gate uses to find
 * them (the command table's FENCE_COMPAT_KEYS_REST), so that every name is
 * checked against the user's ~patterns and no option value is taken for a
 * name.  A name spelled like an option word therefore cannot be part of a
 * multi-lock (LOCK it alone).  Duplicate names are refused here with a
 * message saying which; the core refuses them too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/assert.h"
#include "daemon/compat.h"
#include "server/server.h"

/* Whether a equals word, ignoring case. */
static bool word_is(const fence_resp_arg *a, const char *word)
{
    return strlen(word) == a->len && strncasecmp(word, a->ptr, a->len) == 0;
}

static int keep_names(fence_server *s, fence_slot *slot, const fence_name *names,
                      uint16_t count);

int fence__cmd_multi_parse(fence_server *s, fence_slot *slot, const fence_resp_msg *m,
                           fence_cmd *cmd, fence_name *names)
{
    FENCE_ASSERT(slot->def != NULL);
    FENCE_ASSERT(slot->def->acl_keys == FENCE_COMPAT_KEYS_REST);
    FENCE_ASSERT(m->argc >= 3);
    bool acquire = slot->def->op == OP_ACQUIRE_MULTI;
    char msg[192];
    cmd->type = FENCE_CMD_LOCK_MULTI;
    if (acquire) {
        cmd->lock_delay_ms = s->cfg->lock_delay_ms;
        if (fence__cmd_arg_u64(slot, &m->argv[1], "ttl_ms", FENCE_TTL_MS_MIN,
                               FENCE_TTL_MS_MAX, &cmd->ttl_ms) != 0)
            return -1;
    } else {
        if (fence__cmd_arg_u64(slot, &m->argv[1], "lease", 0, (uint64_t)INT64_MAX,
                               &cmd->lease) != 0)
            return -1;
        if (cmd->lease == 0) {
            /* Lease 0 would be the ACQUIRE form in the log. */
            fence__slot_error(slot, "NOLEASE", "the lease is unknown, expired or revoked");
            return -1;
        }
    }
    uint32_t end = fence_compat_command_keys_end(slot->def, m);
    FENCE_ASSERT(end >= 2 && end <= m->argc);
    uint32_t count = end - 2;
    if (count < 1 || count > FENCE_MULTI_NAMES_MAX) {
        snprintf(msg, sizeof(msg), "%s takes 1..%d lock names", slot->def->name,
                 FENCE_MULTI_NAMES_MAX);
        fence__slot_error(slot, "ERR", msg);
        return -1;
    }
    for (uint32_t i = 0; i < count; i++) {
        const fence_resp_arg *a = &m->argv[2 + i];
        if (a->len < 1 || a->len > FENCE_NAME_MAX) {
            snprintf(msg, sizeof(msg), "lock name must be 1..%d bytes", FENCE_NAME_MAX);
            fence__slot_error(slot, "ERR", msg);
            return -1;
        }
        if (word_is(a, "SHARED")) {
            /* Shared holds are for one lock (LOCK/ACQUIRE ... SHARED); a
             * name spelled so would silently be taken exclusive. */
            fence__slot_error(slot, "ERR", "SHARED is not supported by LOCK.MULTI / "
                                           "ACQUIRE.MULTI (nor a lock named SHARED in one)");
            return -1;
        }
        for (uint32_t j = 0; j < i; j++) {
            const fence_resp_arg *b = &m->argv[2 + j];
            if (a->len == b->len && memcmp(a->ptr, b->ptr, a->len) == 0) {
                snprintf(msg, sizeof(msg), "duplicate lock name '%.*s' in %s",
                         (int)(a->len > 64 ? 64 : a->len), a->ptr, slot->def->name);
                fence__slot_error(slot, "ERR", msg);
                return -1;
            }
        }
        names[i].name = (const uint8_t *)a->ptr;
        names[i].len = (uint16_t)a->len;
    }
    cmd->names = names;
    cmd->names_count = (uint16_t)count;
    /* A trailing SIGNED (an option word, so the names end before it): one
     * signed token string per name in the reply.  Checked before anything
     * is proposed, so a server without a key grants nothing. */
    uint32_t opt_end = m->argc;
    bool sign = m->argc > end && word_is(&m->argv[m->argc - 1], "SIGNED");
    if (sign) {
        if (s->signer == NULL) {
            fence__slot_error(slot, "ERR", "SIGNED: this server has no token signing "
                                           "key (fenced --token-signing-key)");
            return -1;
        }
        opt_end--;
    }
    if (fence__cmd_lock_options(slot, m, end, opt_end, acquire, cmd) != 0)
        return -1;
    if (sign && keep_names(s, slot, names, (uint16_t)count) != 0)
        return -1;
    if (sign)
        slot->signer = s->signer;
    return 0;
}

/* Copy the names into the slot for the signed reply (it may come from a
 * later event, after the request's buffer is gone).  At most 64 names of
 * 256 bytes: 16.5 KiB per signed multi-lock while it waits, where the core
 * keeps only its places in the names' queues; so all of them together are
 * bounded (SIGN_NAMES_MAX), else --max-waits signed multi-locks of long
 * names could hold 100000 x 16.5 KiB. */
#define SIGN_NAMES_MAX (64ull << 20)

static int keep_names(fence_server *s, fence_slot *slot, const fence_name *names,
                      uint16_t count)
{
    size_t total = 0;
    for (uint16_t i = 0; i < count; i++)
        total += sizeof(uint16_t) + names[i].len;
    FENCE_ASSERT(slot->sign_names == NULL);
    if (s->sign_names_bytes + total > SIGN_NAMES_MAX) {
        fence__slot_error(slot, "LIMIT", "too many signed multi-locks are waiting (their "
                                         "names fill 64 MiB); retry later");
        return -1;
    }
    uint8_t *buf = malloc(total);
    if (buf == NULL) {
        fence__slot_error(slot, "TRYAGAIN", "out of memory; retry later");
        return -1;
    }
    s->sign_names_bytes += total;
    slot->sign_names_acct = &s->sign_names_bytes;
    slot->sign_names_size = (uint32_t)total;
    size_t off = 0;
    for (uint16_t i = 0; i < count; i++) {
        memcpy(buf + off, &names[i].len, sizeof(uint16_t));
        off += sizeof(uint16_t);
        memcpy(buf + off, names[i].name, names[i].len);
        off += names[i].len;
    }
    slot->sign_names = buf;
    slot->sign_names_count = count;
    return 0;
}

/* The signed reply (server.h): each name's string is the token signed for
 * that name alone, exactly what LOCK name ... SIGNED with that token would
 * carry, so the resource guarding one name verifies it without knowing the
 * others (docs/security.md, "Signed tokens of a multi-lock"). */
void fence__cmd_multi_signed_reply(fence_slot *slot, const fence_result *r)
{
    FENCE_ASSERT(slot->signer != NULL);
    FENCE_ASSERT(slot->sign_names != NULL && slot->sign_names_count > 0);
    bool with_lease = slot->op == OP_ACQUIRE_MULTI;
    uint16_t n = slot->sign_names_count;
    size_t cap = 2 * fence_resp_array(NULL, 0, n) +
                 (size_t)n * (FENCE_SIGNTOK_STR_MAX + 16) + 32; /* "$len\r\n...\r\n" */
    char *buf = malloc(cap);
    if (buf == NULL) {
        fence__slot_error(slot, "TRYAGAIN", "out of memory; the grant stands: retry with "
                                            "the same REQID");
        return;
    }
    size_t off = 0;
    if (with_lease)
        off += fence_resp_array(buf, cap, 2);
    off += fence_resp_array(buf + off, cap - off, n);
    const uint8_t *p = slot->sign_names;
    for (uint16_t i = 0; i < n; i++) {
        uint16_t len;
        memcpy(&len, p, sizeof(len));
        p += sizeof(len);
        char tok[FENCE_SIGNTOK_BUF_SIZE];
        size_t k = fence_signtok_sign(slot->signer, (const char *)p, len, r->token, tok,
                                      sizeof(tok));
        FENCE_ASSERT(k > 0); /* names are 1..256 bytes, the token > 0 */
        off += fence_resp_bulk(buf + off, cap - off, tok, k);
        p += len;
    }
    if (with_lease)
        off += fence_resp_uint(buf + off, cap - off,
                               r->lease > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : r->lease);
    FENCE_ASSERT(off <= cap);
    fence__slot_reply(slot, buf, off);
    free(buf);
}
