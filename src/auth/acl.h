/* Users, passwords and permissions for fenced and fence-store.
 *
 * An ACL is a set of users read from a file in a subset of Redis 6's
 * users.acl syntax (docs/security.md is the user's view).  One line per
 * user; blank lines and lines starting with '#' are ignored:
 *
 *   user NAME rule rule ...
 *
 * Rules, applied left to right (a later rule overrides an earlier one):
 *   on | off            the user may log in / may not
 *   >password           add a password (stored as its SHA-256 only)
 *   #<64 hex digits>    add a password given as its SHA-256
 *   nopass              any password is accepted (and AUTH pass logs in as
 *                       "default" when that user is nopass)
 *   resetpass           forget every password and nopass
 *   ~pattern            lock / fence names the user may touch (glob:
 *                       * ? [abc] [a-z] [^a] \x)
 *   allkeys             the same as ~*
 *   resetkeys           forget every pattern
 *   +@category -@category
 *   +COMMAND -COMMAND   allow / deny a command (case-insensitive)
 *   reset               resetpass, resetkeys, off, -@all, resetlimits
 *   maxleases=N         at most N live leases of this user (fenced; each
 *                       ACQUIRE's lease counts) -> -LIMIT beyond
 *   maxlocks=N          at most N locks this user's leases hold or wait
 *                       for (fenced) -> -LIMIT beyond
 *   maxconns=N          at most N connections logged in as this user at
 *                       once (fenced and fence-store); a newer one gets
 *                       -LIMIT and is closed
 *   resetlimits         forget the three limits (no own limit: only the
 *                       daemon's --max-* limits apply)
 *   N is a decimal 1..FENCE_ACL_QUOTA_MAX, no sign, no leading zero; the
 *   words are case-insensitive, the '=' and the number are required.
 *   Leases and locks are counted by the replicated state machine (the
 *   leader writes the user's limits into each command it proposes), so
 *   every replica refuses alike; connections are counted by each daemon.
 *
 * Categories (a command may be in several):
 *   @all      every command
 *   @lock     LOCK UNLOCK ACQUIRE LOCK.INFO
 *   @lease    LEASE.GRANT LEASE.KEEPALIVE LEASE.REVOKE LEASE.INFO
 *   @read     commands that only read (LOCK.INFO, LEASE.INFO, FGET,
 *             FENCE.HIGH, INFO)
 *   @write    commands that change state
 *   @admin    CLUSTER.*, ACL LOAD/LIST/USERS, and acting on other users'
 *             leases and locks
 *   @store    fence-store's FSET FDEL FINCR FGET
 *   @fence    fence-store's FENCE.ADMIT FENCE.HIGH
 *   @connection PING QUIT INFO (and the compat commands, always allowed to
 *             a logged-in user)
 *
 * A user starts as "off, no password, no pattern, no command" (Redis'
 * default for a new user).  Parsing is strict: an unknown rule, a bad
 * name, a duplicate user or an over-long line is an error naming the file
 * and line ("users.acl:3: unknown rule 'x'").
 *
 * Pure code apart from fence_acl_load_file: no sockets, no clock, no
 * globals; hashing is libsodium's crypto_hash_sha256 and every secret
 * comparison is sodium_memcmp (constant time).  Passwords never leave this
 * module: not in errors, not in ACL LIST lines (fence_acl_user_describe).
 */
#ifndef FENCE_COMMON_ACL_H
#define FENCE_COMMON_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"

/* Command categories (a bit set). */
#define FENCE_ACL_CAT_LOCK 0x001u
#define FENCE_ACL_CAT_LEASE 0x002u
#define FENCE_ACL_CAT_READ 0x004u
#define FENCE_ACL_CAT_WRITE 0x008u
#define FENCE_ACL_CAT_ADMIN 0x010u
#define FENCE_ACL_CAT_STORE 0x020u
#define FENCE_ACL_CAT_FENCE 0x040u
#define FENCE_ACL_CAT_CONNECTION 0x080u
#define FENCE_ACL_CAT_ALL 0xffffffffu

/* SHA-256 digest size. */
#define FENCE_ACL_HASH_LEN 32

typedef struct fence_acl fence_acl;
typedef struct fence_acl_user fence_acl_user;

/* Parse the text buf[0..len) (file names the source in errors).  On
 * success returns 0 and *out holds a new ACL (free with fence_acl_free).
 * On a bad file returns -1 and err holds "file:line: reason" (never a
 * password); *out is NULL.  Out of memory is -1 with "out of memory". */
int fence_acl_parse(const char *buf, size_t len, const char *file, fence_acl **out,
                    char *err, size_t err_len);

/* Read and parse the file at path (at most FENCE_ACL_FILE_MAX bytes).
 * Same contract as fence_acl_parse; an unreadable file is an error naming
 * it and the reason. */
