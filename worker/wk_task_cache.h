/* wk_task_cache: the worker's cache of tasks (wk_task.h), by id.  Entries
 * live in a small fixed table (WK_TASK_CACHE_SLOTS) and are reference
 * counted: a chunk holds its task with wk_task_get() until wk_task_put();
 * an unreferenced entry older than WK_TASK_TTL_MS is reloaded on the next
 * get, and the oldest unreferenced one is evicted when the table is full.
 * As a worker processes at most 64 chunks at once, the table never fills
 * with referenced entries.  Tasks that cannot be loaded are remembered
 * (negative entries) so their chunks cost no query each. */
#ifndef WK_TASK_CACHE_H
#define WK_TASK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "hr_config.h"
#include "hr_mysql.h"
#include "wk_task.h"

#define WK_TASK_CACHE_SLOTS 128
#define WK_TASK_PREFETCH_MAX 64 /* tasks per wk_task_prefetch: half the cache */
#define WK_TASK_TTL_MS 30000
/* Tasks that could not be loaded are remembered this long (and this many). */
#define WK_TASK_NEG_SLOTS 64
#define WK_TASK_NEG_TTL_MS 10000

typedef struct wk_task_cache wk_task_cache;

int wk_task_cache_new(const hr_config *cfg, wk_task_cache **out);
/* Frees every entry; none may be referenced any more.  Accepts NULL. */
void wk_task_cache_free(wk_task_cache *tc);

/* Returns 0 with a referenced *OUT, 1 when no such task exists, 2 when the
 * task cannot be pushed (ERRSTR says why: bad template, bad payload),
 * WK_TASK_NO_CHANNEL, -1 on a database error.  Answers 1, 2 and
 * WK_TASK_NO_CHANNEL are remembered for WK_TASK_NEG_TTL_MS (no query
 * meanwhile); when a reload of a stale entry fails on the database, the
 * stale entry is served (and kept another TTL). */
int wk_task_get(wk_task_cache *tc, hr_mysql *m, int64_t id, int64_t now_ms, wk_task **out,
                char *errstr, size_t errlen);
void wk_task_put(wk_task_cache *tc, wk_task *wt);

/* Loads the rows of those of the N tasks IDS that the cache lacks (or
 * holds stale, unreferenced) into it, at most WK_TASK_PREFETCH_MAX, in one
 * SELECT, so that their chunks' wk_task_get finds them: the worker's loop
 * asks before starting the chunk messages it received, and many small
 * tasks no longer cost it a blocking round trip each (docs/performance.md
 * "Many small tasks").  A task that cannot be pushed is remembered as
 * wk_task_get would; a failed load leaves everything to wk_task_get. */
void wk_task_prefetch(wk_task_cache *tc, hr_mysql *m, const int64_t *ids, size_t n, int64_t now_ms);

#endif
