/* The shared connection layer (see conn.h).
 *
 * Output order.  A connection's reply bytes live in three places, in this
 * order on the wire: bytes already given to the transport (out_pending),
 * the gathered buffer wbuf, then the slot queue head..tail.  A reply for
 * the current request goes into wbuf when the queue is empty, else into a
 * ready slot at the tail; a slot at the head that is answered goes straight
 * into wbuf, and ready slots at the head move into wbuf when the connection
 * is flushed.  So replies leave in request order whatever order the daemon
 * fills the slots in.  wbuf is written straight from where it is when
 * nothing is queued ahead of it (plain streams), else handed over. */
#include "net/conn.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/limits.h"
#include "base/log.h"

/* First read buffer; it grows by doubling up to limits.rbuf_max. */
#define RBUF_INITIAL (16 * 1024)
/* Grow the read buffer when less than this is free. */
#define RBUF_MIN_FREE 4096
/* An empty read buffer larger than this is given back. */
#define RBUF_SHRINK (64 * 1024)
/* Gathered output is handed to the transport once it reaches this, even
 * in the middle of a pipeline (so the slow-reader check sees it). */
#define WBUF_CHUNK (16 * 1024)
/* First output buffer: small enough for malloc's per-thread cache (a 4 KB
 * one came from the main arena on every reply); it grows by doubling. */
#define WBUF_INITIAL 1024
/* An output buffer the kernel took whole is kept for the next replies up
 * to this size (a larger one, after a big reply, is given back). */
#define WBUF_KEEP (16 * 1024)

/* Freed slots a layer keeps for reuse (fence__net_slot_new); fenced's are
 * about 360 bytes, so at most 180 KB is kept. */
#define FENCE_NET_FREE_SLOTS 512

static void conn_process(fence_net_conn *c);
static void conn_flush(fence_net_conn *c);
static void resume_later(fence_net_conn *c);
static void resume_cancel(fence_net_conn *c);

/* ---- replies -------------------------------------------------------------- */

/* Put c on the layer's list of connections to flush. */
static void conn_mark_dirty(fence_net_conn *c)
{
    if (c->dirty || c->closing)
        return;
    c->dirty = true;
    c->dirty_next = NULL;
    if (c->net->dirty_tail != NULL)
        c->net->dirty_tail->dirty_next = c;
    else
        c->net->dirty = c;
    c->net->dirty_tail = c;
}

/* Close the connection the guard chose to make room; false for none. */
static bool evict(fence_net_conn *victim)
{
    if (victim == NULL)
        return false;
    fence__net_conn_close(victim);
    return true;
}

/* Whether c may grow its buffers by more bytes; a connection not logged
 * in whose share is full makes room by closing the oldest others (a few at
 * most: each holds at least a first buffer). */
static bool mem_reserve(fence_net_conn *c, size_t more)
{
    bool ok = fence__net_guard_mem_ok(c, more);
    for (int i = 0; i < 8 && !ok && fence__net_conn_prelogin(c) &&
                    evict(fence__net_guard_evictee_mem(c)); i++)
        ok = fence__net_guard_mem_ok(c, more);
    return ok;
}

/* Room for n more bytes in wbuf; false if memory ran out. */
static bool wbuf_reserve(fence_net_conn *c, size_t n)
{
    if (c->wcap - c->wlen >= n)
        return true;
    size_t cap = c->wcap ? c->wcap : WBUF_INITIAL;
    while (cap - c->wlen < n)
        cap *= 2;
    if (!mem_reserve(c, cap - c->wcap))
        return false;
    char *p = realloc(c->wbuf, cap);
    if (p == NULL)
        return false;
    c->wbuf = p;
    c->wcap = cap;
    fence__net_guard_account(c);
    return true;
}

/* Room for the current request's reply: the tail of wbuf when no slot is
 * queued, else a new ready slot's buffer. */
