/* The metrics registry and its Prometheus text renderer (see metrics.h for
 * the model and the thread-safety contract). */
#include "ops/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/assert.h"
#include "base/hash.h"
#include "base/limits.h"

/* One series: a label value and its value(s). */
struct fence_metric_series {
    _Atomic int64_t value;       /* counter or gauge */
    _Atomic uint64_t *buckets;   /* histogram: n_bounds + 1 counts (not cumulative) */
    _Atomic uint64_t sum_bits;   /* histogram: the sum of observations (double bits) */
    const fence_metric *family;  /* the family (a histogram's bounds) */
    uint32_t hash;               /* FNV-1a of the label value (lookups) */
    uint16_t label_len;          /* bytes in label */
    char label[FENCE_METRIC_LABEL_MAX]; /* label value (not NUL-terminated) */
};

/* One family. */
struct fence_metric {
    fence_metric *next;          /* next family (registration order) */
    int type;                    /* enum fence_metric_type */
    char *name;                  /* metric name (malloc) */
    char *help;                  /* help text (malloc) */
    char *label;                 /* label name (malloc), NULL: no label */
    uint32_t max_series;         /* labelled: cap on distinct values */
    double *bounds;              /* histogram: upper bounds (malloc) */
    uint32_t n_bounds;           /* histogram: entries in bounds */
    fence_metric_series *series; /* max_series + 1 slots; the last is _other */
    _Atomic uint32_t n_series;   /* labelled: slots published (release) */
    _Atomic bool other_used;     /* labelled: the overflow series was used */
    pthread_mutex_t mu;          /* serializes creators of new series */
};

/* The registry. */
struct fence_metrics {
    fence_metric *head;          /* families in registration order */
    fence_metric *tail;          /* last family */
    const char *errmsg;          /* why the last add failed */
};

const double fence_metric_latency_bounds[] = {
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};
const uint32_t fence_metric_latency_n =
    sizeof(fence_metric_latency_bounds) / sizeof(fence_metric_latency_bounds[0]);
const double fence_metric_wait_bounds[] = {
    0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};
const uint32_t fence_metric_wait_n =
    sizeof(fence_metric_wait_bounds) / sizeof(fence_metric_wait_bounds[0]);
const double fence_metric_size_bounds[] = {1, 4, 16, 64, 256, 1024, 4096};
const uint32_t fence_metric_size_n =
    sizeof(fence_metric_size_bounds) / sizeof(fence_metric_size_bounds[0]);

/* Create an empty registry. */
int fence_metrics_new(fence_metrics **out) {
    FENCE_ASSERT(out != NULL);
    fence_metrics *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return -1;
    *out = m;
    return 0;
}

/* Free one family and everything it owns. */
static void family_free(fence_metric *f) {
    if (f->series != NULL) {
        for (uint32_t i = 0; i <= f->max_series; i++)
            free(f->series[i].buckets);
    }
    pthread_mutex_destroy(&f->mu);
    free(f->series);
    free(f->bounds);
    free(f->label);
    free(f->help);
    free(f->name);
    free(f);
}

/* Free a registry and its families. */
void fence_metrics_free(fence_metrics *m) {
    if (m == NULL)
        return;
    fence_metric *f = m->head;
    while (f != NULL) {
        fence_metric *next = f->next;
        family_free(f);
        f = next;
    }
    free(m);
}

/* Why the last add failed. */
const char *fence_metrics_errmsg(const fence_metrics *m) {
    return m->errmsg != NULL ? m->errmsg : "no error";
}

/* Whether name is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), or with
 * is_label a valid label name (no ':', no leading "__"). */
