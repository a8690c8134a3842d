/* hr_httpd: the daemons' small HTTP servers, over libmicrohttpd.
 *
 * A server is started with a table of routes, each a method and a path
 * pattern whose `{name}` segments match one path segment and are passed to
 * the handler as params ("GET /v1/tasks/{id}").  Handlers run on
 * libmicrohttpd's thread pool, several at once, and must be thread-safe.
 *
 * Everything a caller has not been let in for is decided on the request's
 * headers, before a byte of a body is accepted, so an anonymous client
 * cannot make the server buffer anything: an unknown path is answered 404,
 * a known path with another method 405 with an Allow header; then the
 * route's auth hook runs, if it has one; then the body's announcement is
 * checked against the route: a route takes no body unless it declares a
 * max_body (a Content-Length over it, or any body on a route without one,
 * is 413), and a body, or any POST, must say Content-Type:
 * application/json (415 otherwise: a web page can send a POST of another
 * type, or none, to any origin without a CORS preflight) — or, on a route
 * marked `form` (whose handler checks a capability in its path, never a
 * cookie or a header a browser adds), an HTML form's type.  A body without
 * a Content-Length (chunked) is dropped as it arrives once over max_body
 * and answered 413; only then does the handler run, on the whole body.
 * HEAD is answered only on GET routes that declare it (`head`: the route
 * has no side effect); elsewhere it is 405, so `curl -I` never acts.
 * Every error body is {"error":{"code":"...","message":"..."}}.
 *
 * Connections are bounded per server (hr_httpd_limits): a total, a number
 * per client address, and a deadline for a request's headers that counts
 * from the connection's start (or the end of its previous answer) and that
 * bytes arriving do not renew, so a client trickling a header a byte at a
 * time (slowloris) is closed like a silent one.  Probes and metrics belong
 * on a server of their own (HR_HTTPD_PROBE_LIMITS), so clients filling the
 * API's connections never make a liveness probe fail.
 *
 * What a handler reads of its request is hr_httpd_req.h's; the probes'
 * handlers (/metrics, /healthz, /readyz) are hr_httpd_probe.h's.  The route
 * table and the contexts it points to must outlive the server; the patterns
 * are compiled at start. */
#ifndef HR_HTTPD_H
#define HR_HTTPD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hr_buf.h"

typedef struct hr_httpd hr_httpd;

#define HR_HTTPD_MAX_PARAMS 8
#define HR_HTTPD_MAX_HEADERS 4
#define HR_HTTPD_MAX_RESPONSE ((size_t)64 * 1024 * 1024)
#define HR_HTTPD_AUTH_NAME 200 /* bytes of a caller's name, with its NUL */
#define HR_HTTPD_PEER 64       /* bytes of a client address, with its NUL */

typedef struct hr_httpd_req {
    const char *method; /* "GET", ...; HEAD (on a route that allows it) is seen as "GET" */
    const char *path;   /* decoded, without the query */
    const char *body;   /* NUL-terminated for convenience; may hold NULs itself */
    size_t body_len;
    const char *param_names[HR_HTTPD_MAX_PARAMS];
    const char *param_values[HR_HTTPD_MAX_PARAMS];
    size_t nparams;
    struct MHD_Connection *conn; /* for hr_httpd_query/header */
    int64_t auth_id;             /* what the route's auth hook recorded of the caller; 0 if none */
    int auth_role;               /* the caller's role as the auth hook found it; 0 if none */
    char auth_name[HR_HTTPD_AUTH_NAME]; /* and its name ("" if none), for the handler's records */
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
    size_t max_body;    /* the largest body taken (application/json); 0: none at all */
    bool head;          /* a GET without side effects: HEAD runs it too; else HEAD is 405 */
    /* the body is an HTML form (application/x-www-form-urlencoded or
     * multipart/form-data, as a mail client's RFC 8058 one-click POST or a
     * form of the page itself), not JSON */
    bool form;
} hr_httpd_route;

/* What one server holds open and for how long it waits for headers. */
typedef struct hr_httpd_limits {
    int threads;                /* the pool, 1..64 */
    unsigned max_connections;   /* open at once (16..65536); a connection over it is closed */
    unsigned max_per_ip;        /* open at once from one client address (1..65536) */
    unsigned header_timeout_ms; /* to read a request's headers (100..600000), not renewed */
} hr_httpd_limits;

/* The limits of a server of probes and /metrics: a kubelet and a few
 * Prometheus replicas are its only clients. */
#define HR_HTTPD_PROBE_LIMITS ((hr_httpd_limits){2, 64, 16, 5000})

/* Serves ROUTES on LISTEN ("host:port", "[v6]:port"; port 0 = any free one,
 * see hr_httpd_port) within LIMITS. */
int hr_httpd_start(const char *listen, const hr_httpd_limits *limits, const hr_httpd_route *routes,
                   size_t nroutes, hr_httpd **out, char *errstr, size_t errlen);
/* Stops serving (waits for running handlers) and frees; NULL is fine. */
void hr_httpd_stop(hr_httpd *h);
/* The bound port. */
int hr_httpd_port(const hr_httpd *h);

/* Adds a response header (copied).  0, or -1 when full or out of memory. */
int hr_httpd_resp_header(hr_httpd_resp *resp, const char *name, const char *value);

/* Replaces the response with STATUS and the JSON error body; returns 0, or
 * -1 when even that did not fit (the status is set anyway). */
int hr_httpd_error(hr_httpd_resp *resp, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
