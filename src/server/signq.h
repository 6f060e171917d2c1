/* Signed grants off the loop thread (LOCK / ACQUIRE ... SIGNED).
 *
 * An Ed25519 signature costs 20-25 us on the development VM, and fenced
 * used to compute it on the loop thread while it applied a batch: 64 grants
 * held the loop for 1.5 ms in which it read no request and proposed
 * nothing, so signed grants ran at 52-77% of unsigned ones.  The queue
 * hands each signature to a worker thread instead: the grant's slot waits
 * (SLOT_SIGNING) while the loop goes on, and the reply, bytes for bytes
 * what the loop would have written (Ed25519 is deterministic), is made
 * final on the loop thread when the worker is done.  There is a worker per
 * online CPU (at most 4): the 64 grants of one batch are signed on every
 * core that is free, in about half the time on two.  Replies still leave in
 * request order: the slot keeps its place in its connection's queue.
 *
 * Each job carries a copy of the key taken on the loop thread when the job
 * is queued, so a SIGHUP reload (main.c, on the loop thread) never races
 * the worker; the copy is wiped when the job ends.  A slot whose
 * connection closes meanwhile is orphaned (conn.c on_slot_orphan) and
 * freed when its job ends.  Every job ends, also at shutdown
 * (fence__signq_close drains the queue before the loop ends).
 *
 * Without the worker (it could not start, or the queue is closing)
 * fence__signq_submit returns false and the caller signs inline, as
 * before. */
#ifndef FENCE_SERVER_SIGNQ_H
#define FENCE_SERVER_SIGNQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "token/signtok.h"

typedef struct fence_signq fence_signq;
struct fence_slot;

/* Room for any signed grant's reply: *2, the bulk token, the lease. */
#define FENCE_SIGNQ_REPLY_MAX (FENCE_SIGNTOK_BUF_SIZE + 64)

/* The reply to a signed grant: the bulk signed token, or with_lease the
 * array [signed token, lease], into buf (FENCE_SIGNQ_REPLY_MAX bytes).
 * Returns its length (0 only if name or token cannot be signed, which the
 * callers rule out).  Pure apart from the signature. */
size_t fence__signq_reply(const fence_signtok_signer *signer, const char *name,
                          size_t name_len, uint64_t token, uint64_t lease,
                          bool with_lease, char *buf, size_t cap);

/* Start the queue's worker threads and its wake-up handle on loop.  0, or
 * -1 (out of memory, no thread at all): the caller signs inline. */
int fence__signq_start(fence_signq **out, uv_loop_t *loop);

/* Queue slot's signature: name[0..name_len) and token (lease for
 * with_lease) are copied, and so is *signer.  The slot must be unanswered
 * and is left SLOT_SIGNING; its reply comes from a later loop callback.
 * false (nothing queued) if q is NULL, closing or out of memory. */
bool fence__signq_submit(fence_signq *q, struct fence_slot *slot,
                         const fence_signtok_signer *signer, const char *name,
                         size_t name_len, uint64_t token, uint64_t lease,
                         bool with_lease);

/* Finish every queued job (their replies are made final now; orphans are
 * freed), stop the workers and close the handle.  The queue is freed by
 * the handle's close callback.  NULL is a no-op. */
void fence__signq_close(fence_signq *q);

#endif /* FENCE_SERVER_SIGNQ_H */
