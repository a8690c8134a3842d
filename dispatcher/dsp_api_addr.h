/* dsp_api_addr: the /v1 handlers of the recipients' address book. */
#ifndef DSP_API_ADDR_H
#define DSP_API_ADDR_H

#include "dsp_api.h"

/* GET, POST, PUT and DELETE /v1/users/{uid}/addresses */
void dsp_api_addr_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_addr_add(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_addr_put(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_addr_del(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
