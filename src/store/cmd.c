/* fence-store command table and argument checks (see cmd.h). */
#include "store/cmd.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/assert.h"
#include "base/limits.h"
#include "store/commands_table.h"

/* Format an error message into err (printf style) and return -1. */
static int fail(const char **code, const char *c, char *err, size_t errcap,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int fail(const char **code, const char *c, char *err, size_t errcap,
                const char *fmt, ...)
{
    *code = c;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errcap, fmt, ap);
    va_end(ap);
    return -1;
}

/* Copy up to 40 bytes of p[0..n) into out as printable ASCII; see cmd.h. */
void fence__store_printable(char *out, size_t cap, const char *p, size_t n)
{
    FENCE_ASSERT(cap > 4);
    size_t w = 0;
    for (size_t i = 0; i < n && w + 4 < cap && i < 40; i++) {
        unsigned char ch = (unsigned char)p[i];
        out[w++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
    }
    if (n > 40 && w + 4 < cap) {
        memcpy(out + w, "...", 3);
        w += 3;
    }
    out[w] = '\0';
}

/* "FSET <fence> <token> <key> <value>", "PING [message]": the usage line of
 * row d, from its argument names. */
static void usage_of(const fence_compat_command *d, char *out, size_t cap)
{
    size_t at = (size_t)snprintf(out, cap, "%s", d->name);
    for (size_t i = 0; i < d->n_args && at < cap; i++) {
        bool opt = (d->args[i].flags & FENCE_COMPAT_ARG_OPTIONAL) != 0;
        at += (size_t)snprintf(out + at, cap - at, opt ? " [%s]" : " <%s>", d->args[i].name);
    }
}

/* Check the whole request and fill *out; see cmd.h. */
int fence__store_cmd_parse(const fence_resp_msg *msg, uint64_t value_max,
                    fence_signtok_verifier *verifier, fence_store_cmd *out, const char **code, char *err,
                    size_t errcap)
{
    FENCE_ASSERT(msg != NULL);
    FENCE_ASSERT(msg->argc >= 1);
    FENCE_ASSERT(out != NULL);
    memset(out, 0, sizeof(*out));
    const fence_resp_arg *a = msg->argv;
    const fence_compat_command *d =
        fence_compat_command_find(fence__store_commands, fence__store_commands_n, a[0].ptr,
                                  a[0].len);
    char shown[64];
    if (d == NULL) {
        fence__store_printable(shown, sizeof(shown), a[0].ptr, a[0].len);
        return fail(code, "ERR", err, errcap,
                    "unknown command '%s' (commands: FSET FDEL FINCR FGET "
                    "FENCE.HIGH FENCE.ADMIT PING INFO)", shown);
    }
    if (!fence_compat_command_arity_ok(d, msg->argc)) {
        char usage[160];
        usage_of(d, usage, sizeof(usage));
        return fail(code, "ERR", err, errcap,
                    "wrong number of arguments for '%s' (usage: %s)",
                    d->name, usage);
    }
    out->op = d->op;
    int next = 1;
    switch (d->op) {
    case FENCE_STORE_OP_FSET:
    case FENCE_STORE_OP_FDEL:
    case FENCE_STORE_OP_FINCR:
    case FENCE_STORE_OP_FENCE_ADMIT:
    case FENCE_STORE_OP_FENCE_HIGH:
        out->fence = a[1].ptr;
        out->fence_len = a[1].len;
        if (a[1].len < 1 || a[1].len > FENCE_NAME_MAX)
            return fail(code, "ERR", err, errcap,
                        "fence name must be 1..%d bytes (got %zu)",
                        FENCE_NAME_MAX, a[1].len);
        next = 2;
        if (d->op == FENCE_STORE_OP_FENCE_HIGH)
            break;
        /* Signed tokens (docs/security.md): with verify keys, only a token
         * fenced signed for this fence; without, a signed token counts by
         * its number.  Checked here, before anything reads or moves the
         * mark. */
        if (verifier != NULL || memchr(a[2].ptr, '.', a[2].len) != NULL) {
            char why[192];
            if (fence_signtok_check(verifier, a[1].ptr, a[1].len, a[2].ptr, a[2].len,
                                    &out->token, why, sizeof(why)) != 0)
                return fail(code, "BADTOKEN", err, errcap, "%s", why);
            if (out->token > FENCE_STORE_TOKEN_MAX)
                return fail(code, "BADTOKEN", err, errcap,
                            "token %" PRIu64 " is above %" PRIu64, out->token,
                            FENCE_STORE_TOKEN_MAX);
        } else if (fence_resp_parse_u64(a[2].ptr, a[2].len, FENCE_STORE_TOKEN_MAX,
                                        &out->token) != 0) {
            fence__store_printable(shown, sizeof(shown), a[2].ptr, a[2].len);
            return fail(code, "ERR", err, errcap,
                        "invalid token '%s': a token is a decimal integer "
                        "0..%" PRIu64, shown, FENCE_STORE_TOKEN_MAX);
        }
        next = 3;
        break;
    default:
        break;
    }
    switch (d->op) {
    case FENCE_STORE_OP_FSET:
    case FENCE_STORE_OP_FDEL:
    case FENCE_STORE_OP_FINCR:
    case FENCE_STORE_OP_FGET:
        out->key = a[next].ptr;
        out->key_len = a[next].len;
        if (a[next].len < 1 || a[next].len > FENCE_STORE_KEY_MAX)
            return fail(code, "ERR", err, errcap,
                        "key must be 1..%d bytes (got %zu)",
                        FENCE_STORE_KEY_MAX, a[next].len);
        next++;
        break;
    default:
        break;
    }
    if (d->op == FENCE_STORE_OP_FSET) {
        out->value = a[next].ptr;
        out->value_len = a[next].len;
        if (a[next].len > value_max)
            return fail(code, "LIMIT", err, errcap,
                        "value is %zu bytes; this fence-store accepts at "
                        "most %" PRIu64 " (--max-value); nothing was written",
                        a[next].len, value_max);
    }
    if (d->op == FENCE_STORE_OP_PING && msg->argc == 2) {
        out->value = a[1].ptr;
        out->value_len = a[1].len;
    }
    return 0;
}

/* The canonical name of op. */
const char *fence__store_cmd_name(fence_store_op op)
{
    for (size_t i = 0; i < fence__store_commands_n; i++)
        if (fence__store_commands[i].op == op)
            return fence__store_commands[i].name;
    FENCE_ASSERT(!"op missing from the command table");
    return "?";
}

/* True for the commands that carry a fence and a token and may write. */
int fence__store_cmd_is_write(fence_store_op op)
{
    return op == FENCE_STORE_OP_FSET || op == FENCE_STORE_OP_FDEL ||
           op == FENCE_STORE_OP_FINCR || op == FENCE_STORE_OP_FENCE_ADMIT;
}
