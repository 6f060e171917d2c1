/* The election state replies ([value|nil, token, lease, revision], or
 * nil), shared by reply.c (ELECTION.LEADER, a linearizable read)
 * and observe.c (ELECTION.OBSERVE); below both. */
#include <stdlib.h>

#include "base/assert.h"
#include "server/server.h"

#define INT_REPLY_MAX ((uint64_t)INT64_MAX)

/* Reply with [value | nil, token, lease, revision], or nil. */
void fence__elect_reply_state(fence_slot *slot, const fence_fsm_elect_state *st,
                              bool nil_if_none)
{
    char small[160];
    if (!st->has_leader && nil_if_none) {
        size_t n = fence_resp_nil_v(small, sizeof(small), slot->resp);
        fence__slot_reply(slot, small, n);
        return;
    }
    size_t cap = sizeof(small) + (size_t)st->value_len;
    char *buf = cap <= sizeof(small) ? small : malloc(cap);
    if (buf == NULL) {
        fence__slot_error(slot, "TRYAGAIN", "out of memory; retry later");
        return;
    }
    size_t off = fence_resp_array(buf, cap, 4);
    if (st->has_leader)
        off += fence_resp_bulk(buf + off, cap - off, (const char *)st->value,
                               st->value_len);
    else
        off += fence_resp_nil_v(buf + off, cap - off, slot->resp);
    const uint64_t v[3] = {st->token, st->lease, st->revision};
    for (int i = 0; i < 3; i++)
        off += fence_resp_uint(buf + off, cap - off, v[i] > INT_REPLY_MAX ? INT_REPLY_MAX : v[i]);
    FENCE_ASSERT(off <= cap);
    fence__slot_reply(slot, buf, off);
    if (buf != small)
        free(buf);
}
