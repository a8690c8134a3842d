/* wk_lifecycle_stall: a chunk's failed job, and a failover is a pause, not
 * a drop (issue 34; see wk_lifecycle.h).  Every failed job of a chunk ends
 * in wk_lifecycle_drop.  A failover's error (hr_redis_failover: connection
 * refused or closed, LOADING, MOVED/ASK, CLUSTERDOWN, READONLY, TRYAGAIN, a
 * timeout) stalls the chunk: STALLED, no request of it starts, those
 * running finish into its ack buffer, a failed flush's acks are back in
 * the buffer (wk_chunk_acked_apply), and its lease is kept (renewed, taken
 * again if it expired meanwhile: lease_renew.lua).  The control timer
 * (wk_lifecycle_timers.c, every WK_LIFECYCLE_CTL_MS) tries the failed step
 * again with back-off (250 ms doubling to 1 s): the buffered acks, then the
 * open (a chunk that was opening or pushing reads what is left of its set
 * again, under its lease), the hold's ending, or the end job that failed.
 * Past worker.stall_max_ms (30 s: longer than a Redis Cluster failover with
 * the stack's cluster-node-timeout of 3 s, and than one at Redis's default
 * of 15 s) the chunk is handed back (HANDING_BACK, here): logged as an
 * error and counted, its buffered acks written if Redis takes them, its
 * lease released and the chunk marked for the dispatchers to publish
 * within a second (handback.lua and the hand-back set), so its recipients
 * wait for no redelivery_timeout_s.  A hand-back that fails on a failover
 * is tried again with the same back-off until Redis answers (it holds one
 * of max_chunks_in_flight, and nothing opens without Redis anyway); one
 * that fails otherwise drops the chunk.  Any other error drops the chunk
 * at once: the lease expires and the sweeper republishes it after
 * redelivery_timeout_s.  A revoke hands its stalled chunks back at once; a
 * shutdown abandons them like the others. */
#include "wk_lifecycle_stall.h"

#include <inttypes.h>
#include <stdio.h>

#include "hr_clock.h"
#include "hr_log.h"
#include "hr_redis.h"
#include "wk_chunk_acks.h"
#include "wk_chunk_end.h"

/* The next try of C, and the back-off after it (WK_STALL_MIN_MS doubling
 * to WK_STALL_MAX_MS). */
static void wk_lifecycle_stall_later(wk_chunk *c)
{
    c->stall_retry_ms = hr_clock_mono_ms() + c->stall_backoff_ms;
    c->stall_backoff_ms =
        c->stall_backoff_ms * 2 < WK_STALL_MAX_MS ? c->stall_backoff_ms * 2 : WK_STALL_MAX_MS;
}

/* C's job failed on a failover (ERRSTR): C stalls, or stalls on (a retry
 * that failed again). */
static void wk_lifecycle_stall(wk_lifecycle *l, wk_chunk *c, const char *why, const char *errstr)
{
    hr_metrics_inc(l->met->backend_errors[WK_BACKEND_REDIS]);
    atomic_store(&l->met->redis_ok, false);
    if (c->state != WK_CHUNK_STALLED) {
        /* A stall from a stall's retry keeps where it first came from. */
        c->stalled_from = c->state;
        c->stall_since_ms = hr_clock_mono_ms();
        c->stall_backoff_ms = WK_STALL_MIN_MS;
        hr_metrics_inc(l->met->chunks_stalled);
        hr_log_warn("chunk_stalled",
                    "task=%" PRId64 " seq=%" PRId64 " from=%s reason=%s error=%s max_ms=%d",
                    c->msg.task, c->msg.seq, wk_lifecycle_state_name(c->state), why, errstr,
                    l->cfg->worker.stall_max_ms);
        wk_lifecycle_set(c, WK_CHUNK_STALLED, why);
        /* No request starts; those running finish and are buffered. */
        wk_lifecycle_hold(l, c);
    }
    wk_lifecycle_stall_later(c);
}

