/* hr_httpd: routing, body accumulation, connection limits and JSON errors
 * over libmicrohttpd.
 *
 * The server owns a compiled copy of the route table: each pattern is split
 * into segments in one block (`segbuf`), a `{name}` segment keeping just its
 * name.  libmicrohttpd runs its own thread pool (internal polling, epoll);
 * for each request it calls hr_httpd_access() several times with the same
 * per-request hr_httpd_conn (the con_cls pointer):
 *   1. headers read: the path is split and matched, so 404/405, the
 *      route's auth hook's refusal, a body the route does not take (any, or
 *      a Content-Length over its max_body) and a Content-Type that is not
 *      JSON are answered at once, before any body is read (libmicrohttpd
 *      then closes the connection instead of reading the body);
 *   2. body pieces: appended to the conn's buffer, or dropped once over
 *      max_body (a chunked upload has no Content-Length to refuse early);
 *   3. end of body: 413 if it was too long, else the handler runs and its
 *      response is queued (libmicrohttpd copies the body).
 * hr_httpd_completed() frees the conn when libmicrohttpd is done with it.
 * Params point into the conn's copy of the path, so they live exactly as
 * long as the request.
 *
 * The header deadline.  libmicrohttpd's own timeout is renewed by every
 * byte that arrives, and it has no deadline of its own for the headers.
 * So the server keeps a list of its open sockets (hr_httpd_sock, made and
 * freed by libmicrohttpd's connection notifications), each with the
 * monotonic time since which its next request's headers are awaited (0
 * while a request is being answered), and a watcher thread shuts down the
 * socket of any that waited longer than header_timeout_ms; libmicrohttpd
 * then sees the end of the stream and closes the connection.  The list and
 * the shutdown are under `mu`, and libmicrohttpd notifies the close before
 * it closes the descriptor, so the watcher never shuts a descriptor that
 * has been reused. */
#include "hr_httpd.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "hr_clock.h"
#include "hr_template.h" /* hr_json_escape_append */

#define HR_HTTPD_MAX_SEGS 32
/* Idle time allowed once the headers are in (a body arriving, an answer
 * being read); renewed by traffic, as libmicrohttpd does. */
#define HR_HTTPD_TIMEOUT_S 30
#define HR_HTTPD_JSON "application/json"

typedef struct hr_httpd_croute {
    hr_httpd_route route;
    char *segbuf;                        /* the pattern, split */
    const char *segs[HR_HTTPD_MAX_SEGS]; /* literal text, or the param's name */
    bool is_param[HR_HTTPD_MAX_SEGS];
    size_t nsegs;
} hr_httpd_croute;

/* One open connection, for the header deadline. */
typedef struct hr_httpd_sock {
    struct hr_httpd_sock *prev, *next;
    int fd;
    _Atomic int64_t waiting_since; /* mono ms since headers are awaited; 0 while answering */
} hr_httpd_sock;

struct hr_httpd {
    struct MHD_Daemon *mhd;
    hr_httpd_croute *routes;
    size_t nroutes;
    int port;
    int64_t header_timeout_ms;
    pthread_mutex_t mu; /* socks, stopping */
    pthread_cond_t cv;  /* signalled to stop the watcher */
    hr_httpd_sock *socks;
    bool stopping;
    bool watching; /* the watcher thread was started */
    pthread_t watcher;
};

/* One request, from its headers to its completion. */
typedef struct hr_httpd_conn {
    const hr_httpd_croute *route;
    char *path; /* the request path, split into segments in place */
    char *body;
    size_t body_len, body_cap;
    bool too_large;
    hr_httpd_req req;
} hr_httpd_conn;

/* Splits S (modified in place) at '/' after its leading '/'; -1 when it
 * does not start with '/' or has too many segments. */
static int hr_httpd_split(char *s, const char **segs, size_t *nsegs)
{
    if (*s != '/')
        return -1;
    *nsegs = 0;
    for (char *p = s + 1;;) {
        if (*nsegs == HR_HTTPD_MAX_SEGS)
            return -1;
        segs[(*nsegs)++] = p;
        p = strchr(p, '/');
        if (p == NULL)
            return 0;
        *p++ = '\0';
    }
}

/* ---- responses --------------------------------------------------------- */

