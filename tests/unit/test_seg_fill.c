/* src/server/seg_fill.c: fenced's posix_fallocate allocates as glibc's,
 * and a file named open-* (a libraft open segment) is then written with
 * zeros: it reads as zeros, has its size, and (where the file system
 * reports extents, FIEMAP) no unwritten extent is left; any other file is
 * only allocated.  No timings. */
#include <fcntl.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "server/seg_fill.h"
#include "../lib/test.h"

#define SEG_BYTES (1024 * 1024 + 4096)

static char dir[] = "/tmp/test_seg_fill.XXXXXX";

/* Create dir/name as libraft does (O_DSYNC, O_EXCL) and allocate it. */
static int make_file(const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_DSYNC, 0600);
    REQUIRE(fd >= 0);
    CHECK(posix_fallocate(fd, 0, SEG_BYTES) == 0);
    return fd;
}

/* 1 if fd has an unwritten extent, 0 if none, -1 if FIEMAP is not there. */
static int has_unwritten(int fd)
{
    size_t sz = sizeof(struct fiemap) + 64 * sizeof(struct fiemap_extent);
    struct fiemap *fm = calloc(1, sz);
    REQUIRE(fm != NULL);
    fm->fm_length = FIEMAP_MAX_OFFSET;
    fm->fm_flags = FIEMAP_FLAG_SYNC;
    fm->fm_extent_count = 64;
    int rv = -1;
    if (ioctl(fd, FS_IOC_FIEMAP, fm) == 0 && fm->fm_mapped_extents > 0) {
        rv = 0;
        for (unsigned i = 0; i < fm->fm_mapped_extents; i++)
            if (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN)
                rv = 1;
    }
    free(fm);
    return rv;
}

/* Whether path holds SEG_BYTES zero bytes. */
static bool all_zero(const char *path)
{
    int fd = open(path, O_RDONLY);
    REQUIRE(fd >= 0);
    static char buf[SEG_BYTES];
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    if (n != SEG_BYTES)
        return false;
    for (size_t i = 0; i < sizeof(buf); i++)
        if (buf[i] != 0)
            return false;
    return true;
}

static void test_open_segment_filled(void)
{
    char path[512];
    uint64_t before = fence__seg_fill_count();
    int fd = make_file("open-1", path, sizeof(path));
    CHECK(fence__seg_fill_count() == before + 1);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == SEG_BYTES);
    int u = has_unwritten(fd);
    CHECK(u != 1); /* -1: no FIEMAP here (tmpfs): the count says it */
    close(fd);
    CHECK(all_zero(path));
    unlink(path);
}

static void test_other_file_allocated_only(void)
{
    char path[512];
    uint64_t before = fence__seg_fill_count();
    int fd = make_file("0000000000000001-0000000000000002", path, sizeof(path));
    CHECK(fence__seg_fill_count() == before);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == SEG_BYTES);
    close(fd);
    CHECK(all_zero(path));
    unlink(path);
}

static void test_errors_are_glibcs(void)
{
    uint64_t before = fence__seg_fill_count();
    CHECK(posix_fallocate(-1, 0, 4096) != 0);
    int p[2];
    REQUIRE(pipe(p) == 0);
    CHECK(posix_fallocate(p[1], 0, 4096) != 0); /* ESPIPE: not a file */
    close(p[0]);
    close(p[1]);
    CHECK(fence__seg_fill_count() == before);
}

int main(void)
{
    REQUIRE(mkdtemp(dir) != NULL);
    TEST_RUN(test_open_segment_filled);
    TEST_RUN(test_other_file_allocated_only);
    TEST_RUN(test_errors_are_glibcs);
    rmdir(dir);
    return TEST_DONE();
}
