/* wk_lifecycle_stall: a chunk held through a Redis failover (STALLED) and
 * a chunk handed back to the dispatcher (HANDING_BACK); see
 * wk_lifecycle_stall.c and wk_lifecycle.h.  Loop thread only. */
#ifndef WK_LIFECYCLE_STALL_H
#define WK_LIFECYCLE_STALL_H

#include <stdbool.h>
#include <stdint.h>

#include "wk_lifecycle.h"

/* C's job failed on a failover (ERRSTR), for WHY: C stalls, or, stalled
 * already, waits longer before its next try.  wk_lifecycle_drop's. */
void wk_lifecycle_stall(wk_lifecycle *l, wk_chunk *c, const char *why, const char *errstr);
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
/* The control timer's turn for the stalled and handing-back chunks: the
 * retries whose back-off is over, the hand-backs of those past the bound. */
void wk_lifecycle_stalls(wk_lifecycle *l);
/* A flush of STALLED C answered (RC, ERRSTR): written, C goes back to
 * where it stalled from; failed, it stalls on. */
void wk_lifecycle_stall_flushed(wk_lifecycle *l, wk_chunk *c, int rc, const char *errstr);

#endif
