/* wk_chunk_check: a throttle slice of a chunk, one job on the worker's
 * Redis thread: a slice of the members through the throttle (hr_throttle:
 * throttle.lua for up to 100 members per call, pipelined), then ack.lua
 * counting the blocked ones under 'throttled'.  The lifecycle checks the
 * first slice small and pushes its recipients while the next slices are
 * checked.  Its answer comes back through the chunk's checked hook
 * (wk_chunk.h). */
#ifndef WK_CHUNK_CHECK_H
#define WK_CHUNK_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "wk_chunk.h"
#include "wk_redis.h"

/* The first throttle slice of a chunk: small, so the first pushes start
 * after a few milliseconds of Redis time; the rest go in slices of
 * HR_THROTTLE_PIPE_MAX while those pushes run. */
#define WK_CHUNK_FIRST_SLICE 100

/* What a throttle slice decided (wk_chunk_hooks.checked); the verdicts
 * are in C->verdicts. */
typedef struct wk_chunk_checked {
    int rc; /* 0, or -1 (ERRSTR): the slice's results are unknown */
    size_t first, n;
    int64_t blocked;     /* pushes not to be submitted (settled already) */
    int64_t removed;     /* of those, left the set now: counted as throttled */
    int64_t shadowed;    /* over the limit but pushed (shadow mode) */
    int64_t key_missing; /* throttle_key attribute absent */
    const char *errstr;
} wk_chunk_checked;

/* Returns 0, or -1 when the job could not be submitted (out of memory,
 * the Redis thread's queue full or closing): no hook runs then. */
/* Throttles pushes [FIRST, FIRST + N) of an opened chunk whose task
 * throttles: their verdicts into C->verdicts (allocated by the first
 * call), the blocked ones acknowledged under 'throttled', throttle_shadowed
 * and throttle_key_missing counted in the stats hash. */
int wk_chunk_check(wk_redis *rd, wk_chunk *c, size_t first, size_t n);

#endif
