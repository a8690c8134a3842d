/* wk_chunk_acks: a chunk's settled recipients, buffered (C->acks) until an
 * ack batch is full, and the calls that write them: ack.lua per kind
 * (sent, unregistered, opted_out, suppressed) and dead_letter.lua, in the
 * round's pipeline,
 * which the flushes of other chunks, the renewals and the control reads
 * share (batched).  The scripts answer the task's stats hash counters
 * after the call; the chunk keeps the latest (C->counters).  The helpers
 * below the flush are the other jobs' (open, check, end), which write
 * acknowledgements of their own. */
#ifndef WK_CHUNK_ACKS_H
#define WK_CHUNK_ACKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_pipe.h"
#include "hr_redis.h"
#include "wk_chunk.h"
#include "wk_redis.h"

/* Buffers UID as settled HOW (wk_chunk.h), failed for good with REASON
 * (copied) for WK_CHUNK_DEAD: 1 when the buffers reached the ack batch and
 * should be flushed, 0, or -1 when out of memory. */
int wk_chunk_ack(wk_chunk *c, wk_chunk_settled how, const char *uid, const char *reason);
/* How many recipients A holds, of every kind. */
size_t wk_chunk_acks_held(const wk_chunk_acks *a);
/* The same into A, whose buffers start at BATCH each (1 when they hold
 * BATCH in all). */
int wk_chunk_acks_add(wk_chunk_acks *a, size_t batch, wk_chunk_settled how, const char *uid,
                      const char *reason);

/* Returns 0, or -1 when the job could not be submitted (out of memory,
 * the Redis thread's queue full or closing): no hook runs then. */
/* Acknowledges what C->acks holds (taken whole, so C buffers anew): those
 * that left the set are added to C's totals of their kind. */
int wk_chunk_flush(wk_redis *rd, wk_chunk *c);

/* The stats hash counters the scripts answer after their own values. */
#define WK_CHUNK_NCOUNTERS 7

/* What the calls of one flush answered. */
typedef struct wk_chunk_acked {
    int64_t removed[WK_CHUNK__SETTLED]; /* left the set, per kind */
    wk_chunk_counters counters;
    bool counters_new;
    bool failed[WK_CHUNK__SETTLED]; /* which calls (wk_chunk_acks_calls' order) failed */
    int rc;
    char errstr[256];
} wk_chunk_acked;

/* Reads REPLY (taken; NULL = the call failed, ERRSTR set) of script ID: an
 * array of N integers into OUT, then the stats hash counters into
 * *COUNTERS.  -1 with ERRSTR on another reply. */
int wk_chunk_counted(hr_lua_id id, redisReply *reply, int64_t *out, size_t n,
                     wk_chunk_counters *counters, char *errstr, size_t errlen);
/* Queues ack.lua for the N UIDS of C, counted under stats FIELD, plus
 * RETRIED retries.  0, or -1 when out of memory. */
int wk_chunk_ack_queue(const wk_chunk *c, hr_pipe *pipe, const char *field, int64_t retried,
                       const char *const *uids, size_t n);
/* The calls a flush of A makes, in the order of the kinds: ack.lua for
 * each kind with recipients (sent also for retries alone), dead_letter.lua. */
void wk_chunk_acks_calls(const wk_chunk_acks *a, bool calls[WK_CHUNK__SETTLED]);
/* How many calls a flush of A makes. */
size_t wk_chunk_acks_ncalls(const wk_chunk_acks *a);
/* Queues the calls of A on PIPE.  0, or -1 when out of memory (the calls
 * queued so far stay queued). */
int wk_chunk_acks_queue(const wk_chunk *c, const wk_chunk_acks *a, hr_pipe *pipe);
/* Reads the replies of A's calls, the first at PIPE's *AT (advanced past
 * them), of which AVAIL were queued. */
void wk_chunk_acks_read(const wk_chunk_acks *a, hr_pipe *pipe, size_t *at, size_t avail,
                        wk_chunk_acked *out);
/* Runs the calls of A on R (one round trip). */
void wk_chunk_acks_run(const wk_chunk *c, const wk_chunk_acks *a, hr_redis *r, wk_chunk_acked *out);
/* Loop thread: what a flush of A answered, into C; the calls that failed
 * give their recipients back to C's buffers (A is emptied).  C->ack_failed
 * says whether any did. */
void wk_chunk_acked_apply(wk_chunk *c, wk_chunk_acks *a, const wk_chunk_acked *acked);
/* Puts the recipients of the calls of FROM that FAILED (wk_chunk_acks_calls'
 * order) back into C's buffers, and frees FROM.  0, or -1 when out of
 * memory (the rest is lost to the buffers: still in the set). */
int wk_chunk_acks_give_back(wk_chunk *c, wk_chunk_acks *from, const bool failed[WK_CHUNK__SETTLED]);

#endif
