/* Start-up warnings shared by the daemons (startup_warn.h): a daemon that
 * runs without users, or that serves a non-loopback address because it
 * was told --insecure, says so in its log before it serves anyone. */
#include "daemon/startup_warn.h"

#include <stdbool.h>

#include "daemon/acl_srv.h"
#include "base/assert.h"
#include "base/log.h"

/* See startup_warn.h. */
void fence__startup_warn_auth(const char *daemon, const char *bind, bool has_acl_file,
                              bool tls_only, bool insecure)
{
    FENCE_ASSERT(daemon != NULL);
    FENCE_ASSERT(bind != NULL);
    bool loopback = fence__acl_srv_is_loopback(bind);
    if (!has_acl_file && loopback) {
        FENCE_LOG_W("%s: authentication is off (no --acl-file): every client that reaches "
                    "%s is user 'default' with every right (+@all ~*); give --acl-file to "
                    "have users (docs/security.md)", daemon, bind);
        return;
    }
    if (loopback || !insecure)
        return;
    /* Loud: three lines, as --ignore-tokens does. */
    for (int i = 0; i < 3; i++) {
        if (!has_acl_file)
            FENCE_LOG_W("!!! --insecure: %s serves %s, NOT a loopback address, WITHOUT "
                        "AUTHENTICATION: anyone who can reach it is user 'default' with "
                        "every right and owns every lock. Give --acl-file and TLS. !!!",
                        daemon, bind);
        else if (!tls_only)
            FENCE_LOG_W("!!! --insecure: %s serves plain TCP on %s, NOT a loopback address: "
                        "passwords and tokens cross the network IN CLEAR. Serve TLS only "
                        "(--tls-port, --port 0). !!!", daemon, bind);
        else
            break; /* users and TLS only: --insecure changes nothing here */
    }
}

/* See startup_warn.h. */
void fence__startup_warn_proxy(const char *listen_host, bool tls, bool verify_keys)
{
    FENCE_ASSERT(listen_host != NULL);
    if (!verify_keys)
        FENCE_LOG_W("fence-proxy: tokens are not verified (no --token-verify-keys): any "
                    "client that reaches %s may send any token number for any fence; "
                    "give --token-verify-keys (docs/security.md)", listen_host);
    if (fence__acl_srv_is_loopback(listen_host) || tls)
        return;
    for (int i = 0; i < 3; i++)
        FENCE_LOG_W("!!! fence-proxy serves plain HTTP on %s, NOT a loopback address: "
                    "tokens cross the network IN CLEAR and can be replayed. Give "
                    "--tls-cert and --tls-key. !!!", listen_host);
}
