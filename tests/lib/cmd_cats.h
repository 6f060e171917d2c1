/* The ACL categories of a command, looked up where the daemons look them
 * up: fenced's and fence-store's command tables (the acl column), and the
 * ACL command's subcommand rows.  For the tests of the ACL module, which
 * link the two tables ($(COMPAT_TABLES), mk/compat.mk). */
#ifndef FENCE_TESTS_CMD_CATS_H
#define FENCE_TESTS_CMD_CATS_H

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "daemon/acl_srv.h"
#include "daemon/compat.h"
#include "server/commands_table.h"
#include "store/commands_table.h"

/* Categories of command name (for ACL: of subcommand sub), 0 if unknown. */
static inline uint32_t test_cmd_cats(const char *name, const char *sub)
{
    if (strcasecmp(name, "ACL") == 0 && sub != NULL) {
        size_t n;
        const fence_compat_command *t = fence__acl_srv_subcommands(&n);
        char full[64];
        snprintf(full, sizeof(full), "ACL|%s", sub);
        const fence_compat_command *r = fence_compat_command_find(t, n, full, strlen(full));
        return r != NULL ? r->acl : 0;
    }
    const fence_compat_command *r =
        fence_compat_command_find(fence__server_commands, fence__server_commands_n, name,
                                  strlen(name));
    if (r == NULL)
        r = fence_compat_command_find(fence__store_commands, fence__store_commands_n, name,
                                      strlen(name));
    return r != NULL ? r->acl : 0;
}

#endif /* FENCE_TESTS_CMD_CATS_H */
