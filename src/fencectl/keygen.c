/* `fencectl keygen DIR`: make a token signing key pair (docs/security.md,
 * "Signed tokens"): DIR/signing.key for fenced --token-signing-key (mode
 * 0600) and DIR/verify.keys for the resources' --token-verify-keys. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fencectl/cli.h"
#include "token/signtok.h"

static const char keygen_usage[] =
    "usage: fencectl keygen DIR [--scheme ed25519|hmac-sha256] [--key-id ID]\n"
    "                       [--force]\n"
    "\n"
    "Make a token signing key and write DIR/signing.key (the secret, mode 0600:\n"
    "fenced --token-signing-key DIR/signing.key, the same file on every node)\n"
    "and DIR/verify.keys (one \"KEYID SCHEME KEY\" line: give it to fence-store,\n"
    "fence-proxy and libfence-guard as --token-verify-keys).  DIR is created if\n"
    "missing.  To rotate, make a new key elsewhere, append its verify.keys line\n"
    "to the resources' file, switch fenced to the new signing.key, and remove\n"
    "the old line once no token signed with it is still in use.\n"
    "\n"
    "  --scheme S    ed25519 (default: anyone may hold verify.keys) or\n"
    "                hmac-sha256 (for PostgreSQL; verify.keys then holds the\n"
    "                secret itself and is written mode 0600)\n"
    "  --key-id ID   1..32 of [A-Za-z0-9_-], starting with 'k' for ed25519 or\n"
    "                'h' for hmac-sha256 (default: generated)\n"
    "  --force       replace existing files\n";

/* Parsed command line of keygen. */
typedef struct keygen_args {
    const char *dir;              /* DIR */
    fence_signtok_scheme scheme;  /* --scheme */
    const char *key_id;           /* --key-id, or NULL */
    bool force;                   /* --force */
} keygen_args;

/* Whether the command line is `fencectl [opts] keygen ...`: its first word
 * that is not an option (or the value of --server/--timeout) is "keygen". */
bool fencectl_is_keygen(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] != '-')
            return strcmp(argv[i], "keygen") == 0;
        if ((strcmp(argv[i], "--server") == 0 ||
             strcmp(argv[i], "--timeout") == 0) && i + 1 < argc)
            i++;
    }
    return false;
}

/* Parse the command line.  0, 1 for --help (printed), or the usage exit
 * code after printing the reason. */
static int parse_args(int argc, char **argv, keygen_args *a)
{
    memset(a, 0, sizeof(*a));
    a->scheme = FENCE_SIGNTOK_ED25519;
    bool seen_word = false;
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) {
            fputs(keygen_usage, stdout);
            return 1;
        }
        if (strcmp(s, "--force") == 0) {
            a->force = true;
        } else if (strcmp(s, "--scheme") == 0 || strcmp(s, "--key-id") == 0 ||
                   strcmp(s, "--server") == 0 || strcmp(s, "--timeout") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "fencectl: keygen: %s needs a value\n", s);
                return FENCECTL_EXIT_USAGE;
            }
            const char *v = argv[++i];
            if (strcmp(s, "--scheme") == 0) {
                a->scheme = fence_signtok_scheme_parse(v, strlen(v));
                if (a->scheme == FENCE_SIGNTOK_NONE) {
                    fprintf(stderr, "fencectl: keygen: --scheme wants ed25519 "
                            "or hmac-sha256, not \"%s\"\n", v);
                    return FENCECTL_EXIT_USAGE;
                }
            } else if (strcmp(s, "--key-id") == 0) {
                a->key_id = v;
            }
        } else if (s[0] == '-') {
            fprintf(stderr, "fencectl: keygen: unknown option %s (see "
                    "fencectl keygen --help)\n", s);
            return FENCECTL_EXIT_USAGE;
        } else if (!seen_word) {
            seen_word = true; /* "keygen" */
        } else if (a->dir == NULL) {
            a->dir = s;
        } else {
            fprintf(stderr, "fencectl: keygen: one DIR only\n");
            return FENCECTL_EXIT_USAGE;
        }
    }
    if (a->dir == NULL || a->dir[0] == '\0') {
        fprintf(stderr, "fencectl: keygen: no DIR given\n%s", keygen_usage);
        return FENCECTL_EXIT_USAGE;
    }
    return 0;
}

