/* dsp_ahead: how far the chunker may run ahead of the workers
 * (dispatcher.chunks_ahead pending chunks no worker holds yet). */
#ifndef DSP_AHEAD_H
#define DSP_AHEAD_H

#include "dsp.h"
#include "dsp_owned.h"

/* Loop thread, chunker: 1 when dispatcher.chunks_ahead of owned task DT's
 * pending chunks wait for a worker (move no more now), 0, or -1 on a Redis
 * error (ERRSTR). */
int dsp_ahead(dsp *d, const dsp_task *dt, char *errstr, size_t errlen);

#endif
