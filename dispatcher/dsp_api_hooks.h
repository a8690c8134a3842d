/* dsp_api_hooks: the event webhooks' routes (docs/api.md "Event webhooks"),
 * over hr_hooks:
 *   POST   /v1/hooks                     register {url, types?, description?, secret?}
 *   GET    /v1/hooks                     every endpoint (no secrets)
 *   GET    /v1/hooks/{id}
 *   PATCH  /v1/hooks/{id}                {url?, types?, description?, state?}
 *   DELETE /v1/hooks/{id}
 *   GET    /v1/hooks/{id}/dead-letters   ?limit=&after=
 *   POST   /v1/hooks/{id}/redrive        the dead letters delivered again */
#ifndef DSP_API_HOOKS_H
#define DSP_API_HOOKS_H

#include "dsp_api.h"

void dsp_api_hooks_create(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_hooks_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_hooks_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_hooks_patch(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_hooks_delete(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_hooks_dead(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_hooks_redrive(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
