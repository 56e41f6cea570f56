/* Transfer queue: a FIFO of jobs run in order by one worker thread. */
#include "offload/xfer.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/base/log.h"

#define XFER_CAP 256

struct ig_xfer {
    int threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_job, cv_done;
    ig_xfer_fn fn[XFER_CAP];
    void *arg[XFER_CAP];
    uint64_t head, tail; /* jobs [head, tail) are queued; head - 1 = last started */
    uint64_t done;       /* tickets <= done have finished */
    int stop;
    double busy_s;
};

static void *worker(void *p) {
    ig_xfer *q = p;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (q->head == q->tail && !q->stop) pthread_cond_wait(&q->cv_job, &q->mu);
        if (q->head == q->tail && q->stop) break;
        uint64_t t = q->head++;
        ig_xfer_fn fn = q->fn[t % XFER_CAP];
        void *arg = q->arg[t % XFER_CAP];
        pthread_mutex_unlock(&q->mu);
        double t0 = ig_time_s();
        fn(arg);
        double dt = ig_time_s() - t0;
        pthread_mutex_lock(&q->mu);
        q->busy_s += dt;
        q->done = t + 1;
        pthread_cond_broadcast(&q->cv_done);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

ig_status ig_xfer_create(int threads, ig_xfer **out, ig_error *err) {
    *out = NULL;
    ig_xfer *q = ig_calloc(1, sizeof *q, err);
    if (!q) return IG_ERR_NOMEM;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv_job, NULL);
    pthread_cond_init(&q->cv_done, NULL);
    if (threads > 0) {
        if (pthread_create(&q->thread, NULL, worker, q) != 0) {
            ig_xfer_free(q);
            return ig_error_set(err, IG_ERR_INTERNAL, "cannot start a transfer thread");
        }
        q->threaded = 1;
    }
    *out = q;
    return IG_OK;
}

void ig_xfer_free(ig_xfer *q) {
    if (!q) return;
    if (q->threaded) {
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_broadcast(&q->cv_job);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->thread, NULL);
    }
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv_job);
    pthread_cond_destroy(&q->cv_done);
    free(q);
}

uint64_t ig_xfer_submit(ig_xfer *q, ig_xfer_fn fn, void *arg) {
    if (!q->threaded) {
        double t0 = ig_time_s();
        fn(arg);
        q->busy_s += ig_time_s() - t0;
        return ++q->done;
    }
    pthread_mutex_lock(&q->mu);
    while (q->tail - q->done >= XFER_CAP) pthread_cond_wait(&q->cv_done, &q->mu);
    uint64_t t = q->tail++;
    q->fn[t % XFER_CAP] = fn;
    q->arg[t % XFER_CAP] = arg;
    pthread_cond_signal(&q->cv_job);
    pthread_mutex_unlock(&q->mu);
    return t + 1;
}

double ig_xfer_wait(ig_xfer *q, uint64_t ticket) {
    if (!q->threaded) return 0;
    double t0 = ig_time_s();
    pthread_mutex_lock(&q->mu);
    while (q->done < ticket) pthread_cond_wait(&q->cv_done, &q->mu);
    pthread_mutex_unlock(&q->mu);
    return ig_time_s() - t0;
}

double ig_xfer_busy_s(const ig_xfer *q) {
    ig_xfer *m = (ig_xfer *)q; /* the lock is not part of the logical state */
    pthread_mutex_lock(&m->mu);
    double b = m->busy_s;
    pthread_mutex_unlock(&m->mu);
    return b;
}
