/* ELECTION.OBSERVE and the election state replies (docs/protocol.md).
 *
 * OBSERVE name [AFTER revision] [WAIT ms] is answered by any node, leader
 * or follower, from its applied state: the state is committed, and its
 * revision only grows, so a lagging node answers later, never with an
 * older state than one it gave (a client that moves to another node
 * passes AFTER its last revision and never goes back).  Without AFTER the
 * reply is the current state at once.  With AFTER r: the current state
 * when its revision is above r; otherwise, with WAIT ms, the request is
 * parked here (no log entry) and answered by the first loop turn after
 * an apply (or a snapshot restore) that gives its election a revision
 * above r, or nil when WAIT ms pass first; without WAIT, nil at once.
 * It cannot miss a change: the revision of every change is above the one
 * the client saw, so the next OBSERVE AFTER it answers at once with the
 * latest state (states in between may be coalesced: an observer sees the
 * latest leader, not every leader).
 *
 * Bounds: FENCE_OBSERVERS_PER_CONN parked per connection and
 * FENCE_OBSERVERS_MAX in all (beyond: -LIMIT); each costs its slot and
 * one record.  Waking scans the parked observers once per loop turn in
 * which the core's election revision moved (O(parked)); replies leave in
 * request order on the shared connection layer, whose output bounds close
 * a reader that does not read. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/assert.h"
#include "server/server.h"

#define INT_REPLY_MAX ((uint64_t)INT64_MAX)

struct fence_observer {
    fence_obs base;        /* first: the set's record (observe_set.h) */
    fence_slot *slot;      /* the parked request (SLOT_OBSERVE) */
    fence_conn *conn;      /* its connection */
};

/* Forget o (its slot stays its connection's). */
static void forget(fence_server *s, fence_observer *o)
{
    fence__obs_remove(&s->obs.set, &o->base);
    FENCE_ASSERT(o->conn->observers > 0);
    o->conn->observers--;
    free(o);
}

/* Answer the observers moved to the waking list, one at a time: a reply
 * that fails for lack of memory closes its connection, and the close
 * (fence__observe_conn_closed) takes that connection's other observers off
 * the waking list too, so no freed slot is touched. */
static void answer_waking(fence_server *s)
{
    fence_obs *b;
    while ((b = s->obs.set.waking) != NULL) {
        fence_observer *o = (fence_observer *)b;
        fence_slot *slot = o->slot;
        fence_fsm_elect_state st;
        int rc = b->timed_out ? 0 : fence_fsm_elect_info(s->fsm, b->name, b->name_len, &st);
        char nm[FENCE_NAME_MAX + 128];
        fence__cmd_kind_words(s->fsm, b->name, b->name_len, nm, sizeof(nm));
        bool timed_out = b->timed_out;
        forget(s, o);
        slot->state = SLOT_NEW;
        if (timed_out) {
            char buf[8];
            size_t n = fence_resp_nil_v(buf, sizeof(buf), slot->resp);
            fence__slot_reply(slot, buf, n);
        } else if (rc != 0) {
            fence__slot_error(slot, "WRONGTYPE", nm);
        } else {
            fence__elect_reply_state(slot, &st, false);
        }
    }
}

static void timer_cb(uv_timer_t *t);

/* Arm the timer for uv_now() = due (UINT64_MAX: stop it). */
static void arm_at(fence_server *s, uint64_t due)
{
    s->obs.timer_due = due;
    if (due == UINT64_MAX) {
        uv_timer_stop(&s->obs.timer);
        return;
    }
    uint64_t now = uv_now(s->loop);
    uv_timer_start(&s->obs.timer, timer_cb, due > now ? due - now : 0, 0);
}

/* Arm the timer for the earliest deadline (or stop it): a scan of the
 * parked observers. */
static void rearm(fence_server *s)
{
    if (s->stopping)
        return;
    arm_at(s, fence__obs_first_deadline(&s->obs.set));
}

/* The earliest WAIT ran out: those observers answer nil. */
static void timer_cb(uv_timer_t *t)
{
    fence_server *s = t->data;
    s->obs.timer_due = UINT64_MAX;
    fence__obs_expire(&s->obs.set, uv_now(s->loop));
    answer_waking(s);
    rearm(s);
    fence__conns_flush(s);
}

void fence__observe_init(fence_server *s)
{
    memset(&s->obs, 0, sizeof(s->obs));
    uv_timer_init(s->loop, &s->obs.timer);
    s->obs.timer.data = s;
    s->obs.timer_due = UINT64_MAX;
    fence__obs_init(&s->obs.set, s->fsm);
}

void fence__observe_close(fence_server *s)
{
    uv_timer_stop(&s->obs.timer);
    uv_close((uv_handle_t *)&s->obs.timer, NULL);
}

