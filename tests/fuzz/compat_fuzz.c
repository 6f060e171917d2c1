/* Fuzz target for the Redis-client compatibility module (src/daemon/compat*.c).
 *
 * The input's first byte picks the daemon's table (fenced or fence-store)
 * and whether an auth callback and a CLIENT LIST callback exist; the rest
 * is a client's byte stream, parsed request by request and handed to
 * fence_compat_handle with one connection state.  For every request:
 *   - PASS leaves the reply empty and the state unchanged; REPLIED gives
 *     exactly one well-formed reply in the connection's protocol after the
 *     command (RESP2, or RESP3 after HELLO 3), and the protocol follows a
 *     reference model (a successful HELLO 2/3 sets it, RESET sets 2);
 *   - a shadow connection kept in RESP3 gets every request too: its reply
 *     is well-formed RESP3 and, types mapped back (map -> array, null ->
 *     $-1, ...: tests/lib/resp_check.h), the very bytes of the RESP2 reply
 *     (HELLO, whose proto field differs, and CLIENT, whose resp= does,
 *     excepted);
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

#include "daemon/compat.h"
#include "fuzz.h"
#include "server/commands_table.h"
#include "store/commands_table.h"
#include "../lib/resp_check.h"

#include <stdlib.h>

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
    /* The shadow: the same requests on a connection in RESP3. */
    fence_compat_conn c3;
    fence_compat_conn_init(&c3, 1 + (opts >> 4));
    fence_compat_reply out3;
    fence_compat_reply_init(&out3);
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
            if (c.resp == 3)
                FUZZ_CHECK(resp3_check_all(out.ptr, out.len));
            else
                FUZZ_CHECK(resp_check_all(out.ptr, out.len));
        }
        /* The reference model of the protocol. */
        uint8_t want_resp = before.resp;
        if (is(name, "RESET") && msg.argc == 1) {
            want_resp = 2;
        } else if (rc == FENCE_COMPAT_REPLIED && is(name, "HELLO") && msg.argc >= 2 &&
                   out.len > 0 && out.ptr[0] != '-') {
            char v[24];
            size_t k = msg.argv[1].len < sizeof(v) - 1 ? msg.argv[1].len : sizeof(v) - 1;
            memcpy(v, msg.argv[1].ptr, k);
            v[k] = '\0';
            want_resp = (uint8_t)strtol(v, NULL, 10);
            FUZZ_CHECK(want_resp == 2 || want_resp == 3);
        }
        FUZZ_CHECK(c.resp == want_resp);
        /* The shadow in RESP3 answers the same, in RESP3's types. */
        c3.resp = 3;
        list_self = &c3;
        int rc3 = fence_compat_handle(&ctx, &c3, &msg, &out3);
        list_self = &c;
        FUZZ_CHECK(rc3 == rc);
        if (rc3 == FENCE_COMPAT_REPLIED) {
            if (c3.resp == 3)
                FUZZ_CHECK(resp3_check_all(out3.ptr, out3.len));
            else
                FUZZ_CHECK(resp_check_all(out3.ptr, out3.len));
            if (before.resp == 2 && c.resp == 2 && c3.resp == 3 && !is(name, "HELLO") &&
                !is(name, "CLIENT") && !is(name, "TIME") && !out.failed && !out3.failed) {
                size_t cap = out3.len * 2 + 64;
                char *conv = malloc(cap);
                FUZZ_CHECK(conv != NULL);
                long k = resp3_to_resp2(out3.ptr, out3.len, conv, cap);
                FUZZ_CHECK(k > 0);
                FUZZ_CHECK((size_t)k == out.len && memcmp(conv, out.ptr, out.len) == 0);
                free(conv);
            }
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
        FUZZ_CHECK(c.resp == 2 || c.resp == 3);
        FUZZ_CHECK(c.name[0] == '\0' || name_sane(c.name, sizeof(c.name)));
        FUZZ_CHECK(c.lib_name[0] == '\0' || name_sane(c.lib_name, sizeof(c.lib_name)));
        FUZZ_CHECK(c.lib_ver[0] == '\0' || name_sane(c.lib_ver, sizeof(c.lib_ver)));
        FUZZ_CHECK(c.authenticated == (c.user[0] != '\0'));
        FUZZ_CHECK(ctx.auth != NULL || !c.authenticated);
    }
    fence_compat_reply_free(&out);
    fence_compat_reply_free(&out3);
    return 0;
}
