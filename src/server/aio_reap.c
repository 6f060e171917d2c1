/* io_destroy off the event loop: see aio_reap.h for why and what. */
#include "server/aio_reap.h"

#include <dlfcn.h>
#include <linux/aio_abi.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/limits.h"

/* glibc's syscall(). */
typedef long (*syscall_fn)(long number, ...);

/* The reaper's state (one per process, like the symbol it interposes). */
static struct {
    pthread_mutex_t mu;                       /* guards everything below */
    pthread_cond_t cv;                        /* work queued / queue drained */
    aio_context_t q[FENCE_AIO_REAP_QUEUE];    /* contexts to destroy (FIFO) */
    unsigned head;                            /* index of the oldest */
    unsigned n;                               /* queued */
    bool busy;                                /* the thread is destroying one */
    bool running;                             /* the thread was started */
    pthread_t thread;                         /* the thread */
} reap = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0,
          false, false, 0};
static _Atomic(syscall_fn) real_syscall;      /* glibc's, found on first use */
static _Atomic uint64_t reaped;               /* handed over since start */

/* glibc's syscall(), the next definition after ours. */
static syscall_fn next_syscall(void)
{
    syscall_fn f = atomic_load(&real_syscall);
    if (f == NULL) {
        f = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
        FENCE_ASSERT(f != NULL);
        atomic_store(&real_syscall, f);
    }
    return f;
}

/* The reaper thread: destroy queued contexts, oldest first. */
static void *reap_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&reap.mu);
    for (;;) {
        while (reap.n == 0)
            pthread_cond_wait(&reap.cv, &reap.mu);
        aio_context_t ctx = reap.q[reap.head];
        reap.head = (reap.head + 1) % FENCE_AIO_REAP_QUEUE;
        reap.n--;
        reap.busy = true;
        pthread_mutex_unlock(&reap.mu);
        next_syscall()(SYS_io_destroy, ctx);
        pthread_mutex_lock(&reap.mu);
        reap.busy = false;
        pthread_cond_broadcast(&reap.cv); /* fence__aio_reap_drain */
    }
    return NULL;
}

/* See aio_reap.h. */
int fence__aio_reap_start(void)
{
    next_syscall();
    pthread_mutex_lock(&reap.mu);
    int rv = 0;
    if (!reap.running) {
        rv = pthread_create(&reap.thread, NULL, reap_main, NULL) == 0 ? 0 : -1;
        reap.running = rv == 0;
    }
    pthread_mutex_unlock(&reap.mu);
    return rv;
}

/* See aio_reap.h. */
void fence__aio_reap_drain(void)
{
    pthread_mutex_lock(&reap.mu);
    while (reap.n > 0 || reap.busy)
        pthread_cond_wait(&reap.cv, &reap.mu);
    pthread_mutex_unlock(&reap.mu);
}

/* See aio_reap.h. */
uint64_t fence__aio_reap_count(void)
{
    return atomic_load(&reaped);
}

/* Queue ctx for the reaper; false when it is not running or full. */
static bool reap_queue(aio_context_t ctx)
{
    bool queued = false;
    pthread_mutex_lock(&reap.mu);
    if (reap.running && reap.n < FENCE_AIO_REAP_QUEUE) {
        reap.q[(reap.head + reap.n) % FENCE_AIO_REAP_QUEUE] = ctx;
        reap.n++;
        queued = true;
        pthread_cond_broadcast(&reap.cv);
    }
    pthread_mutex_unlock(&reap.mu);
    if (queued)
        atomic_fetch_add(&reaped, 1);
    return queued;
}

/* glibc's syscall(), interposed (aio_reap.h): SYS_io_destroy goes to the
 * reaper; everything else is passed on with all six argument registers,
 * as glibc's own variadic syscall() reads them. */
__attribute__((visibility("default"))) long syscall(long number, ...)
{
    va_list ap;
    va_start(ap, number);
    long a1 = va_arg(ap, long);
    long a2 = va_arg(ap, long);
    long a3 = va_arg(ap, long);
    long a4 = va_arg(ap, long);
    long a5 = va_arg(ap, long);
    long a6 = va_arg(ap, long);
    va_end(ap);
    if (number == SYS_io_destroy && reap_queue((aio_context_t)a1))
        return 0;
    return next_syscall()(number, a1, a2, a3, a4, a5, a6);
}
