/* dsp_api_series_subs: the /v1 handlers of a series' subscribers
 * (docs/api.md "Subscribers of a series"; the SQL is
 * common/hr_series_subs.c's):
 *
 *   POST   /v1/series/{id}/subscribers        {"uids":[...]}: at most
 *          api.max_ids, checked as a task's subscriber add checks them
 *          (dsp_api_parse_uids); new ones and those who left subscribe
 *          from now; a repeat changes nothing
 *   DELETE /v1/series/{id}/subscribers/{uid}  unsubscribes from now: the
 *          occurrences claimed after it do not take the uid, those claimed
 *          before it keep it
 *   GET    /v1/series/{id}/subscribers        the count now and a page
 *          (?after=UID&limit=N, 1..10000, default 1000) by uid
 *
 * Nothing is written to Redis: an occurrence takes the series'
 * subscribers at its claim (common/hr_subs.h).  A change goes with its
 * audit row (target "series <id>") in one transaction. */
#ifndef DSP_API_SERIES_SUBS_H
#define DSP_API_SERIES_SUBS_H

#include "dsp_api.h"

void dsp_api_series_subs_add(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                             hr_httpd_resp *resp);
void dsp_api_series_subs_del(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                             hr_httpd_resp *resp);
void dsp_api_series_subs_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                              hr_httpd_resp *resp);

#endif