char *fence__net_reply_buf(fence_net_conn *c, size_t need)
{
    FENCE_ASSERT(c != NULL);
    if (c->closing)
        return NULL;
    if (c->head == NULL) {
        if (!wbuf_reserve(c, need))
            goto out_nomem;
        char *p = c->wbuf + c->wlen;
        c->wlen += need;
        conn_mark_dirty(c);
        return p;
    }
    fence_net_slot *slot = fence__net_slot_new(c);
    if (slot == NULL)
        goto out_nomem;
    slot->out = malloc(need ? need : 1);
    if (slot->out == NULL) {
        slot->state = FENCE_NET_SLOT_READY; /* freed with the queue */
        goto out_nomem;
    }
    slot->len = need;
    slot->state = FENCE_NET_SLOT_READY;
    conn_mark_dirty(c);
    return slot->out;

out_nomem:
    FENCE_LOG_E("conn %" PRIu64 ": out of memory for a reply; closing", c->id);
    fence__net_conn_close(c);
    return NULL;
}

/* Answer the current request now (a copy of bytes). */
void fence__net_reply(fence_net_conn *c, const char *bytes, size_t len)
{
    char *p = fence__net_reply_buf(c, len);
    if (p != NULL)
        memcpy(p, bytes, len);
}

/* Encode "-CODE msg" into a bounded buffer (a long message is cut). */
static size_t encode_error(char *buf, size_t cap, const char *code,
                           const char *msg)
{
    size_t n = fence_resp_error(buf, cap, code, msg);
    if (n > cap) {
        n = fence_resp_error(buf, cap, code, "(message too long)");
        FENCE_ASSERT(n <= cap);
    }
    return n;
}

/* Answer the current request with an error now. */
void fence__net_reply_error(fence_net_conn *c, const char *code,
                            const char *msg)
{
    char buf[640];
    fence__net_reply(c, buf, encode_error(buf, sizeof(buf), code, msg));
}

/* Append a pending slot to c's queue: a freed one again when the layer
 * keeps one (a calloc per request went past malloc's per-thread cache, and
 * a batch of 64 frees more than that cache holds), zeroed like a new one. */
fence_net_slot *fence__net_slot_new(fence_net_conn *c)
{
    FENCE_ASSERT(c != NULL);
    fence_net *net = c->net;
    FENCE_ASSERT(net->lim.slot_size >= sizeof(fence_net_slot));
    fence_net_slot *slot = net->free_slots;
    if (slot != NULL) {
        net->free_slots = slot->next;
        net->n_free_slots--;
        memset(slot, 0, net->lim.slot_size);
    } else {
        slot = calloc(1, net->lim.slot_size);
        if (slot == NULL)
            return NULL;
    }
    slot->conn = c;
    slot->net = net;
    slot->state = FENCE_NET_SLOT_PENDING;
    if (c->tail != NULL)
        c->tail->next = slot;
    else
        c->head = slot;
    c->tail = slot;
    c->n_slots++;
    return slot;
}

/* Free a slot in no queue (onto its layer's free list while that has
 * room and the layer runs). */
void fence__net_slot_free(fence_net_slot *slot)
{
    if (slot == NULL)
        return;
    free(slot->out);
    fence_net *net = slot->net;
    if (net != NULL && !net->stopping && net->n_free_slots < FENCE_NET_FREE_SLOTS) {
        slot->out = NULL;
        slot->next = net->free_slots;
        net->free_slots = slot;
        net->n_free_slots++;
        return;
    }
    free(slot);
}

