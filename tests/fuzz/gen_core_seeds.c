/* Writes the hand-made seed inputs of the entry and snapshot fuzz targets.
 *
 *   cc -std=c11 -Isrc -Itests/fuzz tests/fuzz/gen_core_seeds.c \
 *      build/libfencecore.a build/libfencecommon.a -o build/gen_core_seeds
 *   build/gen_core_seeds tests/fuzz/corpus
 *
 * It plays a few scripted scenarios (grants, FIFO hand-over on expiry,
 * ACQUIRE, CANCEL, lock-delay, dedup retries, a leader change) through
 * fence_entry_encode and fence_fsm_apply_entry, and writes:
 *   corpus/entry/seed-<scenario>-<i>   each entry alone (use 1 of the target)
 *   corpus/entry/seed-<scenario>       all entries as u16-length frames (use 2)
 *   corpus/entry/seed-bad-*            malformed entries
 *   corpus/snapshot/seed-<scenario>-raw  the final snapshot, mode byte 0
 *   corpus/snapshot/seed-<scenario>-body the snapshot without its CRC,
 *                                        mode byte 1 (the target adds it)
 * Not part of the build: run it by hand when the formats change.  The seeds
 * of older format versions are kept under other names (seed-v1-* entries,
 * seed-v2-* snapshots) so that the decoders of old versions stay fuzzed.
 * seed-checkpoint* and seed-bad-checkpoint-count (LEASE_CHECKPOINT,
 * docs/leases.md: two leases, a checkpoint renewing one, a later one that
 * finds it expired) were written by hand, not by this program.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/entry.h"
#include "core/fsm.h"
#include "core/snapshot.h"

/* Most entries a scenario has. */
#define SCEN_ENTRIES_MAX 16
/* Most commands in one scripted entry. */
#define SCEN_CMDS_MAX 8

/* One scripted entry: a timestamp and its commands. */
struct step {
    uint64_t ts;                      /* the leader's timestamp */
    uint32_t n;                       /* commands used */
    fence_cmd cmds[SCEN_CMDS_MAX];    /* the commands */
};

/* A scenario: a name and its entries. */
struct scenario {
    const char *name;                     /* file name part */
    uint32_t n;                           /* entries used */
    struct step steps[SCEN_ENTRIES_MAX];  /* the entries */
};

static const char *out_dir;

/* Writes buf[0..len) to <out_dir>/<sub>/<name>, exiting on failure. */
static void write_file(const char *sub, const char *name, const void *buf,
                       size_t len)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", out_dir, sub);
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/%s", out_dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (f == NULL || fwrite(buf, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

/* The allocator of the seed state machine: plain malloc. */
static void *gen_alloc(void *ctx, size_t size)
{
    (void)ctx;
    return malloc(size);
}

/* Frees what gen_alloc returned. */
static void gen_free(void *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
}

/* Shorthands for commands. */
static fence_cmd c_leader(void)
{
    fence_cmd c = {.type = FENCE_CMD_LEADER_START};
    fence_limits_default(&c.limits);
    return c;
}

static fence_cmd c_grant(uint64_t ttl, uint64_t delay)
{
    return (fence_cmd){.type = FENCE_CMD_LEASE_GRANT, .ttl_ms = ttl,
                       .lock_delay_ms = delay};
}

static fence_cmd c_lease(uint8_t type, uint64_t lease)
{
    return (fence_cmd){.type = type, .lease = lease};
}

static fence_cmd c_lock(const char *name, uint64_t lease, uint64_t wait)
{
    return (fence_cmd){.type = FENCE_CMD_LOCK, .name = (const uint8_t *)name,
                       .name_len = (uint16_t)strlen(name), .lease = lease,
                       .wait_ms = wait};
}

static fence_cmd c_unlock(const char *name, uint64_t token)
{
    return (fence_cmd){.type = FENCE_CMD_UNLOCK,
                       .name = (const uint8_t *)name,
                       .name_len = (uint16_t)strlen(name), .token = token};
}

static fence_cmd c_acquire(const char *name, uint64_t ttl, uint64_t wait)
{
    return (fence_cmd){.type = FENCE_CMD_ACQUIRE,
                       .name = (const uint8_t *)name,
                       .name_len = (uint16_t)strlen(name), .ttl_ms = ttl,
                       .wait_ms = wait};
}

