/* dispatcher: herald-dispatcher's lifecycle: builds the daemon (struct dsp
 * and every module's state), runs the loop, tears it down. */
#ifndef DISPATCHER_H
#define DISPATCHER_H

#include "hr_config.h"

/* Runs the dispatcher until SIGTERM/SIGINT; the exit code for main. */
int dsp_run(const hr_config *cfg);

#endif
