/* wk_lifecycle_timers: the lifecycle's periodic work on its open chunks
 * (see wk_lifecycle.h): lease renewal, the control read that halts the
 * chunks of paused, cancelled or expired tasks, the pump watchdog and the retried
 * open of chunks waiting for a foreign lease. */
#include "wk_lifecycle_int.h"

#include <inttypes.h>

#include "hr_log.h"
#include "wk_clock.h"
#include "wk_control.h"

void wk_lifecycle_renew(wk_lifecycle *l)
{
    wk_chunk *c, *held[WK_CHUNK_MAX_OPEN], *lost[WK_CHUNK_MAX_OPEN];
    size_t n = 0, nlost = 0;

    TAILQ_FOREACH(c, &l->chunks, link)
    {
        /* A chunk waiting for a foreign lease holds none to renew. */
        if (c->lease_wait_until_ms > 0 && c->members == NULL)
            continue;
        if (n < WK_CHUNK_MAX_OPEN)
            held[n++] = c;
    }
    wk_control_renew(l->redis, l->met, held, n, l->owner, l->cfg->worker.lease_ms, lost, &nlost);
    /* The lease expired and may be someone else's now: pushing on would
     * only send duplicates, so the chunk is given up like a revoke, and its
     * offset counts as finished since the new holder does the rest. */
    for (size_t i = 0; i < nlost; i++) {
        hr_log_warn("lease_lost", "task=%" PRId64 " seq=%" PRId64, lost[i]->msg.task,
                    lost[i]->msg.seq);
        wk_lifecycle_abandon(l, lost[i], "lease lost", true);
    }
}

/* The pump watchdog: an opened, running chunk with recipients left whose
 * channel has nothing in flight and nothing armed to wake it is stalled —
 * no event would ever push it again (its lease is renewed all the same,
 * so the sweeper would never step in).  Counted, logged, and healed by a
 * kick.  Every path that frees sender slots kicks the sender (the idle
 * callback after wk_lifecycle_unlink), so this should stay at 0. */
static void wk_lifecycle_watchdog(wk_lifecycle *l)
{
    wk_chunk *c;
    size_t stalled = 0;

    if (l->stopping)
        return;
    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->members != NULL && c->halt == WK_CHUNK_RUN && c->open > 0 &&
        wk_sender_stuck(l->sender, c->task->ch_index))
        stalled++;
    hr_metrics_set(l->met->stalled_chunks, (double)stalled);
    if (stalled == 0)
        return;
    hr_metrics_inc(l->met->stalls);
    hr_log_warn("chunks_stalled", "chunks=%zu open_chunks=%zu in_flight=%zu", stalled, l->nchunks,
                wk_sender_in_flight(l->sender));
    l->hooks.wake(l->hooks.privdata);
}

/* Retries the open of the chunks waiting for a foreign lease
 * (wk_lifecycle_open).  They are collected first: an open kicks the sender,
 * which may finish other chunks, never a waiting one (it has no pushes). */
static void wk_lifecycle_reopen(wk_lifecycle *l)
{
    wk_chunk *c, *waiting[WK_CHUNK_MAX_OPEN];
    size_t n = 0;

    TAILQ_FOREACH(c, &l->chunks, link)
    if (c->lease_wait_until_ms > 0 && c->members == NULL && c->halt == WK_CHUNK_RUN &&
        n < WK_CHUNK_MAX_OPEN)
        waiting[n++] = c;
    for (size_t i = 0; i < n; i++)
        wk_lifecycle_open(l, waiting[i]);
}

/* Reads the control key of every task with an open chunk (one pipelined GET
 * per task) and halts the chunks of paused or cancelled tasks, and those of
 * running tasks past their expire_at (the sender also refuses to start
 * their pushes; this catches a chunk none of whose pushes it looks at, e.g.
 * all waiting for rate-limit tokens). */
void wk_lifecycle_control(wk_lifecycle *l)
{
    int64_t tasks[WK_CHUNK_MAX_OPEN];
    wk_chunk_halt halts[WK_CHUNK_MAX_OPEN];
    size_t ntasks = 0, queued = 0;
    char errstr[256];
    wk_chunk *c, *next;
    int64_t now;
    bool failed;

    TAILQ_FOREACH(c, &l->chunks, link)
    {
        size_t i;

        for (i = 0; i < ntasks && tasks[i] != c->msg.task; i++)
            ;
        if (i == ntasks && ntasks < WK_CHUNK_MAX_OPEN)
            tasks[ntasks++] = c->msg.task;
    }
    if (ntasks == 0) {
        /* Nothing open: a PING keeps /readyz's view of Redis current. */
        const char *ping[] = {"PING"};
        redisReply *reply = hr_redis_cmd(l->redis, errstr, sizeof errstr, 1, ping, NULL);

        atomic_store(&l->met->redis_ok, reply != NULL);
        if (reply != NULL)
            freeReplyObject(reply);
        return;
    }
    failed =
        wk_control_read_many(l->redis, tasks, ntasks, halts, &queued, errstr, sizeof errstr) != 0;
    if (failed) {
        hr_metrics_inc(l->met->backend_errors[WK_BACKEND_REDIS]);
        hr_log_warn("ctl_read_failed", "error=%s", errstr);
    }
    atomic_store(&l->met->redis_ok, !failed);
    now = wk_clock_now_ms();
    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        wk_chunk_halt halt = WK_CHUNK_RUN;

        next = TAILQ_NEXT(c, link);
        for (size_t i = 0; i < queued; i++)
            if (tasks[i] == c->msg.task) {
                halt = halts[i];
                break;
            }
        if (halt == WK_CHUNK_RUN && hr_task_expired(c->task->row, now))
            halt = WK_CHUNK_EXPIRE;
        /* May free C (nothing in flight): do not look at it again. */
        if (halt != WK_CHUNK_RUN)
            wk_lifecycle_halt(l, c, halt);
    }
    wk_lifecycle_watchdog(l);
    wk_lifecycle_reopen(l);
}
