/* dsp_sweep: the sweeper and key retirement (DESIGN.md "Sweeper" and "Key
 * retention"), run by the background job on its connections; d->sweep
 * holds the two page cursors. */
#ifndef DSP_SWEEP_H
#define DSP_SWEEP_H

#include <stdint.h>

#include "dsp.h"
#include "hr_task.h"

#define DSP_SWEEP_MAX 100   /* republishes per sweep */
#define DSP_SWEEP_PAGE 1000 /* tasks per sweep */
/* The tasks a sweeper looks at: every `dispatching` one (its chunks'
 * republish), and the `dispatched` ones this dispatcher made so (params:
 * its owner), those without an owner (a row written by hand) and those
 * dispatched DSP_SWEEP_OWNER_SWEEPS sweep intervals ago or more (params:
 * that in µs; their owner's sweeper had that long to end them, and the
 * workers' reporters end most before: the safety net for an owner that
 * died). */
#define DSP_SWEEP_OWNER_SWEEPS 2
#define DSP_SWEEP_OWNER_SQL                                                                    \
    "(state = 'dispatching' OR claimed_by IS NULL OR claimed_by = ? OR dispatched_at IS NULL " \
    "OR dispatched_at <= UTC_TIMESTAMP(3) - INTERVAL ? MICROSECOND)"

/* A page of them from a cursor (params: the cursor, the topic twice, the
 * owner, the µs above, the limit).  Read by the state index's range of the
 * dispatching and dispatched tasks (FORCE INDEX): left to itself, MariaDB
 * walked the primary key from the cursor for the ORDER BY id LIMIT once a
 * few thousand tasks were in flight, and so read every finished task
 * before them on every sweep from the start (docs/performance.md "The
 * dispatcher's scans and the task history"). */
#define DSP_SWEEP_PAGE_SQL                                                                  \
    "SELECT id, state, CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED), shards "       \
    "FROM push_task FORCE INDEX (push_task_state_control_due) "                             \
    "WHERE state IN ('dispatching', 'dispatched') AND id > ? AND (? IS NULL OR topic = ?) " \
    "AND " DSP_SWEEP_OWNER_SQL " ORDER BY id LIMIT ?"

/* The retirement pass's cursor goes back twice this far this often: the
 * catch for a finish committed later than the pass's margin allows (a
 * client stalled between its finish statement and its commit), read again
 * by at most two such rewinds.  At start the pass reads from a day ago. */
#define DSP_RETIRE_REWIND_MS ((int64_t)3600 * 1000)
#define DSP_RETIRE_START "1000-01-01 00:00:00.000" /* before any finish */

/* The retirement pass's cursor: the last finish it read (finished_at as
 * MariaDB prints DATETIME(3), DSP_RETIRE_START before the first; then its
 * id), and when (monotonic ms) it last went back; all zero before the
 * first pass. */
typedef struct dsp_retire_cursor {
    char at[32];
    int64_t id;
    int64_t rewound_ms;
} dsp_retire_cursor;

/* The cursors (at the start) into d->sweep.  0, or -1 out of memory. */
int dsp_sweep_new(dsp *d);
void dsp_sweep_free(dsp *d);
/* One sweep: a page of unfinished tasks, then the retirement pass. */
void dsp_sweep_run(dsp *d, dsp_conn *conn);
/* Task T was taken over from a dead owner (the poller claimed it
 * `dispatching`): its pending chunks no worker holds are published again
 * at once, not after redelivery_timeout_s (issue 34). */
void dsp_sweep_takeover(dsp *d, dsp_conn *conn, const hr_task *t);
/* The chunks workers handed back, republished at once (every second). */
void dsp_sweep_handbacks(dsp *d, dsp_conn *conn);
/* Republishes task ID's (every shard's of its SHARDS) pending chunks last
 * published at or before STALE (ms) that no worker holds; *BUDGET bounds
 * the work.  Returns the number of pending chunks, or -1 on a Redis error. */
int64_t dsp_sweep_task(dsp *d, dsp_conn *conn, int64_t id, int shards, int64_t due_ms, int64_t now,
                       int64_t stale, int *budget);
/* The cursor C before a pass at MONO_MS (monotonic) and WALL_MS (UTC):
 * set to DSP_RETIRE_START at the first; every DSP_RETIRE_REWIND_MS after,
 * moved back to 2 x DSP_RETIRE_REWIND_MS before WALL_MS (id 0) unless it
 * is further back already. */
void dsp_retire_cursor_step(dsp_retire_cursor *c, int64_t mono_ms, int64_t wall_ms);
/* Gives the N finished tasks IDS' Redis keys (subs, seq, pending, stats,
 * ctl, pulled, failed, prep, synced; every shard's of their SHARDS[i]) the
 * retention expiry, only where they have none, so a later pass does not
 * push it further out, in one round trip.  Chunk and lease keys are the
 * workers' and go when a chunk ends.  0 or -1 (ERRSTR). */
int dsp_sweep_retire_keys(dsp_conn *conn, const int64_t *ids, const int *shards, size_t n,
                          char *errstr, size_t errlen);

#endif