/* Make a slot's reply final. */
void fence__net_slot_reply(fence_net_slot *slot, const char *bytes,
                           size_t len)
{
    FENCE_ASSERT(slot != NULL);
    FENCE_ASSERT(slot->state != FENCE_NET_SLOT_READY);
    if (slot->conn == NULL) {
        fence__net_slot_free(slot);
        return;
    }
    fence_net_conn *c = slot->conn;
    if (c->head == slot && !c->closing) {
        /* Every reply ahead of it is in wbuf or further on: its bytes go
         * straight after them, and the slot is done (no copy of its own). */
        slot->state = FENCE_NET_SLOT_READY; /* freed with the queue on close */
        if (!wbuf_reserve(c, len)) {
            FENCE_LOG_E("conn %" PRIu64 ": out of memory for a reply; closing", c->id);
            fence__net_conn_close(c);
            return;
        }
        memcpy(c->wbuf + c->wlen, bytes, len);
        c->wlen += len;
        c->head = slot->next;
        if (c->head == NULL)
            c->tail = NULL;
        c->n_slots--;
        fence__net_slot_free(slot);
        conn_mark_dirty(c);
        return;
    }
    char *out = malloc(len ? len : 1);
    if (out == NULL) {
        /* Without memory for the reply the connection cannot stay in
         * order; drop it. */
        FENCE_LOG_E("conn %" PRIu64 ": out of memory for a reply; closing",
                    slot->conn->id);
        slot->state = FENCE_NET_SLOT_READY;
        fence__net_conn_close(slot->conn);
        return;
    }
    memcpy(out, bytes, len);
    slot->out = out;
    slot->len = len;
    slot->state = FENCE_NET_SLOT_READY;
    conn_mark_dirty(slot->conn);
}

/* Make a slot's reply an error. */
void fence__net_slot_error(fence_net_slot *slot, const char *code,
                           const char *msg)
{
    char buf[640];
    fence__net_slot_reply(slot, buf, encode_error(buf, sizeof(buf), code, msg));
}

/* ---- output ----------------------------------------------------------------- */

/* Move the ready slots at the head of the queue into wbuf.  false if
 * memory ran out (the connection is then closed). */
static bool drain_ready(fence_net_conn *c)
{
    while (c->head != NULL && c->head->state == FENCE_NET_SLOT_READY) {
        fence_net_slot *s = c->head;
        if (!wbuf_reserve(c, s->len)) {
            FENCE_LOG_E("conn %" PRIu64 ": out of memory for output; "
                        "closing", c->id);
            fence__net_conn_close(c);
            return false;
        }
        memcpy(c->wbuf + c->wlen, s->out, s->len);
        c->wlen += s->len;
        c->head = s->next;
        if (c->head == NULL)
            c->tail = NULL;
        c->n_slots--;
        fence__net_slot_free(s);
    }
    return true;
}

/* True once nothing more is owed to the peer. */
static bool all_sent(const fence_net_conn *c)
{
    return c->out_pending == 0 && c->wlen == 0 && c->n_slots == 0;
}

/* Write wbuf straight from where it is when nothing is queued ahead of
 * it (conn.h try_write): the usual case, a reply the kernel takes whole,
 * then costs one write(2) and no allocation, and wbuf stays for the next
 * reply.  Returns true when nothing is left to hand over (all written, or
 * c closed on an error); what the kernel did not take stays in wbuf. */
static bool write_direct(fence_net_conn *c)
{
    if (c->tr->try_write == NULL || c->out_pending != 0)
        return false;
    int n = c->tr->try_write(c, c->wbuf, c->wlen);
    if (n < 0) {
        FENCE_LOG_D("conn %" PRIu64 ": write: %s", c->id, uv_strerror(n));
        fence__net_conn_close(c);
        return true;
    }
    FENCE_ASSERT((size_t)n <= c->wlen);
    if ((size_t)n < c->wlen) {
        memmove(c->wbuf, c->wbuf + n, c->wlen - (size_t)n);
        c->wlen -= (size_t)n;
        return false;
    }
    c->wlen = 0;
    if (c->wcap > WBUF_KEEP) {
        free(c->wbuf);
        c->net->freed_since_trim += c->wcap;
        c->wbuf = NULL;
        c->wcap = 0;
        fence__net_guard_account(c);
    }
    if (c->close_after_flush && all_sent(c))
        fence__net_conn_close(c);
    return true;
}

