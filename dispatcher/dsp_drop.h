/* dsp_drop: what is left of a shard of a task, dropped and counted as an
 * outcome (drop_set.lua through hr_finish_drop): by cancel (dsp_control.c)
 * and by the chunker at expire_at (dsp_chunk.c), each on its own
 * connections.  Shared below both, so neither calls the other. */
#ifndef DSP_DROP_H
#define DSP_DROP_H

#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"
#include "dsp_events.h"
#include "hr_finish.h"

/* Drops every pending chunk of shard SHARD of task ID (0 for a task of one
 * set) no live worker holds, counting its recipients as OUTCOME: adds the
 * count to *DROPPED, raises *TOTAL to the shard's stats hash counter, sets
 * *HELD when a worker held one (that worker drops it).  With EV (not NULL:
 * events on) every recipient dropped is published as an event.  0 or -1. */
int dsp_drop_chunks(dsp_conn *conn, int64_t id, int shard, hr_outcome outcome, dsp_events_drop *ev,
                    int64_t *dropped, int64_t *total, bool *held, char *errstr, size_t errlen);
/* Drops shard SHARD of task ID whole, as dsp_drop_chunks counts: its wait
 * set first (a local-time or windowed task's recipients not yet due: an
 * owner's release racing the drop then lands in subs, dropped next, never
 * after it), then subs, then the pending chunks no worker holds.  0 or -1. */
int dsp_drop_shard(dsp_conn *conn, int64_t id, int shard, hr_outcome outcome, dsp_events_drop *ev,
                   int64_t *dropped, int64_t *total, bool *held, char *errstr, size_t errlen);

#endif
