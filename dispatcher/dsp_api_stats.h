/* dsp_api_stats: GET /v1/tasks/{id}/stats, a task's funnel (sent ->
 * delivered -> opened -> clicked, per channel), its outcome counters and
 * its per-minute series (hr_stats.h; docs/api.md "Funnels"). */
#ifndef DSP_API_STATS_H
#define DSP_API_STATS_H

#include "dsp_api.h"

void dsp_api_stats_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
