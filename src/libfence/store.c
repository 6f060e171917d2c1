/* libfence: the fence-store helper (fenced writes carrying a token). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "libfence/internal.h"
#include "libfence/wire.h"
#include "base/limits.h"

struct fence_store {
    pthread_mutex_t mu;        /* serialises calls on the connection */
    fence__addr addr;          /* where fence-store listens */
    uint32_t timeout_ms;       /* per-call timeout */
    fence__wire_owned wire;    /* TLS context and login (wire.c) */
    fence__wire *w;            /* NULL until connected / after an error */
    char errmsg[FENCE_ERRMSG_BUF_SIZE]; /* detail of the last failure */
};

static int store_fail(fence_store *s, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Record the detail of a failure on s (and in the thread's buffer) and
 * return rc. */
static int store_fail(fence_store *s, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
    va_end(ap);
    fence__fail(rc, "%s", s->errmsg);
    return rc;
}

/* Fill defaults into a store options struct (all zero). */
void fence_store_opts_init(fence_store_opts *opts)
{
    FENCE_ASSERT(opts != NULL);
    memset(opts, 0, sizeof(*opts));
}

/* Close a store handle. */
void fence_store_close(fence_store *s)
{
    if (s == NULL)
        return;
    fence__wire_close(s->w);
    fence__wire_owned_free(&s->wire);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Open a store handle with options; see fence.h. */
int fence_store_open_opts(const fence_store_opts *opts, fence_store **out)
{
    if (opts == NULL || out == NULL)
        return fence__fail(FENCE_EINVAL, "opts and out must not be NULL");
    *out = NULL;
    const char *addr = opts->addr;
    if (addr == NULL || addr[0] == '\0')
        addr = getenv("FENCE_STORE");
    if (addr == NULL || addr[0] == '\0')
        addr = "127.0.0.1:7710";
    fence_store *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return fence__fail(FENCE_ENOMEM, "out of memory");
    pthread_mutex_init(&s->mu, NULL);
    int rc;
    if (fence__addr_parse(addr, strlen(addr), &s->addr) != 0) {
        rc = fence__fail(FENCE_EINVAL, "bad fence-store address \"%.200s\"", addr);
        goto fail;
    }
    s->timeout_ms = opts->timeout_ms ? opts->timeout_ms : 5000;
    rc = fence__wire_owned_init(&s->wire, opts->tls, opts->tls_ca_file, opts->tls_cert_file,
                                opts->tls_key_file, opts->tls_server_name, opts->user,
                                opts->password);
    if (rc != 0)
        goto fail;
    *out = s;
    return 0;
fail:
    fence_store_close(s);
    return rc;
}

/* Open a plaintext store handle without a login; see fence.h. */
int fence_store_open(const char *addr, uint32_t timeout_ms, fence_store **out)
{
    fence_store_opts o;
    fence_store_opts_init(&o);
    o.addr = addr;
    o.timeout_ms = timeout_ms;
    return fence_store_open_opts(&o, out);
}

/* The last failure's detail. */
const char *fence_store_errmsg(fence_store *s)
{
    FENCE_ASSERT(s != NULL);
    return s->errmsg;
}

/* Send one command (under s->mu), connecting first if needed.  A lost
 * connection is not retried: FSET's outcome is then unknown. */
static int store_call(fence_store *s, int argc, const char **argv,
                      const size_t *lens, redisReply **out)
{
    *out = NULL;
    char where[FENCE__HOST_MAX + 16];
    fence__addr_format(&s->addr, where, sizeof(where));
    if (s->w == NULL) {
        bool refused;
        char why[FENCE_ERRMSG_BUF_SIZE];
        int rv = fence__wire_open(&s->addr, &s->wire.cfg, s->timeout_ms, &s->w, &refused, why,
                                  sizeof(why));
        if (rv == FENCE_ENOMEM)
            return store_fail(s, FENCE_ENOMEM, "out of memory");
        if (rv == FENCE_EAUTH)
            return store_fail(s, FENCE_EAUTH, "fence-store at %s refused the login: %.200s",
                              where, why);
        if (rv != 0)
            return store_fail(s, FENCE_EUNREACHABLE, "cannot connect to fence-store at %s: %.200s",
                              where, why);
    }
    bool timed_out;
    redisReply *r = fence__wire_command(s->w, s->timeout_ms, argc, argv, lens, &timed_out);
    if (r == NULL) {
        int rc = store_fail(s, timed_out ? FENCE_ETIMEOUT : FENCE_EIO,
                            "%s to fence-store at %s: %s (outcome unknown)", argv[0], where,
                            timed_out ? "no reply in time" : fence__wire_errstr(s->w));
        fence__wire_close(s->w);
        s->w = NULL;
        return rc;
    }
    *out = r;
    return 0;
}

/* Interpret an OK-or-STALE reply. */
static int ok_or_stale(fence_store *s, redisReply *r, const char *what,
                       uint64_t token, uint64_t *highest_out)
{
    if (r->type == REDIS_REPLY_ERROR) {
        if (fence__error_code(r->str) == FENCE_ESTALE) {
            uint64_t high = 0;
            if (fence__parse_stale(r->str, &high) != 0)
                return store_fail(s, FENCE_EPROTO, "%s: malformed STALE reply: %.200s",
                                  what, r->str);
            if (highest_out != NULL)
                *highest_out = high;
            return store_fail(s, FENCE_ESTALE, "%s: token %" PRIu64
                              " rejected: the fence has seen %" PRIu64, what, token, high);
        }
        return store_fail(s, fence__error_code(r->str), "%s: %.200s", what, r->str);
    }
    if (r->type != REDIS_REPLY_STATUS)
        return store_fail(s, FENCE_EPROTO, "%s: unexpected reply type %d", what, r->type);
    return 0;
}

/* Check a fence name. */
static int check_fence(fence_store *s, const char *fence)
{
    if (fence == NULL)
        return store_fail(s, FENCE_EINVAL, "fence name is NULL");
    size_t n = strlen(fence);
    if (n == 0 || n > FENCE_NAME_MAX)
        return store_fail(s, FENCE_EINVAL, "fence name must be 1..%d bytes", FENCE_NAME_MAX);
    return 0;
}

/* FSET fence TOKEN key value, TOKEN already a string (token: its number,
 * for messages).  Called with s->mu held. */
static int set_locked(fence_store *s, const char *fence, const char *token_s,
                      uint64_t token, const void *key, size_t key_len,
                      const void *value, size_t value_len, uint64_t *highest_out)
{
    int rc = check_fence(s, fence);
    if (rc != 0)
        return rc;
    const char *argv[] = {"FSET", fence, token_s, key, value ? value : ""};
    size_t lens[] = {4, strlen(fence), strlen(token_s), key_len, value_len};
    redisReply *r;
    rc = store_call(s, 5, argv, lens, &r);
    if (rc == 0) {
        rc = ok_or_stale(s, r, "FSET", token, highest_out);
        freeReplyObject(r);
    }
    return rc;
}

/* FENCE.ADMIT fence TOKEN, TOKEN already a string.  Called with s->mu held. */
static int admit_locked(fence_store *s, const char *fence, const char *token_s,
                        uint64_t token, uint64_t *highest_out)
{
    int rc = check_fence(s, fence);
    if (rc != 0)
        return rc;
    const char *argv[] = {"FENCE.ADMIT", fence, token_s};
    size_t lens[] = {11, strlen(fence), strlen(token_s)};
    redisReply *r;
    rc = store_call(s, 3, argv, lens, &r);
    if (rc == 0) {
        rc = ok_or_stale(s, r, "FENCE.ADMIT", token, highest_out);
        freeReplyObject(r);
    }
    return rc;
}

/* Check a signed token's shape and give its number. */
static int check_signed(fence_store *s, const char *tok, uint64_t *token)
{
    char buf[FENCE_SIGNED_TOKEN_BUF_SIZE];
    if (tok == NULL || !fence__parse_signed(tok, strlen(tok), token, buf, sizeof(buf)))
        return store_fail(s, FENCE_EINVAL, "not a signed token (TOKEN.KEYID.SIGNATURE)");
    return 0;
}

/* FSET fence token key value. */
int fence_store_set(fence_store *s, const char *fence, uint64_t token,
                    const void *key, size_t key_len, const void *value,
                    size_t value_len, uint64_t *highest_out)
{
    if (s == NULL || key == NULL || (value == NULL && value_len > 0))
        return fence__fail(FENCE_EINVAL, "store, key and value must not be NULL");
    char token_s[24];
    snprintf(token_s, sizeof(token_s), "%" PRIu64, token);
    pthread_mutex_lock(&s->mu);
    int rc = set_locked(s, fence, token_s, token, key, key_len, value, value_len,
                        highest_out);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* FSET fence signed_token key value. */
int fence_store_set_signed(fence_store *s, const char *fence, const char *signed_token,
                           const void *key, size_t key_len, const void *value,
                           size_t value_len, uint64_t *highest_out)
{
    if (s == NULL || key == NULL || (value == NULL && value_len > 0))
        return fence__fail(FENCE_EINVAL, "store, key and value must not be NULL");
    pthread_mutex_lock(&s->mu);
    uint64_t token = 0;
    int rc = check_signed(s, signed_token, &token);
    if (rc == 0)
        rc = set_locked(s, fence, signed_token, token, key, key_len, value, value_len,
                        highest_out);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* FENCE.ADMIT fence token. */
int fence_store_admit(fence_store *s, const char *fence, uint64_t token,
                      uint64_t *highest_out)
{
    if (s == NULL)
        return fence__fail(FENCE_EINVAL, "store must not be NULL");
    char token_s[24];
    snprintf(token_s, sizeof(token_s), "%" PRIu64, token);
    pthread_mutex_lock(&s->mu);
    int rc = admit_locked(s, fence, token_s, token, highest_out);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* FENCE.ADMIT fence signed_token. */
int fence_store_admit_signed(fence_store *s, const char *fence, const char *signed_token,
                             uint64_t *highest_out)
{
    if (s == NULL)
        return fence__fail(FENCE_EINVAL, "store must not be NULL");
    pthread_mutex_lock(&s->mu);
    uint64_t token = 0;
    int rc = check_signed(s, signed_token, &token);
    if (rc == 0)
        rc = admit_locked(s, fence, signed_token, token, highest_out);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* FGET key. */
int fence_store_get(fence_store *s, const void *key, size_t key_len,
                    char **value_out, size_t *len_out)
{
    if (s == NULL || key == NULL || value_out == NULL || len_out == NULL)
        return fence__fail(FENCE_EINVAL, "arguments must not be NULL");
    *value_out = NULL;
    *len_out = 0;
    pthread_mutex_lock(&s->mu);
    const char *argv[] = {"FGET", key};
    size_t lens[] = {4, key_len};
    redisReply *r;
    int rc = store_call(s, 2, argv, lens, &r);
    if (rc == 0) {
        if (r->type == REDIS_REPLY_ERROR) {
            rc = store_fail(s, fence__error_code(r->str), "FGET: %.200s", r->str);
        } else if (r->type == REDIS_REPLY_STRING) {
            char *v = malloc(r->len + 1);
            if (v == NULL) {
                rc = store_fail(s, FENCE_ENOMEM, "out of memory");
            } else {
                memcpy(v, r->str, r->len);
                v[r->len] = '\0';
                *value_out = v;
                *len_out = r->len;
            }
        } else if (r->type != REDIS_REPLY_NIL) {
            rc = store_fail(s, FENCE_EPROTO, "FGET: unexpected reply type %d", r->type);
        }
        freeReplyObject(r);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}
