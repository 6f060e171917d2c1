/* What fenced says about raft's storage: words for libraft's error codes,
 * and the start-up check that the data directory can hold a log segment;
 * see node.h. */
#include "server/node.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/statvfs.h>

#include "base/log.h"

/* See node.h.  libraft 0.15's raft_strerror() knows the codes up to
 * RAFT_IOERR only and calls the newer ones "unknown error". */
const char *fence__raft_strerror(int rv)
{
    switch (rv) {
    case RAFT_NOTFOUND:
        return "resource not found";
    case RAFT_INVALID:
        return "invalid parameter";
    case RAFT_UNAUTHORIZED:
        return "no access to a resource";
    case RAFT_NOSPACE:
        return "no space left on device";
    case RAFT_TOOMANY:
        return "some system or raft limit was hit";
    default:
        return raft_strerror(rv);
    }
}

/* See node.h. */
int fence__node_check_space(const char *data_dir)
{
    struct statvfs st;
    if (statvfs(data_dir, &st) != 0) {
        FENCE_LOG_E("data-dir %s: cannot read its free space: %s", data_dir, strerror(errno));
        return -1;
    }
    uint64_t free_bytes = (uint64_t)st.f_bavail * (uint64_t)st.f_frsize;
    uint64_t seg = FENCE_RAFT_SEGMENT_BYTES;
    if (free_bytes < seg) {
        FENCE_LOG_E("data-dir %s: no space left for the raft log: %" PRIu64 " bytes free, "
                     "but one log segment takes %" PRIu64 " (raft preallocates it before "
                     "the first write); free some space or use another --data-dir",
                     data_dir, free_bytes, seg);
        return -1;
    }
    if (free_bytes < FENCE_RAFT_SEGMENTS_WARN * seg)
        FENCE_LOG_W("data-dir %s: only %" PRIu64 " bytes free; raft keeps up to %u log "
                    "segments of %" PRIu64 " bytes preallocated, and a full disk stops "
                    "this node (no space left on device)",
                    data_dir, free_bytes, FENCE_RAFT_SEGMENTS_WARN, seg);
    return 0;
}
