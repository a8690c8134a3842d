/* dsp_console.h: the web console's static files (dsp_console.c). */
#ifndef DSP_CONSOLE_H
#define DSP_CONSOLE_H

#include "hr_httpd.h"

/* An open hr_httpd handler for GET /console, /console/ and
 * /console/{asset}: the compiled-in file with its Content-Type, CSP and
 * cache headers, a redirect to /console/ for the first, 404 for a name
 * that is not one of the files.  CTX is unused. */
void dsp_console_serve(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
