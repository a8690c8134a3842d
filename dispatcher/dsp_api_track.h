/* dsp_api_track: the routes that learn what a recipient did with a push
 * (docs/api.md "Opens and clicks"):
 *   GET  /t/o/{token}            the e-mail open pixel (public: signed)
 *   GET  /t/c/{token}?u=URL      the e-mail click redirect (public: signed)
 *   POST /v1/users/{uid}/events  the app's "opened" (a client token of the uid)
 * The links' signatures are hr_track's; each engagement is counted once per
 * recipient (dsp_engage). */
#ifndef DSP_API_TRACK_H
#define DSP_API_TRACK_H

#include "dsp_api.h"

void dsp_api_track_open(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_track_click(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_track_event(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
