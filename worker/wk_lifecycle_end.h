/* wk_lifecycle_end: how a chunk stops — finished (chunk_done.lua), halted
 * by its task's control key or expire_at (parked, or dropped counted as
 * cancelled or expired), abandoned (revoke, lease lost, shutdown) — each
 * through the chunk's end job (wk_chunk_end), whose answer settles the
 * offset and unlinks the chunk; and the revoke and shutdown entry points
 * the worker calls.  Loop thread only. */
#ifndef WK_LIFECYCLE_END_H
#define WK_LIFECYCLE_END_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wk_chunk_end.h"
#include "wk_lifecycle.h"

/* Starts C's ending TO (CLOSING .. YIELDING, see wk_chunk_state), for WHY
 * (a static string): its pushes are unlinked (a request in flight is
 * aborted: only an abandon has any), and its end job is submitted, whose
 * answer (wk_lifecycle_ended) settles the offset — but ABANDONING's, which
 * leaves the chunk to the partition's next owner — and unlinks it.
 * Nothing for a chunk ending already.  May unlink C (the job could not be
 * submitted). */
void wk_lifecycle_end(wk_lifecycle *l, wk_chunk *c, wk_chunk_state to, const char *why);
/* Stops starting requests for C (HALT: park, expire or cancel; each
 * overrides the ones before it while C is held): C is held, running
 * requests finish and are not retried, and once nothing of it is in
 * flight it ends (PARKING, EXPIRING, CANCELLING).  Nothing for a chunk
 * being revoked or ending.  May unlink C. */
void wk_lifecycle_halt(wk_lifecycle *l, wk_chunk *c, wk_chunk_halt halt);
/* Nothing of C is open any more (C->open == 0): it ends as its state says
 * (PUSHING closes, a held chunk ends as it is held). */
void wk_lifecycle_settled(wk_lifecycle *l, wk_chunk *c);
/* The chunk's ended hook: C's end job answered. */
void wk_lifecycle_ended(wk_chunk *c, const wk_chunk_ended *res);

/* PARTITION is being revoked: its chunks are held (HELD_REVOKE) and start
 * no new request; those with nothing in flight are abandoned now.
 * Answers how many of its chunks are left (requests in flight, or an end
 * under way: an abandon's acknowledgements and lease release); the revoke
 * drains until wk_lifecycle_count says none is.  Its stalled chunks are
 * handed back at once (the partition's next owner may not hold Redis
 * better, and the dispatcher republishes them within a second). */
size_t wk_lifecycle_revoke(wk_lifecycle *l, int32_t partition);
/* Abandons every chunk still held for a revoke, for WHY (the log). */
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
