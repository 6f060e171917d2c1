/* The RESP daemon skeleton's option checks (daemon.h): pure code, no
 * loop or socket, so the config fuzzers link it alone. */
#include "daemon/daemon.h"

#include <stdio.h>

#include "daemon/acl_srv.h"
#include "base/assert.h"
#include "base/log.h"
#include "net/tls.h"

/* Whether the clients reach the daemon by TLS only. */
bool fence__daemon_tls_only(const fence_daemon_conf *c)
{
    return fence__acl_srv_tls_only(c->port, c->tls_port, c->tls_cert, c->tls_key);
}

/* The checks across the shared options; see daemon.h. */
int fence__daemon_conf_check(fence_daemon_conf *c, char *err, size_t cap)
{
    /* The table's rows checked these when they were set. */
    c->log_level_num = fence__log_level_parse(c->log_level);
    FENCE_ASSERT(c->log_level_num >= 0);
    FENCE_ASSERT(c->bind[0] != '\0');
    if (fence__log_format_parse(c->log_format) < 0) {
        snprintf(err, cap, "log-format: '%s' is not text or json", c->log_format);
        return -1;
    }
    if (fence__acl_srv_check_bind(c->bind, c->acl_file[0] != '\0', fence__daemon_tls_only(c),
                                  c->insecure, err, cap) != 0)
        return -1;
    fence_tls_conf tc = {c->tls_cert, c->tls_key, c->tls_ca, c->tls_auth_clients,
                         c->port, c->tls_port, c->unix_socket[0] != '\0'};
    return fence__tls_conf_check(&tc, &c->tls_auth, err, cap);
}
