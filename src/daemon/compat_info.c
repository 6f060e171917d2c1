/* Redis-client compatibility: the INFO builder (sections, fields, the
 * standard Server/Clients/Persistence sections) that fenced and
 * fence-store fill with their own fields. */
#include "daemon/compat_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/assert.h"

/* The Redis protocol level our replies follow (INFO redis_version). */
#define COMPAT_REDIS_VERSION "7.0.0"
/* ---- INFO ----------------------------------------------------------------------------- */

void fence_compat_info_begin(fence_compat_info *b, const fence_resp_msg *m)
{
    FENCE_ASSERT(b != NULL);
    fence_compat_reply_init(&b->text);
    b->req = m;
    b->in_section = false;
    b->any = false;
}

bool fence_compat_info_wants(const fence_compat_info *b, const char *name)
{
    FENCE_ASSERT(b != NULL);
    FENCE_ASSERT(name != NULL);
    if (b->req == NULL || b->req->argc < 2)
        return true;
    for (uint32_t i = 1; i < b->req->argc; i++) {
        const fence_resp_arg *a = &b->req->argv[i];
        if (fence__compat_arg_is(a, "all") || fence__compat_arg_is(a, "default") || fence__compat_arg_is(a, "everything") ||
            fence__compat_arg_is(a, name))
            return true;
    }
    return false;
}

bool fence_compat_info_section(fence_compat_info *b, const char *name)
{
    b->in_section = fence_compat_info_wants(b, name);
    if (!b->in_section)
        return false;
    if (b->any)
        fence__compat_puts(&b->text, "\r\n");
    fence__compat_putf(&b->text, "# %.64s\r\n", name);
    b->any = true;
    return true;
}

void fence_compat_info_str(fence_compat_info *b, const char *key, const char *value)
{
    FENCE_ASSERT(key != NULL);
    FENCE_ASSERT(value != NULL);
    if (!b->in_section)
        return;
    fence__compat_puts(&b->text, key);
    fence__compat_puts(&b->text, ":");
    size_t start = b->text.len;
    fence__compat_puts(&b->text, value);
    if (!b->text.failed)
        for (size_t i = start; i < b->text.len; i++)
            if (b->text.ptr[i] == '\r' || b->text.ptr[i] == '\n')
                b->text.ptr[i] = ' ';
    fence__compat_puts(&b->text, "\r\n");
}

void fence_compat_info_u64(fence_compat_info *b, const char *key, uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    fence_compat_info_str(b, key, buf);
}

void fence_compat_info_i64(fence_compat_info *b, const char *key, int64_t v)
{
    char buf[24];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    fence_compat_info_str(b, key, buf);
}

void fence_compat_info_lines(fence_compat_info *b, const char *text, size_t n)
{
    FENCE_ASSERT(text != NULL || n == 0);
    if (b->in_section)
        fence__compat_put(&b->text, text, n);
}

void fence_compat_info_standard(fence_compat_info *b, const fence_compat_ctx *ctx,
                                const fence_compat_info_std *std)
{
    FENCE_ASSERT(ctx != NULL);
    FENCE_ASSERT(std != NULL);
    if (fence_compat_info_section(b, "Server")) {
        char key[64];
        fence_compat_info_str(b, "redis_version", COMPAT_REDIS_VERSION);
        /* "fence-store" becomes fence_store_version. */
        snprintf(key, sizeof(key), "%.40s_version", ctx->server);
        for (char *p = key; *p; p++)
            if (*p == '-')
                *p = '_';
        fence_compat_info_str(b, key, ctx->version);
        fence_compat_info_str(b, "server_name", ctx->server);
        fence_compat_info_str(b, "redis_mode", "standalone");
        fence_compat_info_u64(b, "process_id", std->process_id);
        fence_compat_info_u64(b, "tcp_port", std->tcp_port);
        fence_compat_info_u64(b, "uptime_in_seconds", std->uptime_s);
    }
    if (fence_compat_info_section(b, "Clients")) {
        fence_compat_info_u64(b, "connected_clients", std->connected_clients);
        fence_compat_info_u64(b, "maxclients", std->max_clients);
    }
    if (fence_compat_info_section(b, "Persistence"))
        fence_compat_info_u64(b, "loading", std->loading ? 1 : 0);
}

int fence_compat_info_finish(fence_compat_info *b, fence_compat_reply *out)
{
    FENCE_ASSERT(b != NULL);
    FENCE_ASSERT(out != NULL);
    fence_compat_reply_reset(out);
    if (b->text.failed)
        out->failed = true;
    else
        fence__compat_put_bulk(out, b->text.ptr, b->text.len);
    fence_compat_reply_free(&b->text);
    fence__compat_finish(out);
    return out->failed ? -1 : 0;
}
