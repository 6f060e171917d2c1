/* Signed grants off the loop thread (see signq.h): worker threads (one
 * per online CPU, at most SIGNQ_WORKERS_MAX), a queue of jobs in, a list of
 * finished ones out, and a uv_async handle that brings the finished ones
 * back to the loop.  Each worker takes one job at a time, so the grants of
 * one batch are signed on every core that is free, not one after another
 * on one. */
#include "server/signq.h"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/assert.h"
#include "base/limits.h"
#include "proto/resp.h"
#include "server/server.h"

/* At most this many signing threads (one per online CPU up to it). */
#define SIGNQ_WORKERS_MAX 4

/* Largest value a RESP integer reply can carry. */
#define INT_REPLY_MAX ((uint64_t)INT64_MAX)

/* One signature to make and the reply it becomes. */
typedef struct sign_job {
    struct sign_job *next;         /* todo or done list */
    fence_slot *slot;              /* the grant's slot (SLOT_SIGNING) */
    fence_signtok_signer signer;   /* the key when queued (wiped after) */
    uint64_t token;                /* the fencing token */
    uint64_t lease;                /* with_lease: the lease id */
    bool with_lease;               /* ACQUIRE: [token, lease] */
    uint16_t name_len;             /* bytes in name */
    char name[FENCE_NAME_MAX];     /* the lock name */
    size_t len;                    /* bytes in out, once signed */
    char out[FENCE_SIGNQ_REPLY_MAX]; /* the reply */
} sign_job;

struct fence_signq {
    pthread_mutex_t mu;   /* protects everything below but async */
    pthread_cond_t cv;    /* idle workers wait here for jobs */
    pthread_t threads[SIGNQ_WORKERS_MAX]; /* the workers */
    unsigned n_threads;   /* workers started */
    unsigned n_idle;      /* workers waiting on cv */
    bool stop;            /* the workers end once todo is empty */
    bool closing;         /* fence__signq_close ran: no more submits */
    sign_job *todo;       /* queued, oldest first */
    sign_job *todo_tail;  /* newest queued */
    sign_job *done;       /* signed, oldest first */
    sign_job *done_tail;  /* newest signed */
    uv_async_t async;     /* wakes the loop for done jobs */
};

/* The reply to a signed grant (signq.h). */
size_t fence__signq_reply(const fence_signtok_signer *signer, const char *name,
                          size_t name_len, uint64_t token, uint64_t lease,
                          bool with_lease, char *buf, size_t cap)
{
    FENCE_ASSERT(cap >= FENCE_SIGNQ_REPLY_MAX);
    char tok[FENCE_SIGNTOK_BUF_SIZE];
    size_t n = fence_signtok_sign(signer, name, name_len, token, tok, sizeof(tok));
    if (n == 0)
        return 0;
    size_t off = 0;
    if (with_lease)
        off += fence_resp_array(buf, cap, 2);
    off += fence_resp_bulk(buf + off, cap - off, tok, n);
    if (with_lease)
        off += fence_resp_uint(buf + off, cap - off,
                               lease > INT_REPLY_MAX ? INT_REPLY_MAX : lease);
    FENCE_ASSERT(off <= cap);
    return off;
}

/* Append j to a list. */
static void list_push(sign_job **head, sign_job **tail, sign_job *j)
{
    j->next = NULL;
    if (*tail != NULL)
        (*tail)->next = j;
    else
        *head = j;
    *tail = j;
}

/* A worker: sign what is queued, oldest first, one job at a time (the
 * other workers take the next ones meanwhile), handing each reply back as
 * soon as it is made; end when told to and nothing is left. */
static void *worker_main(void *arg)
{
    fence_signq *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->todo == NULL && !q->stop) {
            q->n_idle++;
            pthread_cond_wait(&q->cv, &q->mu);
            q->n_idle--;
        }
        if (q->todo == NULL)
            break;
        sign_job *j = q->todo;
        q->todo = j->next;
        if (q->todo == NULL)
            q->todo_tail = NULL;
        /* More waiting and a worker asleep: wake it for the next one. */
        if (q->todo != NULL && q->n_idle > 0)
            pthread_cond_signal(&q->cv);
        pthread_mutex_unlock(&q->mu);
        j->len = fence__signq_reply(&j->signer, j->name, j->name_len, j->token, j->lease,
                                    j->with_lease, j->out, sizeof(j->out));
        fence_signtok_signer_wipe(&j->signer);
        pthread_mutex_lock(&q->mu);
        list_push(&q->done, &q->done_tail, j);
        pthread_mutex_unlock(&q->mu);
        uv_async_send(&q->async);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* On the loop thread: make the finished jobs' replies final. */
