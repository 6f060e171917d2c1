/* libfence's multi-lock calls (include/fence.h "Multi-locks"): LOCK.MULTI
 * with a lease the caller keeps alive, through the client's pool and its
 * retries (one REQID for the retries of a call, so it is applied once; an
 * early nil, from a wait cancelled with its connection, is asked again for
 * the time left, as lock.c does).  With SIGNED, one signed token string
 * per name, each checked for its shape (the resource verifies it). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "libfence/internal.h"
#include "libfence/pure.h"
#include "base/assert.h"
#include "base/limits.h"

#define U64_BUF 24

_Static_assert(FENCE_MULTI_NAMES == FENCE_MULTI_NAMES_MAX, "the header's limit is the server's");

/* 1..FENCE_MULTI_NAMES distinct names of 1..256 bytes, none spelled like an
 * option word (it would end the names on the server). */
static int check_names(const char *const *names, size_t count)
{
    if (names == NULL || count == 0 || count > FENCE_MULTI_NAMES)
        return fence__fail(FENCE_EINVAL, "a multi-lock takes 1..%d names, not %zu",
                           FENCE_MULTI_NAMES, names == NULL ? (size_t)0 : count);
    static const char *const words[] = {"WAIT", "REQID", "LOCKDELAY", "SIGNED", "SHARED"};
    for (size_t i = 0; i < count; i++) {
        size_t n = names[i] == NULL ? 0 : strlen(names[i]);
        if (n == 0 || n > FENCE_NAME_MAX)
            return fence__fail(FENCE_EINVAL, "name %zu must be 1..%d bytes", i, FENCE_NAME_MAX);
        for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++)
            if (strcasecmp(names[i], words[w]) == 0)
                return fence__fail(FENCE_EINVAL, "a lock named %s cannot be in a multi-lock "
                                   "(it is an option word)", words[w]);
        for (size_t j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0)
                return fence__fail(FENCE_EINVAL, "duplicate name \"%.64s\"", names[i]);
    }
    return 0;
}

/* One LOCK.MULTI lease names... [WAIT ms] REQID id [SIGNED]; nil: EBUSY. */
static int multi_once(fence_client *c, uint64_t lease, const char *const *names, size_t count,
                      uint32_t wait_ms, bool sign, redisReply **out)
{
    const char *argv[FENCE_MULTI_NAMES + 8];
    size_t lens[FENCE_MULTI_NAMES + 8];
    char lease_s[U64_BUF], wait_s[U64_BUF], id_s[U64_BUF];
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, lease);
    snprintf(wait_s, sizeof(wait_s), "%" PRIu32, wait_ms);
    snprintf(id_s, sizeof(id_s), "%" PRIu64, fence__reqid());
    int argc = 0;
    argv[argc++] = "LOCK.MULTI";
    argv[argc++] = lease_s;
    for (size_t i = 0; i < count; i++)
        argv[argc++] = names[i];
    if (wait_ms > 0) {
        argv[argc++] = "WAIT";
        argv[argc++] = wait_s;
    }
    argv[argc++] = "REQID";
    argv[argc++] = id_s;
    if (sign)
        argv[argc++] = "SIGNED";
    FENCE_ASSERT((size_t)argc <= sizeof(argv) / sizeof(argv[0]));
    for (int i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    uint64_t deadline = fence_monotonic_ms() + c->opts.timeout_ms + wait_ms;
    redisReply *r = NULL;
    int rc = fence__call(c, NULL, deadline, argc, argv, lens, &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_ERROR) {
        rc = fence__reply_error(r, "LOCK.MULTI");
        freeReplyObject(r);
        return rc;
    }
    if (r->type == REDIS_REPLY_NIL) {
        freeReplyObject(r);
        return FENCE_EBUSY;
    }
    *out = r;
    return 0;
}

/* multi_once's arguments but the time, for fence__wait_retry. */
typedef struct multi_args {
    fence_client *c;
    uint64_t lease;
    const char *const *names;
    size_t count;
    bool sign;
} multi_args;

static int multi_once_cb(void *ctx, uint32_t left_ms, redisReply **out)
{
    const multi_args *m = ctx;
    return multi_once(m->c, m->lease, m->names, m->count, left_ms, m->sign, out);
}

static int lock_multi(fence_client *c, uint64_t lease, const char *const *names, size_t count,
                      uint32_t wait_ms, uint64_t *token_out,
                      char (*signed_out)[FENCE_SIGNED_TOKEN_BUF_SIZE])
{
    if (c == NULL || token_out == NULL)
        return fence__fail(FENCE_EINVAL, "client and token_out must not be NULL");
    int rc = check_names(names, count);
    if (rc != 0)
        return rc;
    redisReply *r = NULL;
    multi_args args = {c, lease, names, count, signed_out != NULL};
    rc = fence__wait_retry(wait_ms, multi_once_cb, &args, &r);
    if (rc == FENCE_EBUSY)
        return fence__fail(rc, "multi-lock of %zu names (\"%.64s\", ...): not acquired within %"
                           PRIu32 " ms", count, names[0], wait_ms);
    if (rc != 0)
        return rc;
    if (signed_out == NULL) {
        if (!fence__reply_u64(r, token_out) || *token_out == 0)
            rc = fence__fail(FENCE_EPROTO, "LOCK.MULTI: unexpected reply");
        freeReplyObject(r);
        return rc;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != count) {
        freeReplyObject(r);
        return fence__fail(FENCE_EPROTO, "LOCK.MULTI SIGNED: not one signed token per name");
    }
    for (size_t i = 0; i < count && rc == 0; i++) {
        const redisReply *e = r->element[i];
        uint64_t t = 0;
        if ((e->type != REDIS_REPLY_STRING && e->type != REDIS_REPLY_STATUS) ||
            !fence__parse_signed(e->str, e->len, &t, signed_out[i], FENCE_SIGNED_TOKEN_BUF_SIZE) ||
            (i > 0 && t != *token_out))
            rc = fence__fail(FENCE_EPROTO, "LOCK.MULTI SIGNED: reply %zu is not a signed token "
                             "of the grant", i);
        *token_out = t;
    }
    freeReplyObject(r);
    return rc;
}

int fence_lease_lock_multi(fence_client *c, uint64_t lease, const char *const *names,
                           size_t count, uint32_t wait_ms, uint64_t *token_out)
{
    return lock_multi(c, lease, names, count, wait_ms, token_out, NULL);
}

int fence_lease_lock_multi_signed(fence_client *c, uint64_t lease, const char *const *names,
                                  size_t count, uint32_t wait_ms, uint64_t *token_out,
                                  char (*signed_out)[FENCE_SIGNED_TOKEN_BUF_SIZE])
{
    if (signed_out == NULL)
        return fence__fail(FENCE_EINVAL, "signed_out must not be NULL");
    return lock_multi(c, lease, names, count, wait_ms, token_out, signed_out);
}
