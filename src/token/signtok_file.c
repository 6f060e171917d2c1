/* Reading the key files of signed tokens (signing.key, verify.keys); the
 * parsing itself is pure and lives in signtok.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "token/signtok.h"

/* Read all of path (at most FENCE_SIGNTOK_FILE_MAX bytes) into a new
 * buffer; with private_only, refuse a file group or others may read.
 * Returns 0, FENCE_SIGNTOK_EIO, EKEYFILE or ENOMEM (reason in err). */
static int read_file(const char *path, bool private_only, char **buf_out,
                     size_t *len_out, char *err, size_t errcap)
{
    *buf_out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errcap, "open %s: %s", path, strerror(errno));
        return FENCE_SIGNTOK_EIO;
    }
    int rc = 0;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errcap, "stat %s: %s", path, strerror(errno));
        rc = FENCE_SIGNTOK_EIO;
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "%s is not a regular file", path);
        rc = FENCE_SIGNTOK_EKEYFILE;
        goto out_close;
    }
    if ((st.st_mode & S_IWOTH) != 0) {
        /* Whoever may write a verify.keys file may add his own key and
         * mint tokens every resource accepts. */
        snprintf(err, errcap, "%s may be written by any user (mode %03o), who could add "
                 "a key of his own: chmod o-w it", path, (unsigned)(st.st_mode & 0777));
        rc = FENCE_SIGNTOK_EKEYFILE;
        goto out_close;
    }
    if (private_only && (st.st_mode & 077) != 0) {
        snprintf(err, errcap, "%s may be read by group or others (mode "
                 "%03o); it holds a secret key: chmod 600 it", path,
                 (unsigned)(st.st_mode & 0777));
        rc = FENCE_SIGNTOK_EKEYFILE;
        goto out_close;
    }
    if (st.st_size > FENCE_SIGNTOK_FILE_MAX) {
        snprintf(err, errcap, "%s is larger than %d bytes", path,
                 FENCE_SIGNTOK_FILE_MAX);
        rc = FENCE_SIGNTOK_EKEYFILE;
        goto out_close;
    }
    size_t cap = (size_t)st.st_size + 1;
    char *buf = malloc(cap);
    if (buf == NULL) {
        snprintf(err, errcap, "out of memory reading %s", path);
        rc = FENCE_SIGNTOK_ENOMEM;
        goto out_close;
    }
    size_t got = 0;
    for (;;) {
        ssize_t r = read(fd, buf + got, cap - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(err, errcap, "read %s: %s", path, strerror(errno));
            sodium_memzero(buf, cap);
            free(buf);
            rc = FENCE_SIGNTOK_EIO;
            goto out_close;
        }
        if (r == 0)
            break;
        got += (size_t)r;
        if (got == cap) {
            snprintf(err, errcap, "%s grew while it was read", path);
            sodium_memzero(buf, cap);
            free(buf);
            rc = FENCE_SIGNTOK_EIO;
            goto out_close;
        }
    }
    *buf_out = buf;
    *len_out = got;
out_close:
    close(fd);
    return rc;
}

/* Prefix the path to a parser's message in err. */
static void prefix_path(const char *path, char *err, size_t errcap)
{
    char tmp[256];
    snprintf(tmp, sizeof(tmp), "%s", err);
    snprintf(err, errcap, "%s: %s", path, tmp);
}

/* Load verify.keys and make a verifier. */
int fence_signtok_verifier_load(const char *path, size_t cache_max,
                                fence_signtok_verifier **out, char *err,
                                size_t errcap)
{
    if (path == NULL || out == NULL) {
        snprintf(err, errcap, "invalid argument");
        return FENCE_SIGNTOK_EINVAL;
    }
    *out = NULL;
    char *text;
    size_t len;
    int rc = read_file(path, false, &text, &len, err, errcap);
    if (rc != 0)
        return rc;
    fence_signtok_key *keys = calloc(FENCE_SIGNTOK_KEYS_MAX, sizeof(*keys));
    if (keys == NULL) {
        snprintf(err, errcap, "out of memory");
        rc = FENCE_SIGNTOK_ENOMEM;
        goto out_free_text;
    }
    size_t n = 0;
    rc = fence_signtok_keys_parse(text, len, keys, FENCE_SIGNTOK_KEYS_MAX, &n,
                                  err, errcap);
    if (rc != 0) {
        prefix_path(path, err, errcap);
        goto out_free_keys;
    }
    rc = fence_signtok_verifier_new(keys, n, cache_max, out);
    if (rc != 0)
        snprintf(err, errcap, "%s: %s", path, fence_signtok_strerror(rc));
out_free_keys:
    sodium_memzero(keys, FENCE_SIGNTOK_KEYS_MAX * sizeof(*keys));
    free(keys);
out_free_text:
    sodium_memzero(text, len);
    free(text);
    return rc;
}

/* Reload verify.keys: a new verifier, swapped in only when it loaded. */
int fence_signtok_verifier_reload(const char *path, size_t cache_max,
                                  fence_signtok_verifier **vp, char *err,
                                  size_t errcap)
{
    if (path == NULL || vp == NULL) {
        snprintf(err, errcap, "invalid argument");
        return FENCE_SIGNTOK_EINVAL;
    }
    fence_signtok_verifier *nv = NULL;
    int rc = fence_signtok_verifier_load(path, cache_max, &nv, err, errcap);
    if (rc != 0)
        return rc;
    fence_signtok_verifier *old = *vp;
    if (old != NULL)
        fence_signtok_verifier_stats_carry(nv, old);
    *vp = nv;
    fence_signtok_verifier_free(old);
    return 0;
}

/* Load signing.key. */
int fence_signtok_signer_load(const char *path, fence_signtok_signer *out,
                              char *err, size_t errcap)
{
    if (path == NULL || out == NULL) {
        snprintf(err, errcap, "invalid argument");
        return FENCE_SIGNTOK_EINVAL;
    }
    char *text;
    size_t len;
    int rc = read_file(path, true, &text, &len, err, errcap);
    if (rc != 0)
        return rc;
    rc = fence_signtok_signer_parse(text, len, out, err, errcap);
    if (rc != 0)
        prefix_path(path, err, errcap);
    sodium_memzero(text, len);
    free(text);
    return rc;
}
