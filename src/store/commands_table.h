/* fence-store's own commands as COMMAND / COMMAND DOCS describe them (the
 * table src/daemon/compat_command.c answers from).  cmd.c's table stays the
 * authority on what they do; tests/unit/test_compat.c checks that this
 * description is well formed. */
#ifndef FENCE_STORE_COMMANDS_TABLE_H
#define FENCE_STORE_COMMANDS_TABLE_H

#include <stddef.h>

#include "daemon/compat.h"

/* docs/fence-store.md's commands, in its order. */
extern const fence_compat_command fence__store_commands[];
/* Entries in fence__store_commands. */
extern const size_t fence__store_commands_n;

#endif /* FENCE_STORE_COMMANDS_TABLE_H */