static void hr_httpd_resp_init(hr_httpd_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    resp->status = MHD_HTTP_OK;
    resp->content_type = HR_HTTPD_JSON;
    hr_buf_init(&resp->body, HR_HTTPD_MAX_RESPONSE);
}

static void hr_httpd_resp_free(hr_httpd_resp *resp)
{
    hr_buf_free(&resp->body);
    for (size_t i = 0; i < resp->nheaders; i++) {
        free(resp->header_names[i]);
        free(resp->header_values[i]);
    }
}

int hr_httpd_resp_header(hr_httpd_resp *resp, const char *name, const char *value)
{
    if (resp->nheaders == HR_HTTPD_MAX_HEADERS)
        return -1;
    char *n = strdup(name), *v = strdup(value);
    if (n == NULL || v == NULL) {
        free(n);
        free(v);
        return -1;
    }
    resp->header_names[resp->nheaders] = n;
    resp->header_values[resp->nheaders++] = v;
    return 0;
}

int hr_httpd_error(hr_httpd_resp *resp, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp->status = status;
    resp->content_type = HR_HTTPD_JSON;
    hr_buf_reset(&resp->body);
    static const char open[] = "{\"error\":{\"code\":\"", mid[] = "\",\"message\":\"",
                      close[] = "\"}}";
    if (hr_buf_append(&resp->body, open, sizeof open - 1) != 0 ||
        hr_json_escape_append(&resp->body, code, strlen(code)) != 0 ||
        hr_buf_append(&resp->body, mid, sizeof mid - 1) != 0 ||
        hr_json_escape_append(&resp->body, msg, strlen(msg)) != 0 ||
        hr_buf_append(&resp->body, close, sizeof close - 1) != 0)
        return -1;
    return 0;
}

