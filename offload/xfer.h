/* Transfer queues: work that moves bytes (gathers from the KV home tier into a working set, later
 * weight and disk transfers) runs on a queue's own worker thread, so it overlaps with compute on
 * the caller's threads. A job is a function and its argument; the caller waits for a ticket before
 * using the destination. On a GPU build the same interface fronts CUDA streams and events. */
#ifndef IG_XFER_H
#define IG_XFER_H

#include <stdint.h>

#include "core/base/status.h"

typedef struct ig_xfer ig_xfer;
typedef void (*ig_xfer_fn)(void *arg);

/* A queue with one worker thread (threads == 0: no thread, jobs run inside submit). */
ig_status ig_xfer_create(int threads, ig_xfer **out, ig_error *err);
void ig_xfer_free(ig_xfer *q);
/* Queues a job; returns its ticket (increasing from 1). */
uint64_t ig_xfer_submit(ig_xfer *q, ig_xfer_fn fn, void *arg);
/* Blocks until the job with this ticket (and every earlier one) has finished. Returns the seconds
 * spent waiting. */
double ig_xfer_wait(ig_xfer *q, uint64_t ticket);
/* Seconds the worker spent running jobs since create. */
double ig_xfer_busy_s(const ig_xfer *q);

#endif
