/* dsp_api_series: the /v1 handlers of series (docs/api.md "Series"):
 *
 *   POST /v1/series                  create (checked as the dispatcher will)
 *   GET  /v1/series                  list (by id, ?after=ID, 100 a page)
 *   GET  /v1/series/{id}             one series and its next 5 occurrences
 *   GET  /v1/series/{id}/next        its next ?count=N (1..100, default 10)
 *   POST /v1/series/{id}/pause|resume|end   an operator's change
 *
 * Changes go with their audit row (target "series <id>") in one
 * transaction.  A series' subscribers: dsp_api_series_subs.h. */
#ifndef DSP_API_SERIES_H
#define DSP_API_SERIES_H

#include "dsp_api.h"

void dsp_api_series_create(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_series_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_series_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_series_next(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_series_pause(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_series_resume(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_series_end(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
