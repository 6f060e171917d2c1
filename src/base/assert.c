/* The always-on assertion handler (see assert.h).  It formats into a stack
 * buffer and writes once to stderr: no stdio, no allocation, no locale, so
 * it works from any thread and with a corrupt heap. */
#include "base/assert.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Append the C string s to buf at *pos, never past cap - 1. */
static void put(char *buf, size_t cap, size_t *pos, const char *s)
{
    size_t n = strlen(s);
    if (n > cap - 1 - *pos)
        n = cap - 1 - *pos;
    memcpy(buf + *pos, s, n);
    *pos += n;
}

/* Append the decimal form of v. */
static void put_int(char *buf, size_t cap, size_t *pos, int v)
{
    char tmp[16];
    size_t n = 0;
    unsigned u = v < 0 ? 0u - (unsigned)v : (unsigned)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0 && n < sizeof(tmp) - 1);
    if (v < 0)
        tmp[n++] = '-';
    while (n > 0 && *pos < cap - 1)
        buf[(*pos)++] = tmp[--n];
}

/* Write the message and abort. */
static _Noreturn void die(const char *buf, size_t len)
{
    ssize_t rc = write(2, buf, len);
    (void)rc;
    abort();
}

_Noreturn void fence__assert_fail(const char *expr, const char *file, int line)
{
    char buf[1024];
    size_t pos = 0;
    put(buf, sizeof(buf), &pos, "assertion failed: ");
    put(buf, sizeof(buf), &pos, expr);
    put(buf, sizeof(buf), &pos, " (");
    put(buf, sizeof(buf), &pos, file);
    put(buf, sizeof(buf), &pos, ":");
    put_int(buf, sizeof(buf), &pos, line);
    put(buf, sizeof(buf), &pos, ")\n");
    die(buf, pos);
}

_Noreturn void fence__fatal(const char *msg)
{
    char buf[1024];
    size_t pos = 0;
    put(buf, sizeof(buf), &pos, "fatal: ");
    put(buf, sizeof(buf), &pos, msg);
    put(buf, sizeof(buf), &pos, "\n");
    die(buf, pos);
}
