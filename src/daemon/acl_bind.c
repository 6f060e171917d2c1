/* Safe defaults (acl_srv.h, fence__acl_srv_check_bind): a daemon that
 * serves a non-loopback address must have users and TLS-only clients,
 * unless told --insecure.
 * Kept apart from acl_srv.c so the option parsers link it alone. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "daemon/acl_srv.h"

/* See acl_srv.h. */
bool fence__acl_srv_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return strcmp(host, "localhost") == 0;
}

/* See acl_srv.h. */
int fence__acl_srv_check_bind(const char *host, bool has_acl_file, bool tls_only,
                              bool insecure, char *err, size_t err_len)
{
    struct in_addr a4;
    struct in6_addr a6;
    /* Not an IP literal: the listener refuses it with its own error. */
    bool loopback = true;
    if (inet_pton(AF_INET, host, &a4) == 1)
        loopback = (ntohl(a4.s_addr) >> 24) == 127;
    else if (inet_pton(AF_INET6, host, &a6) == 1)
        loopback = IN6_IS_ADDR_LOOPBACK(&a6);
    if (loopback || insecure || (has_acl_file && tls_only))
        return 0;
    if (!has_acl_file)
        snprintf(err, err_len,
                 "bind: %s is not a loopback address and no --acl-file is given: anyone who "
                 "can reach the port would own every lock; give --acl-file FILE (and TLS), "
                 "or --insecure to serve without users anyway (docs/security.md)",
                 host);
    else
        snprintf(err, err_len,
                 "bind: %s is not a loopback address and clients are not TLS-only: passwords "
                 "and tokens would cross the network in clear; give --tls-port with "
                 "--tls-cert and --tls-key and --port 0, or --insecure to serve plain TCP "
                 "anyway (docs/security.md)",
                 host);
    return -1;
}

/* See acl_srv.h. */
bool fence__acl_srv_tls_only(uint64_t port, uint64_t tls_port, const char *cert,
                             const char *key)
{
    return port == 0 && tls_port != 0 && cert[0] != '\0' && key[0] != '\0';
}
