/* Fuzz target for the Redis-client compatibility module (src/common/compat.c).
 *
 * The input's first byte picks the daemon's table (fenced or fence-store)
 * and whether an auth callback and a CLIENT LIST callback exist; the rest
 * is a client's byte stream, parsed request by request and handed to
 * fence_compat_handle with one connection state.  For every request:
 *   - PASS leaves the reply empty and the state unchanged; REPLIED gives
 *     exactly one well-formed RESP2 reply;
 *   - while the connection is in a refused MULTI, nothing but QUIT ever
 *     passes to the daemon (all-or-nothing refusal);
 *   - the transaction state follows a reference model (MULTI enters it;
 *     EXEC, DISCARD and RESET leave it);
 *   - names in the state stay printable, bounded and NUL-terminated;
 *   - fence_compat_handle never passes a command of its own table.
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "common/compat.h"
#include "fuzz.h"
#include "server/commands_table.h"
#include "store/commands_table.h"
#include "../lib/resp_check.h"

/* Messages are large (FENCE_INLINE_MAX of scratch): keep them static. */
static fence_resp_msg msg;

/* Accepts password "pw" for any user. */
static int auth_cb(void *arg, fence_compat_conn *c, const fence_resp_arg *user,
                   const fence_resp_arg *pass)
{
    (void)arg;
    (void)c;
    (void)user;
    return pass->len == 2 && memcmp(pass->ptr, "pw", 2) == 0 ? 0 : -1;
}

/* The connection list: the caller and one other. */
static fence_compat_conn *list_self;
static void list_cb(void *arg, fence_compat_emit_fn emit, void *emit_arg)
{
    (void)arg;
    static fence_compat_conn other;
    fence_compat_conn_init(&other, 99);
    fence_compat_client_info a = {.conn = list_self, .addr = "127.0.0.1:1", .fd = 5};
    fence_compat_client_info b = {.conn = &other, .addr = "127.0.0.1:2", .fd = 6};
    emit(emit_arg, &a);
    emit(emit_arg, &b);
}

static uint64_t wall_cb(void *arg)
{
    (void)arg;
    return 1234567890123456ULL;
}

/* Whether a state string is NUL-terminated within cap and printable. */
static bool name_sane(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == cap)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '!' || s[i] > '~')
            return false;
    return true;
}

/* Whether two connection states are equal, field by field. */
static bool same_state(const fence_compat_conn *a, const fence_compat_conn *b)
{
    return a->id == b->id && strcmp(a->name, b->name) == 0 &&
           strcmp(a->lib_name, b->lib_name) == 0 && strcmp(a->lib_ver, b->lib_ver) == 0 &&
           a->db == b->db && a->resp == b->resp && a->tx == b->tx &&
           a->tx_refused == b->tx_refused && a->authenticated == b->authenticated &&
           strcmp(a->user, b->user) == 0;
}

/* Whether argument a equals word, ignoring case. */
static bool is(const fence_resp_arg *a, const char *word)
{
    return strlen(word) == a->len && strncasecmp(word, a->ptr, a->len) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t opts = data[0];
    fence_compat_ctx ctx = {
        .server = (opts & 1) ? "fence-store" : "fenced",
        .version = "0.1.0",
        .commands = (opts & 1) ? fence__store_commands : fence__server_commands,
        .n_commands = (opts & 1) ? fence__store_commands_n : fence__server_commands_n,
        .auth = (opts & 2) ? auth_cb : NULL,
        .list = (opts & 4) ? list_cb : NULL,
        .wall_us = (opts & 8) ? wall_cb : NULL,
    };
    size_t nb;
    const fence_compat_command *builtins = fence_compat_builtin_commands(&nb);
    fence_compat_conn c;
    fence_compat_conn_init(&c, 1 + (opts >> 4));
    list_self = &c;
    fence_compat_reply out;
    fence_compat_reply_init(&out);
    fence_resp_limits lim;
    fence_resp_limits_default(&lim);

    const char *p = (const char *)data + 1;
    size_t left = size - 1;
    while (left > 0) {
        ssize_t n = fence_resp_parse(p, left, &lim, &msg);
        if (n <= 0)
            break;
        p += n;
        left -= (size_t)n;
        if (msg.argc == 0)
            continue;
        fence_compat_conn before = c;
        int rc = fence_compat_handle(&ctx, &c, &msg, &out);
        const fence_resp_arg *name = &msg.argv[0];
        if (rc == FENCE_COMPAT_PASS) {
            FUZZ_CHECK(out.len == 0);
            FUZZ_CHECK(same_state(&before, &c));
            /* In a refused MULTI only QUIT reaches the daemon. */
            FUZZ_CHECK(before.tx == FENCE_COMPAT_TX_NONE || is(name, "QUIT"));
            for (size_t i = 0; i < nb; i++)
                FUZZ_CHECK(!is(name, builtins[i].name));
        } else {
            FUZZ_CHECK(rc == FENCE_COMPAT_REPLIED);
            FUZZ_CHECK(resp_check_all(out.ptr, out.len));
        }
        /* The reference model of the transaction state. */
        uint8_t want = before.tx;
        if (is(name, "RESET") && msg.argc == 1)
            want = FENCE_COMPAT_TX_NONE;
        else if (before.tx == FENCE_COMPAT_TX_REFUSED && (is(name, "EXEC") || is(name, "DISCARD")))
            want = FENCE_COMPAT_TX_NONE;
        else if (before.tx == FENCE_COMPAT_TX_NONE && is(name, "MULTI") && msg.argc == 1)
            want = FENCE_COMPAT_TX_REFUSED;
        FUZZ_CHECK(c.tx == want);
        FUZZ_CHECK(c.id == before.id);
        FUZZ_CHECK(c.db == 0);
        FUZZ_CHECK(c.resp == 2);
        FUZZ_CHECK(c.name[0] == '\0' || name_sane(c.name, sizeof(c.name)));
        FUZZ_CHECK(c.lib_name[0] == '\0' || name_sane(c.lib_name, sizeof(c.lib_name)));
        FUZZ_CHECK(c.lib_ver[0] == '\0' || name_sane(c.lib_ver, sizeof(c.lib_ver)));
        FUZZ_CHECK(c.authenticated == (c.user[0] != '\0'));
        FUZZ_CHECK(ctx.auth != NULL || !c.authenticated);
    }
    fence_compat_reply_free(&out);
    return 0;
}
