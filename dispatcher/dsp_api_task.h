/* dsp_api_task: the /v1 handlers of tasks: create, patch, get, list, and
 * the admin's pause / resume / cancel. */
#ifndef DSP_API_TASK_H
#define DSP_API_TASK_H

#include <cJSON.h>
#include <stdbool.h>

#include "dsp_api.h"
#include "dsp_api_parse.h"

/* POST /v1/tasks, PATCH /v1/tasks/{id}, GET /v1/tasks/{id}, GET /v1/tasks */
void dsp_api_task_create(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_task_patch(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_task_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_task_list(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* POST /v1/tasks/{id}/pause|resume|cancel */
void dsp_api_task_pause(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_task_resume(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_task_cancel(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* The checks of POST /v1/tasks on body J into IN (which it initialises with
 * the defaults; IN->t.payload is the caller's to free whatever happens);
 * *SCOPE is the throttle_scope as given (NULL: the topic's).  false after
 * answering 400. */
bool dsp_api_task_input(dsp *d, const cJSON *j, dsp_api_input *in, const char **scope,
                        hr_httpd_resp *resp);

#endif