static bool name_valid(const char *name, bool is_label) {
    size_t n = strlen(name);
    if (n == 0 || n > FENCE_METRIC_NAME_MAX)
        return false;
    if (is_label && n >= 2 && name[0] == '_' && name[1] == '_')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (!is_label && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

/* The family registered under name, or NULL. */
static fence_metric *family_find(const fence_metrics *m, const char *name) {
    for (fence_metric *f = m->head; f != NULL; f = f->next) {
        if (strcmp(f->name, name) == 0)
            return f;
    }
    return NULL;
}

/* Whether name collides with a name a histogram renders (name_bucket,
 * name_sum, name_count) or a histogram's would collide with name. */
static bool suffix_clash(const fence_metrics *m, const char *name, int type) {
    static const char *const sfx[] = {"_bucket", "_sum", "_count"};
    size_t n = strlen(name);
    for (fence_metric *f = m->head; f != NULL; f = f->next) {
        size_t fn = strlen(f->name);
        for (size_t i = 0; i < 3; i++) {
            size_t sn = strlen(sfx[i]);
            if (f->type == FENCE_METRIC_HISTOGRAM && n == fn + sn &&
                memcmp(name, f->name, fn) == 0 && strcmp(name + fn, sfx[i]) == 0)
                return true;
            if (type == FENCE_METRIC_HISTOGRAM && fn == n + sn &&
                memcmp(f->name, name, n) == 0 && strcmp(f->name + n, sfx[i]) == 0)
                return true;
        }
    }
    return false;
}

/* Check the arguments of fence_metrics_add; NULL when they are fine, else
 * the reason. */
static const char *add_check(const fence_metrics *m, int type, const char *name,
                             const char *help, const char *label,
                             uint32_t max_series, const double *bounds,
                             uint32_t n_bounds) {
    if (type != FENCE_METRIC_COUNTER && type != FENCE_METRIC_GAUGE &&
        type != FENCE_METRIC_HISTOGRAM)
        return "unknown metric type";
    if (name == NULL || !name_valid(name, false))
        return "invalid metric name";
    if (help == NULL || strlen(help) > FENCE_METRIC_HELP_MAX)
        return "help text missing or too long";
    if (label != NULL && !name_valid(label, true))
        return "invalid label name";
    if (label != NULL && type == FENCE_METRIC_HISTOGRAM && strcmp(label, "le") == 0)
        return "a histogram cannot have a label named le";
    if (label != NULL && (max_series < 1 || max_series > FENCE_METRIC_SERIES_MAX))
        return "label cap out of range";
    if (family_find(m, name) != NULL || suffix_clash(m, name, type))
        return "metric name already registered";
    if (type != FENCE_METRIC_HISTOGRAM)
        return n_bounds == 0 ? NULL : "only a histogram has buckets";
    if (bounds == NULL || n_bounds < 1 || n_bounds > FENCE_METRIC_BUCKETS_MAX)
        return "histogram bucket count out of range";
    for (uint32_t i = 0; i < n_bounds; i++) {
        if (!isfinite(bounds[i]))
            return "histogram bounds must be finite";
        if (i > 0 && !(bounds[i] > bounds[i - 1]))
            return "histogram bounds must increase";
    }
    return NULL;
}

/* Duplicate a string (NULL when out of memory). */
static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL)
        memcpy(d, s, n);
    return d;
}

/* Register a family (see metrics.h). */
fence_metric *fence_metrics_add(fence_metrics *m, int type, const char *name,
                                const char *help, const char *label,
                                uint32_t max_series, const double *bounds,
                                uint32_t n_bounds) {
    FENCE_ASSERT(m != NULL);
    const char *why = add_check(m, type, name, help, label, max_series, bounds, n_bounds);
    if (why != NULL) {
        m->errmsg = why;
        return NULL;
    }
    m->errmsg = "out of memory";
    fence_metric *f = calloc(1, sizeof(*f));
    if (f == NULL)
        return NULL;
    if (pthread_mutex_init(&f->mu, NULL) != 0) {
        free(f);
        return NULL;
    }
    f->type = type;
    f->max_series = label != NULL ? max_series : 0;
    f->n_bounds = n_bounds;
    f->name = dup_str(name);
    f->help = dup_str(help);
    if (f->name == NULL || f->help == NULL)
        goto out_free_family;
    if (label != NULL && (f->label = dup_str(label)) == NULL)
        goto out_free_family;
    if (n_bounds > 0) {
        f->bounds = malloc(n_bounds * sizeof(*f->bounds));
        if (f->bounds == NULL)
            goto out_free_family;
        memcpy(f->bounds, bounds, n_bounds * sizeof(*f->bounds));
    }
    /* Slots 0 .. max_series-1 for values, slot max_series for _other; a
     * family without a label uses slot 0 only (max_series is 0). */
    uint32_t slots = f->max_series + 1;
    f->series = calloc(slots, sizeof(*f->series));
    if (f->series == NULL)
        goto out_free_family;
    for (uint32_t i = 0; i < slots; i++) {
        fence_metric_series *s = &f->series[i];
        atomic_init(&s->value, 0);
        atomic_init(&s->sum_bits, 0);
        s->family = f;
        if (type == FENCE_METRIC_HISTOGRAM) {
            s->buckets = calloc(n_bounds + 1, sizeof(*s->buckets));
            if (s->buckets == NULL)
                goto out_free_family;
            for (uint32_t b = 0; b <= n_bounds; b++)
                atomic_init(&s->buckets[b], 0);
        }
    }
    if (label != NULL) {
        fence_metric_series *o = &f->series[f->max_series];
        o->label_len = (uint16_t)strlen(FENCE_METRIC_OTHER);
        memcpy(o->label, FENCE_METRIC_OTHER, o->label_len);
    }
    atomic_init(&f->n_series, 0);
    atomic_init(&f->other_used, false);
    if (m->tail != NULL)
        m->tail->next = f;
    else
        m->head = f;
    m->tail = f;
    m->errmsg = NULL;
    return f;

out_free_family:
    family_free(f);
    return NULL;
}