static void deliver(fence_signq *q)
{
    pthread_mutex_lock(&q->mu);
    sign_job *list = q->done;
    q->done = q->done_tail = NULL;
    pthread_mutex_unlock(&q->mu);
    while (list != NULL) {
        sign_job *j = list;
        list = j->next;
        fence_slot *slot = j->slot;
        FENCE_ASSERT(slot->state == SLOT_SIGNING);
        FENCE_ASSERT(j->len > 0); /* name and token were checked when queued */
        slot->state = SLOT_NEW;
        fence__slot_reply(slot, j->out, j->len); /* frees an orphan */
        free(j);
    }
}

/* The worker handed replies back. */
static void on_async(uv_async_t *h)
{
    deliver(h->data);
}

/* The handle is closed: free the queue. */
static void on_closed(uv_handle_t *h)
{
    fence_signq *q = h->data;
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

/* Start (signq.h). */
int fence__signq_start(fence_signq **out, uv_loop_t *loop)
{
    *out = NULL;
    fence_signq *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return -1;
    if (pthread_mutex_init(&q->mu, NULL) != 0)
        goto out_free;
    if (pthread_cond_init(&q->cv, NULL) != 0)
        goto out_mutex;
    if (uv_async_init(loop, &q->async, on_async) != 0)
        goto out_cond;
    q->async.data = q;
    /* The worker takes no signals: they stay the loop thread's. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned want = cpus < 1 ? 1 : cpus > SIGNQ_WORKERS_MAX ? SIGNQ_WORKERS_MAX
                                                           : (unsigned)cpus;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    while (q->n_threads < want &&
           pthread_create(&q->threads[q->n_threads], NULL, worker_main, q) == 0)
        q->n_threads++;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (q->n_threads == 0) {
        /* The handle is open: its close callback frees q. */
        uv_close((uv_handle_t *)&q->async, on_closed);
        return -1;
    }
    *out = q;
    return 0;

out_cond:
    pthread_cond_destroy(&q->cv);
out_mutex:
    pthread_mutex_destroy(&q->mu);
out_free:
    free(q);
    return -1;
}

/* Queue a signature (signq.h). */
bool fence__signq_submit(fence_signq *q, fence_slot *slot,
                         const fence_signtok_signer *signer, const char *name,
                         size_t name_len, uint64_t token, uint64_t lease,
                         bool with_lease)
{
    if (q == NULL || q->closing || token == 0 || name_len == 0 ||
        name_len > FENCE_NAME_MAX || name_len > FENCE_SIGNTOK_NAME_MAX)
        return false;
    FENCE_ASSERT(slot->state == SLOT_NEW);
    sign_job *j = malloc(sizeof(*j));
    if (j == NULL)
        return false;
    j->slot = slot;
    j->signer = *signer;
    j->token = token;
    j->lease = lease;
    j->with_lease = with_lease;
    j->name_len = (uint16_t)name_len;
    memcpy(j->name, name, name_len);
    j->len = 0;
    slot->state = SLOT_SIGNING;
    pthread_mutex_lock(&q->mu);
    list_push(&q->todo, &q->todo_tail, j);
    if (q->n_idle > 0)
        pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return true;
}

/* Drain, stop, close (signq.h). */
void fence__signq_close(fence_signq *q)
{
    if (q == NULL)
        return;
    FENCE_ASSERT(!q->closing);
    q->closing = true;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    for (unsigned i = 0; i < q->n_threads; i++)
        pthread_join(q->threads[i], NULL); /* they sign what was queued first */
    deliver(q);
    uv_close((uv_handle_t *)&q->async, on_closed);
}
