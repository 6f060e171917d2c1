/* Corpus replay: runs a fuzz target's LLVMFuzzerTestOneInput over every
 * file of its corpus directory, without libFuzzer, so `make test` (normal
 * and ASan/UBSan builds) re-checks every input the fuzzers ever kept.
 *
 *   fuzz_<name>_replay [corpus-dir]
 *
 * The directory defaults to FUZZ_CORPUS_DIR, compiled in by mk/fuzz.mk.
 * Files are fed in name order (names starting with "." are skipped), each
 * in its own forked child so that a crash is pinned to the input that
 * caused it; each input is copied into a buffer of exactly its size so
 * that the sanitizers see any read past its end.  The empty input is
 * always fed first.  Output: one "ok - <name>: N inputs" line, or a
 * "# <file>: ..." line per failing input and "not ok - ..." (exit 1).
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz.h"

#ifndef FUZZ_NAME
#define FUZZ_NAME "fuzz"
#endif
#ifndef FUZZ_CORPUS_DIR
#define FUZZ_CORPUS_DIR "."
#endif

/* Seconds one input may run before it counts as a hang. */
#define REPLAY_INPUT_TIMEOUT_S 60
/* Largest corpus file replayed; corpora hold small inputs. */
#define REPLAY_FILE_MAX (64u * 1024 * 1024)

/* The target may define LLVMFuzzerInitialize; most do not. */
#pragma weak LLVMFuzzerInitialize

/* Tells scandir to skip "." and "..", and hidden files such as .gitkeep. */
static int visible(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

/* Reads the whole file at path into a buffer of exactly its size (one
 * byte for an empty file), stored in *out with its length in *len.
 * Returns 0, or -1 with errno set. */
static int read_file(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    struct stat st;
    if (fstat(fileno(f), &st) != 0)
        goto out_close;
    if (st.st_size < 0 || (unsigned long long)st.st_size > REPLAY_FILE_MAX) {
        errno = EFBIG;
        goto out_close;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL)
        goto out_close;
    if (n > 0 && fread(buf, 1, n, f) != n) {
        errno = EIO;
        goto out_free_buf;
    }
    fclose(f);
    *out = buf;
    *len = n;
    return 0;

out_free_buf:
    free(buf);
out_close:
    fclose(f);
    return -1;
}

/* Runs the target on data[0..len) in a forked child and reports whether
 * it returned normally; a failure is described on stdout, naming what. */
static int run_one(const char *what, const uint8_t *data, size_t len)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        printf("# %s: fork: %s\n", what, strerror(errno));
        return -1;
    }
    if (pid == 0) {
        alarm(REPLAY_INPUT_TIMEOUT_S);
        int rc = LLVMFuzzerTestOneInput(data, len);
        _exit(rc == 0 || rc == -1 ? 0 : 3);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            printf("# %s: waitpid: %s\n", what, strerror(errno));
            return -1;
        }
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status))
        printf("# %s: killed by signal %d%s\n", what, WTERMSIG(status),
               WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
    else if (WEXITSTATUS(status) == 3)
        printf("# %s: LLVMFuzzerTestOneInput returned an invalid value\n",
               what);
    else
        printf("# %s: exited with status %d\n", what, WEXITSTATUS(status));
    return -1;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : FUZZ_CORPUS_DIR;
    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);

    struct dirent **list = NULL;
    int n = scandir(dir, &list, visible, alphasort);
    if (n < 0) {
        printf("not ok - %s: cannot read corpus dir %s: %s\n", FUZZ_NAME, dir,
               strerror(errno));
        return 1;
    }
    int inputs = 0, failed = 0;
    static const uint8_t empty[1];
    inputs++;
    if (run_one("(empty input)", empty, 0) != 0)
        failed++;
    for (int i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(list[i]);
            continue;
        }
        uint8_t *data;
        size_t len;
        inputs++;
        if (read_file(path, &data, &len) != 0) {
            printf("# %s: cannot read: %s\n", path, strerror(errno));
            failed++;
        } else {
            if (run_one(path, data, len) != 0)
                failed++;
            free(data);
        }
        free(list[i]);
    }
    free(list);
    if (failed > 0) {
        printf("not ok - %s: %d of %d inputs failed (corpus %s)\n", FUZZ_NAME,
               failed, inputs, dir);
        return 1;
    }
    printf("ok - %s: %d inputs\n", FUZZ_NAME, inputs);
    return 0;
}