/* A counter without a label. */
fence_metric *fence_metrics_counter(fence_metrics *m, const char *name,
                                    const char *help) {
    return fence_metrics_add(m, FENCE_METRIC_COUNTER, name, help, NULL, 0, NULL, 0);
}

/* A gauge without a label. */
fence_metric *fence_metrics_gauge(fence_metrics *m, const char *name,
                                  const char *help) {
    return fence_metrics_add(m, FENCE_METRIC_GAUGE, name, help, NULL, 0, NULL, 0);
}

/* A histogram without a label. */
fence_metric *fence_metrics_histogram(fence_metrics *m, const char *name,
                                      const char *help, const double *bounds,
                                      uint32_t n_bounds) {
    return fence_metrics_add(m, FENCE_METRIC_HISTOGRAM, name, help, NULL, 0, bounds,
                             n_bounds);
}

/* The index of value among the first n published series, or n. */
static uint32_t series_find(const fence_metric *f, uint32_t from, uint32_t n,
                            uint32_t hash, const char *value, size_t len) {
    for (uint32_t i = from; i < n; i++) {
        const fence_metric_series *s = &f->series[i];
        if (s->hash == hash && s->label_len == len && memcmp(s->label, value, len) == 0)
            return i;
    }
    return n;
}

/* The series for one label value, created on first use (see metrics.h). */
fence_metric_series *fence_metric_with(fence_metric *f, const char *value, size_t len) {
    FENCE_ASSERT(f != NULL);
    if (f->label == NULL)
        return &f->series[0];
    FENCE_ASSERT(value != NULL || len == 0);
    if (len > FENCE_METRIC_LABEL_MAX)
        len = FENCE_METRIC_LABEL_MAX;
    uint32_t hash = fence__fnv1a32(value, len);
    uint32_t n = atomic_load_explicit(&f->n_series, memory_order_acquire);
    uint32_t i = series_find(f, 0, n, hash, value, len);
    if (i < n)
        return &f->series[i];
    /* A new value: only creators serialize here.  A published slot's label
     * is never written again, so the scraper reads it without the mutex. */
    fence_metric_series *s = &f->series[f->max_series];
    pthread_mutex_lock(&f->mu);
    uint32_t now = atomic_load_explicit(&f->n_series, memory_order_relaxed);
    i = series_find(f, n, now, hash, value, len);
    if (i < now) {
        s = &f->series[i];
    } else if (now < f->max_series) {
        s = &f->series[now];
        s->hash = hash;
        s->label_len = (uint16_t)len;
        if (len > 0)
            memcpy(s->label, value, len);
        atomic_store_explicit(&f->n_series, now + 1, memory_order_release);
    } else {
        atomic_store_explicit(&f->other_used, true, memory_order_relaxed);
    }
    pthread_mutex_unlock(&f->mu);
    return s;
}

/* The first series of a family. */
fence_metric_series *fence_metric_one(fence_metric *f) {
    FENCE_ASSERT(f != NULL);
    return &f->series[0];
}

/* Add n to a counter or gauge. */
void fence_series_add(fence_metric_series *s, int64_t n) {
    atomic_fetch_add_explicit(&s->value, n, memory_order_relaxed);
}

/* Add one to a counter or gauge. */
void fence_series_inc(fence_metric_series *s) {
    atomic_fetch_add_explicit(&s->value, 1, memory_order_relaxed);
}

/* Set a gauge. */
void fence_series_set(fence_metric_series *s, int64_t v) {
    atomic_store_explicit(&s->value, v, memory_order_relaxed);
}

