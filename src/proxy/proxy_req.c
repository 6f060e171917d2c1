/* fence-proxy: the request records (fp_req): freeing one, detaching it
 * from its client's request.  Below the queues (proxy_fence.c) and the
 * upstream exchange (proxy_upstream.c), which both end requests. */
#include "proxy/proxy_int.h"

#include <stdlib.h>

#include "base/assert.h"

/* ---- Request records ------------------------------------------------- */

/* fr no longer belongs to its client's connection. */
static void conn_unref(fp_req *fr)
{
    if (fr->conn == NULL)
        return;
    FENCE_ASSERT(fr->conn->reqs > 0);
    fr->conn->reqs--;
    fr->conn = NULL;
}

/* Free fr (already detached, unlinked, no upstream exchange). */
void fence__proxy_req_free(fp_req *fr)
{
    FENCE_ASSERT(fr->req == NULL);
    FENCE_ASSERT(fr->client == NULL);
    FENCE_ASSERT(!h2o_timeout_is_linked(&fr->drain));
    FENCE_ASSERT(fr->conn == NULL);
    FENCE_ASSERT(srv.req_mem >= fr->out_cap + fr->hcap + fr->bcap);
    srv.req_mem -= fr->out_cap + fr->hcap + fr->bcap;
    free(fr->out);
    free(fr->hbuf);
    free(fr->body);
    free(fr);
    FENCE_ASSERT(srv.inflight > 0);
    srv.inflight--;
}

/* Detach fr from the client's request and return that request (NULL if
 * the client is gone), so that answering it cannot reach fr again. */
h2o_req_t *fence__proxy_detach(fp_req *fr)
{
    h2o_req_t *req = fr->req;
    if (fr->slot != NULL)
        *fr->slot = NULL;
    fr->slot = NULL;
    fr->req = NULL;
    conn_unref(fr);
    return req;
}

/* See proxy_int.h. */
void fence__proxy_req_unref_conn(fp_req *fr)
{
    conn_unref(fr);
}
