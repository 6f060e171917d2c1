/* Log entries: one raft entry carries one group-commit batch of commands.
 *
 * Layout (integers little-endian):
 *   u8 version (3 or 4) | u64 timestamp_ms | u32 count | count x command
 *   command = u8 type | u8 flags | u64 req_id | u64 owner (from version 3)
 *             | u32 quota_leases | u32 quota_locks (version 4, only with
 *               FENCE_CMD_F_QUOTA)
 *             | fields by type:
 *     LEADER_START   u32 leases_max | u32 locks_max | u32 waiters_max
 *                    | u32 dedup_max | u32 waits_max (from version 2)
 *     TICK           (nothing)
 *     LEASE_GRANT    u64 ttl_ms | u64 lock_delay_ms
 *     LEASE_KEEPALIVE, LEASE_REVOKE   u64 lease
 *     LOCK           name | u64 lease | u64 wait_ms
 *     UNLOCK         name | u64 token
 *     ACQUIRE        name | u64 ttl_ms | u64 lock_delay_ms | u64 wait_ms
 *     CANCEL         u64 wait_id
 *   version 5 (the coordination kinds, docs/recipes.md):
 *     ELECT_CAMPAIGN name | u64 lease | u64 wait_ms | value
 *     ELECT_PROCLAIM name | u64 token | value
 *     ELECT_RESIGN   name | u64 token
 *     SEM_ACQUIRE    name | u32 permits | u64 lease | u64 ttl_ms
 *                    | u64 lock_delay_ms | u64 wait_ms
 *     SEM_RELEASE    name | u32 slot | u64 token
 *     LOCK_MULTI     u16 count (1..FENCE_MULTI_NAMES_MAX) | count x name
 *                    | u64 lease | u64 ttl_ms | u64 lock_delay_ms | u64 wait_ms
 *     UNLOCK_SHARED  name | u64 token | u64 lease
 *     LEASE_CHECKPOINT u32 count (0..FENCE_CHECKPOINT_IDS_MAX)
 *                    | count x u64 lease id (docs/leases.md)
 *     LOCK, ACQUIRE with FENCE_CMD_F_SHARED: as without it
 *   name = u16 length (0..FENCE_NAME_MAX) | bytes
 *   value = u32 length (0..FENCE_ELECT_VALUE_MAX) | bytes
 * A req_id is present (non-zero allowed) only with FENCE_CMD_F_REQID.
 * The decoder checks every length and value range it can; semantic checks
 * (a name of length 0, a TTL out of range) are left to apply, which answers
 * FENCE_ST_INVALID, so that such a command still round-trips.
 *
 * Version 1 (before the global bound on waits) is still decoded, so that
 * existing logs replay: its LEADER_START has no waits_max and decodes with
 * waits_max = UINT32_MAX, which is what those entries meant (no bound).
 * Version 2 (before owners: every command decodes with owner 0, the
 * "default" user, which is what those entries meant) is decoded too.
 * Flags: FENCE_CMD_F_REQID, FENCE_CMD_F_ADMIN from version 3 on, and
 * FENCE_CMD_F_QUOTA from version 4 on.  The encoder writes version 4 when
 * a command of the batch carries FENCE_CMD_F_QUOTA and version 3
 * otherwise, so a log written without per-user limits stays readable by a
 * binary that predates them (a rolling upgrade); a version-4 entry is
 * refused by such a binary, as it must be: it could not enforce it.  A
 * version-4 entry in which no command carries the flag is refused, so
 * that each valid entry has exactly one encoding.  Version 5 in the same
 * way: written only when a command of the batch is of a coordination kind
 * (a type above CANCEL, or FENCE_CMD_F_SHARED), refused without one, and
 * those commands are refused in older versions.
 */
#include <stdint.h>
#include <string.h>

#include "base/assert.h"
#include "base/bytes.h"
#include "core/entry.h"
#include "core/fsm_int.h"

#define ENTRY_HEADER (1 + 8 + 4)
#define CMD_FIXED (1 + 1 + 8)
/* A version-3 command's fixed part: CMD_FIXED and the owner. */
#define CMD_FIXED_V3 (CMD_FIXED + 8)

