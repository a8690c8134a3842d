/* dsp_ab: an A/B test's winner step on its owner's chunker (docs/api.md
 * "Test then winner", docs/architecture.md): the held rest of the task
 * (its wait set's HR_VARIANT_HOLD_MS wave, dsp_wait.c) is released when the
 * winner is picked.  Loop thread, the loop's connections. */
#ifndef DSP_AB_H
#define DSP_AB_H

#include <stdbool.h>
#include <stdint.h>

#include "dsp.h"
#include "dsp_owned.h"

/* Whether DT's next release is its winner step's held rest (nothing else
 * waits before it). */
bool dsp_ab_holds(const dsp_task *dt);

/* The step, when DT's chunker found nothing else due: once the sample is
 * over (subs and pending empty) ab_sampled_at is written (once); ab_wait_s
 * later the winner is picked and written (once, hr_variant_ab_decide) and
 * the held rest moved to due (wait_defer.lua), DT->wait_next_ms 0.  Else
 * DT->next_ms says when to look again.  A failure is logged and looked at
 * again a second later. */
void dsp_ab_step(dsp *d, dsp_task *dt, int64_t now);

#endif
