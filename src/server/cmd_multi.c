/* LOCK.MULTI and ACQUIRE.MULTI (docs/protocol.md): the arguments of an
 * atomic multi-lock into one FENCE_CMD_LOCK_MULTI.
 *
 *   LOCK.MULTI lease name [name ...] [WAIT ms] [REQID id]
 *   ACQUIRE.MULTI ttl_ms name [name ...] [WAIT ms] [LOCKDELAY ms] [REQID id]
 *
 * The names run from the third word up to the first option word (WAIT,
 * LOCKDELAY, REQID, any case): the same rule the ACL gate uses to find
 * them (the command table's FENCE_COMPAT_KEYS_REST), so that every name is
 * checked against the user's ~patterns and no option value is taken for a
 * name.  A name spelled like an option word therefore cannot be part of a
 * multi-lock (LOCK it alone).  Duplicate names are refused here with a
 * message saying which; the core refuses them too. */
#include <stdio.h>
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
        if (word_is(a, "SIGNED")) {
            fence__slot_error(slot, "ERR", "SIGNED is not supported by LOCK.MULTI / "
                                           "ACQUIRE.MULTI (nor a lock named SIGNED in one)");
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
    return fence__cmd_lock_options(slot, m, end, m->argc, acquire, cmd);
}