/* Queues RESP on CONN; libmicrohttpd copies what it needs. */
static enum MHD_Result hr_httpd_send(struct MHD_Connection *conn, const hr_httpd_resp *resp)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        resp->body.len, resp->body.len > 0 ? resp->body.data : (void *)"", MHD_RESPMEM_MUST_COPY);
    if (r == NULL)
        return MHD_NO;
    enum MHD_Result ret =
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
    for (size_t i = 0; ret == MHD_YES && i < resp->nheaders; i++)
        ret = MHD_add_response_header(r, resp->header_names[i], resp->header_values[i]);
    if (ret == MHD_YES)
        ret = MHD_queue_response(conn, (unsigned int)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Answers an error without running a handler. */
static enum MHD_Result hr_httpd_send_error(struct MHD_Connection *conn, int status,
                                           const char *code, const char *allow, const char *fmt,
                                           const char *arg)
{
    hr_httpd_resp resp;
    hr_httpd_resp_init(&resp);
    hr_httpd_error(&resp, status, code, fmt, arg);
    enum MHD_Result ret = MHD_NO;
    if (allow == NULL || hr_httpd_resp_header(&resp, MHD_HTTP_HEADER_ALLOW, allow) == 0)
        ret = hr_httpd_send(conn, &resp);
    hr_httpd_resp_free(&resp);
    return ret;
}

/* ---- routing ----------------------------------------------------------- */

static bool hr_httpd_route_matches(const hr_httpd_croute *cr, const char *const *segs, size_t nsegs)
{
    if (cr->nsegs != nsegs)
        return false;
    for (size_t i = 0; i < nsegs; i++) {
        if (cr->is_param[i] ? segs[i][0] == '\0' : strcmp(cr->segs[i], segs[i]) != 0)
            return false;
    }
    return true;
}

/* Matches HC's path and METHOD (HEAD matches a GET route that allows it):
 * 0 with hc->route and params set, or the status to answer (404, 405 with
 * ALLOW filled). */
static int hr_httpd_match(const hr_httpd *h, hr_httpd_conn *hc, const char *method, char *allow,
                          size_t allowlen)
{
    bool head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    const char *segs[HR_HTTPD_MAX_SEGS];
    size_t nsegs = 0;
    bool path_known = false;
    allow[0] = '\0';
    if (hr_httpd_split(hc->path, segs, &nsegs) != 0)
        return MHD_HTTP_NOT_FOUND;
    for (size_t i = 0; i < h->nroutes; i++) {
        const hr_httpd_croute *cr = &h->routes[i];
        if (!hr_httpd_route_matches(cr, segs, nsegs))
            continue;
        path_known = true;
        bool is_get = strcmp(cr->route.method, MHD_HTTP_METHOD_GET) == 0;
        if (strcmp(cr->route.method, method) == 0 || (head && is_get && cr->route.head)) {
            hc->route = cr;
            for (size_t s = 0; s < nsegs; s++) {
                if (cr->is_param[s] && hc->req.nparams < HR_HTTPD_MAX_PARAMS) {
                    hc->req.param_names[hc->req.nparams] = cr->segs[s];
                    hc->req.param_values[hc->req.nparams++] = segs[s];
                }
            }
            return 0;
        }
        size_t n = strlen(allow);
        snprintf(allow + n, allowlen - n, "%s%s%s", n > 0 ? ", " : "", cr->route.method,
                 is_get && cr->route.head ? ", HEAD" : "");
    }
    return path_known ? MHD_HTTP_METHOD_NOT_ALLOWED : MHD_HTTP_NOT_FOUND;
}

/* Runs the matched handler on the complete request and queues its answer. */
static enum MHD_Result hr_httpd_dispatch(hr_httpd_conn *hc, struct MHD_Connection *conn)
{
    hr_httpd_resp resp;
    hr_httpd_resp_init(&resp);
    hc->req.body = hc->body != NULL ? hc->body : "";
    hc->req.body_len = hc->body_len;
    hc->route->route.handler(hc->route->route.ctx, &hc->req, &resp);
    enum MHD_Result ret = hr_httpd_send(conn, &resp);
    hr_httpd_resp_free(&resp);
    return ret;
}

/* Appends a body piece, or drops it once the body is over the route's max_body. */
static void hr_httpd_take_body(hr_httpd_conn *hc, const char *data, size_t n)
{
    if (hc->too_large)
        return;
    if (n > hc->route->route.max_body - hc->body_len) {
        hc->too_large = true;
        free(hc->body);
        hc->body = NULL;
        hc->body_len = hc->body_cap = 0;
        return;
    }
    if (hc->body_len + n + 1 > hc->body_cap) {
        size_t cap = hc->body_cap == 0 ? 4096 : hc->body_cap;
        while (cap < hc->body_len + n + 1)
            cap *= 2;
        char *body = realloc(hc->body, cap);
        if (body == NULL) {
            /* Out of memory is answered like a body we will not take. */
            hc->too_large = true;
            return;
        }
        hc->body = body;
        hc->body_cap = cap;
    }
    memcpy(hc->body + hc->body_len, data, n);
    hc->body_len += n;
    hc->body[hc->body_len] = '\0';
}

/* Runs the route's auth hook on the headers alone: true to go on, false
 * after queueing its refusal (*RET: what to return to libmicrohttpd). */
static bool hr_httpd_authorize(hr_httpd_conn *hc, struct MHD_Connection *conn, enum MHD_Result *ret)
{
    hr_httpd_resp resp;
    hr_httpd_resp_init(&resp);
    bool ok = hc->route->route.auth(hc->route->route.ctx, &hc->req, &resp);
    if (!ok) {
        if (resp.status < 400) /* a hook that forgot to say why still refuses */
            hr_httpd_error(&resp, MHD_HTTP_FORBIDDEN, "forbidden", "refused");
        *ret = hr_httpd_send(conn, &resp);
    }
    hr_httpd_resp_free(&resp);
    return ok;
}

/* True when the Content-Type header is application/json, parameters
 * (charset=utf-8) allowed. */
static bool hr_httpd_is_json(struct MHD_Connection *conn)
{
    const char *ct =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    size_t n = sizeof HR_HTTPD_JSON - 1;
    if (ct == NULL)
        return false;
    ct += strspn(ct, " \t");
    return strncasecmp(ct, HR_HTTPD_JSON, n) == 0 &&
           (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t');
}

/* True when the Content-Type header is an HTML form's. */
static bool hr_httpd_is_form(struct MHD_Connection *conn)
{
    static const char *const types[] = {"application/x-www-form-urlencoded", "multipart/form-data"};
    const char *ct =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);

    if (ct == NULL)
        return false;
    ct += strspn(ct, " \t");
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        size_t n = strlen(types[i]);

        if (strncasecmp(ct, types[i], n) == 0 &&
            (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ' || ct[n] == '\t'))
            return true;
    }
    return false;
}

/* The checks of a request's body announcement against the matched route,
 * on the headers alone: MHD_YES to read the body, else the refusal queued. */
static enum MHD_Result hr_httpd_check_body(hr_httpd_conn *hc, struct MHD_Connection *conn,
                                           const char *method)
{
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    uint64_t length = cl != NULL ? strtoull(cl, NULL, 10) : 0;
    size_t max = hc->route->route.max_body;
    char limit[32];

    if ((length > 0 || te != NULL) && max == 0)
        return hr_httpd_send_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large", NULL,
                                   "%s takes no request body", hc->route->route.pattern);
    if ((length > 0 || te != NULL || strcmp(method, MHD_HTTP_METHOD_POST) == 0) &&
        !(hc->route->route.form ? hr_httpd_is_form(conn) : hr_httpd_is_json(conn)))
        return hr_httpd_send_error(
            conn, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", NULL, "%s",
            hc->route->route.form ? "the request must say Content-Type: "
                                    "application/x-www-form-urlencoded or multipart/form-data"
                                  : "the request must say Content-Type: application/json");
    if (length > max) {
        snprintf(limit, sizeof limit, "%zu", max);
        return hr_httpd_send_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large", NULL,
                                   "request body over %s bytes", limit);
    }
    return MHD_YES;
}

