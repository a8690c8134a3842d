/* dsp_chunk: the chunker (DESIGN.md "Chunker") on the loop thread: per
 * owned task, grant, move, produce; the delivery reports' effect on the
 * owned tasks; the finish of a task or shard whose set ran out. */
#ifndef DSP_CHUNK_H
#define DSP_CHUNK_H

#include <stdbool.h>

#include "dsp.h"
#include "dsp_kafka.h"

/* Reports, chunk rows and at most one chunk per owned task.  true when it
 * moved a chunk: more may be waiting, so the caller ticks again at once. */
bool dsp_chunk_tick(dsp *d);
/* At exit: flush the producer, write the reports, mark finished tasks,
 * release the leases. */
void dsp_chunk_release_all(dsp *d);
/* The producer's delivered hook (dsp_kafka_hooks; CTX is the dsp): the
 * owner's outstanding count, the health, and the push_chunk row of a
 * confirmed publish (dsp_report.c). */
void dsp_chunk_delivered(void *ctx, const dsp_kafka_msg *msg, const char *err);

#endif
