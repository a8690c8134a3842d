/* dsp_console: the operator's web console (docs/console.md), static files
 * served by the dispatcher's API server at /console/.
 *
 * The files (dispatcher/console/) are compiled in by common/embed.py, so a
 * binary serves the console it was built with and needs no data directory.
 * They are open, like /healthz: they hold no data, and every data call the
 * page makes sends the bearer token the operator typed in.  Each answer
 * carries a CSP that allows only this origin (no inline script, no CDN,
 * no framing), so a task name shown by the page cannot run as script, and
 * `Cache-Control: no-cache`: the files change with the binary, and their
 * names do not, so a browser must revalidate rather than keep an old copy. */
#include <string.h>

#include "dsp_console.h"
#include "dsp_console_files.h"
#include "hr_httpd_req.h"

#define DSP_CONSOLE_CSP \
    "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

static const struct {
    const char *ext;
    const char *type;
} dsp_console_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".svg", "image/svg+xml"},
};

/* The Content-Type of NAME by its extension, or NULL for one not served. */
static const char *dsp_console_type(const char *name)
{
    const char *dot = strrchr(name, '.');

    for (size_t i = 0; dot != NULL && i < sizeof dsp_console_types / sizeof *dsp_console_types;
         i++) {
        if (strcmp(dot, dsp_console_types[i].ext) == 0)
            return dsp_console_types[i].type;
    }
    return NULL;
}

static const hr_embedded *dsp_console_find(const char *name)
{
    for (size_t i = 0; i < DSP_CONSOLE__COUNT; i++) {
        if (strcmp(dsp_console_files[i].name, name) == 0)
            return &dsp_console_files[i];
    }
    return NULL;
}

void dsp_console_serve(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *name = hr_httpd_param(req, "asset");
    const hr_embedded *f;
    const char *type;

    (void)ctx;
    /* "/console" without the slash: the page's relative asset URLs need it. */
    if (strcmp(req->path, "/console") == 0) {
        resp->status = 308;
        resp->content_type = "text/plain; charset=utf-8";
        hr_httpd_resp_header(resp, "Location", "/console/");
        return;
    }
    if (name == NULL)
        name = "index.html";
    f = dsp_console_find(name);
    type = dsp_console_type(name);
    if (f == NULL || type == NULL) {
        hr_httpd_error(resp, 404, "not_found", "no console file %s", name);
        return;
    }
    if (hr_buf_append(&resp->body, f->text, f->len) < 0) {
        hr_httpd_error(resp, 500, "internal", "console file %s does not fit", name);
        return;
    }
    resp->content_type = type;
    hr_httpd_resp_header(resp, "Content-Security-Policy", DSP_CONSOLE_CSP);
    hr_httpd_resp_header(resp, "Cache-Control", "no-cache");
    hr_httpd_resp_header(resp, "X-Content-Type-Options", "nosniff");
    hr_httpd_resp_header(resp, "Referrer-Policy", "no-referrer");
}
