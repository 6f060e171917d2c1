/* The slots that carry fenced's replies in request order on the shared
 * connection layer (src/net/conn.h): making a slot's reply final.  Below
 * every file that answers a request (reply.c, signq.c, cmd.c, observe.c,
 * ...), so that none of them calls up to another to reply. */
#include <stdlib.h>

#include "base/assert.h"
#include "server/server.h"

/* ---- Slots ------------------------------------------------------------------ */

/* Make the slot's reply final.  An orphaned slot (its connection closed)
 * is freed instead. */
void fence__slot_reply(fence_slot *slot, const char *bytes, size_t len)
{
    FENCE_ASSERT(slot->state != SLOT_READY);
    fence__slot_drop_names(slot);
    slot->state = SLOT_READY;
    fence__server_metrics_slot(slot, NULL);
    fence__net_slot_reply(&slot->base, bytes, len);
}

/* Reply with "-CODE msg". */
void fence__slot_error(fence_slot *slot, const char *code, const char *msg)
{
    FENCE_ASSERT(slot->state != SLOT_READY);
    fence__slot_drop_names(slot);
    slot->state = SLOT_READY;
    fence__server_metrics_slot(slot, code);
    fence__net_slot_error(&slot->base, code, msg);
}

/* A multi-lock's names kept for its signed reply: no longer needed once
 * the reply is made (or the slot is orphaned). */
void fence__slot_drop_names(fence_slot *slot)
{
    if (slot->sign_names == NULL)
        return;
    FENCE_ASSERT(slot->sign_names_acct != NULL);
    FENCE_ASSERT(*slot->sign_names_acct >= slot->sign_names_size);
    *slot->sign_names_acct -= slot->sign_names_size;
    free(slot->sign_names);
    slot->sign_names = NULL;
    slot->sign_names_count = 0;
    slot->sign_names_size = 0;
}