/* Raise a gauge to v when v is higher (a high-water mark). */
void fence_series_max(fence_metric_series *s, int64_t v) {
    int64_t cur = atomic_load_explicit(&s->value, memory_order_relaxed);
    while (v > cur &&
           !atomic_compare_exchange_weak_explicit(&s->value, &cur, v, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

/* Read a counter or gauge. */
int64_t fence_series_get(const fence_metric_series *s) {
    return atomic_load_explicit((_Atomic int64_t *)&s->value, memory_order_relaxed);
}

/* Observe v into a histogram series with the given bounds. */
static void hist_observe(fence_metric_series *s, const double *bounds, uint32_t n_bounds,
                         double v) {
    if (isnan(v))
        return;
    uint32_t b = 0;
    while (b < n_bounds && v > bounds[b])
        b++;
    atomic_fetch_add_explicit(&s->buckets[b], 1, memory_order_relaxed);
    uint64_t old = atomic_load_explicit(&s->sum_bits, memory_order_relaxed);
    for (;;) {
        double sum;
        memcpy(&sum, &old, sizeof(sum));
        sum += v;
        uint64_t neu;
        memcpy(&neu, &sum, sizeof(neu));
        if (atomic_compare_exchange_weak_explicit(&s->sum_bits, &old, neu,
                                                  memory_order_relaxed,
                                                  memory_order_relaxed))
            break;
    }
}

/* Observe v into a histogram series. */
void fence_series_observe(fence_metric_series *s, double v) {
    FENCE_ASSERT(s != NULL);
    FENCE_ASSERT(s->family->type == FENCE_METRIC_HISTOGRAM);
    hist_observe(s, s->family->bounds, s->family->n_bounds, v);
}

/* A histogram's observation count. */
uint64_t fence_series_count(const fence_metric_series *s) {
    FENCE_ASSERT(s->family->type == FENCE_METRIC_HISTOGRAM);
    const fence_metric *f = s->family;
    uint64_t n = 0;
    for (uint32_t b = 0; b <= f->n_bounds; b++)
        n += atomic_load_explicit(&s->buckets[b], memory_order_relaxed);
    return n;
}

/* Shorthands on a family's one series. */
void fence_metric_inc(fence_metric *f) {
    fence_series_inc(&f->series[0]);
}

void fence_metric_add(fence_metric *f, int64_t n) {
    fence_series_add(&f->series[0], n);
}

void fence_metric_set(fence_metric *f, int64_t v) {
    fence_series_set(&f->series[0], v);
}

void fence_metric_observe(fence_metric *f, double v) {
    FENCE_ASSERT(f->type == FENCE_METRIC_HISTOGRAM);
    hist_observe(&f->series[0], f->bounds, f->n_bounds, v);
}

/* ---- Rendering -------------------------------------------------------------- */

/* Make room for n more bytes in out; -1 when out of memory. */
static int text_reserve(fence_metrics_text *out, size_t n) {
    if (out->len + n <= out->cap)
        return 0;
    size_t cap = out->cap > 0 ? out->cap : 4096;
    while (cap < out->len + n)
        cap *= 2;
    char *p = realloc(out->buf, cap);
    if (p == NULL)
        return -1;
    out->buf = p;
    out->cap = cap;
    return 0;
}

/* Append n bytes. */
static int text_put(fence_metrics_text *out, const char *s, size_t n) {
    if (text_reserve(out, n) != 0)
        return -1;
    memcpy(out->buf + out->len, s, n);
    out->len += n;
    return 0;
}

/* Append a NUL-terminated string. */
static int text_str(fence_metrics_text *out, const char *s) {
    return text_put(out, s, strlen(s));
}

/* Append escaped bytes: backslash and newline always, '"' when in_label;
 * any other byte outside printable ASCII as \\xHH (see metrics.h). */
static int text_escaped(fence_metrics_text *out, const char *s, size_t n, bool in_label) {
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        char tmp[6];
        size_t k = 0;
        if (c == '\\') {
            tmp[k++] = '\\';
            tmp[k++] = '\\';
        } else if (c == '\n') {
            tmp[k++] = '\\';
            tmp[k++] = 'n';
        } else if (c == '"' && in_label) {
            tmp[k++] = '\\';
            tmp[k++] = '"';
        } else if (c < 0x20 || c >= 0x7f) {
            tmp[k++] = '\\';
            tmp[k++] = '\\';
            tmp[k++] = 'x';
            tmp[k++] = hex[c >> 4];
            tmp[k++] = hex[c & 15];
        } else {
            tmp[k++] = (char)c;
        }
        if (text_put(out, tmp, k) != 0)
            return -1;
    }
    return 0;
}

/* Format a double the way Prometheus reads it: +Inf, -Inf, NaN, or the
 * shortest %g form that reads back as the same value. */
static void fmt_double(char *buf, size_t cap, double v) {
    if (isnan(v)) {
        snprintf(buf, cap, "NaN");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

/* Append "name{label="value"[,le="bound"]}" (the braces only when there is
 * a label or le). */
static int text_series_name(fence_metrics_text *out, const fence_metric *f,
                            const char *suffix, const fence_metric_series *s,
                            const char *le) {
    if (text_str(out, f->name) != 0 || text_str(out, suffix) != 0)
        return -1;
    if (f->label == NULL && le == NULL)
        return 0;
    if (text_str(out, "{") != 0)
        return -1;
    if (f->label != NULL) {
        if (text_str(out, f->label) != 0 || text_str(out, "=\"") != 0 ||
            text_escaped(out, s->label, s->label_len, true) != 0 || text_str(out, "\"") != 0)
            return -1;
    }
    if (le != NULL) {
        if (f->label != NULL && text_str(out, ",") != 0)
            return -1;
        if (text_str(out, "le=\"") != 0 || text_str(out, le) != 0 || text_str(out, "\"") != 0)
            return -1;
    }
    return text_str(out, "}");
}

/* Append one series' sample lines. */
static int render_series(fence_metrics_text *out, const fence_metric *f,
                         const fence_metric_series *s) {
    char num[64];
    if (f->type != FENCE_METRIC_HISTOGRAM) {
        int64_t v = atomic_load_explicit((_Atomic int64_t *)&s->value, memory_order_relaxed);
        snprintf(num, sizeof(num), " %lld\n", (long long)v);
        if (text_series_name(out, f, "", s, NULL) != 0 || text_str(out, num) != 0)
            return -1;
        return 0;
    }
    uint64_t cum = 0;
    for (uint32_t b = 0; b <= f->n_bounds; b++) {
        char le[40];
        if (b < f->n_bounds)
            fmt_double(le, sizeof(le), f->bounds[b]);
        else
            snprintf(le, sizeof(le), "+Inf");
        cum += atomic_load_explicit(&s->buckets[b], memory_order_relaxed);
        snprintf(num, sizeof(num), " %llu\n", (unsigned long long)cum);
        if (text_series_name(out, f, "_bucket", s, le) != 0 || text_str(out, num) != 0)
            return -1;
    }
    uint64_t bits = atomic_load_explicit((_Atomic uint64_t *)&s->sum_bits, memory_order_relaxed);
    double sum;
    memcpy(&sum, &bits, sizeof(sum));
    num[0] = ' ';
    fmt_double(num + 1, sizeof(num) - 2, sum);
    if (text_series_name(out, f, "_sum", s, NULL) != 0 || text_str(out, num) != 0 ||
        text_str(out, "\n") != 0)
        return -1;
    snprintf(num, sizeof(num), " %llu\n", (unsigned long long)cum);
    if (text_series_name(out, f, "_count", s, NULL) != 0 || text_str(out, num) != 0)
        return -1;
    return 0;
}

/* Render the registry (see metrics.h). */
int fence_metrics_render(fence_metrics *m, fence_metrics_text *out) {
    static const char *const type_names[] = {"counter", "gauge", "histogram"};
    FENCE_ASSERT(m != NULL);
    FENCE_ASSERT(out != NULL);
    for (const fence_metric *f = m->head; f != NULL; f = f->next) {
        if (text_str(out, "# HELP ") != 0 || text_str(out, f->name) != 0 ||
            text_str(out, " ") != 0 || text_escaped(out, f->help, strlen(f->help), false) != 0 ||
            text_str(out, "\n# TYPE ") != 0 || text_str(out, f->name) != 0 ||
            text_str(out, " ") != 0 || text_str(out, type_names[f->type]) != 0 ||
            text_str(out, "\n") != 0)
            return -1;
        if (f->label == NULL) {
            if (render_series(out, f, &f->series[0]) != 0)
                return -1;
            continue;
        }
        uint32_t n = atomic_load_explicit((_Atomic uint32_t *)&f->n_series,
                                          memory_order_acquire);
        for (uint32_t i = 0; i < n; i++) {
            if (render_series(out, f, &f->series[i]) != 0)
                return -1;
        }
        if (atomic_load_explicit((_Atomic bool *)&f->other_used, memory_order_relaxed) &&
            render_series(out, f, &f->series[f->max_series]) != 0)
            return -1;
    }
    return 0;
}