/* Whether argument a equals word, ignoring case. */
static bool arg_is(const fence_resp_arg *a, const char *word)
{
    return strlen(word) == a->len && strncasecmp(word, a->ptr, a->len) == 0;
}

void fence__observe_cmd(fence_server *s, fence_conn *c, fence_slot *slot,
                        const fence_resp_msg *m)
{
    const fence_resp_arg *name = &m->argv[1];
    if (name->len < 1 || name->len > FENCE_NAME_MAX) {
        fence__slot_error(slot, "ERR", "election name must be 1..256 bytes");
        return;
    }
    bool has_after = false, has_wait = false;
    uint64_t after = 0, wait_ms = 0;
    for (uint32_t i = 2; i < m->argc; i += 2) {
        const fence_resp_arg *k = &m->argv[i];
        bool is_after = arg_is(k, "AFTER"), is_wait = arg_is(k, "WAIT");
        if ((!is_after && !is_wait) || i + 1 >= m->argc || (is_after && has_after) ||
            (is_wait && has_wait)) {
            fence__slot_error(slot, "ERR", "syntax error: ELECTION.OBSERVE name "
                                           "[AFTER revision] [WAIT ms]");
            return;
        }
        const fence_resp_arg *v = &m->argv[i + 1];
        uint64_t x;
        if (fence_resp_parse_u64(v->ptr, v->len, is_wait ? FENCE_WAIT_MS_MAX : INT_REPLY_MAX,
                                 &x) != 0 ||
            (is_wait && x < 1)) {
            fence__slot_error(slot, "ERR", is_wait ? "WAIT must be an integer in 1..86400000"
                                                   : "AFTER must be a revision (an integer)");
            return;
        }
        if (is_after) {
            has_after = true;
            after = x;
        } else {
            has_wait = true;
            wait_ms = x;
        }
    }
    fence_fsm_elect_state st;
    int rc = fence_fsm_elect_info(s->fsm, (const uint8_t *)name->ptr, (uint16_t)name->len, &st);
    if (rc == FENCE_ST_WRONGTYPE) {
        char msg[FENCE_NAME_MAX + 128];
        fence__cmd_kind_words(s->fsm, (const uint8_t *)name->ptr, (uint16_t)name->len, msg,
                              sizeof(msg));
        fence__slot_error(slot, "WRONGTYPE", msg);
        return;
    }
    FENCE_ASSERT(rc == 0);
    if (!has_after || fence__obs_due(rc, &st, after)) {
        fence__elect_reply_state(slot, &st, false);
        return;
    }
    if (!has_wait) {
        char buf[8];
        size_t n = fence_resp_nil_v(buf, sizeof(buf), slot->resp);
        fence__slot_reply(slot, buf, n);
        return;
    }
    if (c->observers >= FENCE_OBSERVERS_PER_CONN || s->obs.set.n >= FENCE_OBSERVERS_MAX) {
        fence__slot_error(slot, "LIMIT", "too many parked ELECTION.OBSERVEs (16 per "
                                         "connection, 10000 in all)");
        return;
    }
    fence_observer *o = malloc(sizeof(*o));
    if (o == NULL) {
        fence__slot_error(slot, "TRYAGAIN", "out of memory; retry later");
        return;
    }
    memset(o, 0, sizeof(*o));
    o->slot = slot;
    o->conn = c;
    o->base.after = after;
    o->base.deadline_ms = uv_now(s->loop) + wait_ms;
    o->base.name_len = (uint16_t)name->len;
    memcpy(o->base.name, name->ptr, name->len);
    fence__obs_park(&s->obs.set, &o->base);
    c->observers++;
    slot->state = SLOT_OBSERVE;
    /* Only an earlier deadline moves the timer (no scan per request). */
    if (o->base.deadline_ms < s->obs.timer_due && !s->stopping)
        arm_at(s, o->base.deadline_ms);
}

void fence__observe_poll(fence_server *s)
{
    if (fence__obs_poll(&s->obs.set, s->fsm)) {
        answer_waking(s);
        rearm(s);
    }
}

void fence__observe_conn_closed(fence_conn *c)
{
    fence_server *s = c->srv;
    fence_obs *lists[2] = {s->obs.set.head, s->obs.set.waking};
    for (int i = 0; i < 2 && c->observers > 0; i++) {
        fence_obs *b = lists[i];
        while (b != NULL && c->observers > 0) {
            fence_obs *next = b->next;
            fence_observer *o = (fence_observer *)b;
            if (o->conn == c) {
                o->slot->state = SLOT_NEW;
                forget(s, o);
            }
            b = next;
        }
    }
    FENCE_ASSERT(c->observers == 0);
    rearm(s);
}
