/* libfence's leader election calls (include/fence.h "Leader election"):
 * one fenced ELECTION.* command each, through the client's pool and its
 * retries (fence__call: TRYAGAIN, lost connections, NOTLEADER redirects;
 * CAMPAIGN carries a REQID, so a retried campaign is applied once). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "libfence/internal.h"
#include "base/assert.h"
#include "base/limits.h"

#define U64_BUF 24

static int check_args(fence_client *c, const char *name, const void *value, size_t value_len)
{
    if (c == NULL || name == NULL)
        return fence__fail(FENCE_EINVAL, "client and name must not be NULL");
    size_t n = strlen(name);
    if (n == 0 || n > FENCE_NAME_MAX)
        return fence__fail(FENCE_EINVAL, "election name must be 1..%d bytes, not %zu",
                           FENCE_NAME_MAX, n);
    if (value_len > FENCE_ELECTION_VALUE_MAX)
        return fence__fail(FENCE_ETOOBIG, "election value must be at most %d bytes, not %zu",
                           FENCE_ELECTION_VALUE_MAX, value_len);
    if (value_len > 0 && value == NULL)
        return fence__fail(FENCE_EINVAL, "value is NULL");
    return 0;
}

/* Send argv (lens: NULL for strlen) and hand the reply out; an error reply
 * becomes its code. */
static int call(fence_client *c, uint64_t wait_ms, int argc, const char **argv,
                const size_t *lens_in, const char *what, redisReply **out)
{
    size_t lens[12];
    FENCE_ASSERT(argc <= 12);
    for (int i = 0; i < argc; i++)
        lens[i] = lens_in != NULL && lens_in[i] != SIZE_MAX ? lens_in[i] : strlen(argv[i]);
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

int fence_election_campaign(fence_client *c, const char *name, uint64_t lease,
                            const void *value, size_t value_len, uint32_t wait_ms,
                            uint64_t *token_out)
{
    int rc = check_args(c, name, value, value_len);
    if (rc != 0)
        return rc;
    if (token_out == NULL)
        return fence__fail(FENCE_EINVAL, "token_out must not be NULL");
    char lease_s[U64_BUF], wait_s[U64_BUF], id_s[U64_BUF];
    snprintf(lease_s, sizeof(lease_s), "%" PRIu64, lease);
    snprintf(wait_s, sizeof(wait_s), "%" PRIu32, wait_ms);
    snprintf(id_s, sizeof(id_s), "%" PRIu64, fence__reqid());
    const char *argv[8] = {"ELECTION.CAMPAIGN", name, lease_s, value_len ? value : ""};
    size_t lens[8] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, value_len};
    int argc = 4;
    if (wait_ms > 0) {
        argv[argc] = "WAIT";
        lens[argc++] = SIZE_MAX;
        argv[argc] = wait_s;
        lens[argc++] = SIZE_MAX;
    }
    argv[argc] = "REQID";
    lens[argc++] = SIZE_MAX;
    argv[argc] = id_s;
    lens[argc++] = SIZE_MAX;
    redisReply *r = NULL;
    rc = call(c, wait_ms, argc, argv, lens, "ELECTION.CAMPAIGN", &r);
    if (rc != 0)
        return rc;
    if (r->type == REDIS_REPLY_NIL)
        rc = fence__fail(FENCE_EBUSY, "election \"%.100s\": not elected within %" PRIu32 " ms",
                         name, wait_ms);
    else if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
             !fence__reply_u64(r->element[0], token_out) || *token_out == 0)
        rc = fence__fail(FENCE_EPROTO, "ELECTION.CAMPAIGN: unexpected reply");
    freeReplyObject(r);
    return rc;
}

/* PROCLAIM and RESIGN: name token [value]; *v_out the integer reply. */
static int by_token(fence_client *c, const char *cmd, const char *name, uint64_t token,
                    const void *value, size_t value_len, bool with_value, uint64_t *v_out)
{
    int rc = check_args(c, name, value, value_len);
    if (rc != 0)
        return rc;
    char token_s[U64_BUF];
    snprintf(token_s, sizeof(token_s), "%" PRIu64, token);
    const char *argv[4] = {cmd, name, token_s, value_len ? value : ""};
    size_t lens[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, value_len};
    redisReply *r = NULL;
    rc = call(c, 0, with_value ? 4 : 3, argv, lens, cmd, &r);
    if (rc != 0)
        return rc;
    if (!fence__reply_u64(r, v_out))
        rc = fence__fail(FENCE_EPROTO, "%s: unexpected reply", cmd);
    freeReplyObject(r);
    return rc;
}

