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
    fence_observer *next;
    fence_observer *prev;
    fence_slot *slot;      /* the parked request (SLOT_OBSERVE) */
    fence_conn *conn;      /* its connection */
    uint64_t after;        /* answer a revision above this */
    uint64_t deadline_ms;  /* uv_now() at which it answers nil */
    bool timed_out;        /* on the waking list: answer nil */
    uint16_t name_len;
    uint8_t name[FENCE_NAME_MAX];
};

/* Remove o from the list whose head is *head. */
static void list_remove(fence_observer **head, fence_observer *o)
{
    if (o->prev != NULL)
        o->prev->next = o->next;
    else
        *head = o->next;
    if (o->next != NULL)
        o->next->prev = o->prev;
    o->next = o->prev = NULL;
}

static void list_push(fence_observer **head, fence_observer *o)
{
    o->prev = NULL;
    o->next = *head;
    if (*head != NULL)
        (*head)->prev = o;
    *head = o;
}

/* Forget o (its slot stays its connection's). */
static void forget(fence_server *s, fence_observer **head, fence_observer *o)
{
    list_remove(head, o);
    FENCE_ASSERT(s->obs.n > 0);
    s->obs.n--;
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
    fence_observer *o;
    while ((o = s->obs.waking) != NULL) {
        fence_slot *slot = o->slot;
        fence_fsm_elect_state st;
        int rc = o->timed_out ? 0 : fence_fsm_elect_info(s->fsm, o->name, o->name_len, &st);
        char nm[FENCE_NAME_MAX + 128];
        fence__cmd_kind_words(s->fsm, o->name, o->name_len, nm, sizeof(nm));
        bool timed_out = o->timed_out;
        forget(s, &s->obs.waking, o);
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
    uint64_t first = UINT64_MAX;
    for (fence_observer *o = s->obs.head; o != NULL; o = o->next)
        if (o->deadline_ms < first)
            first = o->deadline_ms;
    arm_at(s, first);
}

/* The earliest WAIT ran out: those observers answer nil. */
static void timer_cb(uv_timer_t *t)
{
    fence_server *s = t->data;
    s->obs.timer_due = UINT64_MAX;
    uint64_t now = uv_now(s->loop);
    fence_observer *o = s->obs.head;
    while (o != NULL) {
        fence_observer *next = o->next;
        if (o->deadline_ms <= now) {
            list_remove(&s->obs.head, o);
            o->timed_out = true;
            list_push(&s->obs.waking, o);
        }
        o = next;
    }
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
    s->obs.seen_rev = fence_fsm_elect_revision(s->fsm);
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
    if (!has_after || st.revision > after) {
        fence__elect_reply_state(slot, &st, false);
        return;
    }
    if (!has_wait) {
        char buf[8];
        size_t n = fence_resp_nil_v(buf, sizeof(buf), slot->resp);
        fence__slot_reply(slot, buf, n);
        return;
    }
    if (c->observers >= FENCE_OBSERVERS_PER_CONN || s->obs.n >= FENCE_OBSERVERS_MAX) {
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
    o->after = after;
    o->deadline_ms = uv_now(s->loop) + wait_ms;
    o->name_len = (uint16_t)name->len;
    memcpy(o->name, name->ptr, name->len);
    list_push(&s->obs.head, o);
    s->obs.n++;
    c->observers++;
    slot->state = SLOT_OBSERVE;
    /* Only an earlier deadline moves the timer (no scan per request). */
    if (o->deadline_ms < s->obs.timer_due && !s->stopping)
        arm_at(s, o->deadline_ms);
}

void fence__observe_poll(fence_server *s)
{
    uint64_t rev = fence_fsm_elect_revision(s->fsm);
    if (rev == s->obs.seen_rev)
        return;
    s->obs.seen_rev = rev; /* a restore may lower it: any change wakes */
    fence_observer *o = s->obs.head;
    while (o != NULL) {
        fence_observer *next = o->next;
        fence_fsm_elect_state st;
        int rc = fence_fsm_elect_info(s->fsm, o->name, o->name_len, &st);
        if (rc != 0 || st.revision > o->after) {
            list_remove(&s->obs.head, o);
            list_push(&s->obs.waking, o);
        }
        o = next;
    }
    if (s->obs.waking != NULL) {
        answer_waking(s);
        rearm(s);
    }
}

void fence__observe_conn_closed(fence_conn *c)
{
    fence_server *s = c->srv;
    fence_observer **lists[2] = {&s->obs.head, &s->obs.waking};
    for (int i = 0; i < 2 && c->observers > 0; i++) {
        fence_observer *o = *lists[i];
        while (o != NULL && c->observers > 0) {
            fence_observer *next = o->next;
            if (o->conn == c) {
                o->slot->state = SLOT_NEW;
                forget(s, lists[i], o);
            }
            o = next;
        }
    }
    FENCE_ASSERT(c->observers == 0);
    rearm(s);
}
