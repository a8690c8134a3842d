/* wk_lifecycle: a chunk from intake to offset store (see wk_lifecycle.h):
 * the lifecycle's own bookkeeping, which its files share — the offsets,
 * the counters handed to the reporter, a chunk taken off the list, a chunk
 * dropped on a Redis error.  The rest of the life is in wk_lifecycle_open.c
 * (intake, open), wk_lifecycle_push.c (throttle slices, outcomes,
 * acknowledgements), wk_lifecycle_end.c (the endings, revoke, shutdown)
 * and wk_lifecycle_timers.c (renewal, control, watchdog). */
#include "wk_lifecycle.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_log.h"

void wk_lifecycle_init(wk_lifecycle *l, const hr_config *cfg, const char *owner,
                       const wk_lifecycle_hooks *hooks)
{
    l->cfg = cfg;
    l->owner = owner;
    l->hooks = *hooks;
    TAILQ_INIT(&l->chunks);
}

/* ---- offsets ------------------------------------------------------------ */

/* The message at PARTITION/OFFSET needs nothing more. */
void wk_lifecycle_settle_offset(wk_lifecycle *l, int32_t partition, int64_t offset)
{
    int64_t store;

    if (wk_offsets_finish(l->offsets, partition, offset, &store) == 1)
        l->hooks.store_offset(l->hooks.privdata, partition, store);
}

/* ---- chunk endings ------------------------------------------------------ */

/* Hands the stats hash counters C's last script call answered to the
 * reporter (absolute values: see wk_reporter.h). */
void wk_lifecycle_report_counters(wk_lifecycle *l, wk_chunk *c)
{
    wk_event ev = {.kind = WK_EVENT_COUNTERS, .task = c->msg.task, .shard = wk_chunk_row(c)};

    if (!c->counters_new)
        return;
    ev.u.counters.sent = c->counters.sent;
    ev.u.counters.failed = c->counters.failed;
    ev.u.counters.throttled = c->counters.throttled;
    ev.u.counters.retried = c->counters.retried;
    ev.u.counters.unregistered = c->counters.unregistered;
    wk_reporter_push(l->reporter, &ev);
    c->counters_new = false;
}

static void wk_lifecycle_free(wk_lifecycle *l, wk_chunk *c)
{
    wk_task_put(l->tasks, c->task);
    wk_chunk_free(c);
}

/* A job of C answered: true when the lifecycle was done with C already
 * (the answer is dropped; C is freed once no job points at it). */
bool wk_lifecycle_gone(wk_lifecycle *l, wk_chunk *c)
{
    if (!c->gone)
        return false;
    if (c->jobs == 0)
        wk_lifecycle_free(l, c);
    return true;
}

/* Takes C off the list: no request of it runs any more, no job of it is
 * waited for (those in flight keep it allocated). */
void wk_lifecycle_unlink(wk_lifecycle *l, wk_chunk *c)
{
    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(l->sender, &c->pushes[i]);
    TAILQ_REMOVE(&l->chunks, c, link);
    l->nchunks--;
    c->gone = true;
    if (c->jobs == 0)
        wk_lifecycle_free(l, c);
    l->hooks.wake(l->hooks.privdata);
}

/* A Redis error: the lease is left to expire and the offset counts as
 * finished; the sweeper republishes the chunk (pending still holds it). */
void wk_lifecycle_drop(wk_lifecycle *l, wk_chunk *c, const char *why)
{
    l->stats.errors++;
    hr_metrics_inc(l->met->backend_errors[WK_BACKEND_REDIS]);
    atomic_store(&l->met->redis_ok, false);
    hr_log_error("chunk_dropped", "task=%" PRId64 " seq=%" PRId64 " reason=%s", c->msg.task,
                 c->msg.seq, why);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c);
}
