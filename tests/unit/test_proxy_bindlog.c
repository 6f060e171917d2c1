/* src/proxy/bindlog.c: fence-proxy's durable bindings (path -> first fence)
 * read back after appends, a torn tail cut off, corruption refused. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proxy/bindlog.h"
#include "../lib/test.h"

static char names[64][64];
static size_t nnames;

/* each(): remember "path=fence". */
static int each(void *arg, const char *path, size_t plen, const char *fence, size_t flen,
                char *err, size_t cap)
{
    (void)arg;
    (void)err;
    (void)cap;
    if (nnames < 64)
        snprintf(names[nnames++], sizeof(names[0]), "%.*s=%.*s", (int)plen, path, (int)flen,
                 fence);
    return 0;
}

static char dir[64];
static char file[128];

static void fresh_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/test_proxy_bindlog.XXXXXX");
    if (mkdtemp(dir) == NULL)
        abort();
    snprintf(file, sizeof(file), "%s/%s", dir, FENCE_PROXY_BINDLOG_FILE);
}

static void cleanup(void)
{
    unlink(file);
    rmdir(dir);
}

/* Open the log; returns 0 or -1 and leaves the message in err. */
static int open_log(fence_proxy_bindlog **l, char *err, size_t cap)
{
    nnames = 0;
    return fence__proxy_bindlog_open(dir, each, NULL, l, err, cap);
}

static void append(fence_proxy_bindlog *l, const char *path, const char *fence)
{
    char buf[256];
    size_t len = FENCE_PROXY_BINDLOG_BATCH_HDR;
    len += fence__proxy_bindlog_record(buf + len, path, strlen(path), fence, strlen(fence));
    CHECK(fence__proxy_bindlog_append(l, buf, len) == 0);
}

static off_t file_size(void)
{
    struct stat st;
    return stat(file, &st) == 0 ? st.st_size : -1;
}

static void add_bytes(const void *p, size_t n)
{
    int fd = open(file, O_WRONLY | O_APPEND);
    REQUIRE(fd >= 0);
    REQUIRE(write(fd, p, n) == (ssize_t)n);
    close(fd);
}

static void test_roundtrip(void)
{
    fresh_dir();
    char err[512];
    fence_proxy_bindlog *l = NULL;
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    CHECK_EQ_U64(nnames, 0);
    append(l, "/doc", "acct");
    append(l, "/docs/a/b", "doc:a");
    fence__proxy_bindlog_close(l);
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    CHECK_EQ_U64(nnames, 2);
    CHECK_STR(names[0], "/doc=acct");
    CHECK_STR(names[1], "/docs/a/b=doc:a");
    CHECK_EQ_U64(fence__proxy_bindlog_torn(l), 0);
    append(l, "/third", "f");
    fence__proxy_bindlog_close(l);
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    CHECK_EQ_U64(nnames, 3);
    fence__proxy_bindlog_close(l);
    cleanup();
}

/* A torn final batch (cut short, zero-filled, bad checksum) was never
 * acknowledged: cut off, and the file truncated. */
static void test_torn_tail(void)
{
    fresh_dir();
    char err[512];
    fence_proxy_bindlog *l = NULL;
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    append(l, "/doc", "acct");
    fence__proxy_bindlog_close(l);
    off_t good = file_size();
    static const char zeros[40];
    add_bytes(zeros, sizeof(zeros));
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    CHECK_EQ_U64(nnames, 1);
    CHECK_EQ_U64(fence__proxy_bindlog_torn(l), sizeof(zeros));
    CHECK(file_size() == good);
    fence__proxy_bindlog_close(l);
    /* Half a batch. */
    char buf[256];
    size_t len = FENCE_PROXY_BINDLOG_BATCH_HDR;
    len += fence__proxy_bindlog_record(buf + len, "/x", 2, "y", 1);
    fence__proxy_bindlog_seal(buf, len);
    add_bytes(buf, len - 3);
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    CHECK_EQ_U64(nnames, 1);
    CHECK(file_size() == good);
    fence__proxy_bindlog_close(l);
    /* A whole final batch with a flipped bit. */
    buf[len - 1] ^= 1;
    add_bytes(buf, len);
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    CHECK_EQ_U64(nnames, 1);
    CHECK(file_size() == good);
    append(l, "/after", "z");
    fence__proxy_bindlog_close(l);
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    CHECK_EQ_U64(nnames, 2);
    fence__proxy_bindlog_close(l);
    cleanup();
}

/* A bad batch before a good one is corruption: open fails, naming it. */
static void test_corrupt(void)
{
    fresh_dir();
    char err[512];
    fence_proxy_bindlog *l = NULL;
    REQUIRE(open_log(&l, err, sizeof(err)) == 0);
    append(l, "/doc", "acct");
    append(l, "/two", "b");
    fence__proxy_bindlog_close(l);
    int fd = open(file, O_RDWR);
    REQUIRE(fd >= 0);
    char c;
    REQUIRE(pread(fd, &c, 1, FENCE_PROXY_BINDLOG_BATCH_HDR + 5) == 1);
    c ^= 0x20;
    REQUIRE(pwrite(fd, &c, 1, FENCE_PROXY_BINDLOG_BATCH_HDR + 5) == 1);
    close(fd);
    off_t size = file_size();
    CHECK(open_log(&l, err, sizeof(err)) == -1);
    CHECK(strstr(err, "corrupt") != NULL);
    CHECK(strstr(err, FENCE_PROXY_BINDLOG_FILE) != NULL);
    CHECK(file_size() == size); /* nothing cut off */
    cleanup();
}

int main(void)
{
    TEST_RUN(test_roundtrip);
    TEST_RUN(test_torn_tail);
    TEST_RUN(test_corrupt);
    return TEST_DONE();
}
