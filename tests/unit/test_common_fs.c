/* src/base/fs: mkdir -p, directory fsync, free-space checks. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "base/fs.h"
#include "../lib/test.h"

/* A fresh temporary directory for the case. */
static void tmpdir(char *out, size_t cap)
{
    snprintf(out, cap, "/tmp/test_common_fs.XXXXXX");
    REQUIRE(mkdtemp(out) != NULL);
}

/* Nested, existing, trailing and doubled slashes; a file in the way. */
static void test_mkdir_p(void)
{
    char d[64], p[256];
    struct stat st;
    tmpdir(d, sizeof(d));
    snprintf(p, sizeof(p), "%s/a/b//c/", d);
    CHECK(fence__fs_mkdir_p(p, 0755) == 0);
    snprintf(p, sizeof(p), "%s/a/b/c", d);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(fence__fs_mkdir_p(p, 0755) == 0); /* exists: fine */
    snprintf(p, sizeof(p), "%s/file", d);
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    REQUIRE(fd >= 0);
    close(fd);
    CHECK(fence__fs_mkdir_p(p, 0755) == ENOTDIR);
    snprintf(p, sizeof(p), "%s/file/sub", d);
    CHECK(fence__fs_mkdir_p(p, 0755) == ENOTDIR);
    CHECK(fence__fs_mkdir_p("", 0755) == ENOENT);
    char longp[FENCE_FS_PATH_MAX + 8];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    CHECK(fence__fs_mkdir_p(longp, 0755) == ENAMETOOLONG);
}

/* fsync of a directory works, of a missing one says ENOENT. */
static void test_fsync_dir(void)
{
    char d[64], p[128];
    tmpdir(d, sizeof(d));
    CHECK(fence__fs_fsync_dir(d) == 0);
    snprintf(p, sizeof(p), "%s/missing", d);
    CHECK(fence__fs_fsync_dir(p) == ENOENT);
}

/* Free bytes are reported; asking for more than exists is ENOSPC. */
static void test_space(void)
{
    char d[64];
    uint64_t avail = 0, seen = 0;
    tmpdir(d, sizeof(d));
    CHECK(fence__fs_free_bytes(d, &avail) == 0);
    CHECK(fence__fs_check_space(d, 1, &seen) == (avail >= 1 ? 0 : ENOSPC));
    CHECK(fence__fs_check_space(d, UINT64_MAX, &seen) == ENOSPC);
    CHECK(seen > 0 || avail == 0);
    CHECK(fence__fs_check_space("/nonexistent/dir", 1, NULL) == ENOENT);
}

int main(void)
{
    TEST_RUN(test_mkdir_p);
    TEST_RUN(test_fsync_dir);
    TEST_RUN(test_space);
    return TEST_DONE();
}
