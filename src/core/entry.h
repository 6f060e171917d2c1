/* The log-entry codec: one raft entry carries one group-commit batch of
 * commands and the leader's timestamp. */
#ifndef FENCE_CORE_ENTRY_H
#define FENCE_CORE_ENTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/fsm.h"

/* One raft entry = one group-commit batch:
 *   u8 version (3, or 4 when a command carries quotas) | u64 timestamp_ms
 *   | u32 count | count x command
 * command = u8 type | u8 flags | u64 req_id | u64 owner (v3)
 *           | u32 quota_leases | u32 quota_locks (v4, FENCE_CMD_F_QUOTA) | fields,
 * integers little-endian, names as u16 length + bytes.  See entry.c. */

/* The newest version the encoder writes (3 for a batch without quotas or
 * coordination kinds);
 * the decoder also reads versions from
 * FENCE_ENTRY_VERSION_MIN (1: LEADER_START without waits_max, which then
 * decodes as UINT32_MAX, no bound; 2: commands without an owner, which
 * decode with owner 0), so that existing logs replay. */
#define FENCE_ENTRY_VERSION 5
#define FENCE_ENTRY_VERSION_MIN 1
/* Version 5 (the coordination kinds, docs/recipes.md): written when a
 * command of the batch has a type above FENCE_CMD_CANCEL or carries
 * FENCE_CMD_F_SHARED; fields as version 4, plus each new type's fields
 * (entry.c).  A version-5 entry without such a command is refused, as a
 * version-4 one without a quota is: one encoding per batch. */
#define FENCE_ENTRY_VERSION_KINDS 5

/* Bytes the encoding of these commands needs. */
size_t fence_entry_size(const fence_cmd *cmds, uint32_t n);
/* Encode; returns the length written, or 0 if cap is too small. */
size_t fence_entry_encode(uint64_t timestamp_ms, const fence_cmd *cmds,
                          uint32_t n, uint8_t *buf, size_t cap);

typedef struct fence_entry_iter {
    const uint8_t *p;      /* next byte to decode */
    const uint8_t *end;    /* one past the entry */
    uint8_t version;       /* the entry's format version */
    uint64_t timestamp_ms; /* the leader's timestamp */
    uint32_t count;        /* commands in the entry */
    uint32_t index;        /* commands decoded so far */
    bool quota_seen;       /* a command so far carried FENCE_CMD_F_QUOTA */
    bool kind_seen;        /* a command so far was of a coordination kind */
    fence_name names[FENCE_MULTI_NAMES_MAX]; /* the last LOCK_MULTI's names */
} fence_entry_iter;

/* The version fence_entry_encode writes for these commands: 4 when one
 * carries FENCE_CMD_F_QUOTA, else 3.  The decoder refuses a version-4
 * entry without such a command, so every valid entry has one encoding. */
uint8_t fence_entry_version_for(const fence_cmd *cmds, uint32_t n);

/* 0, or FENCE_ST_INVALID if the header is malformed. */
int fence_entry_open(fence_entry_iter *it, const uint8_t *buf, size_t len);
/* 1 and *out filled (name and value borrowed from buf; a LOCK_MULTI's
 * names array from the iterator, valid until the next call), 0 at the end,
 * or -FENCE_ST_INVALID if malformed. */
int fence_entry_next(fence_entry_iter *it, fence_cmd *out);

/* Decode and apply a whole entry: advance to its timestamp, then apply each
 * command, writing the i-th result to results[i] when i < results_cap.
 * Returns the number of commands, or -FENCE_ST_INVALID for a malformed
 * entry (nothing applied: the entry is validated before anything runs). */
int fence_fsm_apply_entry(fence_fsm *f, const uint8_t *buf, size_t len,
                          fence_result *results, uint32_t results_cap);

/* ---- Framing of a raft entry ----
 * raft_uv pads entries to 8 bytes when it writes them but reloads them
 * unpadded (libraft 0.15 uv_encoding.c / uv_segment.c), so the leader
 * frames every entry it proposes and apply strips the frame: payload,
 * zero bytes, and a last byte saying how many (1..8) were added. */

/* Bytes an entry with a payload of len bytes occupies once framed. */
size_t fence__entry_framed_len(size_t len);
/* Frame in place: buf holds len payload bytes and has room for
 * fence__entry_framed_len(len); returns the framed length. */
size_t fence__entry_frame(uint8_t *buf, size_t len);
/* The payload length of a framed entry, or SIZE_MAX if it is malformed. */
size_t fence__entry_unframe(const uint8_t *buf, size_t len);

#endif /* FENCE_CORE_ENTRY_H */
