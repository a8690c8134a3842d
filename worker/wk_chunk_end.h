/* wk_chunk_end: a chunk's end, one job on the worker's Redis thread: the
 * last flush, then chunk_done.lua (close: every recipient settled; it
 * drops the lease also for a set found not empty), lease_release.lua
 * (abandon, park), drop_set.lua through hr_finish_drop (cancel, expire)
 * or handback.lua (given up after a stall).  Its answer comes back
 * through the chunk's ended hook (wk_chunk.h). */
#ifndef WK_CHUNK_END_H
#define WK_CHUNK_END_H

#include <stdbool.h>
#include <stdint.h>

#include "hr_finish.h"
#include "wk_chunk.h"
#include "wk_redis.h"

/* What a chunk's end job does (wk_chunk_finalize). */
typedef enum wk_chunk_ending {
    WK_CHUNK_CLOSE,       /* chunk_done.lua: every recipient settled */
    WK_CHUNK_RELEASE,     /* lease_release.lua: parked, abandoned, yielded */
    WK_CHUNK_DROP_EXPIRE, /* drop_set.lua: what is left counted expired */
    WK_CHUNK_DROP_CANCEL, /* drop_set.lua: what is left counted cancelled */
    /* handback.lua, then the chunk into the hand-back set: given up after
     * a stall (issue 34), for the dispatcher to publish at once */
    WK_CHUNK_HANDBACK,
} wk_chunk_ending;

/* How an end went (wk_chunk_hooks.ended). */
typedef struct wk_chunk_ended {
    int rc;          /* 0, or -1 (ERRSTR): the end's script failed */
    bool ack_failed; /* its flush, or an earlier one, failed */
    /* CLOSE: chunk_done.lua's {removed, pending left, subs left};
     * DROP: {dropped (-1: another holds the lease), the outcome's total};
     * HANDBACK: {handback.lua's answer (1 pending, 0 gone), 1 when the
     * hand-back set took it (else the sweeper finds it: ERRSTR says why)}. */
    int64_t res[3];
    /* CLOSE of a sharded task's chunk that left its shard empty: res[1]
     * and res[2] are the sums over every shard of the task, so only the
     * task's last chunk asks for done; then STATS holds every shard's
     * stats hash (NSTATS: the task's shards), which go to the reporter
     * with it (the other shards' last counters may still wait in other
     * workers' reporters, and the finish compares the rows' sum with the
     * subscriptions).  res[1] is -1 when they could not be read: the
     * sweeper ends the task. */
    const hr_outcomes *stats;
    int nstats;
    /* DROP with the events gate on (C->gate): the uids dropped, each an
     * event to publish. */
    const uint64_t *dropped;
    size_t ndropped;
    const char *errstr;
} wk_chunk_ended;

/* Returns 0, or -1 when the job could not be submitted (out of memory,
 * the Redis thread's queue full or closing): no hook runs then. */
/* The last flush, then HOW (OWNER's lease). */
int wk_chunk_finalize(wk_redis *rd, wk_chunk *c, wk_chunk_ending how, const char *owner);

#endif
