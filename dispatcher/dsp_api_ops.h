/* dsp_api_ops: the /v1 handlers of the admin operations heraldctl has too:
 * chunks in flight, dead letters, redrive, recover, subscriber counts and a
 * dry-run render. */
#ifndef DSP_API_OPS_H
#define DSP_API_OPS_H

#include "dsp_api.h"

/* GET /v1/tasks/{id}/chunks */
void dsp_api_ops_chunks(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* GET /v1/tasks/{id}/dead-letters */
void dsp_api_ops_dead_letters(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                              hr_httpd_resp *resp);
/* POST /v1/tasks/{id}/redrive */
void dsp_api_ops_redrive(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* POST /v1/tasks/{id}/recover */
void dsp_api_ops_recover(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* GET /v1/tasks/{id}/subscribers/count */
void dsp_api_ops_subs_count(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* POST /v1/render, GET /v1/tasks/{id}/render */
void dsp_api_ops_render_new(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_ops_render_task(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                             hr_httpd_resp *resp);

#endif
