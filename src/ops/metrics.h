/* Metrics: a small registry of counters, gauges and histograms, rendered in
 * the Prometheus text exposition format (version 0.0.4), and an HTTP
 * endpoint that serves it from its own thread (metrics_http.c).
 *
 * Model.  A registry holds families; a family has a name, a help text, a
 * type and at most one label (besides a histogram's "le").  A family
 * without a label has exactly one series; a family with a label has up to
 * max_series series, one per label value, plus one overflow series whose
 * label value is FENCE_METRIC_OTHER ("_other"): once a family holds
 * max_series values, every new value is counted there, so a stream of
 * distinct fence names can never grow the registry (cardinality cap).
 *
 * Units.  Histograms take base units (seconds, bytes, counts) as doubles;
 * their buckets are fixed when the family is registered.  Counters and
 * gauges are integers (counts, indexes, 0/1 flags).
 *
 * Threads.  The daemon's event loop updates series; a scraper thread
 * renders them.  Every value is a C11 atomic updated with relaxed
 * operations, so an update never takes a lock and never waits for a
 * scrape; several updating threads are safe too.  A histogram's _count is
 * the sum of its bucket counts as read, so the +Inf bucket and _count
 * always agree (its _sum may lag an observation by one scrape).  Creating a
 * new labelled series takes the family's mutex, which only other creators
 * of the same family contend for (never the scraper, never an update of an
 * existing series).  Registering families is done before the scraper
 * starts (at daemon start-up); fence_metrics_free after it has stopped.
 *
 * Names are checked when registering: metric and label names must match
 * [a-zA-Z_:][a-zA-Z0-9_:]* (label names without ':', not starting with
 * "__"), and a name may be registered once.  Label values are any bytes:
 * the renderer escapes '\\', '"' and newline as the format requires, and
 * writes every other byte outside printable ASCII as the four characters
 * \xHH (after an escaped backslash), so the output is always valid UTF-8.
 * Values longer than FENCE_METRIC_LABEL_MAX bytes are cut to that length. */
#ifndef FENCE_COMMON_METRICS_H
#define FENCE_COMMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The overflow label value of a capped family. */
#define FENCE_METRIC_OTHER "_other"

typedef struct fence_metrics fence_metrics;      /* a registry */
typedef struct fence_metric fence_metric;        /* one family */
typedef struct fence_metric_series fence_metric_series; /* one series */

/* What a family counts. */
enum fence_metric_type {
    FENCE_METRIC_COUNTER = 0,   /* only goes up (name ends in _total) */
    FENCE_METRIC_GAUGE = 1,     /* goes up and down */
    FENCE_METRIC_HISTOGRAM = 2, /* observations in fixed buckets */
};

/* Create an empty registry.  Returns 0, or -1 when out of memory. */
int fence_metrics_new(fence_metrics **out);

/* Free a registry and every family in it.  The scraper must have stopped.
 * NULL is a harmless no-op. */
void fence_metrics_free(fence_metrics *m);

/* Register a counter (type COUNTER), a gauge (GAUGE) or a histogram
 * (HISTOGRAM).  help is one line of text (copied).  label is NULL for a
 * family with one series, else the label's name, and max_series (1 ..
 * FENCE_METRIC_SERIES_MAX) caps its distinct values.  A histogram passes
 * its n_bounds upper bounds (1 .. FENCE_METRIC_BUCKETS_MAX, strictly
 * increasing, finite; the +Inf bucket is implied), copied.  Returns the
 * family, or NULL when a name is invalid or taken, an argument is out of
 * range, or memory runs out; m->errmsg (fence_metrics_errmsg) says which. */
fence_metric *fence_metrics_add(fence_metrics *m, int type, const char *name,
                                const char *help, const char *label,
                                uint32_t max_series, const double *bounds,
                                uint32_t n_bounds);

/* Shorthands of fence_metrics_add for families without a label. */
fence_metric *fence_metrics_counter(fence_metrics *m, const char *name,
                                    const char *help);
fence_metric *fence_metrics_gauge(fence_metrics *m, const char *name,
                                  const char *help);
fence_metric *fence_metrics_histogram(fence_metrics *m, const char *name,
                                      const char *help, const double *bounds,
                                      uint32_t n_bounds);

/* Why the last fence_metrics_add failed (a static or registry-owned
 * string, valid until the next call). */
const char *fence_metrics_errmsg(const fence_metrics *m);

/* The series of a family for one label value (len bytes, any bytes; cut
 * to FENCE_METRIC_LABEL_MAX), created on first use; the overflow series
 * once the family is full, or when memory for a new value cannot be had
 * (never NULL).  For a family without a label, value is ignored and the
 * one series is returned.  A returned pointer stays valid until the
 * registry is freed, so callers may keep it. */
