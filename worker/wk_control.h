/* wk_control: the worker's periodic Redis reads about open chunks — the
 * tasks' control keys (run, pause, cancel) and the chunks' lease renewals —
 * as batched jobs on the Redis thread (wk_redis), so they share a round
 * trip with each other and with the chunks' acknowledgements.  What to do
 * with the answers (halt, abandon) is the lifecycle's (wk_lifecycle). */
#ifndef WK_CONTROL_H
#define WK_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wk_chunk.h"
#include "wk_redis.h"

/* What a control read found, on the loop thread: HALTS[i] is what task
 * TASKS[i]'s key says (RUN when its read failed); FAILED with ERRSTR when
 * a read failed.  N 0: a PING answered (or not: FAILED). */
typedef void (*wk_control_read_fn)(void *ctx, const int64_t *tasks, const wk_chunk_halt *halts,
                                   size_t n, bool failed, const char *errstr);
/* What a renewal found, on the loop thread: the ids of the chunks whose
 * lease is no longer ours (LOST[NLOST]), and FAILED renewals (ERRSTR). */
typedef void (*wk_control_renew_fn)(void *ctx, const uint64_t *lost, size_t nlost, size_t failed,
                                    const char *errstr);

/* One GET per task of TASKS[N] (copied); with N 0 a PING, which keeps
 * /readyz's view of Redis current while nothing is open.  0, or -1 when
 * the job could not be submitted (DONE is then not called). */
int wk_control_read(wk_redis *rd, const int64_t *tasks, size_t n, wk_control_read_fn done,
                    void *ctx);
/* Renews the leases of HELD[N] (their ids and keys copied) as OWNER for
 * LEASE_MS with lease_renew.lua, taking again a lease that is gone (it
 * expired in an outage the chunk stalled through); a NOSCRIPT is replayed
 * by the pipeline.
 * 0, or -1 as above. */
int wk_control_renew(wk_redis *rd, wk_chunk *const *held, size_t n, const char *owner, int lease_ms,
                     wk_control_renew_fn done, void *ctx);

#endif