/* Hand wbuf to the transport and check the slow-reader bound. */
static void write_out(fence_net_conn *c)
{
    if (c->wlen == 0 || c->closing || c->held)
        return;
    if (write_direct(c))
        return;
    char *buf = c->wbuf;
    size_t len = c->wlen;
    c->wbuf = NULL;
    c->wlen = c->wcap = 0;
    c->out_pending += len;
    int rc = c->tr->write(c, buf, len);
    if (rc != 0) {
        c->out_pending -= len;
        FENCE_LOG_D("conn %" PRIu64 ": write: %s", c->id, uv_strerror(rc));
        fence__net_conn_close(c);
        return;
    }
    if (fence__net_guard_after_write(c)) {
        fence__net_conn_close(c);
        return;
    }
    size_t queued = c->tr->queued(c);
    if (queued > c->net->lim.max_obuf) {
        FENCE_LOG_W("conn %" PRIu64 ": %zu reply bytes unsent (max-obuf %"
                    PRIu64 "); disconnecting a slow reader", c->id, queued,
                    c->net->lim.max_obuf);
        c->net->stat_slow_closed++;
        fence__net_conn_close(c);
    }
}

/* Send what is ready on c; close it if it was waiting for that; read on if
 * the pipeline has room again. */
static void conn_flush(fence_net_conn *c)
{
    if (c->closing || c->held)
        return; /* a held connection sends when its hold ends */
    if (!drain_ready(c))
        return;
    write_out(c);
    if (c->closing)
        return;
    if (c->close_after_flush) {
        if (all_sent(c))
            fence__net_conn_close(c);
        return;
    }
    if (!c->reading && !c->in_input && c->n_slots < c->net->lim.max_pipeline)
        resume_later(c);
}

/* ---- resuming ---------------------------------------------------------------- */

/* Requests are parsed in libuv's poll phase (a read) or, when a connection
 * resumes (its pipeline drained, a hold ended), in the idle phase of the
 * next loop turn: never from a timer or check callback, so a daemon that
 * batches the requests of a loop turn and closes the batch in its check
 * callback (fence-store) always finds them inside the turn's batch. */
static void on_resume_idle(uv_idle_t *h)
{
    fence_net *net = h->data;
    fence_net_conn *list = net->resumes;
    net->resumes = NULL;
    uv_idle_stop(h);
    /* Take the list first: processing one may schedule it (or others)
     * again, onto the new list; a connection closed meanwhile was taken
     * off it by resume_cancel. */
    for (fence_net_conn *c = list; c != NULL; c = c->resume_next)
        c->resume_prev = NULL;
    while (list != NULL) {
        fence_net_conn *c = list;
        list = c->resume_next;
        if (list != NULL)
            list->resume_prev = NULL;
        c->resume_next = NULL;
        c->resume = false;
        if (!c->closing && !c->held)
            conn_process(c);
    }
}

/* Parse c's buffered input and read on, in the next idle phase. */
static void resume_later(fence_net_conn *c)
{
    fence_net *net = c->net;
    if (c->resume || c->closing)
        return;
    c->resume = true;
    c->resume_prev = NULL;
    c->resume_next = net->resumes;
    if (net->resumes != NULL)
        net->resumes->resume_prev = c;
    net->resumes = c;
    uv_idle_start(&net->resume_idle, on_resume_idle);
}

/* Take c off the resume list (it closes). */
static void resume_cancel(fence_net_conn *c)
{
    if (!c->resume)
        return;
    if (c->resume_prev != NULL)
        c->resume_prev->resume_next = c->resume_next;
    else if (c->net->resumes == c)
        c->net->resumes = c->resume_next;
    if (c->resume_next != NULL)
        c->resume_next->resume_prev = c->resume_prev;
    c->resume_prev = c->resume_next = NULL;
    c->resume = false;
}

/* Flush every connection with new output. */
void fence__net_flush(fence_net *net)
{
    while (net->dirty != NULL) {
        fence_net_conn *c = net->dirty;
        net->dirty = c->dirty_next;
        if (net->dirty == NULL)
            net->dirty_tail = NULL;
        c->dirty_next = NULL;
        c->dirty = false;
        conn_flush(c);
    }
}

/* End of a loop turn: send what the daemon answered during it. */
static void on_check(uv_check_t *h)
{
    fence__net_flush(h->data);
}

