/* Fuzz target for fence-store's WAL record parser (src/store/walrec.c),
 * the code recovery runs over whatever a crash or a bad disk left in a
 * WAL file.  The input is a region of a WAL file, scanned as recovery
 * does.  Properties:
 *   - parse never reads past the input and takes a multiple of 8 bytes,
 *     at least the header;
 *   - a parsed record's operations walk to the end of its payload, each
 *     one well-formed (kind, database, key 1..511 bytes, DEL without a
 *     value), exactly nops of them;
 *   - re-encoding the operations with the record's LSN gives back the
 *     same bytes (encode(parse(x)) == x).
 */
#include <assert.h>
#include <string.h>

#include "fuzz.h"
#include "store/walrec.h"

/* Check one parsed record and re-encode it. */
static void check_record(const uint8_t *p, size_t n, const fence_store_walrec *r)
{
    FUZZ_CHECK(n >= FENCE_STORE_WALREC_HDR);
    FUZZ_CHECK(n % 8 == 0);
    fence_store_walbuf b = {0};
    fence__store_walbuf_reset(&b);
    size_t off = 0;
    uint32_t k = 0;
    fence_store_walop op;
    int rc;
    while ((rc = fence__store_walrec_op_next(r->payload, r->payload_len, &off, &op)) == 1) {
        FUZZ_CHECK(op.op == FENCE_STORE_WALOP_PUT || op.op == FENCE_STORE_WALOP_DEL);
        FUZZ_CHECK(op.dbi < FENCE_STORE_WALDB_N);
        FUZZ_CHECK(op.key_len >= 1 && op.key_len <= FENCE_STORE_WALREC_KEY_MAX);
        FUZZ_CHECK(op.op == FENCE_STORE_WALOP_PUT || op.value_len == 0);
        FUZZ_CHECK(fence__store_walbuf_op(&b, op.op, op.dbi, op.key, op.key_len,
                                          op.value, op.value_len) == 0);
        k++;
    }
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(off == r->payload_len);
    FUZZ_CHECK(k == r->nops);
    FUZZ_CHECK(fence__store_walbuf_finish(&b, r->lsn) == 0);
    FUZZ_CHECK(b.len == n);
    FUZZ_CHECK(memcmp(b.p, p, n) == 0);
    fence__store_walbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;
    fence_store_walrec r;
    while (off < size) {
        size_t n = fence__store_walrec_parse(data + off, size - off, &r);
        if (n == 0) {
            off += 8; /* recovery's resync step */
            continue;
        }
        FUZZ_CHECK(n <= size - off);
        check_record(data + off, n, &r);
        off += n;
    }
    return 0;
}