fence_metric_series *fence_metric_with(fence_metric *f, const char *value,
                                       size_t len);

/* The one series of a family without a label (or the first of a labelled
 * one, rarely what you want). */
fence_metric_series *fence_metric_one(fence_metric *f);

/* Counters and gauges.  add() with a negative n is for gauges only. */
void fence_series_add(fence_metric_series *s, int64_t n);
void fence_series_inc(fence_metric_series *s);
/* Gauges: set to v; set to v when v is above the current value. */
void fence_series_set(fence_metric_series *s, int64_t v);
void fence_series_max(fence_metric_series *s, int64_t v);
/* The current value of a counter or gauge (tests, HEALTH, INFO). */
int64_t fence_series_get(const fence_metric_series *s);

/* Histograms: count one observation of v (base units).  NaN is ignored. */
void fence_series_observe(fence_metric_series *s, double v);
/* A histogram's observation count (the sum of its buckets). */
uint64_t fence_series_count(const fence_metric_series *s);

/* The same on a family's one series (families without a label). */
void fence_metric_inc(fence_metric *f);
void fence_metric_add(fence_metric *f, int64_t n);
void fence_metric_set(fence_metric *f, int64_t v);
void fence_metric_observe(fence_metric *f, double v);

/* A growable text buffer the renderer writes into. */
typedef struct fence_metrics_text {
    char *buf;  /* the text (malloc; not NUL-terminated beyond len) */
    size_t len; /* bytes written */
    size_t cap; /* bytes allocated */
} fence_metrics_text;

/* Append the whole registry to out in the text exposition format 0.0.4:
 * per family "# HELP", "# TYPE", then its series (a histogram's
 * cumulative _bucket lines, _sum and _count).  Safe to call from any
 * thread while the event loop updates values.  Returns 0, or -1 when out
 * of memory (out keeps what was written; free out->buf either way). */
int fence_metrics_render(fence_metrics *m, fence_metrics_text *out);

/* Bucket bounds for the common cases, in seconds and counts.
 * fence_metric_latency_bounds: 50us .. 10s; fence_metric_wait_bounds: 1ms
 * .. 60s (lock waits); fence_metric_size_bounds: 1 .. 4096 (batch sizes,
 * powers of 4); each with its count in the _n beside it. */
extern const double fence_metric_latency_bounds[];
extern const uint32_t fence_metric_latency_n;
extern const double fence_metric_wait_bounds[];
extern const uint32_t fence_metric_wait_n;
extern const double fence_metric_size_bounds[];
extern const uint32_t fence_metric_size_n;

/* ---- The HTTP endpoint (metrics_http.c, libmicrohttpd) ------------------- */

typedef struct fence_metrics_http fence_metrics_http;

/* The daemon's answer to /health: return true when this node can serve
 * writes, and write a one-line reason (NUL-terminated, at most cap bytes)
 * either way.  Called on the HTTP thread, never on the event loop: it may
 * only read state the loop publishes atomically (a gauge, an atomic). */
typedef bool (*fence_metrics_health_fn)(void *arg, char *reason, size_t cap);

/* Options of fence_metrics_http_start. */
typedef struct fence_metrics_http_opts {
    const char *bind;               /* numeric IPv4/IPv6 address to bind */
    int port;                       /* TCP port; 0 picks a free one */
    fence_metrics *metrics;         /* what /metrics renders */
    fence_metrics_health_fn health; /* /health; NULL: always 200 */
    void *health_arg;               /* passed to health */
    unsigned max_conns;             /* 0: FENCE_METRIC_HTTP_CONNS_DEFAULT */
    unsigned timeout_s;             /* idle timeout; 0: the default */
} fence_metrics_http_opts;

/* Bind opts->bind:opts->port and serve GET/HEAD /metrics and /health from
 * a thread of libmicrohttpd's (never the caller's loop).  Other paths get
 * 404, other methods 405.  On failure returns -1 and writes the reason to
 * errbuf (errcap bytes, e.g. "127.0.0.1:7701: Address already in use").
 * On success returns 0 and *out. */
int fence_metrics_http_start(const fence_metrics_http_opts *opts,
                             fence_metrics_http **out, char *errbuf,
                             size_t errcap);

/* The TCP port actually bound (useful with port 0). */
int fence_metrics_http_port(const fence_metrics_http *h);

/* Stop serving (joins the HTTP thread) and free.  NULL is a no-op. */
void fence_metrics_http_stop(fence_metrics_http *h);

#endif /* FENCE_COMMON_METRICS_H */
