/* fence-store logging (see log.h). */
#include "store/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

int fence__store_log_level = FENCE_STORE_LOG_INFO;

/* Format one line with a UTC timestamp and the level, and write it to
 * stderr in one call so lines from a crash are not interleaved. */
void fence__store_log_write(int level, const char *fmt, ...)
{
    static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
    char line[1024];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, ".%03ldZ %s ",
                          ts.tv_nsec / 1000000,
                          names[level < 0 ? 0 : level > 3 ? 3 : level]);
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        m = 0;
    n += (size_t)m < sizeof(line) - n - 1 ? (size_t)m : sizeof(line) - n - 2;
    line[n++] = '\n';
    fwrite(line, 1, n, stderr);
    fflush(stderr);
}
