/* dsp_control: the dispatcher's side of pause / resume / cancel and of the
 * tasks heraldctl redrive reopened, run by the background job after each
 * scan on its connections.  Nothing is remembered between scans. */
#ifndef DSP_CONTROL_H
#define DSP_CONTROL_H

#include <stdbool.h>

#include "dsp.h"

/* One round of control transitions (at most DSP_CONTROL_MAX of each kind).
 * Whether a task entered or left a finished state (a cancel, a redrive). */
bool dsp_control_scan(dsp *d, dsp_conn *conn);

#endif
