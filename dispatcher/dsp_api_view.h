/* dsp_api_view: the JSON views of a task the API answers with: its row
 * (every POST/PATCH/GET of a task, the list), and the live half of GET
 * /v1/tasks/{id} (Redis state, progress, waves, the pacing plan). */
#ifndef DSP_API_VIEW_H
#define DSP_API_VIEW_H

#include <cJSON.h>

#include "dsp_api.h"
#include "hr_task.h"

/* Adds NAME: MS as an RFC 3339 UTC string to O, or null when MS < 0. */
void dsp_api_add_time(cJSON *o, const char *name, int64_t ms);
/* Task T's row as a new JSON object (the caller's). */
cJSON *dsp_api_view_task(const hr_task *t);
/* The fields of T an admin sets (dsp_api_view_task without its id, state,
 * control, counters, errors and owner): what the audit log records of a
 * task created or changed. */
cJSON *dsp_api_view_settings(const hr_task *t);
/* Adds "live" and "progress" of task T to O (docs/api.md "Progress"), read
 * with AC's connections; without Redis the progress still comes from
 * MySQL. */
void dsp_api_view_live(dsp_api_conn *ac, const hr_task *t, cJSON *o);

#endif