/* SEM_ACQUIRE of name with n permits for lease (0: the TTL form, ttl). */
static fence_cmd c_sem(const char *name, uint32_t n, uint64_t lease, uint64_t ttl,
                       uint64_t wait)
{
    return (fence_cmd){.type = FENCE_CMD_SEM_ACQUIRE, .name = (const uint8_t *)name,
                       .name_len = (uint16_t)strlen(name), .permits = n, .lease = lease,
                       .ttl_ms = ttl, .wait_ms = wait};
}

static fence_cmd c_sem_release(const char *name, uint32_t slot, uint64_t token)
{
    return (fence_cmd){.type = FENCE_CMD_SEM_RELEASE, .name = (const uint8_t *)name,
                       .name_len = (uint16_t)strlen(name), .slot = slot, .token = token};
}

/* LOCK_MULTI of n names from names (lease 0: the ACQUIRE form, ttl). */
static fence_cmd c_multi(const fence_name *names, uint16_t n, uint64_t lease, uint64_t ttl,
                         uint64_t wait)
{
    return (fence_cmd){.type = FENCE_CMD_LOCK_MULTI, .names = names, .names_count = n,
                       .lease = lease, .ttl_ms = ttl, .wait_ms = wait};
}

/* Names for the multi-lock scenario. */
static const fence_name mn_ab[] = {{(const uint8_t *)"a", 1}, {(const uint8_t *)"b", 1}};
static const fence_name mn_bc[] = {{(const uint8_t *)"b", 1}, {(const uint8_t *)"c", 1}};
static const fence_name mn_cad[] = {{(const uint8_t *)"c", 1}, {(const uint8_t *)"a", 1},
                                    {(const uint8_t *)"d", 1}};

static fence_cmd c_elect(uint8_t type, const char *name, uint64_t lease_or_token,
                         uint64_t wait, const char *value)
{
    fence_cmd c = {.type = type, .name = (const uint8_t *)name,
                   .name_len = (uint16_t)strlen(name), .wait_ms = wait,
                   .value = (const uint8_t *)value, .value_len = (uint32_t)strlen(value)};
    if (type == FENCE_CMD_ELECT_CAMPAIGN)
        c.lease = lease_or_token;
    else
        c.token = lease_or_token;
    return c;
}

/* c as owner with per-owner limits (FENCE_CMD_F_QUOTA). */
static fence_cmd c_quota(fence_cmd c, uint64_t owner, uint32_t leases, uint32_t locks)
{
    c.flags |= FENCE_CMD_F_QUOTA;
    c.owner = owner;
    c.quota_leases = leases;
    c.quota_locks = locks;
    return c;
}

static fence_cmd c_reqid(fence_cmd c, uint64_t req)
{
    c.flags |= FENCE_CMD_F_REQID;
    c.req_id = req;
    return c;
}

/* c as a shared (read) hold: LOCK/ACQUIRE with FENCE_CMD_F_SHARED. */
static fence_cmd c_shared(fence_cmd c)
{
    c.flags |= FENCE_CMD_F_SHARED;
    return c;
}

/* Plays scenario s: writes each entry, the framed sequence and the final
 * snapshot in both snapshot-target modes. */
