/* wk_lifecycle_timers: the lifecycle's periodic work on its open chunks
 * (see wk_lifecycle.h): lease renewal, the control read that halts the
 * chunks of paused, cancelled or expired tasks, the pump watchdog and the
 * retried open of chunks waiting for a foreign lease.  The renewal and the
 * control read are jobs on the Redis thread (wk_control): a tick submits
 * one unless the last one has not answered yet, and its answer is acted on
 * when it comes. */
#include "wk_lifecycle_timers.h"

#include <inttypes.h>

#include "hr_log.h"
#include "hr_clock.h"
#include "wk_chunk_acks.h"
#include "wk_control.h"
#include "wk_lifecycle_end.h"
#include "wk_lifecycle_open.h"
#include "wk_lifecycle_stall.h"

/* The renewal's answer.  The lease expired and may be someone else's now:
 * pushing on would only send duplicates, so the chunk is given up like a
 * revoke, and its offset counts as finished since the new holder does the
 * rest. */
static void wk_lifecycle_renewed(void *ctx, const uint64_t *lost, size_t nlost, size_t failed,
                                 const char *errstr)
{
    wk_lifecycle *l = ctx;

    l->renewing = false;
    /* A lease not renewed now is renewed on the next round. */
    if (failed > 0) {
        hr_metrics_inc(l->met->backend_errors[WK_BACKEND_REDIS]);
        hr_log_warn("lease_renew_failed", "leases=%zu error=%s", failed, errstr);
    }
    for (size_t i = 0; i < nlost; i++) {
        wk_chunk *c;

        TAILQ_FOREACH(c, &l->chunks, link)
        if (c->id == lost[i])
            break;
        /* Gone meanwhile, or already ending (its end releases nothing). */
        if (c == NULL || !wk_chunk_is_leased(c))
            continue;
        hr_log_warn("lease_lost", "task=%" PRId64 " seq=%" PRId64, c->msg.task, c->msg.seq);
        wk_lifecycle_end(l, c, WK_CHUNK_YIELDING, "lease lost");
    }
}

void wk_lifecycle_renew(wk_lifecycle *l)
{
    wk_chunk *c, *held[WK_CHUNK_MAX_OPEN];
    size_t n = 0;

    if (l->renewing)
        return;
    /* Only an open chunk holds a lease to renew: one opening takes its
     * own, fresh; one ending gives it up. */
    TAILQ_FOREACH(c, &l->chunks, link)
    if (wk_chunk_is_leased(c) && n < WK_CHUNK_MAX_OPEN)
        held[n++] = c;
    if (n == 0)
        return;
    if (wk_control_renew(l->rd, held, n, l->owner, l->cfg->worker.lease_ms, wk_lifecycle_renewed,
                         l) == 0)
        l->renewing = true;
    else
        hr_log_warn("lease_renew_failed", "leases=%zu error=the Redis thread took no job", n);
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
    if (c->state == WK_CHUNK_PUSHING && c->open > c->unchecked + c->unread &&
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
 * (wk_lifecycle_open). */
static void wk_lifecycle_reopen(wk_lifecycle *l)
{
    wk_chunk *c, *next;

    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if (c->state == WK_CHUNK_LEASE_WAIT)
            wk_lifecycle_open(l, c); /* may drop C */
    }
}

/* The control read's answer: halts the chunks of paused or cancelled
 * tasks, and those of running tasks past their expire_at (the sender also
 * refuses to start their pushes; this catches a chunk none of whose pushes
 * it looks at, e.g. all waiting for rate-limit tokens). */
static void wk_lifecycle_ctl_read(void *ctx, const int64_t *tasks, const wk_chunk_halt *halts,
                                  size_t n, bool failed, const char *errstr)
{
    wk_lifecycle *l = ctx;
    wk_chunk *c, *next;
    int64_t now = hr_clock_now_ms();

    l->reading_ctl = false;
    if (failed) {
        hr_metrics_inc(l->met->backend_errors[WK_BACKEND_REDIS]);
        if (n > 0)
            hr_log_warn("ctl_read_failed", "error=%s", errstr);
    }
    atomic_store(&l->met->redis_ok, !failed);
    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        wk_chunk_halt halt = WK_CHUNK_RUN;

        next = TAILQ_NEXT(c, link);
        /* Past halting (and a hand-back may have no task). */
        if (wk_chunk_is_ending(c))
            continue;
        for (size_t i = 0; i < n; i++)
            if (tasks[i] == c->msg.task) {
                halt = halts[i];
                break;
            }
        if (halt == WK_CHUNK_RUN && hr_task_expired(c->task->row, now))
            halt = WK_CHUNK_EXPIRE;
        /* May end C (nothing in flight), even drop it: not looked at again. */
        if (halt != WK_CHUNK_RUN)
            wk_lifecycle_halt(l, c, halt);
    }
}

