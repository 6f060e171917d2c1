/* libfence's error codes and messages: the strings of FENCE_ERRNO_MAP
 * (fence.h) and the calling thread's last error detail.  The lowest file
 * of libfence: every other one reports through fence__fail, and it calls
 * none of them. */
#include <stdarg.h>
#include <stdio.h>

#include "libfence/internal.h"

/* The calling thread's last error message (see fence_client_errmsg()). */
static __thread char tls_errmsg[FENCE_ERRMSG_BUF_SIZE];

static const char *const err_msgs[FENCE_ERRNO_COUNT_] = {
    [0] = "success",
#define FENCE_ERRNO_STR_(name, msg) [FENCE_ERRNO_INDEX_##name##_] = msg,
    FENCE_ERRNO_MAP(FENCE_ERRNO_STR_)
#undef FENCE_ERRNO_STR_
};

static const char *const err_names[FENCE_ERRNO_COUNT_] = {
    [0] = "FENCE_OK",
#define FENCE_ERRNO_NAME_(name, msg) [FENCE_ERRNO_INDEX_##name##_] = "FENCE_E" #name,
    FENCE_ERRNO_MAP(FENCE_ERRNO_NAME_)
#undef FENCE_ERRNO_NAME_
};

/* Describe an error code with a static string. */
const char *fence_strerror(int rc)
{
    if (rc > 0 || -rc >= FENCE_ERRNO_COUNT_)
        return "unknown error";
    return err_msgs[-rc];
}

/* Name an error code with a static string. */
const char *fence_err_name(int rc)
{
    if (rc > 0 || -rc >= FENCE_ERRNO_COUNT_)
        return "FENCE_E?";
    return err_names[-rc];
}

/* Record a formatted detail for rc in the thread's buffer; returns rc so a
 * failure can be reported in one line: return fence__fail(...). */
int fence__fail(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tls_errmsg, sizeof(tls_errmsg), fmt, ap);
    va_end(ap);
    return rc;
}

/* Return the calling thread's last error detail. */
const char *fence_client_errmsg(const fence_client *c)
{
    (void)c;
    return tls_errmsg;
}
