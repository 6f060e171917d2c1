/* Leveled logging for fenced; see log.h. */
#include "server/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int fence__log_level = FENCE_LOG_INFO;

/* Where lines go: stderr unless --log-file named a file. */
static FILE *log_out;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

/* Write the timestamp/pid/level prefix, the formatted message and a newline
 * as one line, then flush so a crash right after loses nothing. */
static void log_vwrite(int level, const char *fmt, va_list ap)
{
    FILE *out = log_out ? log_out : stderr;
    struct timeval tv;
    struct tm tm;
    char ts[32];
    char line[1024];
    int n;

    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    n = snprintf(line, sizeof(line), "%s.%03dZ %d %s ", ts,
                 (int)(tv.tv_usec / 1000), (int)getpid(),
                 level_names[level < 0 ? 0 : level > 3 ? 3 : level]);
    if (n < 0 || (size_t)n >= sizeof(line))
        n = 0;
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    fprintf(out, "%s\n", line);
    fflush(out);
}

/* Format and write one line (callers go through FENCE_LOG). */
void fence__log_write(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, fmt, ap);
    va_end(ap);
}

/* Set the level and open the destination file, if any, in append mode. */
int fence__log_open(int level, const char *path)
{
    fence__log_level = level;
    if (path == NULL || path[0] == '\0')
        return 0;
    FILE *f = fopen(path, "a");
    if (f == NULL)
        return -1;
    if (log_out != NULL)
        fclose(log_out);
    log_out = f;
    return 0;
}

/* Map a level name to its number, so config and flags share one spelling. */
int fence__log_level_parse(const char *name)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(name, level_names[i]) == 0)
            return i;
    return -1;
}

/* Log at ERROR level regardless of the threshold, then abort. */
void fence__log_fatal(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(FENCE_LOG_ERROR, fmt, ap);
    va_end(ap);
    abort();
}