/* A transport finished a write. */
void fence__net_conn_written(fence_net_conn *c, size_t len, int status)
{
    FENCE_ASSERT(c->out_pending >= len);
    c->out_pending -= len;
    fence__net_guard_account(c);
    if (c->closing)
        return;
    if (status != 0) {
        FENCE_LOG_D("conn %" PRIu64 ": write failed: %s", c->id,
                    uv_strerror(status));
        fence__net_conn_close(c);
        return;
    }
    if (c->close_after_flush && all_sent(c))
        fence__net_conn_close(c);
}

/* ---- closing ------------------------------------------------------------------ */

/* The handle is closed: free the connection. */
void fence__net_conn_closed(uv_handle_t *h)
{
    fence_net_conn *c = h->data;
    c->net->freed_since_trim += c->rcap + c->wcap;
    free(c->rbuf);
    free(c->wbuf);
    free(c);
}

/* Hand the unanswered slots over, unlink c, close its handle. */
void fence__net_conn_close(fence_net_conn *c)
{
    if (c == NULL || c->closing)
        return;
    fence_net *net = c->net;
    c->closing = true;
    fence__net_guard_account(c);
    fence__net_guard_unhold(c);
    resume_cancel(c);
    FENCE_LOG_D("conn %" PRIu64 ": closed", c->id);
    if (net->hooks.on_close != NULL)
        net->hooks.on_close(net->hooks.ctx, c);
    fence_net_slot *slot = c->head;
    c->head = c->tail = NULL;
    c->n_slots = 0;
    while (slot != NULL) {
        fence_net_slot *next = slot->next;
        slot->next = NULL;
        bool keep = false;
        if (slot->state == FENCE_NET_SLOT_PENDING &&
            net->hooks.on_slot_orphan != NULL)
            keep = net->hooks.on_slot_orphan(net->hooks.ctx, slot);
        if (keep)
            slot->conn = NULL; /* the daemon frees it when it answers */
        else
            fence__net_slot_free(slot);
        slot = next;
    }
    if (c->dirty) {
        fence_net_conn **pp = &net->dirty;
        fence_net_conn *prev = NULL;
        while (*pp != c) {
            prev = *pp;
            pp = &(*pp)->dirty_next;
        }
        *pp = c->dirty_next;
        if (net->dirty_tail == c)
            net->dirty_tail = prev;
        c->dirty_next = NULL;
        c->dirty = false;
    }
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        net->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    FENCE_ASSERT(net->n_conns > 0);
    net->n_conns--;
    c->reading = false;
    c->tr->close(c);
}

/* Stop parsing, answer what is owed, then close. */
void fence__net_close_after_flush(fence_net_conn *c)
{
    if (c->closing || c->close_after_flush)
        return;
    c->close_after_flush = true;
    if (c->reading) {
        c->tr->read_stop(c);
        c->reading = false;
    }
    conn_mark_dirty(c);
}

/* ---- input ------------------------------------------------------------------- */

/* Grow the read buffer when little is free, up to the bound. */
void fence__net_conn_rbuf(fence_net_conn *c, char **p, size_t *room)
{
    size_t max = fence__net_conn_rbuf_max(c);
    if (c->rcap - c->rlen < RBUF_MIN_FREE && c->rcap < max) {
        size_t cap = c->rcap ? c->rcap * 2
                             : fence__net_conn_prelogin(c) ? FENCE_PRELOGIN_RBUF_INITIAL
                                                           : RBUF_INITIAL;
        if (cap > max)
            cap = max;
        bool ok = mem_reserve(c, cap - c->rcap);
        char *nb = ok ? realloc(c->rbuf, cap) : NULL;
        if (nb != NULL) {
            c->rbuf = nb;
            c->rcap = cap;
            c->mem_refused = false;
            fence__net_guard_account(c);
        } else if (!ok) {
            c->mem_refused = true;
        }
    }
    /* A connection logged out (RESET) may hold a larger buffer than its
     * bound now: it reads no further than the bound. */
    size_t end = c->rcap < max ? c->rcap : max;
    *p = c->rbuf + c->rlen;
    *room = c->rlen < end ? end - c->rlen : 0;
}

/* Stop reading (pipeline full, or closing after an error). */
static void conn_pause(fence_net_conn *c)
{
    if (c->reading) {
        c->tr->read_stop(c);
        c->reading = false;
    }
}

