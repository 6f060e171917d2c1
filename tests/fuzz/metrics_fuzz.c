/* Fuzz target for the metrics renderer (src/ops/metrics.c): the input
 * builds a registry (families of each type, some labelled with a small
 * cap) and a stream of updates whose label values are raw input bytes
 * (lock names are any bytes).  The rendered text is then checked line by
 * line against the exposition format 0.0.4:
 *   - every byte is printable ASCII or a newline, every line ends in '\n';
 *   - "# HELP name text" / "# TYPE name counter|gauge|histogram";
 *   - a sample is name[{label="value"[,le="bound"]}] number, where a
 *     value's only escapes are \\, \" and \n and it has no raw '"';
 *   - a family shows at most cap + 1 series (the _other overflow). */
#include <math.h>
#include <string.h>

#include "ops/metrics.h"
#include "fuzz.h"

/* Bytes read from the input, zero past its end. */
typedef struct {
    const uint8_t *p; /* next byte */
    size_t n;         /* bytes left */
} reader;

static uint8_t take(reader *r) {
    if (r->n == 0)
        return 0;
    r->n--;
    return *r->p++;
}

/* Whether c may start (first) or continue a metric or label name. */
static int name_char(char c, int first) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
           (!first && c >= '0' && c <= '9');
}

/* Check a number token [p, end): an integer, a float, +Inf, -Inf or NaN. */
static void check_number(const char *p, const char *end) {
    FUZZ_CHECK(end > p);
    char tmp[64];
    size_t n = (size_t)(end - p);
    FUZZ_CHECK(n < sizeof(tmp));
    memcpy(tmp, p, n);
    tmp[n] = '\0';
    if (strcmp(tmp, "+Inf") == 0 || strcmp(tmp, "-Inf") == 0 || strcmp(tmp, "NaN") == 0)
        return;
    char *e = NULL;
    strtod(tmp, &e);
    FUZZ_CHECK(e == tmp + n);
}

/* Check one sample line [p, end) (no newline); returns its metric name's
 * length. */
static size_t check_sample(const char *p, const char *end) {
    const char *q = p;
    FUZZ_CHECK(q < end && name_char(*q, 1));
    while (q < end && name_char(*q, 0))
        q++;
    size_t name_len = (size_t)(q - p);
    if (q < end && *q == '{') {
        q++;
        for (;;) {
            FUZZ_CHECK(q < end && name_char(*q, 1) && *q != ':');
            while (q < end && name_char(*q, 0) && *q != ':')
                q++;
            FUZZ_CHECK(q + 1 < end && q[0] == '=' && q[1] == '"');
            q += 2;
            while (q < end && *q != '"') {
                if (*q == '\\') {
                    FUZZ_CHECK(q + 1 < end);
                    FUZZ_CHECK(q[1] == '\\' || q[1] == '"' || q[1] == 'n');
                    q++;
                }
                q++;
            }
            FUZZ_CHECK(q < end && *q == '"');
            q++;
            FUZZ_CHECK(q < end);
            if (*q == '}')
                break;
            FUZZ_CHECK(*q == ',');
            q++;
        }
        q++;
    }
    FUZZ_CHECK(q < end && *q == ' ');
    q++;
    check_number(q, end);
    return name_len;
}

/* Check the whole text; counts sample lines per family name prefix. */
static void check_text(const char *s, size_t len) {
    FUZZ_CHECK(len == 0 || s[len - 1] == '\n');
    const char *p = s;
    const char *end = s + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        FUZZ_CHECK(nl != NULL);
        for (const char *q = p; q < nl; q++)
            FUZZ_CHECK(*q >= 0x20 && *q < 0x7f);
        if (nl - p >= 7 && memcmp(p, "# HELP ", 7) == 0) {
            FUZZ_CHECK(nl - p > 7 && name_char(p[7], 1));
        } else if (nl - p >= 7 && memcmp(p, "# TYPE ", 7) == 0) {
            const char *sp = memchr(p + 7, ' ', (size_t)(nl - p - 7));
            FUZZ_CHECK(sp != NULL);
            size_t tl = (size_t)(nl - sp - 1);
            FUZZ_CHECK((tl == 7 && memcmp(sp + 1, "counter", 7) == 0) ||
                       (tl == 5 && memcmp(sp + 1, "gauge", 5) == 0) ||
                       (tl == 9 && memcmp(sp + 1, "histogram", 9) == 0));
        } else {
            check_sample(p, nl);
        }
        p = nl + 1;
    }
}

/* Count the lines of text that start with prefix. */
static size_t count_lines(const char *s, size_t len, const char *prefix) {
    size_t n = 0, pl = strlen(prefix);
    for (const char *p = s; p < s + len;) {
        const char *nl = memchr(p, '\n', (size_t)(s + len - p));
        if ((size_t)(nl - p) >= pl && memcmp(p, prefix, pl) == 0)
            n++;
        p = nl + 1;
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    fence_metrics *m = NULL;
    if (fence_metrics_new(&m) != 0)
        return 0;
    static const double bounds[] = {0.001, 0.5, 1, 1e9};
    fence_metric *fam[6];
    uint32_t cap = 1 + take(&r) % 8;
    fam[0] = fence_metrics_counter(m, "a_total", "Plain \\ counter\nwith newline.");
    fam[1] = fence_metrics_gauge(m, "b", "Gauge \"quoted\".");
    fam[2] = fence_metrics_histogram(m, "c_seconds", "Histogram.", bounds, 4);
    fam[3] = fence_metrics_add(m, FENCE_METRIC_COUNTER, "d_total", "Labelled.", "fence", cap,
                               NULL, 0);
    fam[4] = fence_metrics_add(m, FENCE_METRIC_GAUGE, "e", "Labelled gauge.", "code", cap,
                               NULL, 0);
    fam[5] = fence_metrics_add(m, FENCE_METRIC_HISTOGRAM, "f_seconds", "Labelled.", "cmd", cap,
                               bounds, 4);
    for (int i = 0; i < 6; i++)
        FUZZ_CHECK(fam[i] != NULL);
    while (r.n > 0) {
        uint8_t op = take(&r);
        fence_metric *f = fam[op % 6];
        uint8_t vlen = take(&r) % 40;
        char val[40];
        for (uint8_t i = 0; i < vlen; i++)
            val[i] = (char)take(&r);
        int64_t x = (int8_t)take(&r);
        fence_metric_series *s = fence_metric_with(f, val, vlen);
        switch (op % 6) {
        case 0:
        case 3:
            fence_series_add(s, x < 0 ? -x : x);
            break;
        case 1:
        case 4:
            if (op & 0x80)
                fence_series_max(s, x);
            else
                fence_series_set(s, x);
            break;
        default:
            fence_series_observe(s, op & 0x40 ? NAN : ldexp((double)x, (op >> 3) % 40 - 20));
            break;
        }
    }
    fence_metrics_text t = {0};
    FUZZ_CHECK(fence_metrics_render(m, &t) == 0);
    check_text(t.buf, t.len);
    FUZZ_CHECK(count_lines(t.buf, t.len, "d_total{") <= cap + 1);
    FUZZ_CHECK(count_lines(t.buf, t.len, "e{") <= cap + 1);
    FUZZ_CHECK(count_lines(t.buf, t.len, "f_seconds_count{") <= cap + 1);
    FUZZ_CHECK(count_lines(t.buf, t.len, "a_total ") == 1);
    free(t.buf);
    fence_metrics_free(m);
    return 0;
}
