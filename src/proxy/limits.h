/* fence-proxy's limits, with their reasons (kept beside the proxy rather
 * than in src/base/limits.h, which another part owns; the lead may move
 * them).  _DEFAULT values are what a fresh install uses, _MAX values are
 * ceilings that configuration cannot exceed. */
#ifndef FENCE_PROXY_LIMITS_H
#define FENCE_PROXY_LIMITS_H

#include "base/limits.h"
#include "fence_guard.h"

/* Longest fence name (Fencing-Lock value): the guard's and fenced's bound. */
#define FENCE_PROXY_NAME_MAX FENCE_NAME_MAX
/* Routes in one --route value, and the longest path prefix of one. */
#define FENCE_PROXY_ROUTES_MAX 64
#define FENCE_PROXY_PREFIX_MAX 256
/* Methods listed in one route, and the longest method name. */
#define FENCE_PROXY_METHODS_MAX 32
#define FENCE_PROXY_METHOD_LEN_MAX 24
/* Longest normalised request path (the query not counted): longer ones
 * get 414.  Bounds what one binding of a path to its fence costs. */
#define FENCE_PROXY_PATH_MAX 4096
/* Length of the --route option text. */
#define FENCE_PROXY_ROUTE_TEXT_MAX 4096

/* Client connections open at once (--max-connections). */
#define FENCE_PROXY_CONNECTIONS_DEFAULT 1024
#define FENCE_PROXY_CONNECTIONS_MAX 100000
/* Requests accepted and not yet answered, queued or at the upstream
 * (--max-inflight). */
#define FENCE_PROXY_INFLIGHT_DEFAULT 4096
#define FENCE_PROXY_INFLIGHT_MAX 1000000
/* Sum of one request's header names and values (--max-header-bytes).  H2O
 * itself refuses a request head above H2O_MAX_REQLEN (checked in
 * proxy.c). */
#define FENCE_PROXY_HEADER_DEFAULT (16 * 1024)
#define FENCE_PROXY_HEADER_MAX (64 * 1024)
/* Request body, held in memory by H2O before the proxy sees the request
 * (--max-body-bytes), and upstream response body, buffered by the proxy
 * before it answers (--max-response-bytes). */
#define FENCE_PROXY_BODY_DEFAULT (16 * 1024 * 1024)
#define FENCE_PROXY_BODY_MAX (1024ULL * 1024 * 1024)
#define FENCE_PROXY_RESPONSE_DEFAULT (64 * 1024 * 1024)
#define FENCE_PROXY_RESPONSE_MAX (1024ULL * 1024 * 1024)
/* Memory of all client connections' read buffers (request heads and
 * bodies H2O is reading) plus the request and response copies the proxy
 * holds (--max-conn-memory; 0: no bound).  The default holds a few
 * maximal bodies at once; the issue-18 test took an unbounded proxy to 1 GB
 * with 64 clients sending 15 MB bodies. */
#define FENCE_PROXY_CONN_MEMORY_DEFAULT (256ULL * 1024 * 1024)
#define FENCE_PROXY_CONN_MEMORY_MAX (1ULL << 40)
/* SO_RCVBUF of a client connection under a memory budget: what one loop
 * turn can read from it beyond the budget (the kernel doubles it). */
#define FENCE_PROXY_CONN_RCVBUF (128 * 1024)
/* Distinct fences tracked (--max-fences), bounded by the guard's ceiling. */
#define FENCE_PROXY_FENCES_DEFAULT 100000
/* Paths bound to the first fence that wrote them (--max-bindings), where
 * no route names the fence.  Each costs its path (at most
 * FENCE_PROXY_PATH_MAX) plus about 40 bytes, and is never forgotten. */
#define FENCE_PROXY_BINDINGS_DEFAULT 100000
#define FENCE_PROXY_BINDINGS_MAX 10000000
/* Threads that make marks durable (--guard-threads); their concurrent
 * admits share fsyncs in the guard (group commit).  libuv's pool caps
 * them at 1024. */
#define FENCE_PROXY_GUARD_THREADS_DEFAULT 64
#define FENCE_PROXY_GUARD_THREADS_MAX 1024
/* Response headers copied from the upstream. */
#define FENCE_PROXY_RESP_HEADERS_MAX 64

_Static_assert(FENCE_PROXY_FENCES_DEFAULT <= FENCE_GUARD_FENCES_MAX,
               "fences must fit the guard's ceiling");
_Static_assert(FENCE_PROXY_PREFIX_MAX < FENCE_PROXY_ROUTE_TEXT_MAX,
               "a prefix must fit the route text");

#endif /* FENCE_PROXY_LIMITS_H */
