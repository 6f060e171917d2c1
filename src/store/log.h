/* fence-store logging: a level check before anything is formatted. */
#ifndef FENCE_STORE_LOG_H
#define FENCE_STORE_LOG_H

/* Log levels, most severe first. */
enum fence_store_log_levels {
    FENCE_STORE_LOG_ERROR = 0, /* something failed */
    FENCE_STORE_LOG_WARN = 1,  /* something is unusual or unsafe */
    FENCE_STORE_LOG_INFO = 2,  /* start, stop, configuration */
    FENCE_STORE_LOG_DEBUG = 3, /* per-connection events */
};

/* Messages above this level are dropped (set from --log-level). */
extern int fence__store_log_level;

/* Write one line "<time> <level> <message>" to stderr. */
void fence__store_log_write(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define FENCE_STORE_LOG(level, ...)                                            \
    do {                                                                       \
        if ((level) <= fence__store_log_level)                                 \
            fence__store_log_write((level), __VA_ARGS__);                      \
    } while (0)

/* Log and abort: used when continuing could lose acknowledged data (a
 * failed disk write).  A crashed store loses nothing acknowledged. */
#define FENCE_STORE_FATAL(...)                                                 \
    do {                                                                       \
        fence__store_log_write(FENCE_STORE_LOG_ERROR, __VA_ARGS__);            \
        fence__store_log_write(FENCE_STORE_LOG_ERROR,                          \
                               "fatal: stopping (crash-stop)");                \
        abort();                                                               \
    } while (0)

#endif /* FENCE_STORE_LOG_H */
