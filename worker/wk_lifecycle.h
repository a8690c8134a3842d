/* wk_lifecycle: a chunk's life on the worker, from intake to offset store.
 *
 * The loop file (wk_worker) consumes Kafka and hands every message it
 * received to wk_lifecycle_intake; from there the lifecycle owns the chunk:
 * decode, task load, open (control key, lease, members, and the addresses
 * of an addressed channel), the throttle slices, the pushes' outcomes
 * (wk_lifecycle_push_done, the sender's done callback), acknowledgements,
 * and one of the endings —
 *   close     every recipient settled: chunk_done.lua, row 'done'
 *   halt      the task's control key says pause/cancel, or it expired:
 *             park, or drop counted as cancelled or expired
 *   abandon   revoke, shutdown: acks flushed, lease released; lease lost:
 *             the same, yielded to the lease's holder
 *   stall     a Redis failover: held, retried with back-off, then back to
 *             where it was, or handed back to the dispatcher
 *   drop      another Redis error: the lease expires, the sweeper republishes
 * — and, for every message, the offset: wk_offsets says when a finished
 * message lets the partition's offset move, and the store_offset hook
 * stores it.  Every message ends in exactly one of these (a "skip" is an
 * offset settled without a chunk).
 *
 * Every Redis step is a job on the worker's Redis thread (wk_redis, through
 * the wk_chunk_* jobs and wk_control): the lifecycle submits it and goes
 * on, and acts on its answer when the chunk's hook (or the timer's
 * callback) runs on the loop.  The jobs report; the lifecycle decides, and
 * it alone moves a chunk from state to state (wk_chunk_state in
 * wk_chunk.h, wk_lifecycle_set below).  Its files, by behaviour:
 *   wk_lifecycle.c         the state's one setter; offsets, counters to the
 *                          reporter, unlink, hold
 *   wk_lifecycle_stall.c   a failed job: drop, or stall (a failover);
 *                          the hand-back
 *   wk_lifecycle_open.c    intake, task load, the open and its answer
 *   wk_lifecycle_push.c    throttle slices, the pushes' outcomes, acks
 *   wk_lifecycle_end.c     halt, the endings and their answers,
 *                          revoke and shutdown
 *   wk_lifecycle_timers.c  renewal, control read, watchdog, lease waits,
 *                          the stalled chunks' retries
 *
 * The worker drives the lifecycle's timers (wk_lifecycle_renew every
 * lease_ms / 3, wk_lifecycle_control every WK_LIFECYCLE_CTL_MS) and its
 * revoke and shutdown; the lifecycle reaches the worker only through the
 * hooks, set once (the model is hiredis's async event hooks: function
 * pointers and one privdata).
 *
 * Ownership: the lifecycle owns every wk_chunk on its list; a chunk owns
 * its pushes; the sender only links them.  The connections, the task
 * cache, the offsets, the sender, the reporter and the metrics sit in the
 * lifecycle's struct, but the worker creates and frees them (the loop,
 * which the sender's handles need, is the worker's).  Loop thread only. */
#ifndef WK_LIFECYCLE_H
#define WK_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "hr_config.h"
#include "hr_mysql.h"
#include "wk_chunk.h"
#include "wk_gate.h"
#include "wk_metrics.h"
#include "wk_offsets.h"
#include "wk_redis.h"
#include "wk_reporter.h"
#include "wk_sender.h"
#include "wk_task.h"
#include "wk_task_cache.h"

/* Control keys are re-read this often while chunks are open, so a pause
 * or cancel stops new requests well within 2 s. */
#define WK_LIFECYCLE_CTL_MS 250

/* Counters of skipped input and endings, for logs and tests. */
typedef struct wk_lifecycle_stats {
    int64_t bad_messages, unknown_tasks, busy_chunks, parked_chunks, chunks_done, errors;
} wk_lifecycle_stats;

