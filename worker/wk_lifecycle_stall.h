/* wk_lifecycle_stall: a chunk's failed job — dropped, or held through a
 * Redis failover (STALLED) — and a chunk handed back to the dispatchers
 * (HANDING_BACK); see wk_lifecycle_stall.c.  The stalled chunks' retries
 * are the control timer's (wk_lifecycle_timers.c).  Loop thread only. */
#ifndef WK_LIFECYCLE_STALL_H
#define WK_LIFECYCLE_STALL_H

#include <stdbool.h>
#include <stdint.h>

#include "wk_lifecycle.h"

/* A job of C failed, for WHY (static), with ERRSTR (NULL: not Redis's
 * answer: the Redis thread took no job, out of memory).  A failover's
 * error (hr_redis_failover) stalls C (STALLED: held, the lease kept, the
 * failed step tried again with back-off, for worker.stall_max_ms, then
 * handed back); any other drops it: the lease is left to expire, the
 * offset counts as finished, and the sweeper republishes the chunk after
 * redelivery_timeout_s (pending still holds it).  Every failed job of a
 * chunk ends here. */
void wk_lifecycle_drop(wk_lifecycle *l, wk_chunk *c, const char *why, const char *errstr);
/* Gives C up at once, for WHY (logged as an error, counted in
 * herald_chunks_handed_back_total): its requests cancelled, then the
 * hand-back job (the buffered acks if Redis takes them, handback.lua, the
 * hand-back set), tried again with back-off while Redis fails as in a
 * failover. */
void wk_lifecycle_hand_back(wk_lifecycle *l, wk_chunk *c, const char *why);
/* The hand-back's answer (wk_chunk_ended: RC, PENDING res[0], INDEXED
 * res[1], ERRSTR). */
void wk_lifecycle_handed_back(wk_lifecycle *l, wk_chunk *c, int rc, int64_t pending, bool indexed,
                              const char *errstr);
/* The next try of a stalled chunk (or of a hand-back) after WK_STALL_MIN_MS,
 * doubling up to WK_STALL_MAX_MS: a restarted Redis or a promoted replica
 * is found within a second of serving, and a long outage costs a job per
 * chunk every second. */
#define WK_STALL_MIN_MS 250
#define WK_STALL_MAX_MS 1000

/* Submits C's hand-back (HANDING_BACK already, its try due); a refused job
 * drops it. */
void wk_lifecycle_hand_back_submit(wk_lifecycle *l, wk_chunk *c);
/* A flush of STALLED C answered (RC, ERRSTR): written, the control
 * timer's next turn takes C back where it stalled from; failed, it stalls
 * on. */
void wk_lifecycle_stall_flushed(wk_lifecycle *l, wk_chunk *c, int rc, const char *errstr);

#endif
