/* The argument parsers of the command table: integers in a range and the
 * trailing options (WAIT, LOCKDELAY, REQID).  Below cmd.c and cmd_multi.c,
 * which both parse with them. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "server/server.h"

/* Whether argument a equals word, ignoring case. */
static bool arg_is(const fence_resp_arg *a, const char *word)
{
    return strlen(word) == a->len && strncasecmp(word, a->ptr, a->len) == 0;
}

/* Parse argument a as an integer in [min, max]; on failure reply "ERR" on
 * the slot naming the argument and return -1. */
static int arg_u64(fence_slot *slot, const fence_resp_arg *a, const char *what,
                   uint64_t min, uint64_t max, uint64_t *out)
{
    char msg[160];
    if (fence_resp_parse_u64(a->ptr, a->len, max, out) != 0 || *out < min) {
        snprintf(msg, sizeof(msg), "%s must be an integer in %" PRIu64 "..%" PRIu64,
                 what, min, max);
        fence__slot_error(slot, "ERR", msg);
        return -1;
    }
    return 0;
}

/* Parse the trailing options from argv[first..argc) into cmd.  Replies ERR
 * and returns -1 on anything unexpected. */
static int parse_options(fence_slot *slot, const fence_resp_msg *m, uint32_t first,
                         uint32_t end, unsigned allowed, fence_cmd *cmd)
{
    unsigned seen = 0;
    for (uint32_t i = first; i < end; i += 2) {
        const fence_resp_arg *k = &m->argv[i];
        unsigned which = 0;
        if (arg_is(k, "SHARED") && (allowed & OPTF_SHARED)) {
            if (seen & OPTF_SHARED) {
                fence__slot_error(slot, "ERR", "syntax error: option given twice");
                return -1;
            }
            seen |= OPTF_SHARED;
            cmd->flags |= FENCE_CMD_F_SHARED;
            i--; /* a word without a value */
            continue;
        }
        if (arg_is(k, "WAIT"))
            which = OPTF_WAIT;
        else if (arg_is(k, "LOCKDELAY"))
            which = OPTF_LOCKDELAY;
        else if (arg_is(k, "REQID"))
            which = OPTF_REQID;
        if (which == 0 || !(allowed & which)) {
            char msg[160];
            snprintf(msg, sizeof(msg), "syntax error: unexpected '%.*s'",
                     (int)(k->len > 32 ? 32 : k->len), k->ptr);
            fence__slot_error(slot, "ERR", msg);
            return -1;
        }
        if (seen & which) {
            fence__slot_error(slot, "ERR", "syntax error: option given twice");
            return -1;
        }
        seen |= which;
        if (i + 1 >= end) {
            fence__slot_error(slot, "ERR", "syntax error: option without a value");
            return -1;
        }
        const fence_resp_arg *v = &m->argv[i + 1];
        switch (which) {
        case OPTF_WAIT:
            if (arg_u64(slot, v, "WAIT", 1, FENCE_WAIT_MS_MAX, &cmd->wait_ms) != 0)
                return -1;
            break;
        case OPTF_LOCKDELAY:
            if (arg_u64(slot, v, "LOCKDELAY", 0, FENCE_LOCK_DELAY_MS_MAX,
                        &cmd->lock_delay_ms) != 0)
                return -1;
            break;
        default:
            if (arg_u64(slot, v, "REQID", 0, UINT64_MAX, &cmd->req_id) != 0)
                return -1;
            cmd->flags |= FENCE_CMD_F_REQID;
            break;
        }
    }
    return 0;
}

int fence__cmd_arg_u64(fence_slot *slot, const fence_resp_arg *a, const char *what,
                       uint64_t min, uint64_t max, uint64_t *out)
{
    return arg_u64(slot, a, what, min, max, out);
}

int fence__cmd_lock_options(fence_slot *slot, const fence_resp_msg *m, uint32_t first,
                            uint32_t end, bool lockdelay, fence_cmd *cmd)
{
    return parse_options(slot, m, first, end,
                         OPTF_WAIT | OPTF_REQID | (lockdelay ? OPTF_LOCKDELAY : 0), cmd);
}

int fence__cmd_parse_options(fence_slot *slot, const fence_resp_msg *m, uint32_t first,
                             uint32_t end, unsigned allowed, fence_cmd *cmd)
{
    return parse_options(slot, m, first, end, allowed, cmd);
}
