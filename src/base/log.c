/* The shared logger (see log.h). */
#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/fs.h"

int fence__log_level = FENCE_LOG_INFO;

/* enum fence_log_format in force. */
static int log_format = FENCE_LOG_TEXT;

/* The destination: -1 for stderr, else the open --log-file. */
static int log_fd = -1;
/* The --log-file path, for fence__log_reopen ("" when on stderr). */
static char log_path[FENCE_FS_PATH_MAX];

static const char *const level_names[] = {"debug", "info", "warn", "error"};

/* The word for a level. */
const char *fence__log_level_name(int level)
{
    if (level < FENCE_LOG_DEBUG || level > FENCE_LOG_ERROR)
        return "?";
    return level_names[level];
}

/* The level for a word. */
int fence__log_level_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = FENCE_LOG_DEBUG; i <= FENCE_LOG_ERROR; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

/* Write the whole line, retrying short writes and EINTR (a log line must
 * not be lost to a signal). */
static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* The format a word names. */
int fence__log_format_parse(const char *word)
{
    if (word != NULL && strcmp(word, "text") == 0)
        return FENCE_LOG_TEXT;
    if (word != NULL && strcmp(word, "json") == 0)
        return FENCE_LOG_JSON;
    return -1;
}

/* Choose the line format. */
int fence__log_format_set(const char *word)
{
    int f = fence__log_format_parse(word);
    if (f < 0)
        return -1;
    log_format = f;
    return 0;
}

/* Take one line of a rate-limited kind. */
int fence__log_limit_take(fence_log_limit *l, unsigned long *dropped)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *dropped = 0;
    if ((long long)ts.tv_sec != l->window_s) {
        l->window_s = (long long)ts.tv_sec;
        l->used = 0;
    }
    if (l->used >= l->burst) {
        l->dropped++;
        return 0;
    }
    l->used++;
    *dropped = l->dropped;
    l->dropped = 0;
    return 1;
}

/* Write "{...}" for a JSON line: the prefix fields, then msg escaped. */
static void write_json(int level, const struct timeval *tv, const struct tm *tm,
                       const char *msg, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    char line[FENCE_LOG_LINE_MAX];
    size_t n = strftime(line, sizeof(line), "{\"ts\":\"%Y-%m-%dT%H:%M:%S", tm);
    int m = snprintf(line + n, sizeof(line) - n, ".%03dZ\",\"pid\":%d,\"level\":\"%s\",\"msg\":\"",
                     (int)(tv->tv_usec / 1000), (int)getpid(), fence__log_level_name(level));
    if (m > 0)
        n += (size_t)m;
    /* Room kept for the closing "}\n and one escape. */
    for (size_t i = 0; i < len && n + 10 < sizeof(line); i++) {
        unsigned char c = (unsigned char)msg[i];
        if (c == '"' || c == '\\') {
            line[n++] = '\\';
            line[n++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            memcpy(line + n, "\\u00", 4);
            n += 4;
            line[n++] = hex[c >> 4];
            line[n++] = hex[c & 15];
        } else {
            line[n++] = (char)c;
        }
    }
    memcpy(line + n, "\"}\n", 3);
    n += 3;
    write_all(log_fd >= 0 ? log_fd : STDERR_FILENO, line, n);
}

/* Format "TIME PID LEVEL message\n" (or its JSON object) into a stack
 * buffer and write it once. */
void fence__log_vwrite(int level, const char *fmt, va_list ap)
{
    char line[FENCE_LOG_LINE_MAX];
    struct timeval tv;
    struct tm tm;
    int saved = errno; /* callers often log strerror(errno) after us */

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    if (log_format == FENCE_LOG_JSON) {
        char msg[FENCE_LOG_LINE_MAX];
        int k = vsnprintf(msg, sizeof(msg), fmt, ap);
        size_t len = k < 0 ? 0 : (size_t)k < sizeof(msg) ? (size_t)k : sizeof(msg) - 1;
        write_json(level, &tv, &tm, msg, len);
        errno = saved;
        return;
    }
    size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    int m = snprintf(line + n, sizeof(line) - n, ".%03dZ %d %s ",
                     (int)(tv.tv_usec / 1000), (int)getpid(),
                     fence__log_level_name(level));
    if (m > 0)
        n += (size_t)m < sizeof(line) - n ? (size_t)m : sizeof(line) - n - 1;
    m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    if (m > 0)
        n += (size_t)m < sizeof(line) - n - 1 ? (size_t)m : sizeof(line) - n - 2;
    line[n++] = '\n';
    write_all(log_fd >= 0 ? log_fd : STDERR_FILENO, line, n);
    errno = saved;
}

/* Format and write one line. */
void fence__log_write(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__log_vwrite(level, fmt, ap);
    va_end(ap);
}

/* Open path for appending; -1 with errno set. */
static int open_log(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
}

/* Set the level and the destination. */
int fence__log_open(int level, const char *path)
{
    fence__log_level = level;
    if (path == NULL || path[0] == '\0')
        return 0;
    if (strlen(path) >= sizeof(log_path))
        return ENAMETOOLONG;
    int fd = open_log(path);
    if (fd < 0)
        return errno;
    if (log_fd >= 0)
        close(log_fd);
    log_fd = fd;
    snprintf(log_path, sizeof(log_path), "%s", path);
    return 0;
}

/* Open the path again and switch descriptors. */
int fence__log_reopen(void)
{
    if (log_fd < 0 || log_path[0] == '\0')
        return 0;
    int fd = open_log(log_path);
    if (fd < 0) {
        int e = errno;
        fence__log_write(FENCE_LOG_ERROR, "cannot reopen log file %s: %s; "
                         "still writing to the old one", log_path, strerror(e));
        return e;
    }
    close(log_fd);
    log_fd = fd;
    return 0;
}

/* Back to stderr. */
void fence__log_close(void)
{
    if (log_fd >= 0)
        close(log_fd);
    log_fd = -1;
    log_path[0] = '\0';
}

/* Log, say we stop, abort. */
void fence__log_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fence__log_vwrite(FENCE_LOG_ERROR, fmt, ap);
    va_end(ap);
    fence__log_write(FENCE_LOG_ERROR, "fatal: stopping (crash-stop)");
    abort();
}
