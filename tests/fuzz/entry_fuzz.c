/* Fuzz target for the log entry decoder and apply (src/core/entry.c).
 *
 * Each input is used two ways:
 *
 * 1. As one raw entry.  fence_entry_open/next must stay inside the buffer
 *    and give at most FENCE_BATCH_MAX commands; a fully decoded entry of
 *    the current version must re-encode (fence_entry_size/encode) to
 *    exactly the same bytes, since the format has one encoding per entry;
 *    one of an older version must re-encode to an entry that decodes to
 *    the same commands.  fence_fsm_apply_entry on a
 *    fresh state machine must agree with the decoder (the command count,
 *    or -FENCE_ST_INVALID with the state untouched), and fence_fsm_check
 *    must pass afterwards.
 *
 * 2. As a sequence of frames, "u16 length (little-endian) | entry", all
 *    applied to one state machine, so that the fuzzer can build up leases,
 *    locks and waiters over several entries.  After every entry the
 *    invariants must hold and tokens must behave: the last token never
 *    decreases, every grant reported by an event is a new token above all
 *    tokens seen so far, and no result carries a token above the last one.
 *    At the end the state is snapshotted, restored into a fresh state
 *    machine, and must snapshot to the same bytes again; then time is
 *    advanced to the next deadline and the invariants checked once more.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"
#include "fuzz.h"

/* Largest timestamp the core accepts (fsm.h defines it; this is a
 * fallback for an older header). */
#ifndef FENCE_TIME_MS_MAX
#define FENCE_TIME_MS_MAX (1ULL << 62)
#endif

/* Decoded commands of the raw entry, and their results. */
static fence_cmd cmds[FENCE_BATCH_MAX];
static fence_result results[FENCE_BATCH_MAX];

/* What the event callback checks against; reset for every state machine. */
struct token_watch {
    fence_fsm *f;        /* the state machine the events come from */
    uint64_t max_seen;   /* largest token seen in any result or event */
};
static struct token_watch watch;

/* The injected allocator: plain malloc. */
static void *fz_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

/* Frees what fz_alloc returned. */
static void fz_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

/* Checks the deferred outcomes of the last apply/advance call, in order:
 * a granted wait carries a brand-new token. */
static void check_events(struct token_watch *w)
{
    size_t n = 0;
    const fence_event *evs = fence_fsm_events(w->f, &n);
    for (size_t i = 0; i < n; i++) {
        const fence_event *ev = &evs[i];
        FUZZ_CHECK(ev->wait_id != 0);
        FUZZ_CHECK(ev->result.status != FENCE_ST_QUEUED);
        FUZZ_CHECK(ev->result.status <= FENCE_ST_INVALID);
        if (ev->result.status == FENCE_ST_OK) {
            FUZZ_CHECK(ev->result.token > w->max_seen);
            w->max_seen = ev->result.token;
        }
    }
}

/* Creates an empty state machine (check_events reads its events). */
static fence_fsm *new_fsm(void)
{
    fence_fsm_opts o = {
        .alloc = {.alloc = fz_alloc, .free = fz_free, .ctx = NULL},
    };
    fence_fsm *f = NULL;
    FUZZ_CHECK(fence_fsm_create(&o, &f) == 0);
    FUZZ_CHECK(f != NULL);
    return f;
}

/* Returns a malloc'ed snapshot of f, its length in *len. */
static uint8_t *snapshot(const fence_fsm *f, size_t *len)
{
    size_t need = fence_fsm_snapshot_size(f);
    uint8_t *buf = malloc(need ? need : 1);
    FUZZ_CHECK(buf != NULL);
    *len = fence_fsm_snapshot(f, buf, need);
    FUZZ_CHECK(*len > 0);
    FUZZ_CHECK(*len <= need);
    return buf;
}

/* The format version of the entry decode() saw last. */
static uint8_t decoded_version;

/* Decodes data[0..size) as one entry into cmds.  Returns the number of
 * commands, or -1 if the entry is malformed. */