/* Bytes of one command's encoding. */
static size_t cmd_size(const fence_cmd *c)
{
    size_t n = CMD_FIXED_V3 + ((c->flags & FENCE_CMD_F_QUOTA) ? 8 : 0);
    switch (c->type) {
    case FENCE_CMD_LEADER_START:
        return n + 20;
    case FENCE_CMD_TICK:
        return n;
    case FENCE_CMD_LEASE_GRANT:
        return n + 16;
    case FENCE_CMD_LEASE_KEEPALIVE:
    case FENCE_CMD_LEASE_REVOKE:
    case FENCE_CMD_CANCEL:
        return n + 8;
    case FENCE_CMD_LOCK:
        return n + 2 + c->name_len + 16;
    case FENCE_CMD_UNLOCK:
        return n + 2 + c->name_len + 8;
    case FENCE_CMD_ACQUIRE:
        return n + 2 + c->name_len + 24;
    case FENCE_CMD_ELECT_CAMPAIGN:
        return n + 2 + c->name_len + 16 + 4 + c->value_len;
    case FENCE_CMD_ELECT_PROCLAIM:
        return n + 2 + c->name_len + 8 + 4 + c->value_len;
    case FENCE_CMD_ELECT_RESIGN:
        return n + 2 + c->name_len + 8;
    case FENCE_CMD_SEM_ACQUIRE:
        return n + 2 + c->name_len + 4 + 32;
    case FENCE_CMD_SEM_RELEASE:
        return n + 2 + c->name_len + 4 + 8;
    case FENCE_CMD_LOCK_MULTI: {
        size_t m = n + 2 + 32;
        for (uint16_t i = 0; i < c->names_count; i++) {
            m += 2 + c->names[i].len;
        }
        return m;
    }
    case FENCE_CMD_UNLOCK_SHARED:
        return n + 2 + c->name_len + 16;
    case FENCE_CMD_LEASE_CHECKPOINT:
        return n + 4 + (size_t)c->ids_count * 8;
    default:
        FENCE_ASSERT(0);
        return 0;
    }
}

/* A command that only a version-5 entry may carry. */
static bool is_kind_cmd(uint64_t type, uint64_t flags)
{
    return type > FENCE_CMD_CANCEL || (flags & FENCE_CMD_F_SHARED) != 0;
}

/* Bytes the encoding of these commands needs. */
size_t fence_entry_size(const fence_cmd *cmds, uint32_t n)
{
    FENCE_ASSERT(n <= FENCE_BATCH_MAX);
    FENCE_ASSERT(n == 0 || cmds != NULL);
    size_t total = ENTRY_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        total += cmd_size(&cmds[i]);
    }
    return total;
}

/* Write v as `bytes` (1, 2, 4 or 8) little-endian bytes at *pp. */
static void put_le(uint8_t **pp, uint64_t v, int bytes)
{
    switch (bytes) {
    case 1:
        FENCE_ASSERT(v <= UINT8_MAX);
        **pp = (uint8_t)v;
        break;
    case 2:
        FENCE_ASSERT(v <= UINT16_MAX);
        fence__put_u16(*pp, (uint16_t)v);
        break;
    case 4:
        FENCE_ASSERT(v <= UINT32_MAX);
        fence__put_u32(*pp, (uint32_t)v);
        break;
    case 8:
        fence__put_u64(*pp, v);
        break;
    default:
        FENCE_ASSERT(0);
    }
    *pp += bytes;
}

/* Write a name (u16 length + bytes) at *pp. */
static void put_name(uint8_t **pp, const fence_cmd *c)
{
    FENCE_ASSERT(c->name_len <= FENCE_NAME_MAX);
    FENCE_ASSERT(c->name_len == 0 || c->name != NULL);
    put_le(pp, c->name_len, 2);
    if (c->name_len > 0) {
        memcpy(*pp, c->name, c->name_len);
    }
    *pp += c->name_len;
}

/* Write a value (u32 length + bytes) at *pp. */
static void put_value(uint8_t **pp, const fence_cmd *c)
{
    FENCE_ASSERT(c->value_len <= FENCE_ELECT_VALUE_MAX);
    FENCE_ASSERT(c->value_len == 0 || c->value != NULL);
    put_le(pp, c->value_len, 4);
    if (c->value_len > 0) {
        memcpy(*pp, c->value, c->value_len);
    }
    *pp += c->value_len;
}

/* 5 when a command is of a coordination kind, else 4 when one carries
 * quotas, else 3. */
