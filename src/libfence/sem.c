/* libfence's semaphore calls (include/fence.h "Semaphores of slots"): one
 * fenced SEM.* command each, through the client's pool and its retries
 * (fence__call: TRYAGAIN, lost connections, NOTLEADER redirects; ACQUIRE
 * carries a REQID, so a retried acquire is applied once, and the server
 * answers a lease that holds a slot with that slot again anyway). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "libfence/internal.h"
#include "libfence/pure.h"
#include "base/assert.h"
#include "base/limits.h"

#define U64_BUF 24

_Static_assert(FENCE_SEM_N_MAX == FENCE_SEM_PERMITS_MAX, "the header's n matches the server's");
_Static_assert(FENCE_SEM_FENCE_BUF_SIZE == FENCE_NAME_MAX + 1, "a fence name and its NUL");

int fence_sem_fence_name(const char *name, uint32_t slot, char *buf, size_t cap)
{
    if (name == NULL || buf == NULL || cap == 0)
        return fence__fail(FENCE_EINVAL, "name and buf must not be NULL");
    int n = snprintf(buf, cap, "%s#%" PRIu32, name, slot);
    if (n < 0 || (size_t)n >= cap || n > FENCE_NAME_MAX) {
        buf[0] = '\0';
        return fence__fail(FENCE_EINVAL, "the slot's fence name does not fit %d bytes",
                           FENCE_NAME_MAX);
    }
    return 0;
}

/* The name must be 1..FENCE_NAME_MAX bytes and, with n given, its last
 * slot's name "name#(n-1)" must fit FENCE_NAME_MAX as well. */
static int check_name(fence_client *c, const char *name, uint32_t n)
{
    if (c == NULL || name == NULL)
        return fence__fail(FENCE_EINVAL, "client and name must not be NULL");
    size_t len = strlen(name);
    if (len == 0 || len > FENCE_NAME_MAX)
        return fence__fail(FENCE_EINVAL, "semaphore name must be 1..%d bytes, not %zu",
                           FENCE_NAME_MAX, len);
    if (n == 0)
        return 0;
    if (n > FENCE_SEM_N_MAX)
        return fence__fail(FENCE_EINVAL, "a semaphore has 1..%d slots, not %" PRIu32,
                           FENCE_SEM_N_MAX, n);
    char digits[U64_BUF];
    int d = snprintf(digits, sizeof(digits), "%" PRIu32, n - 1);
    if (len + 1 + (size_t)d > FENCE_NAME_MAX)
        return fence__fail(FENCE_EINVAL, "semaphore name too long: its slot names "
                           "name#0..name#%" PRIu32 " must fit %d bytes", n - 1, FENCE_NAME_MAX);
    return 0;
}

/* Send argv and hand the reply out; an error reply becomes its code. */
static int call(fence_client *c, uint64_t wait_ms, int argc, const char **argv,
                const char *what, redisReply **out)
{
    size_t lens[12];
    FENCE_ASSERT(argc <= 12);
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    uint64_t deadline = fence_monotonic_ms() + c->opts.timeout_ms + wait_ms;
    redisReply *r = NULL;
    int rc = fence__call(c, NULL, deadline, argc, argv, lens, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR) {
        rc = fence__reply_error(r, what);
        freeReplyObject(r);
        return rc;
    }
    *out = r;
    return 0;
}

/* One SEM.ACQUIRE name n lease [WAIT ms] REQID id [SIGNED] with a fresh
 * REQID; nil becomes FENCE_EBUSY. */
static int acquire_once(fence_client *c, const char *name, uint32_t n, uint64_t lease,
                        uint32_t wait_ms, bool sign, redisReply **out)
{
    char n_s[U64_BUF], lease_s[U64_BUF], wait_s[U64_BUF], id_s[U64_BUF];
    snprintf(n_s, sizeof(n_s), "%" PRIu32, n);
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, lease);
    snprintf(wait_s, sizeof(wait_s), "%" PRIu32, wait_ms);
    snprintf(id_s, sizeof(id_s), "%" PRIu64, fence__reqid());
    const char *argv[10] = {"SEM.ACQUIRE", name, n_s, lease_s};
    int argc = 4;
    if (wait_ms > 0) {
        argv[argc++] = "WAIT";
        argv[argc++] = wait_s;
    }
    argv[argc++] = "REQID";
    argv[argc++] = id_s;
    if (sign)
        argv[argc++] = "SIGNED";
    redisReply *r = NULL;
    int rc = call(c, wait_ms, argc, argv, "SEM.ACQUIRE", &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        return FENCE_EBUSY;
    }
    *out = r;
    return 0;
}

/* acquire_once's arguments but the time, for fence__wait_retry. */
typedef struct acquire_args {
    fence_client *c;
    const char *name;
    uint32_t n;
    uint64_t lease;
    bool sign;
} acquire_args;

static int acquire_once_cb(void *ctx, uint32_t left_ms, redisReply **out)
{
    const acquire_args *a = ctx;
    return acquire_once(a->c, a->name, a->n, a->lease, left_ms, a->sign, out);
}

