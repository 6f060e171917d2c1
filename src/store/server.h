/* fence-store's network side: a libuv loop serving RESP clients. */
#ifndef FENCE_STORE_SERVER_H
#define FENCE_STORE_SERVER_H

#include "store/config.h"
#include "store/db.h"

/* Listen on cfg->daemon.bind:cfg->daemon.port and serve until SIGINT or SIGTERM.
 * Returns the process exit status (0 after a clean stop). */
int fence__store_server_run(const fence_store_config *cfg, fence_store_db *db);

#endif /* FENCE_STORE_SERVER_H */
