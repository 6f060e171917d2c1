/* Fuzz target for the guard's log decoder (src/guard/format.c).
 *
 * The input is a whole guard log file.  Properties:
 *   - the scan returns 0 or FENCE_GUARD_ECORRUPT (with a message), and the
 *     good part it reports lies within the input;
 *   - on success, scanning just the good prefix succeeds with no torn bytes
 *     and the same records (what open keeps after cutting a torn tail);
 *   - re-encoding those records (one frame each) scans back to the same
 *     sequence, and appending a valid frame after the good prefix adds
 *     exactly its record (a recovered log accepts new appends).
 */
#include <assert.h>
#include <string.h>

#include "fence_guard.h"
#include "fuzz.h"
#include "guard/format.h"

/* Most records remembered per scan (bounded: the input is bounded too). */
#define RECS_MAX 4096

/* One decoded record. */
typedef struct rec {
    const char *name; /* points into the scanned buffer */
    size_t len;       /* name length */
    uint64_t token;   /* token */
} rec;

/* Records collected by a scan. */
typedef struct recs {
    rec r[RECS_MAX]; /* the records, in file order */
    size_t n;        /* how many (stops counting at RECS_MAX) */
} recs;

static recs first, second;
static unsigned char buf[(RECS_MAX + 1) * (FENCE__GUARD_FRAME_HDR +
                                           FENCE__GUARD_REC_MAX) + 64];

/* Scan callback: checks the record and remembers it. */
static int collect(void *ctx, const char *name, size_t len, uint64_t token)
{
    recs *rs = ctx;
    FUZZ_CHECK(len >= 1 && len <= FENCE_GUARD_NAME_MAX);
    if (rs->n < RECS_MAX)
        rs->r[rs->n] = (rec){name, len, token};
    rs->n++;
    return 0;
}

/* True if both scans saw the same records (names compared by content). */
static int same(const recs *a, const recs *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n && i < RECS_MAX; i++)
        if (a->r[i].len != b->r[i].len || a->r[i].token != b->r[i].token ||
            memcmp(a->r[i].name, b->r[i].name, a->r[i].len) != 0)
            return 0;
    return 1;
}

/* Append one frame holding one record at buf[off]; returns the new end. */
static size_t put_frame(size_t off, const char *name, size_t len,
                        uint64_t token)
{
    size_t n = fence__guard_rec_encode(buf + off + FENCE__GUARD_FRAME_HDR,
                                       name, len, token);
    fence__guard_frame_header(buf + off, buf + off + FENCE__GUARD_FRAME_HDR,
                              n);
    return off + FENCE__GUARD_FRAME_HDR + n;
}

/* Check the decoder's properties on one input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fence__guard_scan_result res;
    first.n = 0;
    int rc = fence__guard_scan(data, size, collect, &first, &res);
    FUZZ_CHECK(rc == 0 || rc == FENCE_GUARD_ECORRUPT);
    if (rc != 0) {
        FUZZ_CHECK(res.err[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(res.valid_end <= size);
    FUZZ_CHECK(res.valid_end >= FENCE__GUARD_FILE_HDR);
    FUZZ_CHECK(res.valid_end + res.torn_bytes == size);
    FUZZ_CHECK(res.records == first.n);

    second.n = 0;
    fence__guard_scan_result res2;
    FUZZ_CHECK(fence__guard_scan(data, (size_t)res.valid_end, collect,
                                 &second, &res2) == 0);
    FUZZ_CHECK(res2.torn_bytes == 0);
    FUZZ_CHECK(same(&first, &second));

    if (first.n > RECS_MAX)
        return 0;
    fence__guard_file_header(buf);
    size_t off = FENCE__GUARD_FILE_HDR;
    for (size_t i = 0; i < first.n; i++)
        off = put_frame(off, first.r[i].name, first.r[i].len,
                        first.r[i].token);
    second.n = 0;
    FUZZ_CHECK(fence__guard_scan(buf, off, collect, &second, &res2) == 0);
    FUZZ_CHECK(res2.torn_bytes == 0);
    FUZZ_CHECK(same(&first, &second));

    /* The recovered prefix plus one new frame: one more record. */
    if (res.valid_end + FENCE__GUARD_FRAME_HDR + FENCE__GUARD_REC_MAX <=
        sizeof(buf)) {
        memcpy(buf, data, (size_t)res.valid_end);
        off = put_frame((size_t)res.valid_end, "new", 3, 42);
        recs *third = &second;
        third->n = 0;
        FUZZ_CHECK(fence__guard_scan(buf, off, collect, third, &res2) == 0);
        FUZZ_CHECK(third->n == first.n + 1);
        FUZZ_CHECK(third->r[third->n - 1].token == 42 || third->n > RECS_MAX);
    }
    return 0;
}
