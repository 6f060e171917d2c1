/* One logger for every daemon (fenced, fence-store, fence-proxy).
 *
 * A line is
 *
 *   2026-12-01T09:57:35.123Z 4242 info listening on 127.0.0.1:7700
 *
 * (UTC time with milliseconds, process id, level word, message), written
 * with one write(2) on a descriptor opened O_APPEND, so lines from several
 * processes sharing a file never interleave and a crash loses nothing
 * already logged.  Lines longer than FENCE_LOG_LINE_MAX are cut.
 *
 * Levels are words, the same in every daemon's --log-level: debug < info <
 * warn < error.  FENCE_LOG checks the level before it formats anything (as
 * Redis' serverLog does), so a disabled debug line costs one comparison.
 *
 * Destination: stderr, or the --log-file (opened in append mode, created
 * 0644).  fence__log_reopen() opens the same path again, for logrotate's
 * "mv the file, kill -HUP": the daemon's SIGHUP handler calls it.  Only
 * daemons and the CLI log; libraries return codes (docs/conventions.md,
 * "Logging").
 *
 * Single-threaded use: the level and the descriptor are process globals
 * set at start-up and changed only from the event loop. */
#ifndef FENCE_COMMON_LOG_H
#define FENCE_COMMON_LOG_H

#include <stdarg.h>
#include <stdnoreturn.h>

/* Levels, least severe first. */
enum fence_log_level {
    FENCE_LOG_DEBUG = 0, /* chatty detail: per-connection events */
    FENCE_LOG_INFO = 1,  /* lifecycle: start, leadership, stop */
    FENCE_LOG_WARN = 2,  /* something an operator should look at */
    FENCE_LOG_ERROR = 3, /* a failure; the daemon may stop next */
};

/* Longest line written, newline included. */
#define FENCE_LOG_LINE_MAX 2048

/* The threshold: lines below it are skipped unformatted. */
extern int fence__log_level;

/* Log a printf-style line at LEVEL if LEVEL is enabled. */
#define FENCE_LOG(level, ...)                                                \
    do {                                                                     \
        if ((level) >= fence__log_level)                                     \
            fence__log_write((level), __VA_ARGS__);                          \
    } while (0)

#define FENCE_LOG_D(...) FENCE_LOG(FENCE_LOG_DEBUG, __VA_ARGS__)
#define FENCE_LOG_I(...) FENCE_LOG(FENCE_LOG_INFO, __VA_ARGS__)
#define FENCE_LOG_W(...) FENCE_LOG(FENCE_LOG_WARN, __VA_ARGS__)
#define FENCE_LOG_E(...) FENCE_LOG(FENCE_LOG_ERROR, __VA_ARGS__)

/* Format and write one line whatever the threshold (use FENCE_LOG). */
void fence__log_write(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same with a va_list. */
void fence__log_vwrite(int level, const char *fmt, va_list ap);

/* Set the threshold and the destination: path NULL or "" means stderr.
 * Returns 0, or a positive errno if the file cannot be opened (the old
 * destination stays). */
int fence__log_open(int level, const char *path);

/* Open the --log-file path again (after logrotate moved it) and switch to
 * the new descriptor.  A no-op returning 0 when logging to stderr.  On
 * failure the old descriptor stays in use, an error line saying why is
 * written to it, and a positive errno is returned. */
int fence__log_reopen(void);

/* Close the log file (back to stderr). */
void fence__log_close(void);

/* Line formats: text (above), or JSON, one object a line:
 *   {"ts":"2026-12-01T09:57:35.123Z","pid":4242,"level":"info","msg":"..."}
 * with the message escaped as a JSON string (control bytes as \u00XX,
 * other bytes outside ASCII as \u00XX of the byte, so every line is valid
 * JSON whatever a lock name contains). */
enum fence_log_format {
    FENCE_LOG_TEXT = 0, /* "TIME PID LEVEL message" */
    FENCE_LOG_JSON = 1, /* one JSON object a line */
};

/* The format a word names ("text", "json"): enum fence_log_format, or -1
 * for another word (NULL included).  Option checks use it. */
int fence__log_format_parse(const char *word);

/* Choose the format by word (fence__log_format_parse); 0, or -1 for
 * another word (the format is then unchanged). */
int fence__log_format_set(const char *word);

/* A rate limit for a kind of line (audit lines): at most burst lines per
 * second; the lines over it are counted, and the next line let through
 * says how many were dropped. */
typedef struct fence_log_limit {
    unsigned burst;        /* lines per second */
    long long window_s;    /* the second being counted */
    unsigned used;         /* lines let through in it */
    unsigned long dropped; /* lines dropped since the last one let through */
} fence_log_limit;

/* Whether a line of this kind may be written now; when it may and lines
 * were dropped before it, *dropped receives their count (else 0). */
int fence__log_limit_take(fence_log_limit *l, unsigned long *dropped);

/* The level for a word ("debug", "info", "warn", "error"); -1 if none. */
int fence__log_level_parse(const char *name);

/* The word for a level ("debug".."error"); "?" outside the range. */
const char *fence__log_level_name(int level);

/* Log at error level whatever the threshold, then "fatal: stopping
 * (crash-stop)", then abort.  For conditions after which continuing could
 * lose acknowledged data (a failed disk write). */
noreturn void fence__log_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

#endif /* FENCE_COMMON_LOG_H */
