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

/* Gives C up without finishing it (WHY: a static string for the log); with
 * SETTLE its offset counts as finished.  Submits C's end job (C is unlinked
 * when it answered); nothing for a chunk ending already. */
void wk_lifecycle_abandon(wk_lifecycle *l, wk_chunk *c, const char *why, bool settle);
/* Stops starting requests for C (HALT: park, expire or cancel); once
 * nothing of it is in flight its end job is submitted.  May unlink C (when
 * the job cannot be submitted). */
void wk_lifecycle_halt(wk_lifecycle *l, wk_chunk *c, wk_chunk_halt halt);
/* Nothing of C is in flight any more and it was halted: parked or
 * dropped. */
void wk_lifecycle_halted(wk_lifecycle *l, wk_chunk *c);
/* Every recipient of C is settled: acknowledge, close, store the offset. */
void wk_lifecycle_finish(wk_lifecycle *l, wk_chunk *c);
/* Nothing of C is open any more (C->open == 0): given up, halted or
 * finished, as it stands. */
void wk_lifecycle_settled(wk_lifecycle *l, wk_chunk *c);
/* The chunk's ended hook: C's end job answered. */
void wk_lifecycle_ended(wk_chunk *c, const wk_chunk_ended *res);

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