/* Write text to dir/name with mode, durably: a temporary file, fsync, then
 * link (no --force: fails if the file exists) or rename (--force).
 * Returns 0 or prints why and returns an exit code. */
static int write_file(const char *dir, const char *name, const char *text,
                      mode_t mode, bool force)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s/.%s.tmp.%ld", dir, name, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0) {
        fprintf(stderr, "fencectl: keygen: create %s: %s\n", tmp, strerror(errno));
        return FENCECTL_EXIT_ERROR;
    }
    size_t len = strlen(text);
    bool ok = fchmod(fd, mode) == 0 && write(fd, text, len) == (ssize_t)len &&
              fsync(fd) == 0;
    int err = errno;
    if (close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        fprintf(stderr, "fencectl: keygen: write %s: %s\n", tmp, strerror(err));
        unlink(tmp);
        return FENCECTL_EXIT_ERROR;
    }
    int rv = force ? rename(tmp, path) : link(tmp, path);
    err = errno;
    if (!force)
        unlink(tmp);
    if (rv != 0) {
        if (!force && err == EEXIST)
            fprintf(stderr, "fencectl: keygen: %s exists; not replacing it "
                    "without --force\n", path);
        else
            fprintf(stderr, "fencectl: keygen: %s: %s\n", path, strerror(err));
        unlink(tmp);
        return FENCECTL_EXIT_ERROR;
    }
    return 0;
}

/* fsync a directory so the new names are durable (best effort). */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* `fencectl keygen DIR ...`; argv is the whole command line. */
int fencectl_cmd_keygen(int argc, char **argv)
{
    keygen_args a;
    int rv = parse_args(argc, argv, &a);
    if (rv == 1)
        return FENCECTL_EXIT_OK;
    if (rv != 0)
        return rv;
    char path[4096];
    for (int i = 0; i < 2 && !a.force; i++) {
        snprintf(path, sizeof(path), "%s/%s", a.dir,
                 i == 0 ? "signing.key" : "verify.keys");
        if (access(path, F_OK) == 0) {
            fprintf(stderr, "fencectl: keygen: %s exists; not replacing it "
                    "without --force\n", path);
            return FENCECTL_EXIT_ERROR;
        }
    }
    fence_signtok_signer s;
    fence_signtok_key v;
    char err[256];
    if (fence_signtok_keygen(a.scheme, a.key_id, &s, &v, err, sizeof(err)) != 0) {
        fprintf(stderr, "fencectl: keygen: %s\n", err);
        return FENCECTL_EXIT_USAGE;
    }
    if (mkdir(a.dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "fencectl: keygen: mkdir %s: %s\n", a.dir, strerror(errno));
        return FENCECTL_EXIT_ERROR;
    }
    char sline[256], vline[256];
    size_t sn = fence_signtok_key_line(&s.key, sline, sizeof(sline));
    size_t vn = fence_signtok_key_line(&v, vline, sizeof(vline));
    char stext[512], vtext[512];
    snprintf(stext, sizeof(stext),
             "# fenced token signing key (secret): fenced --token-signing-key "
             "THIS_FILE\n%s", sline);
    snprintf(vtext, sizeof(vtext),
             "# fenced token verify keys (--token-verify-keys): one line per "
             "key; append lines to rotate\n%s", vline);
    fence_signtok_signer_wipe(&s);
    if (sn == 0 || vn == 0) {
        fprintf(stderr, "fencectl: keygen: cannot format the key\n");
        return FENCECTL_EXIT_ERROR;
    }
    bool hmac = a.scheme == FENCE_SIGNTOK_HMAC_SHA256;
    rv = write_file(a.dir, "signing.key", stext, 0600, a.force);
    if (rv == 0)
        rv = write_file(a.dir, "verify.keys", vtext, hmac ? 0600 : 0644, a.force);
    memset(stext, 0, sizeof(stext));
    memset(sline, 0, sizeof(sline));
    if (rv != 0)
        return rv;
    sync_dir(a.dir);
    printf("key id %s (%s)\n%s/signing.key  (secret; fenced --token-signing-key)\n"
           "%s/verify.keys  (%s; --token-verify-keys)\n", v.key_id,
           fence_signtok_scheme_name(a.scheme), a.dir, a.dir,
           hmac ? "also secret: an HMAC key verifies AND signs" : "public");
    return FENCECTL_EXIT_OK;
}
