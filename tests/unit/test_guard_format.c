/* The guard's file format: torn tails are recovered, corruption anywhere
 * else is refused with a clear message, and the decoder survives any bytes. */
#include <fcntl.h>
#include <sys/stat.h>

#include "fence_guard.h"
#include "guard/format.h"
#include "../lib/test.h"

/* A guard directory with a log of several frames, and the offsets where
 * each frame starts. */
typedef struct fixture {
    char dir[64];          /* the directory */
    char log[128];         /* its log file */
    size_t frame_at[16];   /* start offset of each frame */
    size_t frames;         /* frames written */
    size_t size;           /* file size */
} fixture;

/* Read the whole log into a new buffer; *n gets its size. */
static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    REQUIRE(f != NULL);
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)sz + 1);
    REQUIRE(buf != NULL);
    REQUIRE(fread(buf, 1, (size_t)sz, f) == (size_t)sz);
    fclose(f);
    *n = (size_t)sz;
    return buf;
}

/* Replace the log with buf[0..n). */
static void spit(const char *path, const unsigned char *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    REQUIRE(f != NULL);
    REQUIRE(fwrite(buf, 1, n, f) == n);
    fclose(f);
}

/* Build a log: fence "a" gets tokens 1..8, one frame each (sequential
 * admits on one thread never share a batch). */
static void setup(fixture *fx)
{
    memset(fx, 0, sizeof(*fx));
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/fence-guard-fmt.XXXXXX");
    REQUIRE(mkdtemp(fx->dir) != NULL);
    snprintf(fx->log, sizeof(fx->log), "%s/fence-guard.log", fx->dir);
    fence_guard *g = NULL;
    REQUIRE(fence_guard_open(fx->dir, NULL, &g) == 0);
    for (uint64_t t = 1; t <= 8; t++) {
        fence_guard_stats st;
        fence_guard_stats_get(g, &st);
        fx->frame_at[fx->frames++] = (size_t)st.log_bytes;
        REQUIRE(fence_guard_admit(g, "a", 1, t, NULL) == 0);
    }
    fence_guard_stats st;
    fence_guard_stats_get(g, &st);
    fx->size = (size_t)st.log_bytes;
    fence_guard_close(g);
}

/* Remove the fixture's files. */
static void teardown(fixture *fx)
{
    char p[160];
    unlink(fx->log);
    snprintf(p, sizeof(p), "%s/fence-guard.lock", fx->dir);
    unlink(p);
    rmdir(fx->dir);
}

/* Open the fixture; returns the code, *high the mark of "a" if opened,
 * msg (if not NULL) a copy of the error message. */
static int reopen(fixture *fx, uint64_t *high, char *msg, size_t msgcap)
{
    fence_guard *g = NULL;
    int rc = fence_guard_open(fx->dir, NULL, &g);
    if (msg)
        snprintf(msg, msgcap, "%s", fence_guard_errmsg(g));
    if (rc == 0 && high)
        REQUIRE(fence_guard_high(g, "a", 1, high) == 0);
    fence_guard_close(g);
    return rc;
}

/* Every way of cutting the last frame short is a torn tail: the guard
 * opens with the previous mark, truncates the file, and works on. */
static void test_truncated_tail(void)
{
    fixture fx;
    setup(&fx);
    size_t n;
    unsigned char *orig = slurp(fx.log, &n);
    REQUIRE(n == fx.size);
    size_t last = fx.frame_at[fx.frames - 1];
    for (size_t cut = last; cut < n; cut++) {
        spit(fx.log, orig, cut);
        uint64_t h = 0;
        char msg[600];
        int rc = reopen(&fx, &h, msg, sizeof(msg));
        if (rc != 0)
            printf("#   cut at %zu: %s\n", cut, msg);
        CHECK(rc == 0);
        CHECK_EQ_U64(h, 7);
        struct stat st;
        REQUIRE(stat(fx.log, &st) == 0);
        CHECK_EQ_U64(st.st_size, last); /* torn bytes removed */
    }
    /* After recovery, new admits append cleanly and survive reopen. */
    fence_guard *g = NULL;
    REQUIRE(fence_guard_open(fx.dir, NULL, &g) == 0);
    CHECK(fence_guard_admit(g, "a", 1, 6, NULL) == FENCE_GUARD_ESTALE);
    CHECK(fence_guard_admit(g, "a", 1, 9, NULL) == 0);
    fence_guard_close(g);
    uint64_t h = 0;
    CHECK(reopen(&fx, &h, NULL, 0) == 0);
    CHECK_EQ_U64(h, 9);
    free(orig);
    teardown(&fx);
}

/* Zero-filled blocks after the last frame (allocated, never written) and a
 * last frame whose payload was torn are recovered too. */
static void test_zero_tail_and_torn_payload(void)
{
    fixture fx;
    setup(&fx);
    size_t n;
    unsigned char *orig = slurp(fx.log, &n);
    unsigned char *buf = calloc(1, n + 8192);
    REQUIRE(buf != NULL);
    memcpy(buf, orig, n);
    spit(fx.log, buf, n + 8192);
    uint64_t h = 0;
    fence_guard *g = NULL;
    REQUIRE(fence_guard_open(fx.dir, NULL, &g) == 0);
    fence_guard_stats st;
    fence_guard_stats_get(g, &st);
    CHECK_EQ_U64(st.torn_bytes, 8192);
    REQUIRE(fence_guard_high(g, "a", 1, &h) == 0);
    CHECK_EQ_U64(h, 8);
    fence_guard_close(g);
    /* Garble the last frame's payload (the tail of the final write). */
    memcpy(buf, orig, n);
    buf[n - 1] ^= 0x55;
    spit(fx.log, buf, n);
    CHECK(reopen(&fx, &h, NULL, 0) == 0);
    CHECK_EQ_U64(h, 7);
    free(buf);
    free(orig);
    teardown(&fx);
}