/* Read again when there is room for more requests. */
static void conn_resume(fence_net_conn *c)
{
    if (!c->reading && !c->closing && !c->close_after_flush && !c->held) {
        if (c->tr->read_start(c) == 0)
            c->reading = true;
    }
}

/* A final error reply, then close once it is sent. */
static void conn_fail(fence_net_conn *c, int status, const char *detail)
{
    fence_net *net = c->net;
    const char *code = "ERR";
    char msg[512];
    if (fence__net_conn_prelogin(c) &&
        (status == FENCE_NET_EREQ_TOOBIG || status == FENCE_RESP_ETOOBIG)) {
        /* The daemon's limits are not the ones that refused it. */
        net->stat_prelogin_refused++;
        if (c->mem_refused) {
            code = "LIMIT";
            snprintf(msg, sizeof(msg),
                     "the memory for connections not logged in is full (1/%d of "
                     "max-conn-memory); log in on a connection that has, or try again later",
                     FENCE_PRELOGIN_MEMORY_DIV);
        } else {
            code = "NOAUTH";
            snprintf(msg, sizeof(msg),
                     "%s: before login a request may have at most %d arguments of %d bytes "
                     "(AUTH first); closing", detail ? detail : "Protocol error: request too "
                     "large", FENCE_PRELOGIN_ARGS_MAX, FENCE_PRELOGIN_BULK_MAX);
        }
    } else if (net->hooks.proto_error != NULL) {
        msg[0] = '\0';
        net->hooks.proto_error(net->hooks.ctx, c, status, detail, &code, msg,
                               sizeof(msg));
    } else if (status == FENCE_NET_EREQ_TOOBIG) {
        snprintf(msg, sizeof(msg),
                 "Protocol error: request larger than the read buffer");
    } else {
        snprintf(msg, sizeof(msg), "%s", detail ? detail : "Protocol error");
    }
    FENCE_LOG_D("conn %" PRIu64 ": %s", c->id,
                detail ? detail : "request larger than the read buffer");
    conn_pause(c);
    c->rlen = 0;
    fence__net_reply_error(c, code, msg);
    fence__net_close_after_flush(c);
}

/* Parse and hand over every complete request while the pipeline has
 * room; pause reading when it is full. */
static void conn_process(fence_net_conn *c)
{
    fence_net *net = c->net;
    size_t off = 0;
    bool partial = false;
    if (c->in_input)
        return;
    c->in_input = true;
    while (off < c->rlen && !c->closing && !c->close_after_flush && !c->held) {
        if (c->n_slots >= net->lim.max_pipeline) {
            if (!drain_ready(c))
                break;
            if (c->n_slots >= net->lim.max_pipeline) {
                conn_pause(c);
                break;
            }
        }
        /* Limits per request: a login in the middle of a pipeline lifts
         * the pre-login ones for the requests after it. */
        ssize_t n = fence_resp_parse(c->rbuf + off, c->rlen - off,
                                     fence__net_conn_resp_limits(c), net->msg);
        if (n == FENCE_RESP_PARTIAL) {
            partial = true;
            break;
        }
        if (n < 0) {
            c->in_input = false;
            conn_fail(c, (int)n, net->msg->error);
            return;
        }
        FENCE_ASSERT((size_t)n <= c->rlen - off);
        off += (size_t)n;
        if (net->msg->argc == 0)
            continue;
        net->stat_requests++;
        net->hooks.on_request(net->hooks.ctx, c, net->msg);
        if (c->wlen >= WBUF_CHUNK)
            write_out(c);
    }
    c->in_input = false;
    if (c->closing)
        return;
    if (c->close_after_flush) {
        c->rlen = 0;
        conn_flush(c);
        return;
    }
    if (off > 0) {
        memmove(c->rbuf, c->rbuf + off, c->rlen - off);
        c->rlen -= off;
    }
    fence__net_guard_after_input(c, off > 0);
    if (partial && c->rlen >= fence__net_conn_rbuf_max(c)) {
        conn_fail(c, FENCE_NET_EREQ_TOOBIG, NULL);
        conn_flush(c);
        return;
    }
    if (c->rlen == 0 && c->rcap > RBUF_SHRINK) {
        free(c->rbuf); /* a big request has passed: give its memory back */
        c->rbuf = NULL;
        c->rcap = 0;
        fence__net_guard_account(c);
    }
    if (c->n_slots < net->lim.max_pipeline)
        conn_resume(c);
    conn_flush(c);
}

