/* The pending batch of group commit (leader.h "Group commit"): appending
 * a command or read to it, cutting it (closing it for the next step), and
 * the internal commands.  Below batch.c (the intake and the proposals),
 * renew.c (the checkpoints) and step.c, which all add to it. */
#include <stdlib.h>
#include <string.h>

#include "leader/internal.h"

/* Append a command or read to the pending batch, cutting it first when
 * it is full or when a write follows a read of the same connection c (see
 * leader.h "Group commit").  The cut batch goes out at the next step, so
 * nothing here proposes or replies: a failed proposal's reply can no
 * longer close a connection (for lack of memory) under the request being
 * added, as it could when a cut batch was proposed on the spot.  Returns
 * the item, or NULL if memory ran out. */
static litem *batch_add(fence_leader *l, const fence_cmd *cmd, bool is_read,
                        fence_lreq *r, fence_lconn *c)
{
    lbatch *b = l->pending;
    /* Bytes kept with the item: its name, or a checkpoint's lease ids. */
    bool ids = cmd->type == FENCE_CMD_LEASE_CHECKPOINT;
    size_t extra = ids ? (size_t)cmd->ids_count * 8 : cmd->name_len;
    const uint8_t *src = ids ? cmd->ids : cmd->name;
    if (b != NULL && b->n_items >= FENCE_BATCH_MAX) {
        fence__ld_batch_close(l);
        b = NULL;
    }
    if (b != NULL && !is_read && c != NULL && c->read_seq == b->seq) {
        fence__ld_batch_close(l);
        b = NULL;
    }
    if (b == NULL) {
        b = calloc(1, sizeof(*b));
        if (b == NULL)
            return NULL;
        b->seq = ++l->batch_seq;
        l->pending = b;
    }
    if (b->n_items == b->cap_items) {
        uint32_t cap = b->cap_items ? b->cap_items * 2 : 16;
        if (cap > FENCE_BATCH_MAX)
            cap = FENCE_BATCH_MAX;
        litem *items = realloc(b->items, cap * sizeof(*items));
        if (items == NULL)
            return NULL;
        b->items = items;
        b->cap_items = cap;
    }
    /* An election's value rides right after the name (at most
     * FENCE_ELECT_VALUE_MAX bytes, checked by the shell). */
    size_t need = extra + cmd->value_len;
    for (uint16_t i = 0; i < cmd->names_count; i++)
        need += 2u + cmd->names[i].len; /* LOCK_MULTI: u16 length + bytes */
    if (b->names_len + need > b->names_cap) {
        size_t cap = b->names_cap ? b->names_cap * 2 : 1024;
        while (cap < b->names_len + need)
            cap *= 2;
        uint8_t *names = realloc(b->names, cap);
        if (names == NULL)
            return NULL;
        b->names = names;
        b->names_cap = cap;
    }
    litem *it = &b->items[b->n_items++];
    it->cmd = *cmd;
    it->cmd.name = NULL;
    it->cmd.ids = NULL;
    it->cmd.value = NULL;
    it->name_off = (uint32_t)b->names_len;
    if (extra > 0)
        memcpy(b->names + b->names_len, src, extra);
    b->names_len += extra;
    if (cmd->value_len > 0) {
        memcpy(b->names + b->names_len, cmd->value, cmd->value_len);
        b->names_len += cmd->value_len;
    }
    it->cmd.names = NULL;
    for (uint16_t i = 0; i < cmd->names_count; i++) {
        uint16_t len = cmd->names[i].len;
        b->names[b->names_len] = (uint8_t)len;
        b->names[b->names_len + 1] = (uint8_t)(len >> 8);
        memcpy(b->names + b->names_len + 2, cmd->names[i].name, len);
        b->names_len += 2u + len;
    }
    it->is_read = is_read;
    it->req = r;
    if (!is_read)
        b->n_cmds++;
    if (r != NULL) {
        r->state = RQ_BATCH;
        if (c != NULL) {
            c->unapplied++;
            if (!is_read && cmd->type == FENCE_CMD_LEASE_KEEPALIVE)
                c->unapplied_ka++;
            if (is_read)
                c->read_seq = b->seq;
        }
    }
    return it;
}

/* Move the pending batch to the closed list: it is proposed at the next
 * step, even behind entries in flight. */
void fence__ld_batch_close(fence_leader *l)
{
    lbatch *b = l->pending;
    if (b == NULL)
        return;
    l->pending = NULL;
    l->hold_until = 0;
    l->hold_over = false;
    b->next = NULL;
    if (l->closed_tail != NULL)
        l->closed_tail->next = b;
    else
        l->closed = b;
    l->closed_tail = b;
}

/* Queue an internal command (no reply) into the pending batch. */
bool fence__ld_batch_add_internal(fence_leader *l, const fence_cmd *cmd)
{
    return batch_add(l, cmd, false, NULL, NULL) != NULL;
}

/* See internal.h. */
litem *fence__ld_batch_add(fence_leader *l, const fence_cmd *cmd, bool is_read,
                           fence_lreq *r, fence_lconn *c)
{
    return batch_add(l, cmd, is_read, r, c);
}