/* The connection's hr_httpd_sock, or NULL when it could not be made. */
static hr_httpd_sock *hr_httpd_sock_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci != NULL ? ci->socket_context : NULL;
}

static enum MHD_Result hr_httpd_access(void *cls, struct MHD_Connection *conn, const char *url,
                                       const char *method, const char *version,
                                       const char *upload_data, size_t *upload_data_size,
                                       void **con_cls)
{
    (void)version;
    const hr_httpd *h = cls;
    hr_httpd_conn *hc = *con_cls;
    if (hc == NULL) {
        hr_httpd_sock *sk = hr_httpd_sock_of(conn);
        if (sk != NULL) /* the headers are in: the deadline is met */
            atomic_store(&sk->waiting_since, 0);
        hc = calloc(1, sizeof *hc);
        if (hc == NULL)
            return MHD_NO;
        *con_cls = hc;
        hc->path = strdup(url);
        if (hc->path == NULL)
            return MHD_NO;
        hc->req.method = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0 ? MHD_HTTP_METHOD_GET : method;
        hc->req.path = url;
        hc->req.conn = conn;
        char allow[256];
        int status = hr_httpd_match(h, hc, method, allow, sizeof allow);
        if (status == MHD_HTTP_NOT_FOUND)
            return hr_httpd_send_error(conn, status, "not_found", NULL, "no such path: %s", url);
        if (status != 0)
            return hr_httpd_send_error(conn, status, "method_not_allowed", allow,
                                       "method %s not allowed here", method);
        enum MHD_Result refused;
        if (hc->route->route.auth != NULL && !hr_httpd_authorize(hc, conn, &refused))
            return refused;
        return hr_httpd_check_body(hc, conn, method);
    }
    if (*upload_data_size != 0) {
        hr_httpd_take_body(hc, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (hc->too_large) {
        char limit[32];
        snprintf(limit, sizeof limit, "%zu", hc->route->route.max_body);
        return hr_httpd_send_error(conn, MHD_HTTP_CONTENT_TOO_LARGE, "body_too_large", NULL,
                                   "request body over %s bytes", limit);
    }
    return hr_httpd_dispatch(hc, conn);
}

static void hr_httpd_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                               enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)toe;
    hr_httpd_sock *sk = hr_httpd_sock_of(conn);
    if (sk != NULL) /* a kept-alive connection waits for its next headers from now */
        atomic_store(&sk->waiting_since, hr_clock_mono_ms());
    hr_httpd_conn *hc = *con_cls;
    if (hc == NULL)
        return;
    free(hc->path);
    free(hc->body);
    free(hc);
    *con_cls = NULL;
}

/* ---- the header deadline ----------------------------------------------- */

/* libmicrohttpd's connection notifications: a socket joins the list when
 * it is accepted and leaves it before its descriptor is closed. */