static void play(const struct scenario *s)
{
    fence_fsm_opts o = {.alloc = {gen_alloc, gen_free, NULL}};
    fence_fsm *f;
    if (fence_fsm_create(&o, &f) != 0)
        exit(1);
    static uint8_t framed[65536];
    size_t flen = 0;
    char name[256];
    for (uint32_t i = 0; i < s->n; i++) {
        const struct step *st = &s->steps[i];
        uint8_t buf[4096];
        size_t len = fence_entry_encode(st->ts, st->cmds, st->n, buf,
                                        sizeof(buf));
        if (len == 0 || flen + 2 + len > sizeof(framed))
            exit(1);
        fence_result res[SCEN_CMDS_MAX];
        int rc = fence_fsm_apply_entry(f, buf, len, res, SCEN_CMDS_MAX);
        if (rc != (int)st->n || fence_fsm_check(f) != NULL) {
            fprintf(stderr, "%s: entry %u: rc %d\n", s->name, i, rc);
            exit(1);
        }
        snprintf(name, sizeof(name), "seed-%s-%u", s->name, i);
        write_file("entry", name, buf, len);
        framed[flen++] = (uint8_t)len;
        framed[flen++] = (uint8_t)(len >> 8);
        memcpy(framed + flen, buf, len);
        flen += len;
    }
    snprintf(name, sizeof(name), "seed-%s", s->name);
    write_file("entry", name, framed, flen);

    size_t need = fence_fsm_snapshot_size(f);
    uint8_t *snap = malloc(need + 1);
    if (snap == NULL)
        exit(1);
    size_t len = fence_fsm_snapshot(f, snap + 1, need);
    snap[0] = 0;
    snprintf(name, sizeof(name), "seed-%s-raw", s->name);
    write_file("snapshot", name, snap, len + 1);
    snap[0] = 1;
    snprintf(name, sizeof(name), "seed-%s-body", s->name);
    write_file("snapshot", name, snap, len + 1 - 4);
    free(snap);
    fence_fsm_destroy(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS-DIR\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    struct scenario sc[] = {
        {"basic", 3, {
            {1000, 2, {c_leader(), c_grant(5000, 0)}},
            {1100, 2, {c_lock("a", 1, 0), c_lock("a", 1, 0)}},
            {1200, 2, {c_unlock("a", 1), c_lock("b", 1, 0)}},
        }},
        {"handover", 4, {
            {1000, 3, {c_leader(), c_grant(1000, 0), c_grant(5000, 0)}},
            {1010, 2, {c_lock("res", 1, 0), c_lock("res", 2, 3000)}},
            {1500, 1, {c_lease(FENCE_CMD_LEASE_KEEPALIVE, 2)}},
            {2500, 1, {(fence_cmd){.type = FENCE_CMD_TICK}}},
        }},
        {"acquire", 4, {
            {10, 1, {c_leader()}},
            {20, 2, {c_acquire("q", 2000, 0), c_acquire("q", 2000, 500)}},
            {30, 2, {c_acquire("q", 2000, 5000),
                     (fence_cmd){.type = FENCE_CMD_CANCEL, .wait_id = 2}}},
            {900, 1, {c_lease(FENCE_CMD_LEASE_REVOKE, 1)}},
        }},
        {"delay", 3, {
            {0, 2, {c_leader(), c_grant(100, 2000)}},
            {5, 3, {c_lock("d", 1, 0), c_grant(10000, 0), c_lock("d", 2, 9000)}},
            {500, 1, {(fence_cmd){.type = FENCE_CMD_TICK}}},
        }},
        {"dedup", 3, {
            {100, 2, {c_leader(), c_reqid(c_grant(3000, 0), 77)}},
            {200, 2, {c_reqid(c_grant(3000, 0), 77),
                      c_reqid(c_lock("x", 1, 0), 78)}},
            {300, 2, {c_reqid(c_lock("x", 1, 0), 78),
                      c_reqid(c_unlock("x", 1), 79)}},
        }},
        {"quota", 4, {
            {100, 3, {c_leader(), c_quota(c_grant(3000, 0), 7, 2, 1),
                      c_quota(c_grant(3000, 0), 7, 2, 1)}},
            {200, 3, {c_quota(c_grant(3000, 0), 7, 2, 1),
                      c_quota(c_lock("qa", 1, 0), 7, 2, 1),
                      c_quota(c_lock("qb", 1, 0), 7, 2, 1)}},
            {300, 2, {c_quota(c_acquire("qc", 2000, 0), 9, 1, 1),
                      c_quota(c_lock("qa", 2, 500), 7, 2, 2)}},
            {400, 2, {c_unlock("qa", 1), c_lease(FENCE_CMD_LEASE_REVOKE, 2)}},
        }},
        {"shared", 4, {
            {100, 4, {c_leader(), c_grant(5000, 0), c_grant(5000, 0), c_grant(5000, 0)}},
            {110, 3, {c_shared(c_lock("rw", 1, 0)), c_shared(c_lock("rw", 2, 0)),
                      c_lock("rw", 3, 2000)}},
            {120, 2, {c_shared(c_acquire("rw", 2000, 1000)),
                      (fence_cmd){.type = FENCE_CMD_UNLOCK_SHARED, .token = 1, .lease = 1,
                                  .name = (const uint8_t *)"rw", .name_len = 2}}},
            {130, 1, {(fence_cmd){.type = FENCE_CMD_UNLOCK_SHARED, .token = 1, .lease = 2,
                                  .name = (const uint8_t *)"rw", .name_len = 2}}},
        }},
        {"sem", 4, {
            {100, 4, {c_leader(), c_grant(3000, 300), c_grant(3000, 0), c_grant(3000, 0)}},
            {200, 4, {c_sem("s", 2, 1, 0, 0), c_reqid(c_sem("s", 2, 2, 0, 0), 5),
                      c_sem("s", 2, 3, 0, 2000), c_sem("s", 2, 0, 1000, 2000)}},
            {300, 3, {c_lock("s#1", 3, 0), c_sem_release("s", 1, 2),
                      c_reqid(c_sem("s", 2, 2, 0, 0), 5)}},
            {3200, 1, {(fence_cmd){.type = FENCE_CMD_TICK}}},
        }},
        {"elect", 4, {
            {100, 3, {c_leader(), c_grant(3000, 0), c_grant(3000, 0)}},
            {200, 3, {c_elect(FENCE_CMD_ELECT_CAMPAIGN, "e", 1, 0, "host-a"),
                      c_elect(FENCE_CMD_ELECT_CAMPAIGN, "e", 2, 5000, "host-b"),
                      c_elect(FENCE_CMD_ELECT_PROCLAIM, "e", 1, 0, "host-a2")}},
            {300, 2, {c_elect(FENCE_CMD_ELECT_RESIGN, "e", 1, 0, ""),
                      c_reqid(c_elect(FENCE_CMD_ELECT_CAMPAIGN, "f", 1, 100, "x"), 5)}},
            {400, 2, {c_elect(FENCE_CMD_ELECT_RESIGN, "f", 3, 0, ""),
                      c_elect(FENCE_CMD_ELECT_CAMPAIGN, "e", 1, 900, "again")}},
        }},
        {"leader", 3, {
            {5000, 3, {c_leader(), c_grant(1000, 0), c_lock("l", 1, 0)}},
            {100, 1, {c_leader()}},
            {900, 1, {c_lock("m", 1, 0)}},
        }},
        /* Multi-locks (issue 21): granted whole, a waiter over a held name
         * keeping a free one reserved, the ACQUIRE form queued behind it,
         * a single LOCK behind both; left queued for the snapshot. */
        {"multi", 3, {
            {100, 4, {c_leader(), c_grant(60000, 0), c_grant(60000, 0), c_grant(60000, 0)}},
            {200, 4, {c_multi(mn_ab, 2, 1, 0, 0), c_reqid(c_multi(mn_bc, 2, 2, 0, 9000), 5),
                      c_multi(mn_cad, 3, 0, 4000, 8000), c_lock("d", 3, 7000)}},
            {300, 1, {c_lock("a", 1, 0)}},
        }},
    };
    for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++)
        play(&sc[i]);

    /* Malformed entries: bad version, short header, bad flags, trailing
     * bytes, a name longer than the entry. */
    static const uint8_t bad_version[] = {FENCE_ENTRY_VERSION + 1, 0, 0, 0, 0, 0, 0,
                                          0, 0, 0, 0, 0, 0};
    static const uint8_t short_header[] = {1, 0, 0, 0};
    static const uint8_t bad_flags[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
                                        2, 0x80, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t trailing[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9};
    static const uint8_t long_name[] = {1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
                                        7, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                        0xff, 0x00, 'a'};
    /* Version 4 without a quota command (one encoding per entry). */
    {
        fence_cmd t = {.type = FENCE_CMD_TICK};
        uint8_t v4[64];
        size_t n4 = fence_entry_encode(5, &t, 1, v4, sizeof(v4));
        if (n4 == 0)
            exit(1);
        v4[0] = 4;
        write_file("entry", "seed-bad-v4-noquota", v4, n4);
    }
    write_file("entry", "seed-bad-version", bad_version, sizeof(bad_version));
    write_file("entry", "seed-bad-short", short_header, sizeof(short_header));
    write_file("entry", "seed-bad-flags", bad_flags, sizeof(bad_flags));
    write_file("entry", "seed-bad-trailing", trailing, sizeof(trailing));
    write_file("entry", "seed-bad-name", long_name, sizeof(long_name));
    return 0;
}
