/* dsp_unsub: one-click unsubscribe (RFC 8058) and the preference page at
 * /u/{token} (docs/recipients.md): routes anyone holding a mail's link may
 * call, the token their capability. */
#ifndef DSP_UNSUB_H
#define DSP_UNSUB_H

#include "dsp_api.h"

/* The largest form a POST may carry: the page's checkboxes and times. */
#define DSP_UNSUB_MAX_BODY 8192

/* GET /u/{token}: the preference page. */
void dsp_unsub_get(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* POST /u/{token}: one-click (List-Unsubscribe=One-Click), or the page's
 * form. */
void dsp_unsub_post(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