/* ---- stalls (wk_lifecycle_stall.h) -------------------------------------------- */

/* Leaves STALLED for what C came from, now that nothing of it is in
 * flight and its acks are written. */
static void wk_lifecycle_unstall(wk_lifecycle *l, wk_chunk *c)
{
    wk_chunk_state from = c->stalled_from;

    hr_log_info("chunk_unstalled", "task=%" PRId64 " seq=%" PRId64 " to=%s stalled_ms=%" PRId64,
                c->msg.task, c->msg.seq, wk_lifecycle_state_name(from),
                hr_clock_mono_ms() - c->stall_since_ms);
    switch (from) {
    case WK_CHUNK_NEW:
    case WK_CHUNK_OPENING:
    case WK_CHUNK_LEASE_WAIT:
    case WK_CHUNK_PUSHING:
        /* What is still in the set is read again, under the lease kept. */
        wk_chunk_reset(c);
        wk_lifecycle_open(l, c);
        break;
    case WK_CHUNK_HELD_PAUSE:
    case WK_CHUNK_HELD_EXPIRE:
    case WK_CHUNK_HELD_CANCEL:
    case WK_CHUNK_HELD_REVOKE:
        wk_lifecycle_set(c, from, "stall over");
        wk_lifecycle_settled(l, c);
        break;
    default: /* an ending: its end job again */
        wk_lifecycle_end(l, c, from, "stall over");
        break;
    }
}

/* One stalled chunk at the control timer: given up past the bound, or
 * tried again when its back-off is over and nothing of it runs. */
static void wk_lifecycle_stall_tick(wk_lifecycle *l, wk_chunk *c, int64_t now)
{
    if (c->state == WK_CHUNK_HANDING_BACK) {
        if (c->jobs == 0 && now >= c->stall_retry_ms)
            wk_lifecycle_hand_back_submit(l, c);
        return;
    }
    if (now - c->stall_since_ms >= l->cfg->worker.stall_max_ms) {
        wk_lifecycle_hand_back(l, c, "stalled past worker.stall_max_ms");
        return;
    }
    /* A flush or an old job in flight, or the back-off not over: later. */
    if (c->jobs > 0 || now < c->stall_retry_ms)
        return;
    if (wk_chunk_state_ending(c->stalled_from)) {
        /* Its requests were cancelled when it began to end; the end job
         * writes the buffered acks first. */
        wk_lifecycle_unstall(l, c);
        return;
    }
    /* Requests still running: their outcomes go into the buffer first. */
    if (c->open > 0)
        return;
    if (wk_chunk_acks_ncalls(&c->acks) > 0) {
        /* The acks first; the flush's answer unstalls C. */
        if (wk_chunk_flush(l->rd, c) != 0)
            wk_lifecycle_drop(l, c, "the Redis thread took no job", NULL);
        return;
    }
    wk_lifecycle_unstall(l, c);
}

static void wk_lifecycle_stalls(wk_lifecycle *l)
{
    int64_t now = hr_clock_mono_ms();
    wk_chunk *c, *next;

    for (c = TAILQ_FIRST(&l->chunks); c != NULL; c = next) {
        next = TAILQ_NEXT(c, link);
        if (c->state == WK_CHUNK_STALLED || c->state == WK_CHUNK_HANDING_BACK)
            wk_lifecycle_stall_tick(l, c, now); /* may unlink C */
    }
}

/* Submits the read of the control key of every task with a chunk (one
 * pipelined GET per task; a PING when there is none, so /readyz's view of
 * Redis stays current), then runs the watchdog, the lease-waiting opens
 * and the stalled chunks' retries (wk_lifecycle_stall.c). */
void wk_lifecycle_control(wk_lifecycle *l)
{
    int64_t tasks[WK_CHUNK_MAX_OPEN];
    size_t ntasks = 0;
    wk_chunk *c;

    if (!l->reading_ctl) {
        TAILQ_FOREACH(c, &l->chunks, link)
        {
            size_t i;

            if (wk_chunk_is_ending(c))
                continue;
            for (i = 0; i < ntasks && tasks[i] != c->msg.task; i++)
                ;
            if (i == ntasks && ntasks < WK_CHUNK_MAX_OPEN)
                tasks[ntasks++] = c->msg.task;
        }
        if (wk_control_read(l->rd, tasks, ntasks, wk_lifecycle_ctl_read, l) == 0)
            l->reading_ctl = true;
    }
    wk_lifecycle_watchdog(l);
    wk_lifecycle_reopen(l);
    wk_lifecycle_stalls(l);
}
