/* wk_chunkrows: chunk ends (done, parked, cancelled, expired) into their
 * push_chunk rows — never over 'done' — and, for a closed chunk that was
 * its task's last (nothing pending, subs empty), the task's move to 'done'
 * (hr_finish_tasks, once for the write's tasks, after the counters of the
 * same transaction; `cancelled` when its control is cancel).  Written by
 * the reporter thread inside its transaction (wk_reporter).
 *
 * A chunk end can come before its row.  The dispatcher writes a chunk's
 * push_chunk row only after Kafka confirmed the publish, in batches per
 * tick (dsp_report.c), and its INSERT IGNORE ... RETURNING is the only
 * writer of a new row: the rows it inserts are the first publishes, whose
 * sizes go into push_task.total, so the worker must not insert one.  A
 * small chunk can be consumed, pushed and closed before that batch ran, and
 * the end's UPDATE then matches no row, which would stay 'published' for
 * ever.  The ends of a write go in one UPDATE; when it changes fewer rows
 * than it has chunks, one SELECT reads which rows exist (a row found,
 * 'done' or already holding these values, needs nothing), and an end whose
 * row does not exist is kept and written again in every later
 * write, in order and before newer events (a newer end of the same chunk
 * waits behind it, so an older one never overwrites it), until the row
 * appears.  Bounded: an end kept ROW_WAIT_MS is given up, and beyond
 * WK_CHUNKROWS_WAIT_MAX ends the oldest is, each logged (chunk_row_missing,
 * task, seq, reason) and counted (herald_chunk_rows_missing_total, which an
 * alert watches): a row that never came was lost by the dispatcher
 * (chunk_row_lost), and its publishes are not in total either.  What a
 * write kept waiting counts only once its transaction committed.  Reporter
 * thread only. */
#ifndef WK_CHUNKROWS_H
#define WK_CHUNKROWS_H

#include <stddef.h>
#include <stdint.h>

#include "hr_mysql.h"
#include "wk_event.h"
#include "wk_metrics.h"

/* Chunk ends waiting for their rows, at most. */
#define WK_CHUNKROWS_WAIT_MAX 4096

typedef struct wk_chunkrows wk_chunkrows;

/* OWNER (copied) goes into push_chunk.worker; an end waits for its row at
 * most ROW_WAIT_MS; MET (which must outlive it) counts what is given up
 * and the recipients a finished task left unaccounted.  NULL when out of
 * memory. */
wk_chunkrows *wk_chunkrows_new(const char *owner, int64_t row_wait_ms, wk_metrics *met);
/* Writes, on M in the caller's transaction, the ends still waiting whose
 * rows exist now, then the N chunk events EVS: 0, or -1 with ERRSTR.
 * Then exactly one of: */
int wk_chunkrows_write(wk_chunkrows *cr, hr_mysql *m, const wk_event *evs, size_t n, char *errstr,
                       size_t errlen);
/* ... the transaction committed: what the write left waiting waits (and
 * what waited too long or beyond the cap is given up); */
void wk_chunkrows_committed(wk_chunkrows *cr);
/* ... it was rolled back: the waiting ends stay as they were. */
void wk_chunkrows_rolled_back(wk_chunkrows *cr);
/* How many ends wait for their rows. */
size_t wk_chunkrows_waiting(const wk_chunkrows *cr);
/* Gives up every waiting end (the reporter stops). */
void wk_chunkrows_give_up_all(wk_chunkrows *cr);
/* Accepts NULL. */
void wk_chunkrows_free(wk_chunkrows *cr);

#endif
