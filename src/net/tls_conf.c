/* The pure part of client TLS (see tls.h): option checks and the common
 * name rule.  No OpenSSL here, so the config fuzzers and every program
 * that only parses options link without it. */
#include "net/tls.h"

#include <stdio.h>
#include <string.h>

#include "base/assert.h"
#include "base/limits.h"

/* Parse a tls-auth-clients word. */
int fence__tls_auth_parse(const char *word, bool have_ca, int *auth)
{
    FENCE_ASSERT(word != NULL);
    FENCE_ASSERT(auth != NULL);
    if (word[0] == '\0')
        *auth = have_ca ? FENCE_TLS_AUTH_YES : FENCE_TLS_AUTH_NO;
    else if (strcmp(word, "yes") == 0)
        *auth = FENCE_TLS_AUTH_YES;
    else if (strcmp(word, "no") == 0)
        *auth = FENCE_TLS_AUTH_NO;
    else if (strcmp(word, "optional") == 0)
        *auth = FENCE_TLS_AUTH_OPTIONAL;
    else
        return -1;
    return 0;
}

/* The word for a mode. */
const char *fence__tls_auth_name(int auth)
{
    switch (auth) {
    case FENCE_TLS_AUTH_NO:
        return "no";
    case FENCE_TLS_AUTH_YES:
        return "yes";
    case FENCE_TLS_AUTH_OPTIONAL:
        return "optional";
    default:
        return "?";
    }
}

/* Check the TLS options with the listeners. */
int fence__tls_conf_check(const fence_tls_conf *tc, int *auth, char *err,
                          size_t cap)
{
    FENCE_ASSERT(tc != NULL);
    FENCE_ASSERT(tc->cert != NULL && tc->key != NULL);
    FENCE_ASSERT(tc->ca != NULL && tc->auth_word != NULL);
    bool cert = tc->cert[0] != '\0';
    bool key = tc->key[0] != '\0';
    bool ca = tc->ca[0] != '\0';
    if (fence__tls_auth_parse(tc->auth_word, ca, auth) != 0) {
        snprintf(err, cap, "tls-auth-clients: '%.32s' is not yes, no or "
                 "optional", tc->auth_word);
        return -1;
    }
    if (tc->tls_port == 0) {
        if (cert || key || ca) {
            snprintf(err, cap, "%s: set, but no tls-port to serve TLS on",
                     cert ? "tls-cert" : key ? "tls-key" : "tls-ca");
            return -1;
        }
        if (tc->auth_word[0] != '\0') {
            snprintf(err, cap, "tls-auth-clients: set, but no tls-port");
            return -1;
        }
    } else {
        if (!cert || !key) {
            snprintf(err, cap, "tls-port: needs tls-cert and tls-key");
            return -1;
        }
        if (tc->tls_port == tc->port) {
            snprintf(err, cap, "tls-port: %llu is also the plain port",
                     (unsigned long long)tc->tls_port);
            return -1;
        }
        if (*auth != FENCE_TLS_AUTH_NO && !ca) {
            snprintf(err, cap, "tls-auth-clients: %s needs tls-ca (the CA "
                     "client certificates are checked against)",
                     fence__tls_auth_name(*auth));
            return -1;
        }
    }
    if (tc->port == 0 && tc->tls_port == 0 && !tc->have_unix) {
        snprintf(err, cap, "port: 0 (no plain TCP listener) needs tls-port "
                 "or unix-socket");
        return -1;
    }
    return 0;
}

/* The common-name rule. */
bool fence__tls_cn_valid(const char *cn, size_t len)
{
    if (cn == NULL || len == 0 || len > FENCE_TLS_CN_MAX)
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)cn[i];
        if (ch < 0x20 || ch == 0x7f)
            return false;
    }
    return true;
}
