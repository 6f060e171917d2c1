/* Start-up warnings about how a daemon is exposed (startup_warn.c). */
#ifndef FENCE_COMMON_STARTUP_WARN_H
#define FENCE_COMMON_STARTUP_WARN_H

#include <stdbool.h>

/* fenced and fence-store, once the options are checked: without an
 * --acl-file on a loopback bind, one WARN line saying that every client is
 * 'default' with every right; with --insecure on a non-loopback bind
 * (which the option check let through), three loud WARN lines saying what
 * is exposed (no users, or passwords in clear).  Nothing otherwise. */
void fence__startup_warn_auth(const char *daemon, const char *bind, bool has_acl_file,
                              bool tls_only, bool insecure);

/* fence-proxy: a WARN when tokens are not verified (no verify keys), and
 * three loud lines when it serves plain HTTP on a non-loopback address. */
void fence__startup_warn_proxy(const char *listen_host, bool tls, bool verify_keys);

#endif /* FENCE_COMMON_STARTUP_WARN_H */