static int decode(const uint8_t *data, size_t size, uint64_t *ts)
{
    fence_entry_iter it;
    if (fence_entry_open(&it, data, size) != 0)
        return -1;
    decoded_version = it.version;
    FUZZ_CHECK(it.count <= FENCE_BATCH_MAX);
    *ts = it.timestamp_ms;
    FUZZ_CHECK(*ts <= FENCE_TIME_MS_MAX);
    uint32_t n = 0;
    int rc;
    fence_cmd c;
    /* A LOCK_MULTI's names array is the iterator's (valid until the next
     * command): copy each into the pool, which lives as long as cmds. */
    static fence_name *pool;
    static size_t pool_cap;
    size_t pool_used = 0;
    static size_t offs[FENCE_BATCH_MAX];
    while ((rc = fence_entry_next(&it, &c)) == 1) {
        FUZZ_CHECK(n < it.count);
        FUZZ_CHECK(c.name_len <= FENCE_NAME_MAX);
        if (c.name_len > 0) {
            FUZZ_CHECK(c.name >= data);
            FUZZ_CHECK(c.name + c.name_len <= data + size);
        }
        FUZZ_CHECK(c.names_count <= FENCE_MULTI_NAMES_MAX);
        if (pool_used + c.names_count > pool_cap) {
            size_t cap = (pool_cap ? pool_cap * 2 : 256) + c.names_count;
            fence_name *np = realloc(pool, cap * sizeof(*np));
            FUZZ_CHECK(np != NULL);
            pool = np;
            pool_cap = cap;
        }
        offs[n] = pool_used;
        for (uint16_t k = 0; k < c.names_count; k++) {
            FUZZ_CHECK(c.names[k].name >= data);
            FUZZ_CHECK(c.names[k].name + c.names[k].len <= data + size);
            pool[pool_used++] = c.names[k];
        }
        cmds[n++] = c;
    }
    for (uint32_t i = 0; i < n; i++)
        cmds[i].names = cmds[i].names_count > 0 ? pool + offs[i] : NULL;
    FUZZ_CHECK(rc == 0 || rc == -FENCE_ST_INVALID);
    if (rc != 0)
        return -1;
    FUZZ_CHECK(n == it.count);
    return (int)n;
}

/* True when two commands name the same LOCK_MULTI names, in order. */
static bool names_same(const fence_cmd *a, const fence_cmd *b)
{
    if (a->names_count != b->names_count)
        return false;
    for (uint16_t k = 0; k < a->names_count; k++)
        if (a->names[k].len != b->names[k].len ||
            memcmp(a->names[k].name, b->names[k].name, a->names[k].len) != 0)
            return false;
    return true;
}

/* True when two decoded commands ask for the same thing. */
static bool same_cmd(const fence_cmd *a, const fence_cmd *b)
{
    return a->type == b->type && a->flags == b->flags &&
           a->req_id == b->req_id && a->lease == b->lease &&
           a->token == b->token && a->wait_id == b->wait_id &&
           a->ttl_ms == b->ttl_ms && a->wait_ms == b->wait_ms &&
           a->lock_delay_ms == b->lock_delay_ms &&
           a->name_len == b->name_len &&
           (a->name_len == 0 || memcmp(a->name, b->name, a->name_len) == 0) &&
           memcmp(&a->limits, &b->limits, sizeof(a->limits)) == 0 &&
           a->owner == b->owner && a->quota_leases == b->quota_leases &&
           a->quota_locks == b->quota_locks && names_same(a, b);
}

/* Checks that enc (the current encoding of the n commands in cmds, from
 * an entry of an older version) decodes to the same commands. */
static void same_after_reencode(const uint8_t *enc, size_t len, uint64_t ts,
                                int n)
{
    fence_entry_iter it;
    FUZZ_CHECK(fence_entry_open(&it, enc, len) == 0);
    FUZZ_CHECK(it.version == fence_entry_version_for(cmds, (uint32_t)n));
    FUZZ_CHECK(it.timestamp_ms == ts);
    FUZZ_CHECK(it.count == (uint32_t)n);
    fence_cmd c;
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(fence_entry_next(&it, &c) == 1);
        FUZZ_CHECK(same_cmd(&c, &cmds[i]));
    }
    FUZZ_CHECK(fence_entry_next(&it, &c) == 0);
}

/* Use 1: the whole input as one raw entry. */
static void raw_entry(const uint8_t *data, size_t size)
{
    uint64_t ts = 0;
    int n = decode(data, size, &ts);
    if (n >= 0) {
        size_t need = fence_entry_size(cmds, (uint32_t)n);
        uint8_t *enc = malloc(need);
        FUZZ_CHECK(enc != NULL);
        FUZZ_CHECK(fence_entry_encode(ts, cmds, (uint32_t)n, enc, need) ==
                   need);
        if (decoded_version == fence_entry_version_for(cmds, (uint32_t)n)) {
            FUZZ_CHECK(need == size);
            FUZZ_CHECK(memcmp(enc, data, size) == 0);
        } else {
            /* An older version: the current encoding says the same. */
            FUZZ_CHECK(decoded_version < fence_entry_version_for(cmds, (uint32_t)n));
            same_after_reencode(enc, need, ts, n);
        }
        free(enc);
    }

    watch.max_seen = 0;
    fence_fsm *f = new_fsm();
    watch.f = f;
    size_t before_len;
    uint8_t *before = snapshot(f, &before_len);
    int rc = fence_fsm_apply_entry(f, data, size, results, FENCE_BATCH_MAX);
    check_events(&watch);
    FUZZ_CHECK(rc == (n >= 0 ? n : -FENCE_ST_INVALID));
    FUZZ_CHECK(fence_fsm_check(f) == NULL);
    if (rc < 0) {
        size_t after_len;
        uint8_t *after = snapshot(f, &after_len);
        FUZZ_CHECK(after_len == before_len);
        FUZZ_CHECK(memcmp(after, before, before_len) == 0);
        free(after);
    }
    free(before);
    fence_fsm_destroy(f);
}

