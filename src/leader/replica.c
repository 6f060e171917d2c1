/* What every server's state machine does with the log (raft's fsm
 * callbacks, leader.h: they record and reply, never call raft): a
 * committed entry is unframed and applied, and the events of the waits
 * that ended answer the requests registered for them; a restored
 * snapshot answers the registered waits it made stale.  On the leader,
 * raft's callback of the proposal that carried the entry comes right
 * after (outcome.c) and answers the entry's own requests from the
 * results kept here. */
#include <stdint.h>

#include "base/assert.h"
#include "core/entry.h"
#include "leader/internal.h"

/* raft fsm->apply; see leader.h.  Results go to an array of this module
 * that the raft_apply callback (leader only, right after) reads; nothing
 * is allocated per entry, so nothing leaks on followers. */
const fence_result *fence__leader_apply(fence_leader *l, const uint8_t *buf,
                                        size_t len)
{
    l->in_raft_cb++;
    size_t plen = fence__entry_unframe(buf, len);
    int n = plen == SIZE_MAX ? -1
                             : fence_fsm_apply_entry(l->fsm, buf, plen, l->results,
                                                     FENCE_BATCH_MAX);
    if (n < 0) {
        llog(l, FENCE_LLOG_ERROR, "malformed log entry (%zu bytes): refusing to go on",
             len);
        fence__fatal("malformed log entry");
    }
    l->n_results = n;
    l->apply_seq++;
    l->events = fence_fsm_events(l->fsm, &l->n_events);
    /* Waits that ended: answer every request registered for them.  The
     * events stay listed for QUEUED results of this same entry, which are
     * registered only when its callback runs (item_done). */
    for (size_t i = 0; i < l->n_events; i++) {
        const fence_event *ev = &l->events[i];
        fence_lreq *r;
        while ((r = fence__ld_wait_take(l, ev->wait_id)) != NULL) {
            fence_result res = ev->result;
            fence__ld_answer_result(l, fence__ld_req_release(r), &res, true);
        }
    }
    l->rearm = true;
    l->in_raft_cb--;
    return l->results;
}

/* After a snapshot restore: a request registered for a wait that no
 * longer exists will never get its event (the wait ended inside the
 * entries the snapshot replaced; this happens to a deposed leader whose
 * clients still wait on it and that catches up by InstallSnapshot).
 * Answer such requests RESTORED (TRYAGAIN): the outcome is unknown here,
 * and a retry (same REQID, or LOCK by the same lease) gets it from the
 * leader.  One request at a time, with a fresh scan of its bucket after
 * each reply, because a reply that fails for lack of memory closes its
 * connection, which unlinks that connection's other requests. */
void fence__leader_restored(fence_leader *l)
{
    l->in_raft_cb++;
    l->events = NULL; /* the fsm's array is gone with the old state */
    l->n_events = 0;
    l->apply_seq++;
    for (size_t b = 0; b < l->wait_nb; b++) {
        fence_lreq *r = l->wait_tab[b];
        while (r != NULL) {
            if (fence_fsm_wait_exists(l->fsm, r->wait_id)) {
                r = r->wnext;
                continue;
            }
            fence__ld_wait_remove(l, r);
            fence__ld_answer_error(l, fence__ld_req_release(r), FENCE_LERR_RESTORED);
            r = l->wait_tab[b];
        }
    }
    l->rearm = true;
    l->in_raft_cb--;
}
