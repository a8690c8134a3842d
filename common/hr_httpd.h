/* hr_httpd: the daemons' small HTTP servers, over libmicrohttpd.
 *
 * A server is started with a table of routes, each a method and a path
 * pattern whose `{name}` segments match one path segment and are passed to
 * the handler as params ("GET /v1/tasks/{id}").  Handlers run on
 * libmicrohttpd's thread pool, several at once, and must be thread-safe.
 * A route may have an auth hook: it runs as soon as the headers are read,
 * before a byte of the body is accepted, so a refused caller never makes
 * the server buffer anything.  Then a Content-Length over max_body is
 * answered 413 at once; a body without one (chunked) is dropped as it
 * arrives once over max_body and answered 413; only then does the handler
 * run, on the whole body.  An unknown path is answered 404, a known
 * path with another method 405 with an Allow header; a GET route answers
 * HEAD too.  Every error body is {"error":{"code":"...","message":"..."}}.
 *
 * Built-in handlers serve /metrics (ctx: an hr_metrics registry), /healthz
 * and /readyz (ctx: an hr_httpd_ready); put them in the route table like
 * any other.  The route table and the contexts it points to must outlive
 * the server; the patterns are compiled at start. */
#ifndef HR_HTTPD_H
#define HR_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_metrics.h"
#include "hr_buf.h"

typedef struct hr_httpd hr_httpd;

#define HR_HTTPD_MAX_PARAMS 8
#define HR_HTTPD_MAX_HEADERS 4
#define HR_HTTPD_MAX_RESPONSE ((size_t)64 * 1024 * 1024)

typedef struct hr_httpd_req {
    const char *method; /* "GET", ...; HEAD is seen as "GET" */
    const char *path;   /* decoded, without the query */
    const char *body;   /* NUL-terminated for convenience; may hold NULs itself */
    size_t body_len;
    const char *param_names[HR_HTTPD_MAX_PARAMS];
    const char *param_values[HR_HTTPD_MAX_PARAMS];
    size_t nparams;
    struct MHD_Connection *conn; /* for hr_httpd_query/header */
    int64_t auth_id;             /* what the route's auth hook recorded of the caller; 0 if none */
} hr_httpd_req;

typedef struct hr_httpd_resp {
    int status;                               /* 200 unless the handler says otherwise */
    const char *content_type;                 /* static string; "application/json" by default */
    hr_buf body;                              /* capped at HR_HTTPD_MAX_RESPONSE */
    char *header_names[HR_HTTPD_MAX_HEADERS]; /* owned; use hr_httpd_resp_header */
    char *header_values[HR_HTTPD_MAX_HEADERS];
    size_t nheaders;
} hr_httpd_resp;

typedef void (*hr_httpd_handler)(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp);
/* An auth hook: true to let the request in (it may set req->auth_id for the
 * handler), false after filling RESP with the refusal.  It sees the method,
 * path, params and headers; the body is not read yet (req->body is NULL). */
typedef bool (*hr_httpd_auth)(void *ctx, hr_httpd_req *req, hr_httpd_resp *resp);

typedef struct hr_httpd_route {
    const char *method;  /* "GET", "POST", "DELETE", ... */
    const char *pattern; /* "/v1/tasks/{id}/subscribers/{uid}" */
    hr_httpd_handler handler;
    void *ctx;          /* for the handler and the auth hook */
    hr_httpd_auth auth; /* NULL: open */
} hr_httpd_route;

/* Readiness for /readyz: FN appends a JSON object of checks to OUT
 * (e.g. {"mysql":"ok","kafka":"no assignment yet"}) and returns true when
 * the daemon is ready (200), false otherwise (503).  Called on any pool
 * thread. */
typedef struct hr_httpd_ready {
    bool (*fn)(void *ctx, hr_buf *out);
    void *ctx;
} hr_httpd_ready;

/* Serves ROUTES on LISTEN ("host:port", "[v6]:port"; port 0 = any free one,
 * see hr_httpd_port) with a pool of THREADS (1..64). */
int hr_httpd_start(const char *listen, int threads, const hr_httpd_route *routes, size_t nroutes,
                   size_t max_body, hr_httpd **out, char *errstr, size_t errlen);
/* Stops serving (waits for running handlers) and frees; NULL is fine. */
void hr_httpd_stop(hr_httpd *h);
/* The bound port. */
int hr_httpd_port(const hr_httpd *h);

/* The value of path param NAME, query argument NAME (decoded) or header
 * NAME (case-insensitive), or NULL when absent. */
const char *hr_httpd_param(const hr_httpd_req *req, const char *name);
const char *hr_httpd_query(const hr_httpd_req *req, const char *name);
const char *hr_httpd_header(const hr_httpd_req *req, const char *name);

/* Adds a response header (copied).  0, or -1 when full or out of memory. */
int hr_httpd_resp_header(hr_httpd_resp *resp, const char *name, const char *value);

/* Replaces the response with STATUS and the JSON error body; returns 0, or
 * -1 when even that did not fit (the status is set anyway). */
int hr_httpd_error(hr_httpd_resp *resp, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* True when the Authorization header is "Bearer T" for one of TOKENS.  The
 * comparison takes the same time whichever bytes differ, and every token is
 * compared, so timing tells nothing of the tokens' contents. */
bool hr_httpd_bearer_ok(const hr_httpd_req *req, char *const *tokens, size_t ntokens);
/* The token of an "Authorization: Bearer T" header, or NULL (no header,
 * another scheme, an empty token). */
const char *hr_httpd_bearer(const hr_httpd_req *req);

/* Built-in handlers. */
void hr_httpd_metrics(void *ctx /* hr_metrics * */, const hr_httpd_req *req, hr_httpd_resp *resp);
void hr_httpd_healthz(void *ctx /* unused */, const hr_httpd_req *req, hr_httpd_resp *resp);
void hr_httpd_readyz(void *ctx /* hr_httpd_ready * */, const hr_httpd_req *req,
                     hr_httpd_resp *resp);

#endif
