/* Fuzz target for fence-store's request handling before the database:
 * the RESP parser with fence-store's limits, then the command checks
 * (src/store/cmd.c).  The input is a client's byte stream, pipelined.
 * Properties, for every request:
 *   - a checked command's fields obey every limit (fence 1..256 bytes,
 *     token <= INT64_MAX, key 1..511 bytes, value <= --max-value) and its
 *     name matches the request's first word;
 *   - a refused command has the code ERR or LIMIT and a one-line,
 *     printable message (it goes into an error reply as is).
 */
#include <assert.h>
#include <string.h>
#include <strings.h>

#include "base/limits.h"
#include "fuzz.h"
#include "proto/resp.h"
#include "store/cmd.h"

/* A small --max-value so that the limit is reachable. */
#define VALUE_MAX 300

static fence_resp_msg msg;

/* Check one parsed request against the command checks. */
static void check_request(void)
{
    fence_store_cmd cmd;
    const char *code = NULL;
    char err[256];
    memset(err, 0x5a, sizeof(err));
    if (fence__store_cmd_parse(&msg, VALUE_MAX, NULL, &cmd, &code, err,
                               sizeof(err)) != 0) {
        FUZZ_CHECK(code != NULL);
        FUZZ_CHECK(strcmp(code, "ERR") == 0 || strcmp(code, "LIMIT") == 0);
        size_t n = strnlen(err, sizeof(err));
        FUZZ_CHECK(n > 0 && n < sizeof(err));
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(err[i] >= 0x20 && err[i] < 0x7f);
        return;
    }
    const char *name = fence__store_cmd_name(cmd.op);
    FUZZ_CHECK(strlen(name) == msg.argv[0].len);
    FUZZ_CHECK(strncasecmp(name, msg.argv[0].ptr, msg.argv[0].len) == 0);
    if (fence__store_cmd_is_write(cmd.op) ||
        cmd.op == FENCE_STORE_OP_FENCE_HIGH) {
        FUZZ_CHECK(cmd.fence != NULL);
        FUZZ_CHECK(cmd.fence_len >= 1 && cmd.fence_len <= FENCE_NAME_MAX);
    }
    if (fence__store_cmd_is_write(cmd.op))
        FUZZ_CHECK(cmd.token <= FENCE_STORE_TOKEN_MAX);
    if (cmd.key != NULL)
        FUZZ_CHECK(cmd.key_len >= 1 && cmd.key_len <= FENCE_STORE_KEY_MAX);
    if (cmd.op == FENCE_STORE_OP_FSET) {
        FUZZ_CHECK(cmd.key != NULL);
        FUZZ_CHECK(cmd.value != NULL);
        FUZZ_CHECK(cmd.value_len <= VALUE_MAX);
    }
}

/* Parse the stream request by request and check each. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fence_resp_limits lim;
    fence_resp_limits_default(&lim);
    lim.args_max = 16;
    lim.bulk_max = VALUE_MAX;
    size_t off = 0;
    while (off < size) {
        ssize_t n = fence_resp_parse((const char *)data + off, size - off,
                                     &lim, &msg);
        if (n == FENCE_RESP_PARTIAL || n < 0)
            break;
        FUZZ_CHECK((size_t)n <= size - off);
        off += (size_t)n;
        if (msg.argc > 0)
            check_request();
    }
    return 0;
}