/* How the lifecycle reaches the loop that drives it. */
typedef struct wk_lifecycle_hooks {
    void *privdata;
    /* Every message of PARTITION below OFFSET is finished: store OFFSET
     * (already the next one to consume). */
    void (*store_offset)(void *privdata, int32_t partition, int64_t offset);
    /* Run the deferred work once the current callback returned: a chunk
     * left (sender slots may be free, more may be fetched), or a stopping
     * worker may be done. */
    void (*wake)(void *privdata);
} wk_lifecycle_hooks;

typedef struct wk_lifecycle {
    const hr_config *cfg;
    const char *owner; /* the lease owner, "<instance>/<pid>" */
    wk_redis *rd;      /* the Redis thread: every Redis call goes there */
    hr_mysql *mysql;
    wk_task_cache *tasks;
    wk_sender *sender;
    wk_reporter *reporter;
    wk_metrics *met;
    wk_offsets *offsets;
    wk_lifecycle_hooks hooks;
    TAILQ_HEAD(wk_chunk_list, wk_chunk) chunks;
    size_t nchunks;
    bool stopping; /* set by the worker at shutdown: a settled push wakes it */
    /* A timer's job is in flight: the next tick does not submit another
     * (a slow Redis gets one renewal and one control read at a time). */
    bool renewing, reading_ctl;
    wk_lifecycle_stats stats;
    /* The events gate (events.enabled): every chunk's acknowledgements
     * wait here for their events (wk_gate.h). */
    wk_gate gate;
} wk_lifecycle;

/* Sets the lifecycle's own fields; the worker then creates the
 * connections, cache, offsets, sender, reporter and metrics in place
 * before the first call. */
void wk_lifecycle_init(wk_lifecycle *l, const hr_config *cfg, const char *owner,
                       const wk_lifecycle_hooks *hooks);

/* Moves C to state TO, for WHY (a static string: the log, and C->why);
 * the only writer of C->state and C->held (see wk_chunk_state).  A
 * transition wk_chunk.h does not list is made all the same, and logged as
 * an error (chunk_state_unexpected). */
void wk_lifecycle_set(wk_chunk *c, wk_chunk_state to, const char *why);
/* Whether FROM -> TO is a transition wk_chunk.h lists. */
bool wk_lifecycle_may(wk_chunk_state from, wk_chunk_state to);
/* STATE's name ("pushing"). */
const char *wk_lifecycle_state_name(wk_chunk_state state);
/* How many chunks of PARTITION are on the list (a revoke drains until
 * none is). */
size_t wk_lifecycle_count(const wk_lifecycle *l, int32_t partition);

/* The bookkeeping the lifecycle's files (wk_lifecycle_*.c) share. */
/* The message at PARTITION/OFFSET needs nothing more. */
void wk_lifecycle_settle_offset(wk_lifecycle *l, int32_t partition, int64_t offset);
/* Hands the stats hash counters C's last script call answered to the
 * reporter (absolute values: see wk_reporter.h). */
void wk_lifecycle_report_counters(wk_lifecycle *l, wk_chunk *c);
/* A job of C answered: true when the lifecycle was done with C already
 * (the answer is dropped; C is freed once no job points at it). */
bool wk_lifecycle_gone(wk_lifecycle *l, wk_chunk *c);
/* Takes C off the list (GONE, for WHY): no request of it runs any more, no
 * job of it is waited for (those in flight keep it allocated). */
void wk_lifecycle_unlink(wk_lifecycle *l, wk_chunk *c, const char *why);
/* No new request of C starts: its pushes not yet started (ready, waiting
 * for a retry, or for their throttle slice) are taken back, the members
 * whose part of the open's read has not answered will get none; those in
 * flight finish and are not retried.  A halt's, a revoke's and a stall's. */
void wk_lifecycle_hold(wk_lifecycle *l, wk_chunk *c);
/* The events gate moved, or may have (the reporter's confirmed hook, the
 * control timer): the chunks' jobs it lets through go to Redis.  FORCE
 * opens it for good (a stop's or revoke's grace ran out). */
void wk_lifecycle_release(wk_lifecycle *l, bool force);
#endif