/* Checks the results of one applied entry (whose commands decode() left
 * in cmds) against the token rules: a granted LOCK or ACQUIRE carries a
 * token that was issued, either a new one or the one already held. */
static void check_results(const fence_fsm *f, int n)
{
    uint64_t last = fence_fsm_last_token(f);
    for (int i = 0; i < n; i++) {
        FUZZ_CHECK(results[i].status <= FENCE_ST_LAST); /* NOPERM too: owners differ */
        bool grant = cmds[i].type == FENCE_CMD_LOCK ||
                     cmds[i].type == FENCE_CMD_ACQUIRE;
        /* A request id reused for a different request is refused (the
         * dedup table keeps a fingerprint of the request); this target once
         * found LOCK answered "OK, token 0" with LEADER_START's result. */
        if (!grant || results[i].status != FENCE_ST_OK)
            continue;
        FUZZ_CHECK(results[i].token >= 1);
        FUZZ_CHECK(results[i].token <= last);
        if (results[i].token > watch.max_seen)
            watch.max_seen = results[i].token;
    }
    FUZZ_CHECK(watch.max_seen <= last);
}

/* Use 2: the input as frames of entries applied to one state machine. */
static void framed_entries(const uint8_t *data, size_t size)
{
    watch.max_seen = 0;
    fence_fsm *f = new_fsm();
    watch.f = f;
    uint64_t last_token = 0, last_now = 0;
    size_t off = 0;
    while (size - off >= 2) {
        size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;
        off += 2;
        if (len > size - off)
            break;
        uint64_t ts;
        int decoded = decode(data + off, len, &ts);
        int n = fence_fsm_apply_entry(f, data + off, len, results,
                                      FENCE_BATCH_MAX);
        check_events(&watch);
        off += len;
        FUZZ_CHECK(n == (decoded >= 0 ? decoded : -FENCE_ST_INVALID));
        const char *why = fence_fsm_check(f);
        if (why != NULL) {
            fprintf(stderr, "fence_fsm_check: %s\n", why);
            FUZZ_CHECK(why == NULL);
        }
        check_results(f, n);
        FUZZ_CHECK(fence_fsm_last_token(f) >= last_token);
        FUZZ_CHECK(fence_fsm_now(f) >= last_now);
        last_token = fence_fsm_last_token(f);
        last_now = fence_fsm_now(f);
    }

    /* Snapshot, restore into a fresh state machine, snapshot again. */
    size_t len1, len2;
    uint8_t *snap1 = snapshot(f, &len1);
    FUZZ_CHECK(len1 == fence_fsm_snapshot_size(f));
    fence_fsm *g = new_fsm();
    int rc = fence_fsm_restore(g, snap1, len1);
    FUZZ_CHECK(rc == 0);
    FUZZ_CHECK(fence_fsm_check(g) == NULL);
    uint8_t *snap2 = snapshot(g, &len2);
    FUZZ_CHECK(len2 == len1);
    FUZZ_CHECK(memcmp(snap1, snap2, len1) == 0);
    FUZZ_CHECK(fence_fsm_last_token(g) == fence_fsm_last_token(f));
    FUZZ_CHECK(fence_fsm_now(g) == fence_fsm_now(f));
    free(snap1);
    free(snap2);
    fence_fsm_destroy(g);

    /* Let every pending deadline pass. */
    uint64_t next = fence_fsm_next_deadline(f);
    if (next != UINT64_MAX && next <= FENCE_TIME_MS_MAX) {
        fence_fsm_advance(f, next);
        check_events(&watch);
        FUZZ_CHECK(fence_fsm_check(f) == NULL);
        FUZZ_CHECK(fence_fsm_last_token(f) >= last_token);
        FUZZ_CHECK(watch.max_seen <= fence_fsm_last_token(f));
    }
    fence_fsm_destroy(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    raw_entry(data, size);
    framed_entries(data, size);
    return 0;
}