uint8_t fence_entry_version_for(const fence_cmd *cmds, uint32_t n)
{
    FENCE_ASSERT(n == 0 || cmds != NULL);
    uint8_t v = 3;
    for (uint32_t i = 0; i < n; i++) {
        if (is_kind_cmd(cmds[i].type, cmds[i].flags)) {
            return FENCE_ENTRY_VERSION_KINDS;
        }
        if (cmds[i].flags & FENCE_CMD_F_QUOTA) {
            v = 4;
        }
    }
    return v;
}

/* Encode a batch; returns the length written, or 0 if cap is too small. */
size_t fence_entry_encode(uint64_t timestamp_ms, const fence_cmd *cmds,
                          uint32_t n, uint8_t *buf, size_t cap)
{
    FENCE_ASSERT(timestamp_ms <= FENCE_TIME_MS_MAX);
    size_t need = fence_entry_size(cmds, n);
    if (buf == NULL || cap < need) {
        return 0;
    }
    uint8_t version = fence_entry_version_for(cmds, n);
    uint8_t *p = buf;
    put_le(&p, version, 1);
    put_le(&p, timestamp_ms, 8);
    put_le(&p, n, 4);
    for (uint32_t i = 0; i < n; i++) {
        const fence_cmd *c = &cmds[i];
        FENCE_ASSERT((c->flags & ~FENCE_CMD_F_ALL) == 0);
        put_le(&p, c->type, 1);
        put_le(&p, c->flags, 1);
        put_le(&p, (c->flags & FENCE_CMD_F_REQID) ? c->req_id : 0, 8);
        put_le(&p, c->owner, 8);
        if (c->flags & FENCE_CMD_F_QUOTA) {
            put_le(&p, c->quota_leases, 4);
            put_le(&p, c->quota_locks, 4);
        } else {
            FENCE_ASSERT(c->quota_leases == 0 && c->quota_locks == 0);
        }
        switch (c->type) {
        case FENCE_CMD_LEADER_START:
            put_le(&p, c->limits.leases_max, 4);
            put_le(&p, c->limits.locks_max, 4);
            put_le(&p, c->limits.waiters_max, 4);
            put_le(&p, c->limits.dedup_max, 4);
            put_le(&p, c->limits.waits_max, 4);
            break;
        case FENCE_CMD_TICK:
            break;
        case FENCE_CMD_LEASE_GRANT:
            put_le(&p, c->ttl_ms, 8);
            put_le(&p, c->lock_delay_ms, 8);
            break;
        case FENCE_CMD_LEASE_KEEPALIVE:
        case FENCE_CMD_LEASE_REVOKE:
            put_le(&p, c->lease, 8);
            break;
        case FENCE_CMD_CANCEL:
            put_le(&p, c->wait_id, 8);
            break;
        case FENCE_CMD_LOCK:
            put_name(&p, c);
            put_le(&p, c->lease, 8);
            put_le(&p, c->wait_ms, 8);
            break;
        case FENCE_CMD_UNLOCK:
            put_name(&p, c);
            put_le(&p, c->token, 8);
            break;
        case FENCE_CMD_ACQUIRE:
            put_name(&p, c);
            put_le(&p, c->ttl_ms, 8);
            put_le(&p, c->lock_delay_ms, 8);
            put_le(&p, c->wait_ms, 8);
            break;
        case FENCE_CMD_ELECT_CAMPAIGN:
            put_name(&p, c);
            put_le(&p, c->lease, 8);
            put_le(&p, c->wait_ms, 8);
            put_value(&p, c);
            break;
        case FENCE_CMD_ELECT_PROCLAIM:
            put_name(&p, c);
            put_le(&p, c->token, 8);
            put_value(&p, c);
            break;
        case FENCE_CMD_ELECT_RESIGN:
            put_name(&p, c);
            put_le(&p, c->token, 8);
            break;
        case FENCE_CMD_SEM_ACQUIRE:
            put_name(&p, c);
            put_le(&p, c->permits, 4);
            put_le(&p, c->lease, 8);
            put_le(&p, c->ttl_ms, 8);
            put_le(&p, c->lock_delay_ms, 8);
            put_le(&p, c->wait_ms, 8);
            break;
        case FENCE_CMD_SEM_RELEASE:
            put_name(&p, c);
            put_le(&p, c->slot, 4);
            put_le(&p, c->token, 8);
            break;
        case FENCE_CMD_LOCK_MULTI:
            FENCE_ASSERT(c->names_count >= 1 && c->names_count <= FENCE_MULTI_NAMES_MAX);
            put_le(&p, c->names_count, 2);
            for (uint16_t k = 0; k < c->names_count; k++) {
                fence_cmd one = {.name = c->names[k].name, .name_len = c->names[k].len};
                put_name(&p, &one);
            }
            put_le(&p, c->lease, 8);
            put_le(&p, c->ttl_ms, 8);
            put_le(&p, c->lock_delay_ms, 8);
            put_le(&p, c->wait_ms, 8);
            break;
        case FENCE_CMD_UNLOCK_SHARED:
            put_name(&p, c);
            put_le(&p, c->token, 8);
            put_le(&p, c->lease, 8);
            break;
        case FENCE_CMD_LEASE_CHECKPOINT:
            FENCE_ASSERT(c->ids_count <= FENCE_CHECKPOINT_IDS_MAX);
            FENCE_ASSERT(c->ids_count == 0 || c->ids != NULL);
            put_le(&p, c->ids_count, 4);
            if (c->ids_count > 0) {
                memcpy(p, c->ids, (size_t)c->ids_count * 8);
            }
            p += (size_t)c->ids_count * 8;
            break;
        default:
            FENCE_ASSERT(0);
        }
    }
    FENCE_ASSERT((size_t)(p - buf) == need);
    return need;
}

