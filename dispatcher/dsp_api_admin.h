/* dsp_api_admin: the /v1 handlers of the API's own administration
 * (docs/api.md): who the caller is (GET /v1/me), operators' tokens
 * (/v1/tokens), the audit log (GET /v1/audit) and the API's jobs (GET
 * /v1/jobs/{id}). */
#ifndef DSP_API_ADMIN_H
#define DSP_API_ADMIN_H

#include "dsp_api.h"

/* GET /v1/me: the caller's name, role and the routes it may call. */
void dsp_api_admin_me(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* GET /v1/jobs/{id}: a job's record (dsp_api_job.h). */
void dsp_api_admin_job(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* GET /v1/tokens?all=1: the live API tokens (every one with all=1). */
void dsp_api_admin_tokens(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* POST /v1/tokens {"name", "role", "expires_in" | "expires_at"}: 201 with
 * the token, shown this once. */
void dsp_api_admin_token_create(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                                hr_httpd_resp *resp);
/* DELETE /v1/tokens/{id}: revokes it. */
void dsp_api_admin_token_revoke(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                                hr_httpd_resp *resp);
/* GET /v1/audit?task=&actor=&action=&since=&until=&before=&limit= */
void dsp_api_admin_audit(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