/* A hold ended (conn_guard.c): parse the requests that waited, read on,
 * send what is owed. */
void fence__net_conn_release(fence_net_conn *c)
{
    FENCE_ASSERT(!c->held);
    if (c->closing)
        return;
    conn_mark_dirty(c);
    if (!c->close_after_flush)
        resume_later(c);
}

/* Bytes placed in the read buffer by the transport. */
void fence__net_conn_input(fence_net_conn *c, size_t n)
{
    if (c->closing || c->close_after_flush)
        return; /* input after a fatal error or QUIT is ignored */
    c->rlen += n;
    FENCE_ASSERT(c->rlen <= c->rcap);
    conn_process(c);
}

/* End of input or a read error. */
void fence__net_conn_eof(fence_net_conn *c, int status)
{
    if (c->closing)
        return;
    if (status == UV_ENOBUFS) {
        conn_fail(c, FENCE_NET_EREQ_TOOBIG, NULL);
        conn_flush(c);
        return;
    }
    if (status != UV_EOF)
        FENCE_LOG_D("conn %" PRIu64 ": read: %s", c->id, uv_strerror(status));
    if (status == UV_EOF && c->net->lim.eof_flush) {
        /* Half-closed, maybe: send the replies it is owed, then close. */
        c->rlen = 0;
        fence__net_close_after_flush(c);
        conn_flush(c);
        return;
    }
    fence__net_conn_close(c);
}

/* ---- accepting (the listeners themselves: conn_listen.c) ------------------------ */

/* Accept one client, refusing it politely beyond max_clients (the
 * listeners' callback, conn_listen.c). */
void fence__net_on_connection(uv_stream_t *server, int status)
{
    fence_net *net = server->data;
    if (status != 0) {
        FENCE_LOG_W("accept: %s", uv_strerror(status));
        return;
    }
    fence_net_conn *c = calloc(1, net->lim.conn_size);
    if (c == NULL) {
        FENCE_LOG_E("accept: out of memory");
        return;
    }
    c->net = net;
    c->id = ++net->next_id;
    c->opened_ms = c->active_ms = uv_now(net->loop);
    if (net->hooks.on_open != NULL)
        net->hooks.on_open(net->hooks.ctx, c);
    if (server == (uv_stream_t *)&net->tr_tcp) {
        uv_tcp_init(net->loop, &c->h.tcp);
        c->tr = net->tr_tcp_tr;
    } else if (server->type == UV_TCP) {
        uv_tcp_init(net->loop, &c->h.tcp);
        c->tr = net->tcp_tr;
    } else {
        uv_pipe_init(net->loop, &c->h.pipe, 0);
        c->tr = net->pipe_tr;
    }
    c->h.handle.data = c;
    c->next = net->conns;
    if (net->conns != NULL)
        net->conns->prev = c;
    net->conns = c;
    net->n_conns++;
    if (uv_accept(server, &c->h.stream) != 0 || net->stopping) {
        fence__net_conn_close(c);
        return;
    }
    if (server->type == UV_TCP)
        uv_tcp_nodelay(&c->h.tcp, 1);
    if (c->tr->open != NULL && c->tr->open(c) != 0) {
        fence__net_conn_close(c);
        return;
    }
    net->stat_accepted++;
    if (net->n_conns > net->lim.max_clients && !evict(fence__net_guard_evictee(net, c))) {
        const char *why = net->hooks.refuse_msg ? net->hooks.refuse_msg
                                                : "max number of clients reached";
        net->stat_refused++;
        FENCE_LOG_W("refused a client: %s", why);
        fence__net_reply_error(c, "LIMIT", why);
        fence__net_close_after_flush(c);
        conn_flush(c);
        return;
    }
    FENCE_LOG_D("conn %" PRIu64 ": accepted", c->id);
    conn_resume(c);
}

