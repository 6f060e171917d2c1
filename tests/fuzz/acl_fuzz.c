/* Fuzz target for the ACL file parser (src/common/acl.c).
 *
 * The input is an ACL file.  Properties:
 *   - the parser either accepts it or fails with "acl:<line>: reason" (or
 *     out of memory), and a refused file yields no ACL;
 *   - every accepted user's ACL LIST line parses back to a user whose line
 *     is the same (describe is a fixed point) and who has the same rights
 *     for a few commands and names;
 *   - glob matching of every pattern against a few names terminates.
 */
#include <stdio.h>
#include <string.h>

#include "common/acl.h"
#include "fuzz.h"

/* Names and commands the round trip compares. */
static const char *names[] = {"", "orders", "orders:1", "a", "x*y", "[", "billing"};
static const char *cmds[] = {"LOCK", "UNLOCK", "CLUSTER.REMOVE", "FSET", "FENCE.ADMIT", "PING"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fence_acl *acl = NULL;
    char err[320];
    int rc = fence_acl_parse((const char *)data, size, "acl", &acl, err, sizeof(err));
    if (rc != 0) {
        FUZZ_CHECK(acl == NULL);
        FUZZ_CHECK(strncmp(err, "acl:", 4) == 0 || strcmp(err, "out of memory") == 0);
        return 0;
    }
    FUZZ_CHECK(acl != NULL);
    static char line[64 * 1024], line2[64 * 1024];
    for (size_t i = 0; i < fence_acl_count(acl); i++) {
        const fence_acl_user *u = fence_acl_user_at(acl, i);
        size_t need = fence_acl_user_describe(u, line, sizeof(line));
        if (need >= sizeof(line))
            continue;
        fence_acl *again = NULL;
        char err2[320];
        int rc2 = fence_acl_parse(line, strlen(line), "again", &again, err2, sizeof(err2));
        if (rc2 != 0 && strstr(err2, "longer than") != NULL)
            continue; /* the line form may exceed FENCE_ACL_LINE_MAX */
        FUZZ_CHECK(rc2 == 0);
        FUZZ_CHECK(fence_acl_count(again) == 1);
        const fence_acl_user *v = fence_acl_user_at(again, 0);
        fence_acl_user_describe(v, line2, sizeof(line2));
        FUZZ_CHECK(strcmp(line, line2) == 0);
        FUZZ_CHECK(fence_acl_user_on(u) == fence_acl_user_on(v));
        for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            FUZZ_CHECK(fence_acl_key_allowed(u, names[k], strlen(names[k])) ==
                       fence_acl_key_allowed(v, names[k], strlen(names[k])));
        for (size_t k = 0; k < sizeof(cmds) / sizeof(cmds[0]); k++) {
            uint32_t cats = fence_acl_command_cats(cmds[k], NULL);
            FUZZ_CHECK(fence_acl_cmd_allowed(u, cmds[k], cats) ==
                       fence_acl_cmd_allowed(v, cmds[k], cats));
        }
        FUZZ_CHECK(fence_acl_is_admin(u) == fence_acl_is_admin(v));
        fence_acl_free(again);
    }
    fence_acl_free(acl);
    return 0;
}