/* Read `bytes` little-endian bytes; false if the entry is too short. */
static bool get_le(fence_entry_iter *it, int bytes, uint64_t *out)
{
    if ((size_t)(it->end - it->p) < (size_t)bytes) {
        return false;
    }
    switch (bytes) {
    case 1:
        *out = it->p[0];
        break;
    case 2:
        *out = fence__get_u16(it->p);
        break;
    case 4:
        *out = fence__get_u32(it->p);
        break;
    case 8:
        *out = fence__get_u64(it->p);
        break;
    default:
        FENCE_ASSERT(0);
    }
    it->p += bytes;
    return true;
}

/* Read a name into out (borrowed from the buffer). */
static bool get_name(fence_entry_iter *it, fence_cmd *out)
{
    uint64_t len;
    if (!get_le(it, 2, &len) || len > FENCE_NAME_MAX ||
        (size_t)(it->end - it->p) < len) {
        return false;
    }
    out->name_len = (uint16_t)len;
    out->name = len > 0 ? it->p : NULL;
    it->p += len;
    return true;
}

/* Read a value into out (borrowed from the buffer). */
static bool get_value(fence_entry_iter *it, fence_cmd *out)
{
    uint64_t len;
    if (!get_le(it, 4, &len) || len > FENCE_ELECT_VALUE_MAX ||
        (size_t)(it->end - it->p) < len) {
        return false;
    }
    out->value_len = (uint32_t)len;
    out->value = len > 0 ? it->p : NULL;
    it->p += len;
    return true;
}

/* Read LOCK_MULTI's names into the iterator's array (out->names points
 * there: valid until the next fence_entry_next on this iterator). */
static bool get_names(fence_entry_iter *it, fence_cmd *out)
{
    uint64_t count;
    if (!get_le(it, 2, &count) || count < 1 || count > FENCE_MULTI_NAMES_MAX) {
        return false;
    }
    for (uint64_t k = 0; k < count; k++) {
        fence_cmd one;
        memset(&one, 0, sizeof(one));
        if (!get_name(it, &one)) {
            return false;
        }
        it->names[k].name = one.name;
        it->names[k].len = one.name_len;
    }
    out->names = it->names;
    out->names_count = (uint16_t)count;
    return true;
}

/* Read LEASE_CHECKPOINT's ids (borrowed from the buffer, as bytes). */
static bool get_ids(fence_entry_iter *it, fence_cmd *out)
{
    uint64_t count;
    if (!get_le(it, 4, &count) || count > FENCE_CHECKPOINT_IDS_MAX ||
        (size_t)(it->end - it->p) / 8 < count) {
        return false;
    }
    out->ids_count = (uint32_t)count;
    out->ids = count > 0 ? it->p : NULL;
    it->p += count * 8;
    return true;
}

