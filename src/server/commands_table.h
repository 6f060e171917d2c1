/* fenced's own commands as COMMAND / COMMAND DOCS describe them (the
 * table src/daemon/compat_command.c answers from).  cmd.c's dispatch table stays
 * the authority on what they do; tests/unit/test_compat.c checks that
 * this description is well formed. */
#ifndef FENCE_SERVER_COMMANDS_TABLE_H
#define FENCE_SERVER_COMMANDS_TABLE_H

#include <stddef.h>

#include "daemon/compat.h"

/* docs/protocol.md's commands, in its order. */
extern const fence_compat_command fence__server_commands[];
/* Entries in fence__server_commands. */
extern const size_t fence__server_commands_n;

#endif /* FENCE_SERVER_COMMANDS_TABLE_H */