static void hr_httpd_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                                   enum MHD_ConnectionNotificationCode toe)
{
    hr_httpd *h = cls;
    hr_httpd_sock *sk = *socket_context;

    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        /* Out of memory leaves this one connection to the idle timeout. */
        if (ci == NULL || (sk = calloc(1, sizeof *sk)) == NULL)
            return;
        sk->fd = ci->connect_fd;
        atomic_init(&sk->waiting_since, hr_clock_mono_ms());
        pthread_mutex_lock(&h->mu);
        sk->next = h->socks;
        if (h->socks != NULL)
            h->socks->prev = sk;
        h->socks = sk;
        pthread_mutex_unlock(&h->mu);
        *socket_context = sk;
        return;
    }
    if (sk == NULL)
        return;
    pthread_mutex_lock(&h->mu);
    if (sk->prev != NULL)
        sk->prev->next = sk->next;
    else
        h->socks = sk->next;
    if (sk->next != NULL)
        sk->next->prev = sk->prev;
    pthread_mutex_unlock(&h->mu);
    free(sk);
    *socket_context = NULL;
}

/* The watcher: every quarter of the deadline (25 ms..1 s), shuts down the
 * sockets whose headers are overdue. */
static void *hr_httpd_watch(void *arg)
{
    hr_httpd *h = arg;
    int64_t tick = h->header_timeout_ms / 4;

    tick = tick < 25 ? 25 : tick > 1000 ? 1000 : tick;
    pthread_mutex_lock(&h->mu);
    while (!h->stopping) {
        int64_t now = hr_clock_mono_ms();
        for (hr_httpd_sock *sk = h->socks; sk != NULL; sk = sk->next) {
            int64_t since = atomic_load(&sk->waiting_since);
            if (since != 0 && now - since >= h->header_timeout_ms) {
                shutdown(sk->fd, SHUT_RDWR);
                atomic_store(&sk->waiting_since, 0);
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += tick / 1000;
        ts.tv_nsec += (long)(tick % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

/* ---- start and stop ---------------------------------------------------- */

static int hr_httpd_compile(hr_httpd_croute *cr, const hr_httpd_route *route, char *errstr,
                            size_t errlen)
{
    cr->route = *route;
    if (route->method == NULL || route->pattern == NULL || route->handler == NULL) {
        snprintf(errstr, errlen, "route with no method, pattern or handler");
        return -1;
    }
    cr->segbuf = strdup(route->pattern);
    if (cr->segbuf == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    if (hr_httpd_split(cr->segbuf, cr->segs, &cr->nsegs) != 0) {
        snprintf(errstr, errlen, "route %s %s: not an absolute path of at most %d segments",
                 route->method, route->pattern, HR_HTTPD_MAX_SEGS);
        return -1;
    }
    for (size_t i = 0; i < cr->nsegs; i++) {
        char *seg = (char *)cr->segs[i];
        size_t n = strlen(seg);
        if (n >= 3 && seg[0] == '{' && seg[n - 1] == '}') {
            seg[n - 1] = '\0';
            cr->segs[i] = seg + 1;
            cr->is_param[i] = true;
        } else if (strchr(seg, '{') != NULL || strchr(seg, '}') != NULL) {
            snprintf(errstr, errlen, "route %s %s: a {param} must be a whole segment",
                     route->method, route->pattern);
            return -1;
        }
    }
    return 0;
}

/* Resolves LISTEN ("host:port", "[v6]:port", ":port" for any address). */
static int hr_httpd_resolve(const char *listen, struct sockaddr_storage *ss, int *family,
                            char *errstr, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(listen, ':');
    if (colon == NULL || colon[1] == '\0' || (size_t)(colon - listen) >= sizeof host) {
        snprintf(errstr, errlen, "listen '%s': expected host:port", listen);
        return -1;
    }
    const char *hs = listen, *he = colon;
    if (*hs == '[' && he > hs && he[-1] == ']') {
        hs++;
        he--;
    }
    memcpy(host, hs, (size_t)(he - hs));
    host[he - hs] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host[0] != '\0' ? host : NULL, colon + 1, &hints, &ai);
    if (rc != 0) {
        snprintf(errstr, errlen, "listen '%s': %s", listen, gai_strerror(rc));
        return -1;
    }
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *family = ai->ai_family;
    freeaddrinfo(ai);
    return 0;
}

/* The mutex and the watcher's condition variable (on the monotonic clock). */
static int hr_httpd_sync_init(hr_httpd *h)
{
    pthread_condattr_t ca;
    int rc;

    if (pthread_condattr_init(&ca) != 0)
        return -1;
    rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&h->cv, &ca) == 0
             ? 0
             : -1;
    pthread_condattr_destroy(&ca);
    if (rc == 0 && pthread_mutex_init(&h->mu, NULL) != 0) {
        pthread_cond_destroy(&h->cv);
        rc = -1;
    }
    return rc;
}

int hr_httpd_start(const char *listen, const hr_httpd_limits *limits, const hr_httpd_route *routes,
                   size_t nroutes, hr_httpd **out, char *errstr, size_t errlen)
{
    *out = NULL;
    if (limits->threads < 1 || limits->threads > 64) {
        snprintf(errstr, errlen, "threads %d out of 1..64", limits->threads);
        return -1;
    }
    if (limits->max_connections < 16 || limits->max_connections > 65536 || limits->max_per_ip < 1 ||
        limits->max_per_ip > 65536 || limits->header_timeout_ms < 100 ||
        limits->header_timeout_ms > 600000) {
        snprintf(errstr, errlen,
                 "connection limits out of range (max_connections %u, per ip %u, header "
                 "timeout %u ms)",
                 limits->max_connections, limits->max_per_ip, limits->header_timeout_ms);
        return -1;
    }
    hr_httpd *h = calloc(1, sizeof *h);
    if (h == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    if (hr_httpd_sync_init(h) != 0) {
        free(h);
        snprintf(errstr, errlen, "cannot create a mutex or condition variable");
        return -1;
    }
    h->header_timeout_ms = limits->header_timeout_ms;
    if ((h->routes = calloc(nroutes + 1, sizeof *h->routes)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto fail;
    }
    for (; h->nroutes < nroutes; h->nroutes++) {
        if (hr_httpd_compile(&h->routes[h->nroutes], &routes[h->nroutes], errstr, errlen) != 0) {
            h->nroutes++; /* so its segbuf is freed */
            goto fail;
        }
    }
    struct sockaddr_storage ss;
    int family = AF_INET;
    if (hr_httpd_resolve(listen, &ss, &family, errstr, errlen) != 0)
        goto fail;
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
    if (family == AF_INET6)
        flags |= MHD_USE_IPv6;
    if (pthread_create(&h->watcher, NULL, hr_httpd_watch, h) != 0) {
        snprintf(errstr, errlen, "cannot start the header deadline's thread");
        goto fail;
    }
    h->watching = true;
    errno = 0;
    h->mhd = MHD_start_daemon(
        flags, 0, NULL, NULL, hr_httpd_access, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)limits->threads, MHD_OPTION_CONNECTION_LIMIT,
        limits->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits->max_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HR_HTTPD_TIMEOUT_S,
        MHD_OPTION_NOTIFY_CONNECTION, hr_httpd_on_connection, h, MHD_OPTION_NOTIFY_COMPLETED,
        hr_httpd_completed, NULL, MHD_OPTION_END);
    if (h->mhd == NULL) {
        snprintf(errstr, errlen, "cannot serve on %s: %s", listen,
                 errno != 0 ? strerror(errno) : "libmicrohttpd refused to start");
        goto fail;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    h->port = info != NULL ? info->port : 0;
    *out = h;
    return 0;
fail:
    hr_httpd_stop(h);
    return -1;
}

void hr_httpd_stop(hr_httpd *h)
{
    if (h == NULL)
        return;
    if (h->watching) {
        pthread_mutex_lock(&h->mu);
        h->stopping = true;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->watcher, NULL);
    }
    /* Closes every connection, so every hr_httpd_sock is freed. */
    if (h->mhd != NULL)
        MHD_stop_daemon(h->mhd);
    for (size_t i = 0; h->routes != NULL && i < h->nroutes; i++)
        free(h->routes[i].segbuf);
    free(h->routes);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}

int hr_httpd_port(const hr_httpd *h)
{
    return h->port;
}
