/* wk_control: the worker's periodic Redis reads about open chunks — the
 * tasks' control keys (run, pause, cancel) and the chunks' lease renewals —
 * each one pipelined round trip on the loop thread.  What to do with the
 * answers (halt, abandon) is the lifecycle's (wk_lifecycle). */
#ifndef WK_CONTROL_H
#define WK_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#include "hr_redis.h"
#include "wk_chunk.h"
#include "wk_metrics.h"

/* TASK's control key as a wk_chunk_halt, or -1 with ERRSTR on error. */
int wk_control_read(hr_redis *r, int64_t task, char *errstr, size_t errlen);
/* One pipelined GET per task of TASKS[N]: HALTS[i] gets what the key says
 * (RUN when its read failed), *QUEUED how many were sent (the rest are not
 * read).  0, or -1 with ERRSTR when a reply failed. */
int wk_control_read_many(hr_redis *r, const int64_t *tasks, size_t n, wk_chunk_halt *halts,
                         size_t *queued, char *errstr, size_t errlen);
/* Renews the leases of HELD[N] as OWNER for LEASE_MS (lease_renew.lua,
 * one pipeline, which replays a NOSCRIPT).  LOST (N slots) gets the chunks
 * whose lease is no longer OWNER's, *NLOST their number.  Errors are
 * counted in MET and logged once: a lease not renewed now is renewed on
 * the next round. */
void wk_control_renew(hr_redis *r, wk_metrics *met, wk_chunk **held, size_t n, const char *owner,
                      int lease_ms, wk_chunk **lost, size_t *nlost);

#endif