static int sem_acquire(fence_client *c, const char *name, uint32_t n, uint64_t lease,
                       uint32_t wait_ms, uint32_t *slot_out, uint64_t *token_out,
                       char *sbuf, size_t scap)
{
    int rc = check_name(c, name, n == 0 ? 1 : n);
    if (rc != 0)
        return rc;
    if (n == 0)
        return fence__fail(FENCE_EINVAL, "a semaphore has 1..%d slots, not 0", FENCE_SEM_N_MAX);
    if (slot_out == NULL || token_out == NULL)
        return fence__fail(FENCE_EINVAL, "slot_out and token_out must not be NULL");
    if (sbuf != NULL && scap < FENCE_SIGNED_TOKEN_BUF_SIZE)
        return fence__fail(FENCE_EINVAL, "a signed token needs a buffer of %d bytes",
                           FENCE_SIGNED_TOKEN_BUF_SIZE);
    redisReply *r = NULL;
    acquire_args args = {c, name, n, lease, sbuf != NULL};
    rc = fence__wait_retry(wait_ms, acquire_once_cb, &args, &r);
    if (rc == FENCE_EBUSY)
        return fence__fail(rc, "semaphore \"%.100s\": no slot free within %" PRIu32 " ms",
                           name, wait_ms);
    if (rc != 0)
        return rc;
    uint64_t slot = 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        !fence__reply_u64(r->element[0], &slot) || slot >= n) {
        rc = fence__fail(FENCE_EPROTO, "SEM.ACQUIRE: unexpected reply");
    } else if (sbuf != NULL) {
        const redisReply *t = r->element[1];
        if ((t->type != REDIS_REPLY_STRING && t->type != REDIS_REPLY_STATUS) ||
            !fence__parse_signed(t->str, t->len, token_out, sbuf, scap))
            rc = fence__fail(FENCE_EPROTO, "SEM.ACQUIRE SIGNED: the reply is not a signed token");
    } else if (!fence__reply_u64(r->element[1], token_out) || *token_out == 0) {
        rc = fence__fail(FENCE_EPROTO, "SEM.ACQUIRE: unexpected reply");
    }
    if (rc == 0)
        *slot_out = (uint32_t)slot;
    freeReplyObject(r);
    return rc;
}

int fence_sem_acquire(fence_client *c, const char *name, uint32_t n, uint64_t lease,
                      uint32_t wait_ms, uint32_t *slot_out, uint64_t *token_out)
{
    return sem_acquire(c, name, n, lease, wait_ms, slot_out, token_out, NULL, 0);
}

int fence_sem_acquire_signed(fence_client *c, const char *name, uint32_t n, uint64_t lease,
                             uint32_t wait_ms, uint32_t *slot_out, uint64_t *token_out,
                             char *signed_out, size_t signed_cap)
{
    if (signed_out == NULL)
        return fence__fail(FENCE_EINVAL, "signed_out must not be NULL");
    return sem_acquire(c, name, n, lease, wait_ms, slot_out, token_out, signed_out,
                       signed_cap);
}

int fence_sem_release(fence_client *c, const char *name, uint32_t slot, uint64_t token,
                      bool *released_out)
{
    int rc = check_name(c, name, 0);
    if (rc != 0)
        return rc;
    if (slot >= FENCE_SEM_N_MAX)
        return fence__fail(FENCE_EINVAL, "slot %" PRIu32 " is not below %d", slot,
                           FENCE_SEM_N_MAX);
    char slot_s[U64_BUF], token_s[U64_BUF];
    snprintf(slot_s, sizeof(slot_s), "%" PRIu32, slot);
    snprintf(token_s, sizeof(token_s), "%" PRIu64, token);
    const char *argv[4] = {"SEM.RELEASE", name, slot_s, token_s};
    redisReply *r = NULL;
    rc = call(c, 0, 4, argv, "SEM.RELEASE", &r);
    if (rc != 0)
        return rc;
    uint64_t v = 0;
    if (!fence__reply_u64(r, &v) || v > 1)
        rc = fence__fail(FENCE_EPROTO, "SEM.RELEASE: unexpected reply");
    else if (released_out != NULL)
        *released_out = v == 1;
    freeReplyObject(r);
    return rc;
}

int fence_sem_info_get(fence_client *c, const char *name, fence_sem_info *out,
                       fence_sem_slot *slots, size_t cap)
{
    int rc = check_name(c, name, 0);
    if (rc != 0)
        return rc;
    if (out == NULL || (slots == NULL && cap > 0))
        return fence__fail(FENCE_EINVAL, "out (and slots, with a cap) must not be NULL");
    memset(out, 0, sizeof(*out));
    const char *argv[2] = {"SEM.INFO", name};
    redisReply *r = NULL;
    rc = call(c, 0, 2, argv, "SEM.INFO", &r);
    if (rc != 0)
        return rc;
    uint64_t n = 0, waiters = 0;
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        return 0;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 3 ||
        !fence__reply_u64(r->element[0], &n) || n == 0 || n > FENCE_SEM_N_MAX ||
        r->element[1]->type != REDIS_REPLY_ARRAY || r->element[1]->elements > n ||
        !fence__reply_u64(r->element[2], &waiters)) {
        freeReplyObject(r);
        return fence__fail(FENCE_EPROTO, "SEM.INFO: unexpected reply");
    }
    const redisReply *list = r->element[1];
    for (size_t i = 0; i < list->elements; i++) {
        const redisReply *e = list->element[i];
        uint64_t v[4];
        if (e->type != REDIS_REPLY_ARRAY || e->elements != 4 ||
            !fence__reply_u64(e->element[0], &v[0]) || v[0] >= n ||
            !fence__reply_u64(e->element[1], &v[1]) ||
            !fence__reply_u64(e->element[2], &v[2]) ||
            !fence__reply_u64(e->element[3], &v[3])) {
            freeReplyObject(r);
            memset(out, 0, sizeof(*out));
            return fence__fail(FENCE_EPROTO, "SEM.INFO: unexpected slot in the reply");
        }
        if (i < cap) {
            slots[i].slot = (uint32_t)v[0];
            slots[i].token = v[1];
            slots[i].lease = v[2];
            slots[i].remaining_ms = v[3];
        }
    }
    out->exists = true;
    out->n = (uint32_t)n;
    out->waiters = waiters;
    out->slots_count = list->elements;
    freeReplyObject(r);
    return 0;
}
