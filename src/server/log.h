/* Logging for the fenced daemon.
 *
 * FENCE_LOG checks the level before it formats anything (as Redis'
 * serverLog does), so a disabled debug line costs one comparison.  Lines go
 * to stderr, or to the file given with --log-file, each with a UTC
 * timestamp, the process id and the level.  Only the daemon logs; the
 * libraries it links return codes instead. */
#ifndef FENCE_SERVER_LOG_H
#define FENCE_SERVER_LOG_H

#include <stdnoreturn.h>

enum fence_log_level {
    FENCE_LOG_DEBUG = 0, /* chatty detail: per-connection events */
    FENCE_LOG_INFO = 1,  /* lifecycle: start, leadership, stop */
    FENCE_LOG_WARN = 2,  /* something a user should look at */
    FENCE_LOG_ERROR = 3, /* a failure; the daemon may abort next */
};

/* The current threshold; lines below it are skipped unformatted. */
extern int fence__log_level;

/* Log a printf-style line at LEVEL if LEVEL is enabled. */
#define FENCE_LOG(level, ...)                                                \
    do {                                                                     \
        if ((level) >= fence__log_level)                                     \
            fence__log_write((level), __VA_ARGS__);                          \
    } while (0)

#define LOG_DEBUG(...) FENCE_LOG(FENCE_LOG_DEBUG, __VA_ARGS__)
#define LOG_INFO(...) FENCE_LOG(FENCE_LOG_INFO, __VA_ARGS__)
#define LOG_WARN(...) FENCE_LOG(FENCE_LOG_WARN, __VA_ARGS__)
#define LOG_ERROR(...) FENCE_LOG(FENCE_LOG_ERROR, __VA_ARGS__)

/* Format and write one line unconditionally (use the macros instead). */
void fence__log_write(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Set the threshold and the destination.  path NULL or "" means stderr.
 * Returns 0, or -1 if the file cannot be opened (errno set). */
int fence__log_open(int level, const char *path);

/* Parse a level name ("debug", "info", "warn", "error"); -1 if unknown. */
int fence__log_level_parse(const char *name);

/* Log a fatal message at ERROR level and abort the process.  Used for disk
 * errors: continuing on a log that may be behind is never safe. */
noreturn void fence__log_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

#endif /* FENCE_SERVER_LOG_H */
