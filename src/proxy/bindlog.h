/* fence-proxy's durable bindings: which fence a path belongs to when no
 * route names one (the first fence that wrote it; issue 18, section 2).
 * Kept in --data-dir beside the marks, in "fence-proxy.bindings", an
 * append-only log of batches:
 *
 *     "FPB1" | u32 body length | u32 CRC32C(body) | body
 *     body = records: u16 path length | u16 fence length | path | fence
 *
 * (little-endian).  One batch is appended and fdatasynced at a time (the
 * proxy has at most one append in flight), so only the final batch can be
 * torn by a crash: a final batch that is cut short or fails its checksum,
 * or a tail of zero bytes, was never acknowledged and is cut off at open;
 * a bad batch followed by a good one is corruption and refuses the start.
 * Bindings are never removed (as fence-store keeps a deleted key's owner). */
#ifndef FENCE_PROXY_BINDLOG_H
#define FENCE_PROXY_BINDLOG_H

#include <stddef.h>
#include <stdint.h>

#define FENCE_PROXY_BINDLOG_FILE "fence-proxy.bindings"
/* Bytes of a batch's header, and of a record's own header. */
#define FENCE_PROXY_BINDLOG_BATCH_HDR 12
#define FENCE_PROXY_BINDLOG_REC_HDR 4
/* Largest batch body (records gathered while one append is out). */
#define FENCE_PROXY_BINDLOG_BATCH_MAX (1024 * 1024)

typedef struct fence_proxy_bindlog fence_proxy_bindlog;

/* One binding read back at open: return 0 to go on, -1 to stop (open then
 * fails with the message the callback wrote to err). */
typedef int (*fence_proxy_bind_each)(void *arg, const char *path, size_t plen,
                                     const char *fence, size_t flen, char *err, size_t cap);

/* Walk the log's bytes buf[0..n) (pure: what open does after reading the
 * file; file only names it in messages): call each() for every binding
 * of every good batch.  Returns the length of the good prefix (n, or the
 * offset where a torn tail starts), or -1 with err (corruption, or each()
 * stopped). */
long fence__proxy_bindlog_walk(const unsigned char *buf, size_t n, const char *file,
                               fence_proxy_bind_each each, void *arg, char *err, size_t cap);

/* Open (create) dir/fence-proxy.bindings, call each() for every binding,
 * cut off a torn tail.  Returns 0 and *out, or -1 with err. */
int fence__proxy_bindlog_open(const char *dir, fence_proxy_bind_each each, void *arg,
                              fence_proxy_bindlog **out, char *err, size_t cap);

/* Encode one record at out (which has room for FENCE_PROXY_BINDLOG_REC_HDR
 * + plen + flen bytes); returns the bytes written. */
size_t fence__proxy_bindlog_record(char *out, const char *path, size_t plen, const char *fence,
                                   size_t flen);

/* Fill the batch header buf[0..HDR) for the records buf[HDR..len). */
void fence__proxy_bindlog_seal(char *buf, size_t len);

/* Append a batch whose body (records) is buf[HDR..len): buf[0..HDR) is
 * filled here.  Writes and fdatasyncs; returns 0 or an errno value.  Not
 * to be called concurrently on one log. */
int fence__proxy_bindlog_append(fence_proxy_bindlog *l, char *buf, size_t len);

/* Bytes of bindings torn off at open (for the log line). */
uint64_t fence__proxy_bindlog_torn(const fence_proxy_bindlog *l);

void fence__proxy_bindlog_close(fence_proxy_bindlog *l);

#endif /* FENCE_PROXY_BINDLOG_H */