/* A Redis error that no failover explains (or an internal one: the Redis
 * thread took no job, out of memory): the lease is left to expire and the
 * offset counts as finished; the sweeper republishes the chunk after
 * redelivery_timeout_s (pending still holds it). */
static void wk_lifecycle_drop_now(wk_lifecycle *l, wk_chunk *c, const char *why, const char *errstr)
{
    l->stats.errors++;
    hr_metrics_inc(l->met->backend_errors[WK_BACKEND_REDIS]);
    atomic_store(&l->met->redis_ok, false);
    hr_log_error("chunk_dropped", "task=%" PRId64 " seq=%" PRId64 " reason=%s error=%s",
                 c->msg.task, c->msg.seq, why, errstr != NULL ? errstr : "-");
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c, "dropped");
}

void wk_lifecycle_drop(wk_lifecycle *l, wk_chunk *c, const char *why, const char *errstr)
{
    if (errstr == NULL || !hr_redis_failover(errstr) || c->state == WK_CHUNK_HANDING_BACK) {
        wk_lifecycle_drop_now(l, c, why, errstr);
        return;
    }
    wk_lifecycle_stall(l, c, why, errstr);
}

void wk_lifecycle_hand_back_submit(wk_lifecycle *l, wk_chunk *c)
{
    if (wk_chunk_finalize(l->rd, c, WK_CHUNK_HANDBACK, l->owner) != 0)
        wk_lifecycle_drop(l, c, "the Redis thread took no job", NULL);
}

void wk_lifecycle_hand_back(wk_lifecycle *l, wk_chunk *c, const char *why)
{
    int64_t now = hr_clock_mono_ms();

    for (size_t i = 0; i < c->npushes; i++)
        wk_sender_cancel(l->sender, &c->pushes[i]);
    hr_metrics_inc(l->met->chunks_handed_back);
    hr_log_error("chunk_handed_back",
                 "task=%" PRId64 " seq=%" PRId64 " reason=%s stalled_ms=%" PRId64 " unacked=%zu",
                 c->msg.task, c->msg.seq, why,
                 c->state == WK_CHUNK_STALLED ? now - c->stall_since_ms : 0,
                 wk_chunk_acks_held(&c->acks));
    c->stall_backoff_ms = WK_STALL_MIN_MS;
    wk_lifecycle_set(c, WK_CHUNK_HANDING_BACK, why);
    wk_lifecycle_hand_back_submit(l, c);
}

/* The hand-back of C answered: done (the dispatcher publishes it again),
 * or tried again later, for as long as Redis fails as in a failover (a
 * drop would only leave the chunk to the sweeper's timer once Redis is
 * back); another error drops it. */
void wk_lifecycle_handed_back(wk_lifecycle *l, wk_chunk *c, int rc, int64_t pending, bool indexed,
                              const char *errstr)
{
    if (rc != 0) {
        if (hr_redis_failover(errstr)) {
            wk_lifecycle_stall_later(c);
            return;
        }
        wk_lifecycle_drop(l, c, "hand-back failed", errstr); /* HANDING_BACK: dropped */
        return;
    }
    if (pending == 1 && !indexed)
        hr_log_warn("handback_unindexed", "task=%" PRId64 " seq=%" PRId64 " error=%s", c->msg.task,
                    c->msg.seq, errstr);
    hr_log_info("chunk_given_back", "task=%" PRId64 " seq=%" PRId64 " pending=%" PRId64,
                c->msg.task, c->msg.seq, pending);
    wk_lifecycle_settle_offset(l, c->partition, c->offset);
    wk_lifecycle_unlink(l, c, "handed back");
}

/* A flush of STALLED C answered: written, the control timer's next turn
 * takes C back at once; failed, C stalls on. */
void wk_lifecycle_stall_flushed(wk_lifecycle *l, wk_chunk *c, int rc, const char *errstr)
{
    if (rc != 0) {
        wk_lifecycle_drop(l, c, "ack failed", errstr);
        return;
    }
    c->stall_retry_ms = 0;
}
