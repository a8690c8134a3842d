/* dsp_wait: local-time sends and send windows on the dispatcher's side
 * (docs/scheduling.md): the wait set of a task whose recipients are not
 * all due at once, planned by the reconciliation, released by the
 * chunker.  Stateless; each caller passes its own connections. */
#ifndef DSP_WAIT_H
#define DSP_WAIT_H

#include <stdint.h>

#include "dsp.h"
#include "dsp_owned.h"

/* Reconciliation job: parks task ID's recipients in its wait set by
 * release instant, once (a local-time or windowed task, or one with
 * event_at: only its recipients whose lead's wave is ahead; others
 * untouched);
 * profiles Redis lost are refilled from MySQL first (CFG: their checks);
 * what is already past, by Redis's clock (TIME), is released at once.
 * *PARKED gets how many.  0 or -1 (ERRSTR). */
int dsp_wait_plan(dsp_conn *conn, const hr_config *cfg, int64_t id, int64_t *parked, char *errstr,
                  size_t errlen);
/* Loop thread, chunker: puts off the waves of DT whose window closed, then
 * releases up to MAX due recipients from the wait set into subs, "due" by
 * Redis's clock (TIME).  The number released, or -1 (ERRSTR); *NEXT_MS gets
 * the earliest release instant still waiting, in the clock of NOW (the
 * host's; -1 = none), *LEFT how many still wait. */
int64_t dsp_wait_release(dsp_conn *conn, const dsp_task *dt, int64_t now, int64_t max,
                         int64_t *next_ms, int64_t *left, char *errstr, size_t errlen);

#endif