/* The guard's sweep found c timed out: tell it why and close it once the
 * answer is out. */
static void guard_time_out(fence_net_conn *c, const char *why)
{
    fence__net_reply_error(c, "ERR", why);
    fence__net_close_after_flush(c);
    fence__net_flush(c->net);
}

/* What the guard's timers do (conn.h fence_net_guard_acts). */
static const fence_net_guard_acts guard_acts = {
    fence__net_conn_close, guard_time_out, fence__net_conn_release,
};

/* Set up the layer. */
int fence__net_init(fence_net *net, uv_loop_t *loop,
                    const fence_net_limits *lim, const fence_net_hooks *hooks)
{
    FENCE_ASSERT(net != NULL);
    FENCE_ASSERT(lim != NULL);
    FENCE_ASSERT(hooks != NULL);
    FENCE_ASSERT(hooks->on_request != NULL);
    memset(net, 0, sizeof(*net));
    net->loop = loop;
    net->lim = *lim;
    if (net->lim.slot_size < sizeof(fence_net_slot))
        net->lim.slot_size = sizeof(fence_net_slot);
    if (net->lim.conn_size < sizeof(fence_net_conn))
        net->lim.conn_size = sizeof(fence_net_conn);
    if (net->lim.max_pipeline == 0)
        net->lim.max_pipeline = 1;
    net->hooks = *hooks;
    net->on_connection = fence__net_on_connection;
    net->resp_prelogin = net->lim.resp;
    if (net->resp_prelogin.args_max > FENCE_PRELOGIN_ARGS_MAX)
        net->resp_prelogin.args_max = FENCE_PRELOGIN_ARGS_MAX;
    if (net->resp_prelogin.bulk_max > FENCE_PRELOGIN_BULK_MAX)
        net->resp_prelogin.bulk_max = FENCE_PRELOGIN_BULK_MAX;
    if (net->resp_prelogin.inline_max > FENCE_PRELOGIN_INLINE_MAX)
        net->resp_prelogin.inline_max = FENCE_PRELOGIN_INLINE_MAX;
    /* Big buffers are mmapped and go back to the kernel when freed (see
     * FENCE_MMAP_THRESHOLD); process-wide, as only daemons use this layer. */
    (void)mallopt(M_MMAP_THRESHOLD, FENCE_MMAP_THRESHOLD);
    net->msg = malloc(sizeof(*net->msg));
    if (net->msg == NULL)
        return UV_ENOMEM;
    uv_check_init(loop, &net->check);
    net->check.data = net;
    uv_check_start(&net->check, on_check);
    uv_unref((uv_handle_t *)&net->check);
    uv_idle_init(loop, &net->resume_idle);
    net->resume_idle.data = net;
    uv_unref((uv_handle_t *)&net->resume_idle);
    fence__net_guard_start(net, &guard_acts);
    return 0;
}

/* Close listeners and connections. */
void fence__net_stop(fence_net *net)
{
    fence__net_close_listeners(net);
    fence__net_guard_stop(net);
    while (net->conns != NULL)
        fence__net_conn_close(net->conns);
    if (net->tr_ctx_stop != NULL) {
        net->tr_ctx_stop(net->tr_ctx);
        net->tr_ctx_stop = NULL;
        net->tr_ctx = NULL;
    }
    if (net->loop != NULL && !uv_is_closing((uv_handle_t *)&net->check))
        uv_close((uv_handle_t *)&net->check, NULL);
    if (net->loop != NULL && !uv_is_closing((uv_handle_t *)&net->resume_idle))
        uv_close((uv_handle_t *)&net->resume_idle, NULL);
}

/* Free the parse scratch and the kept slots. */
void fence__net_free(fence_net *net)
{
    free(net->msg);
    net->msg = NULL;
    while (net->free_slots != NULL) {
        fence_net_slot *slot = net->free_slots;
        net->free_slots = slot->next;
        free(slot);
    }
    net->n_free_slots = 0;
}