int fence_acl_load_file(const char *path, fence_acl **out, char *err, size_t err_len);

/* The ACL of a daemon started without --acl-file: one user, "default",
 * on, nopass, ~*, +@all.  NULL only when out of memory. */
fence_acl *fence_acl_new_default(void);

/* Release an ACL (NULL is a no-op).  Pointers to its users die with it. */
void fence_acl_free(fence_acl *acl);

/* Number of users. */
size_t fence_acl_count(const fence_acl *acl);

/* The user named name[0..len), or NULL. */
const fence_acl_user *fence_acl_find(const fence_acl *acl, const char *name, size_t len);

/* Check a login.  user NULL means the one-argument AUTH, that is user
 * "default".  Returns the user when it exists, is on, and pass matches one
 * of its passwords (or it is nopass); NULL otherwise (the caller answers
 * -WRONGPASS and does not say which part was wrong).  The comparison of
 * digests is constant time; the time to find the user is not secret. */
const fence_acl_user *fence_acl_auth(const fence_acl *acl, const char *user, size_t user_len,
                                     const char *pass, size_t pass_len);

/* The user connections start logged in as: "default" when it exists, is
 * on and is nopass (so a daemon without --acl-file needs no AUTH); NULL
 * when every client must log in. */
const fence_acl_user *fence_acl_auto_user(const fence_acl *acl);

/* Name of user u (NUL-terminated, valid while its ACL lives). */
const char *fence_acl_user_name(const fence_acl_user *u);
/* Whether u is on. */
bool fence_acl_user_on(const fence_acl_user *u);

/* Whether u may run command name (upper or lower case) of categories cats
 * (FENCE_ACL_CAT_*): the last +/- rule that names the command or one of
 * its categories decides; no rule: denied. */
bool fence_acl_cmd_allowed(const fence_acl_user *u, const char *name, uint32_t cats);

/* Whether u may touch lock/fence name key[0..len): one of its patterns
 * matches. */
bool fence_acl_key_allowed(const fence_acl_user *u, const char *key, size_t len);

/* A user's own limits (0: none). */
typedef struct fence_acl_limits {
    uint32_t leases; /* maxleases */
    uint32_t locks;  /* maxlocks */
    uint32_t conns;  /* maxconns */
} fence_acl_limits;

/* u's limits. */
void fence_acl_user_limits(const fence_acl_user *u, fence_acl_limits *out);

/* Whether some user of acl has a maxconns limit (a daemon skips counting
 * connections otherwise), or a maxleases or maxlocks limit (a daemon skips
 * looking its users' limits up otherwise).  O(1). */
bool fence_acl_any_maxconns(const fence_acl *acl);
bool fence_acl_any_quota(const fence_acl *acl);

/* Whether u is an administrator (may act on other users' leases): the
 * rules allow the category @admin. */
bool fence_acl_is_admin(const fence_acl_user *u);

/* The owner id a user's leases carry in the log (fence_cmd.owner): 0 for
 * "default" (so logs and snapshots written before owners existed belong
 * to it), else a 64-bit FNV-1a hash of the name (never 0).  Names are
 * chosen by the operator, not by clients, so collisions are not an
 * attacker's choice. */
uint64_t fence_acl_owner_id(const char *name);

/* Write u's rules as an ACL file line ("user alice on #<hex> ~orders:*
 * +@all") into buf (NUL-terminated, truncated to buf_len).  Passwords
 * appear only as their hashes.  Returns the length it needed. */
size_t fence_acl_user_describe(const fence_acl_user *u, char *buf, size_t buf_len);

/* The i-th user (i < fence_acl_count), in file order. */
const fence_acl_user *fence_acl_user_at(const fence_acl *acl, size_t i);

/* Glob match of pattern p[0..plen) against s[0..slen) (Redis' syntax:
 * * ? [set] [^set] [a-z] \x).  Runs in O(plen * slen) at worst. */
bool fence_acl_glob(const char *p, size_t plen, const char *s, size_t slen);

/* One category: its name (without '@') and bits.  fence__acl_categories
 * lists them all, @all first (acl_cats.c). */
typedef struct fence_acl_category {
    const char *name;
    uint32_t cats;
} fence_acl_category;
extern const fence_acl_category fence__acl_categories[];
extern const size_t fence__acl_categories_n;

/* The name (without '@') of the one category bit (FENCE_ACL_CAT_LOCK ...),
 * or NULL for anything else.  A command's categories are a column of its
 * daemon's command table (fence_compat_command.acl, daemon/compat.h); the
 * ACL module decides only what a user's rules make of them. */
const char *fence_acl_category_name(uint32_t bit);

#endif /* FENCE_COMMON_ACL_H */