/* Open an entry: check its header. */
int fence_entry_open(fence_entry_iter *it, const uint8_t *buf, size_t len)
{
    FENCE_ASSERT(it != NULL);
    memset(it, 0, sizeof(*it));
    if (buf == NULL || len < ENTRY_HEADER) {
        return FENCE_ST_INVALID;
    }
    it->p = buf;
    it->end = buf + len;
    uint64_t version, ts, count;
    if (!get_le(it, 1, &version) || !get_le(it, 8, &ts) ||
        !get_le(it, 4, &count)) {
        return FENCE_ST_INVALID;
    }
    if (version < FENCE_ENTRY_VERSION_MIN || version > FENCE_ENTRY_VERSION ||
        ts > FENCE_TIME_MS_MAX ||
        count > FENCE_BATCH_MAX ||
        count > (size_t)(it->end - it->p) / CMD_FIXED) {
        memset(it, 0, sizeof(*it));
        return FENCE_ST_INVALID;
    }
    it->version = (uint8_t)version;
    it->timestamp_ms = ts;
    it->count = (uint32_t)count;
    it->index = 0;
    return 0;
}

/* Decode the next command. */
int fence_entry_next(fence_entry_iter *it, fence_cmd *out)
{
    FENCE_ASSERT(it != NULL);
    FENCE_ASSERT(out != NULL);
    memset(out, 0, sizeof(*out));
    if (it->index >= it->count) {
        /* Version 4 and 5 only when needed: one encoding per entry. */
        if (it->version == 4 && !it->quota_seen) {
            return -FENCE_ST_INVALID;
        }
        if (it->version >= FENCE_ENTRY_VERSION_KINDS && !it->kind_seen) {
            return -FENCE_ST_INVALID;
        }
        return it->p == it->end ? 0 : -FENCE_ST_INVALID;
    }
    uint64_t type, flags, req_id, a = 0, b = 0, c = 0, d = 0, e = UINT32_MAX;
    if (!get_le(it, 1, &type) || !get_le(it, 1, &flags) ||
        !get_le(it, 8, &req_id)) {
        return -FENCE_ST_INVALID;
    }
    uint64_t allowed = it->version >= FENCE_ENTRY_VERSION_KINDS ? FENCE_CMD_F_ALL
                       : it->version == 4 ? (FENCE_CMD_F_ALL & ~(uint64_t)FENCE_CMD_F_SHARED)
                       : it->version == 3 ? (FENCE_CMD_F_REQID | FENCE_CMD_F_ADMIN)
                                          : FENCE_CMD_F_REQID;
    if ((flags & ~allowed) != 0 ||
        (!(flags & FENCE_CMD_F_REQID) && req_id != 0)) {
        return -FENCE_ST_INVALID;
    }
    if (is_kind_cmd(type, flags)) {
        if (it->version < FENCE_ENTRY_VERSION_KINDS) {
            return -FENCE_ST_INVALID;
        }
        if ((flags & FENCE_CMD_F_SHARED) && type != FENCE_CMD_LOCK && type != FENCE_CMD_ACQUIRE) {
            return -FENCE_ST_INVALID;
        }
        it->kind_seen = true;
    }
    uint64_t owner = 0;
    if (it->version >= 3 && !get_le(it, 8, &owner)) {
        return -FENCE_ST_INVALID;
    }
    uint64_t ql = 0, qk = 0;
    if ((flags & FENCE_CMD_F_QUOTA) && (!get_le(it, 4, &ql) || !get_le(it, 4, &qk))) {
        return -FENCE_ST_INVALID;
    }
    out->type = (uint8_t)type;
    out->flags = (uint8_t)flags;
    out->req_id = req_id;
    out->owner = owner;
    out->quota_leases = (uint32_t)ql;
    out->quota_locks = (uint32_t)qk;
    if (flags & FENCE_CMD_F_QUOTA) {
        it->quota_seen = true;
    }
    bool ok;
    switch (type) {
    case FENCE_CMD_LEADER_START:
        ok = get_le(it, 4, &a) && get_le(it, 4, &b) && get_le(it, 4, &c) &&
             get_le(it, 4, &d) && (it->version < 2 || get_le(it, 4, &e));
        out->limits.leases_max = (uint32_t)a;
        out->limits.locks_max = (uint32_t)b;
        out->limits.waiters_max = (uint32_t)c;
        out->limits.dedup_max = (uint32_t)d;
        out->limits.waits_max = (uint32_t)e;
        break;
    case FENCE_CMD_TICK:
        ok = true;
        break;
    case FENCE_CMD_LEASE_GRANT:
        ok = get_le(it, 8, &out->ttl_ms) && get_le(it, 8, &out->lock_delay_ms);
        break;
    case FENCE_CMD_LEASE_KEEPALIVE:
    case FENCE_CMD_LEASE_REVOKE:
        ok = get_le(it, 8, &out->lease);
        break;
    case FENCE_CMD_CANCEL:
        ok = get_le(it, 8, &out->wait_id);
        break;
    case FENCE_CMD_LOCK:
        ok = get_name(it, out) && get_le(it, 8, &out->lease) &&
             get_le(it, 8, &out->wait_ms);
        break;
    case FENCE_CMD_UNLOCK:
        ok = get_name(it, out) && get_le(it, 8, &out->token);
        break;
    case FENCE_CMD_ACQUIRE:
        ok = get_name(it, out) && get_le(it, 8, &out->ttl_ms) &&
             get_le(it, 8, &out->lock_delay_ms) &&
             get_le(it, 8, &out->wait_ms);
        break;
    case FENCE_CMD_ELECT_CAMPAIGN:
        ok = get_name(it, out) && get_le(it, 8, &out->lease) &&
             get_le(it, 8, &out->wait_ms) && get_value(it, out);
        break;
    case FENCE_CMD_ELECT_PROCLAIM:
        ok = get_name(it, out) && get_le(it, 8, &out->token) && get_value(it, out);
        break;
    case FENCE_CMD_ELECT_RESIGN:
        ok = get_name(it, out) && get_le(it, 8, &out->token);
        break;
    case FENCE_CMD_SEM_ACQUIRE:
        ok = get_name(it, out) && get_le(it, 4, &a) && get_le(it, 8, &out->lease) &&
             get_le(it, 8, &out->ttl_ms) && get_le(it, 8, &out->lock_delay_ms) &&
             get_le(it, 8, &out->wait_ms);
        out->permits = (uint32_t)a;
        break;
    case FENCE_CMD_SEM_RELEASE:
        ok = get_name(it, out) && get_le(it, 4, &a) && get_le(it, 8, &out->token);
        out->slot = (uint32_t)a;
        break;
    case FENCE_CMD_LOCK_MULTI:
        ok = get_names(it, out) && get_le(it, 8, &out->lease) &&
             get_le(it, 8, &out->ttl_ms) && get_le(it, 8, &out->lock_delay_ms) &&
             get_le(it, 8, &out->wait_ms);
        break;
    case FENCE_CMD_UNLOCK_SHARED:
        ok = get_name(it, out) && get_le(it, 8, &out->token) && get_le(it, 8, &out->lease);
        break;
    case FENCE_CMD_LEASE_CHECKPOINT:
        ok = get_ids(it, out);
        break;
    default:
        ok = false;
        break;
    }
    if (!ok) {
        memset(out, 0, sizeof(*out));
        return -FENCE_ST_INVALID;
    }
    it->index++;
    return 1;
}

/* ---- Entry framing (entry.h) ------------------------------------------------ */

/* Framed size: at least one trailer byte, up to the next multiple of 8. */
size_t fence__entry_framed_len(size_t len)
{
    return len + (8 - len % 8);
}

/* Zero-fill the padding and store its size in the last byte. */
size_t fence__entry_frame(uint8_t *buf, size_t len)
{
    size_t pad = 8 - len % 8;
    FENCE_ASSERT(pad >= 1);
    FENCE_ASSERT(pad <= 8);
    memset(buf + len, 0, pad - 1);
    buf[len + pad - 1] = (uint8_t)pad;
    return len + pad;
}

/* Strip the framing, checking it is well formed. */
size_t fence__entry_unframe(const uint8_t *buf, size_t len)
{
    if (len == 0 || len % 8 != 0)
        return SIZE_MAX;
    size_t pad = buf[len - 1];
    if (pad < 1 || pad > 8 || pad > len)
        return SIZE_MAX;
    for (size_t i = len - pad; i < len - 1; i++)
        if (buf[i] != 0)
            return SIZE_MAX;
    return len - pad;
}