int fence_election_proclaim(fence_client *c, const char *name, uint64_t token,
                            const void *value, size_t value_len, uint64_t *revision_out)
{
    uint64_t v = 0;
    int rc = by_token(c, "ELECTION.PROCLAIM", name, token, value, value_len, true, &v);
    if (rc == 0 && v == 0)
        rc = fence__fail(FENCE_ESTALE, "election \"%.100s\": token %" PRIu64
                         " does not lead it (any more)", name, token);
    if (rc == 0 && revision_out != NULL)
        *revision_out = v;
    return rc;
}

int fence_election_resign(fence_client *c, const char *name, uint64_t token,
                          bool *resigned_out)
{
    uint64_t v = 0;
    int rc = by_token(c, "ELECTION.RESIGN", name, token, NULL, 0, false, &v);
    if (rc == 0 && resigned_out != NULL)
        *resigned_out = v == 1;
    return rc;
}

/* Fill out from a state reply ([value|nil, token, lease, revision]). */
static int parse_state(const redisReply *r, const char *what, fence_election_state *out)
{
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 ||
        !fence__reply_u64(r->element[1], &out->token) ||
        !fence__reply_u64(r->element[2], &out->lease) ||
        !fence__reply_u64(r->element[3], &out->revision))
        return fence__fail(FENCE_EPROTO, "%s: unexpected reply", what);
    const redisReply *v = r->element[0];
    if (v->type == REDIS_REPLY_NIL) {
        out->has_leader = false;
    } else if (v->type == REDIS_REPLY_STRING && v->len <= FENCE_ELECTION_VALUE_MAX) {
        out->has_leader = true;
        memcpy(out->value, v->str, v->len);
        out->value_len = v->len;
    } else {
        return fence__fail(FENCE_EPROTO, "%s: unexpected value in the reply", what);
    }
    out->value[out->value_len] = '\0';
    out->changed = true;
    return 0;
}

int fence_election_leader(fence_client *c, const char *name, fence_election_state *out)
{
    int rc = check_args(c, name, NULL, 0);
    if (rc != 0)
        return rc;
    if (out == NULL)
        return fence__fail(FENCE_EINVAL, "out must not be NULL");
    memset(out, 0, sizeof(*out));
    const char *argv[2] = {"ELECTION.LEADER", name};
    redisReply *r = NULL;
    rc = call(c, 0, 2, argv, NULL, "ELECTION.LEADER", &r);
    if (rc != 0)
        return rc;
    if (r->type != REDIS_REPLY_NIL)
        rc = parse_state(r, "ELECTION.LEADER", out);
    freeReplyObject(r);
    return rc;
}

int fence_election_observe(fence_client *c, const char *name, uint64_t after,
                           uint32_t wait_ms, fence_election_state *out)
{
    int rc = check_args(c, name, NULL, 0);
    if (rc != 0)
        return rc;
    if (out == NULL)
        return fence__fail(FENCE_EINVAL, "out must not be NULL");
    memset(out, 0, sizeof(*out));
    char after_s[U64_BUF], wait_s[U64_BUF];
    snprintf(after_s, sizeof(after_s), "%" PRIu64, after);
    snprintf(wait_s, sizeof(wait_s), "%" PRIu32, wait_ms);
    const char *argv[6] = {"ELECTION.OBSERVE", name};
    int argc = 2;
    if (after != FENCE_ELECTION_NOW) {
        argv[argc++] = "AFTER";
        argv[argc++] = after_s;
        if (wait_ms > 0) {
            argv[argc++] = "WAIT";
            argv[argc++] = wait_s;
        }
    }
    redisReply *r = NULL;
    rc = call(c, wait_ms, argc, argv, NULL, "ELECTION.OBSERVE", &r);
    if (rc != 0)
        return rc;
    if (r->type != REDIS_REPLY_NIL)
        rc = parse_state(r, "ELECTION.OBSERVE", out);
    freeReplyObject(r);
    return rc;
}
