/* wk_lifecycle: a chunk's life on the worker, from intake to offset store.
 *
 * The loop file (wk_worker) consumes Kafka and hands every message it
 * received to wk_lifecycle_intake; from there the lifecycle owns the chunk:
 * decode, task load, open (control key, lease, members, and the addresses
 * of an addressed channel), the throttle slices, the pushes' outcomes
 * (wk_lifecycle_push_done, the sender's done callback), acknowledgements,
 * and one of the endings —
 *   finish    every recipient settled: chunk_done.lua, row 'done'
 *   halt      the task's control key says pause/cancel, or it expired:
 *             park, or drop counted as cancelled or expired
 *   abandon   revoke, lease lost, shutdown: acks flushed, lease released
 *   drop      a Redis error: the lease expires, the sweeper republishes
 * — and, for every message, the offset: wk_offsets says when a finished
 * message lets the partition's offset move, and the store_offset hook
 * stores it.  Every message ends in exactly one of these (a "skip" is an
 * offset settled without a chunk).
 *
 * Every Redis step is a job on the worker's Redis thread (wk_redis, through
 * wk_chunk and wk_control): the lifecycle submits it and goes on, and acts
 * on its answer when the chunk's hook (or the timer's callback) runs on the
 * loop.  A chunk in the middle of a step is in a phase (wk_chunk_phase):
 * opening, open, ending; an ending chunk stays on the list (and counts
 * against max_chunks_in_flight, and keeps a revoke draining) until its end
 * job answered, and a chunk the lifecycle is done with is freed only once
 * no job points at it.
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
#include "wk_inbox.h"
#include "wk_metrics.h"
#include "wk_offsets.h"
#include "wk_redis.h"
#include "wk_reporter.h"
#include "wk_sender.h"
#include "wk_task.h"

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
} wk_lifecycle;

/* Sets the lifecycle's own fields; the worker then creates the
 * connections, cache, offsets, sender, reporter and metrics in place
 * before the first call. */
void wk_lifecycle_init(wk_lifecycle *l, const hr_config *cfg, const char *owner,
                       const wk_lifecycle_hooks *hooks);

/* The task rows of the N messages MSGS (received, not started yet) that
 * the task cache lacks, loaded in one statement (wk_task_prefetch). */
void wk_lifecycle_prefetch(wk_lifecycle *l, const wk_inbox_msg *msgs, size_t n);
/* A message received at PARTITION/OFFSET with PAYLOAD: becomes an open
 * chunk, or its offset is settled at once. */
void wk_lifecycle_intake(wk_lifecycle *l, int32_t partition, int64_t offset, const void *payload,
                         size_t len);
/* The sender's done callback (CTX is the lifecycle). */
void wk_lifecycle_push_done(void *ctx, wk_push *push, const wk_push_result *res);
/* The sender's prune callback (CTX: the wk_lifecycle). */
void wk_lifecycle_prune(void *ctx, wk_push *push, const hr_addr *a);

/* Renews the lease of every open chunk; a chunk whose lease was lost is
 * abandoned (its offset counts as finished). */
void wk_lifecycle_renew(wk_lifecycle *l);
/* Reads the control keys and halts the chunks of paused or cancelled
 * tasks, runs the pump watchdog and retries opens waiting for a foreign
 * lease. */
void wk_lifecycle_control(wk_lifecycle *l);

/* PARTITION is being revoked: its chunks start no new request; those with
 * nothing in flight are abandoned now.  Answers how many are left
 * draining (requests in flight, or the abandon's acknowledgements and
 * lease release under way). */
size_t wk_lifecycle_revoke(wk_lifecycle *l, int32_t partition);
/* True while a revoked chunk is still draining. */
bool wk_lifecycle_revoke_draining(const wk_lifecycle *l);
/* Abandons every revoked chunk, for WHY (the log). */
void wk_lifecycle_abandon_revoked(wk_lifecycle *l, const char *why);
/* Forgets PARTITION's unsettled messages (revoked: its next owner
 * consumes them again). */
void wk_lifecycle_forget(wk_lifecycle *l, int32_t partition);
/* True while a chunk's end job (close, park, cancel, abandon) has not
 * answered: the offsets some of them store are not stored yet. */
bool wk_lifecycle_ending(const wk_lifecycle *l);
/* Abandons every chunk (shutdown): what was settled is acknowledged, the
 * leases released (jobs the Redis thread finishes before it stops). */
void wk_lifecycle_abandon_all(wk_lifecycle *l, const char *why);

#endif