/* A flipped byte anywhere before the last frame makes open fail with
 * ECORRUPT and a message naming the file; the marks are never reset. */
static void test_flip_in_middle(void)
{
    fixture fx;
    setup(&fx);
    size_t n;
    unsigned char *orig = slurp(fx.log, &n);
    size_t last = fx.frame_at[fx.frames - 1];
    int refused = 0, tried = 0;
    for (size_t at = 0; at < last; at++) {
        for (int bit = 0; bit < 8; bit += 3) {
            orig[at] ^= (unsigned char)(1u << bit);
            spit(fx.log, orig, n);
            orig[at] ^= (unsigned char)(1u << bit);
            char msg[600];
            int rc = reopen(&fx, NULL, msg, sizeof(msg));
            tried++;
            if (rc == FENCE_GUARD_ECORRUPT) {
                refused++;
                if (strstr(msg, fx.log) == NULL ||
                    strstr(msg, "corrupt") == NULL) {
                    printf("#   unclear message: %s\n", msg);
                    CHECK(0);
                }
            } else {
                printf("#   flip at %zu bit %d: rc %d\n", at, bit, rc);
                CHECK(0);
            }
        }
    }
    CHECK_EQ_U64(refused, tried);
    char msg[600];
    orig[fx.frame_at[2] + 14] ^= 1; /* a payload byte of frame 2 */
    spit(fx.log, orig, n);
    CHECK(reopen(&fx, NULL, msg, sizeof(msg)) == FENCE_GUARD_ECORRUPT);
    printf("#   example: %s\n", msg);
    CHECK(strstr(msg, "checksum") != NULL);
    free(orig);
    teardown(&fx);
}

/* Scan callback that counts records. */
static int count_rec(void *ctx, const char *name, size_t len, uint64_t token)
{
    (void)name;
    (void)token;
    REQUIRE(len >= 1 && len <= 256);
    (*(uint64_t *)ctx)++;
    return 0;
}

/* The pure decoder: header checks, frame encoding round trip, and random
 * garbage never crashes it (results are 0 or ECORRUPT only). */
static void test_scan_pure(void)
{
    fence__guard_scan_result res;
    uint64_t recs = 0;
    CHECK(fence__guard_scan(NULL, 0, count_rec, &recs, &res) ==
          FENCE_GUARD_ECORRUPT);
    unsigned char buf[4096];
    fence__guard_file_header(buf);
    CHECK(fence__guard_scan(buf, 16, count_rec, &recs, &res) == 0);
    CHECK_EQ_U64(res.frames, 0);
    buf[9] = 7; /* version byte changes the header checksum */
    CHECK(fence__guard_scan(buf, 16, count_rec, &recs, &res) ==
          FENCE_GUARD_ECORRUPT);
    fence__guard_file_header(buf);
    size_t off = 16;
    size_t p = off + FENCE__GUARD_FRAME_HDR;
    p += fence__guard_rec_encode(buf + p, "x", 1, 5);
    p += fence__guard_rec_encode(buf + p, "yy", 2, 6);
    fence__guard_frame_header(buf + off, buf + off + FENCE__GUARD_FRAME_HDR,
                              p - off - FENCE__GUARD_FRAME_HDR);
    recs = 0;
    CHECK(fence__guard_scan(buf, p, count_rec, &recs, &res) == 0);
    CHECK_EQ_U64(recs, 2);
    CHECK_EQ_U64(res.valid_end, p);
    /* A CRC-valid frame with an impossible record is corruption. */
    buf[off + FENCE__GUARD_FRAME_HDR] = 0; /* name length 0 */
    buf[off + FENCE__GUARD_FRAME_HDR + 1] = 0;
    fence__guard_frame_header(buf + off, buf + off + FENCE__GUARD_FRAME_HDR,
                              p - off - FENCE__GUARD_FRAME_HDR);
    CHECK(fence__guard_scan(buf, p, count_rec, &recs, &res) ==
          FENCE_GUARD_ECORRUPT);
    CHECK(strstr(res.err, "name length") != NULL);
    /* Known CRC32C check value ("123456789" -> 0xE3069283). */
    CHECK_EQ_U64(fence__crc32c("123456789", 9), 0xE3069283u);
    unsigned seed = 1;
    for (int i = 0; i < 20000; i++) {
        size_t n = 16 + (size_t)(rand_r(&seed) % 200);
        fence__guard_file_header(buf);
        for (size_t j = 16; j < n; j++)
            buf[j] = (unsigned char)(rand_r(&seed) % 4 ? 0 : rand_r(&seed));
        int rc = fence__guard_scan(buf, n, count_rec, &recs, &res);
        CHECK(rc == 0 || rc == FENCE_GUARD_ECORRUPT);
        CHECK(res.valid_end <= n);
    }
}

int main(void)
{
    TEST_RUN(test_truncated_tail);
    TEST_RUN(test_zero_tail_and_torn_payload);
    TEST_RUN(test_flip_in_middle);
    TEST_RUN(test_scan_pure);
    return TEST_DONE();
}
