/* Tests for common/hr_httpd.c over loopback (port 0, libcurl easy as the
 * client).  Needs no stack, so it never skips: routes with params and
 * query, 404/405/413/415 JSON errors, HEAD only where a route allows it,
 * /metrics, /readyz switching, the bearer helper, start-up errors, 50
 * concurrent requests, an auth hook that answers on the headers before any
 * body is sent (raw socket), bodies refused on the headers where a route
 * takes none (RSS bounded under 100 stalled 1 MiB uploads), the per-address
 * connection limit, the header deadline a trickle does not renew, and a
 * probe server answering within 100 ms while 2,000 idle connections fill
 * the other one. */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "hr_clock.h"
#include "hr_httpd.h"
#include "hr_httpd_probe.h"
#include "hr_httpd_req.h"
#include "hr_metrics.h"

#define MAX_BODY 4096

/* ---- the server under test --------------------------------------------- */

typedef struct fixture {
    hr_httpd *h;
    int port;
    hr_metrics *reg;
    hr_metrics_child *hits;
    atomic_bool ready;
    hr_httpd_ready readiness;
    atomic_int guard_calls, guarded_calls, act_calls;
    atomic_bool guard_saw_body;
} fixture;

/* The limits of the fixture's server. */
#define LIMITS ((hr_httpd_limits){4, 1024, 64, 10000})

static void echo_task(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    fixture *fx = ctx;
    hr_metrics_inc(fx->hits);
    const char *state = hr_httpd_query(req, "state");
    char out[512];
    int n =
        snprintf(out, sizeof out, "{\"method\":\"%s\",\"id\":\"%s\",\"state\":\"%s\",\"len\":%zu}",
                 req->method, hr_httpd_param(req, "id"), state != NULL ? state : "", req->body_len);
    hr_buf_append(&resp->body, out, (size_t)n);
}

static void echo_sub(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)ctx;
    char out[256];
    int n = snprintf(out, sizeof out, "%s %s %s", hr_httpd_param(req, "id"),
                     hr_httpd_param(req, "uid"), hr_httpd_param(req, "none") == NULL ? "-" : "?");
    resp->status = 202;
    resp->content_type = "text/plain";
    hr_httpd_resp_header(resp, "X-Herald", "yes");
    hr_buf_append(&resp->body, out, (size_t)n);
}

static void auth(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    (void)ctx;
    char *tokens[] = {"", "first-token", "second"};
    if (!hr_httpd_bearer_ok(req, tokens, 3))
        hr_httpd_error(resp, 401, "unauthorized", "missing or wrong bearer token");
}

/* The auth hook of /guarded: the same tokens as /auth, checked on the
 * headers alone; it records the body it saw (must be none) and the id it
 * hands the handler. */
static bool guard(void *ctx, hr_httpd_req *req, hr_httpd_resp *resp)
{
    fixture *fx = ctx;
    char *tokens[] = {"first-token"};
    atomic_fetch_add(&fx->guard_calls, 1);
    if (req->body != NULL || req->body_len != 0)
        atomic_store(&fx->guard_saw_body, true);
    if (!hr_httpd_bearer_ok(req, tokens, 1)) {
        hr_httpd_error(resp, 401, "unauthorized", "missing or wrong bearer token");
        return false;
    }
    req->auth_id = 42;
    return true;
}

static void guarded(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    fixture *fx = ctx;
    char out[64];
    atomic_fetch_add(&fx->guarded_calls, 1);
    int n =
        snprintf(out, sizeof out, "{\"auth_id\":%d,\"len\":%zu}", (int)req->auth_id, req->body_len);
    hr_buf_append(&resp->body, out, (size_t)n);
}

/* A GET with a side effect (like the pull's ?ack=1): its route does not
 * allow HEAD. */
static void act(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    fixture *fx = ctx;
    (void)req;
    atomic_fetch_add(&fx->act_calls, 1);
    hr_buf_append(&resp->body, "{}", 2);
}

static bool readiness(void *ctx, hr_buf *out)
{
    fixture *fx = ctx;
    bool ok = atomic_load(&fx->ready);
    const char *json = ok ? "{\"mysql\":\"ok\"}" : "{\"mysql\":\"connection refused\"}";
    hr_buf_append(out, json, strlen(json));
    return ok;
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    assert_non_null(fx);
    fx->reg = hr_metrics_new(0);
    assert_non_null(fx->reg);
    hr_metrics_family *fam = NULL;
    const hr_metrics_spec spec = {
        &fam, "test_hits_total", "Handler calls.", HR_METRICS_COUNTER, "route", NULL, 0};
    char err[256];
    assert_int_equal(hr_metrics_register(fx->reg, &spec, 1, err, sizeof err), 0);
    fx->hits = hr_metrics_labels(fam, "task");
    atomic_init(&fx->ready, false);
    fx->readiness = (hr_httpd_ready){readiness, fx};
    /* A local table: the server keeps its own compiled copy. */
    hr_httpd_route routes[] = {
        {"GET", "/v1/tasks/{id}", echo_task, fx, NULL, 0, false, false},
        {"POST", "/v1/tasks/{id}", echo_task, fx, NULL, MAX_BODY, false, false},
        {"DELETE", "/v1/tasks/{id}/subscribers/{uid}", echo_sub, fx, NULL, 0, false, false},
        {"GET", "/auth", auth, NULL, NULL, 0, true, false},
        {"POST", "/guarded", guarded, fx, guard, MAX_BODY, false, false},
        {"GET", "/act", act, fx, NULL, 0, false, false},
        {0},
        {0},
        {0},
    };
    size_t n = sizeof routes / sizeof routes[0];
    hr_httpd_probe_routes(&routes[n - HR_HTTPD_NPROBES], fx->reg, &fx->readiness);
    if (hr_httpd_start("127.0.0.1:0", &LIMITS, routes, n, &fx->h, err, sizeof err) != 0)
        fail_msg("start: %s", err);
    fx->port = hr_httpd_port(fx->h);
    assert_true(fx->port > 0);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    hr_httpd_stop(fx->h);
    hr_metrics_free(fx->reg);
    free(fx);
    return 0;
}

/* ---- the client -------------------------------------------------------- */

typedef struct reply {
    long status;
    char body[8192];
    size_t len;
    char allow[128], ctype[128], xherald[16];
} reply;

typedef struct upload {
    const char *data;
    size_t len, off;
} upload;

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    size_t len = size * n;
    if (len > sizeof r->body - 1 - r->len)
        return 0;
    memcpy(r->body + r->len, p, len);
    r->len += len;
    r->body[r->len] = '\0';
    return len;
}

/* Keeps the value of the headers the tests look at. */
static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    size_t len = size * n;
    struct {
        const char *name;
        char *dst;
        size_t dstlen;
    } keep[] = {{"allow:", r->allow, sizeof r->allow},
                {"content-type:", r->ctype, sizeof r->ctype},
                {"x-herald:", r->xherald, sizeof r->xherald}};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        size_t kn = strlen(keep[i].name);
        if (len <= kn || strncasecmp(p, keep[i].name, kn) != 0)
            continue;
        const char *v = p + kn;
        size_t vn = len - kn;
        for (; vn > 0 && *v == ' '; vn--)
            v++;
        while (vn > 0 && (v[vn - 1] == '\r' || v[vn - 1] == '\n'))
            vn--;
        snprintf(keep[i].dst, keep[i].dstlen, "%.*s", (int)vn, v);
    }
    return len;
}

static size_t on_read(char *p, size_t size, size_t n, void *ud)
{
    upload *u = ud;
    size_t len = size * n;
    if (len > u->len - u->off)
        len = u->len - u->off;
    memcpy(p, u->data + u->off, len);
    u->off += len;
    return len;
}

/* One request to PORT; BODY NULL for none, CHUNKED sends it without
 * Content-Length; CTYPE the Content-Type (NULL: none).  Safe on any thread
 * (asserts nothing). */
static CURLcode http_port(int port, const char *method, const char *path, const char *body,
                          size_t body_len, bool chunked, const char *authz, const char *ctype,
                          reply *r)
{
    memset(r, 0, sizeof *r);
    char url[512], ct[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    if (c == NULL)
        return CURLE_OUT_OF_MEMORY;
    struct curl_slist *hdrs = NULL;
    upload u = {body, body_len, 0};
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body != NULL && chunked) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &u);
        hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
    } else if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)body_len);
    }
    if (authz != NULL)
        hdrs = curl_slist_append(hdrs, authz);
    snprintf(ct, sizeof ct, "Content-Type:%s%s", ctype != NULL ? " " : "", ctype ? ctype : "");
    hdrs = curl_slist_append(hdrs, ct);
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    return rc;
}

/* http_port to the fixture's server, saying Content-Type: application/json
 * when there is a body or the method is POST, as a JSON client does. */
static CURLcode http_try(const fixture *fx, const char *method, const char *path, const char *body,
                         size_t body_len, bool chunked, const char *authz, reply *r)
{
    bool json = body != NULL || strcmp(method, "POST") == 0;
    return http_port(fx->port, method, path, body, body_len, chunked, authz,
                     json ? "application/json" : NULL, r);
}

static void http(const fixture *fx, const char *method, const char *path, const char *body,
                 size_t body_len, bool chunked, const char *authz, reply *r)
{
    CURLcode rc = http_try(fx, method, path, body, body_len, chunked, authz, r);
    if (rc != CURLE_OK)
        fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
}

/* One request with Content-Type CTYPE (NULL: none) to the fixture's server. */
static void http_ct(const fixture *fx, const char *method, const char *path, const char *body,
                    const char *ctype, const char *authz, reply *r)
{
    CURLcode rc = http_port(fx->port, method, path, body, body != NULL ? strlen(body) : 0, false,
                            authz, ctype, r);
    if (rc != CURLE_OK)
        fail_msg("%s %s: %s", method, path, curl_easy_strerror(rc));
}

/* Asserts R is the JSON error STATUS/CODE. */
static void assert_error(const reply *r, long status, const char *code)
{
    assert_int_equal(r->status, status);
    assert_string_equal(r->ctype, "application/json");
    cJSON *j = cJSON_Parse(r->body);
    if (j == NULL)
        fail_msg("not JSON: %s", r->body);
    assert_int_equal(cJSON_GetArraySize(j), 1);
    cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    assert_true(cJSON_IsObject(e));
    assert_int_equal(cJSON_GetArraySize(e), 2);
    cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "code");
    cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
    assert_true(cJSON_IsString(c) && cJSON_IsString(m));
    assert_string_equal(c->valuestring, code);
    assert_true(m->valuestring[0] != '\0');
    cJSON_Delete(j);
}

/* ---- tests ------------------------------------------------------------- */

static void test_routes(void **state)
{
    fixture *fx = *state;
    reply r;
    http(fx, "GET", "/v1/tasks/42?state=running", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "application/json");
    assert_string_equal(r.body,
                        "{\"method\":\"GET\",\"id\":\"42\",\"state\":\"running\",\"len\":0}");

    http(fx, "POST", "/v1/tasks/7", "{\"a\":1}", 7, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"method\":\"POST\",\"id\":\"7\",\"state\":\"\",\"len\":7}");

    http(fx, "DELETE", "/v1/tasks/7/subscribers/u%2099", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 202);
    assert_string_equal(r.ctype, "text/plain");
    assert_string_equal(r.xherald, "yes");
    assert_string_equal(r.body, "7 u 99 -"); /* the path arrives decoded */

    http(fx, "HEAD", "/healthz", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 0);
    http(fx, "GET", "/healthz", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "ok\n");
}

static void test_errors(void **state)
{
    fixture *fx = *state;
    reply r;
    http(fx, "GET", "/nope", NULL, 0, false, NULL, &r);
    assert_error(&r, 404, "not_found");
    http(fx, "GET", "/v1/tasks/", NULL, 0, false, NULL, &r); /* an empty {id} */
    assert_error(&r, 404, "not_found");
    http(fx, "GET", "/v1/tasks/1/extra", NULL, 0, false, NULL, &r);
    assert_error(&r, 404, "not_found");
    http(fx, "POST", "/nope", "x", 1, false, NULL, &r);
    assert_error(&r, 404, "not_found");

    http(fx, "PUT", "/v1/tasks/1", "x", 1, false, NULL, &r);
    assert_error(&r, 405, "method_not_allowed");
    assert_string_equal(r.allow, "GET, POST");
    http(fx, "POST", "/healthz", NULL, 0, false, NULL, &r);
    assert_error(&r, 405, "method_not_allowed");
    assert_string_equal(r.allow, "GET, HEAD");
}

static void test_body_limit(void **state)
{
    fixture *fx = *state;
    char *big = malloc(4 * MAX_BODY);
    assert_non_null(big);
    memset(big, 'x', 4 * MAX_BODY);
    reply r;
    /* Exactly the limit is taken. */
    http(fx, "POST", "/v1/tasks/1", big, MAX_BODY, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"len\":4096"));
    /* Over it by Content-Length: refused before the body is read. */
    http(fx, "POST", "/v1/tasks/1", big, MAX_BODY + 1, false, NULL, &r);
    assert_error(&r, 413, "body_too_large");
    /* Over it while arriving in chunks. */
    http(fx, "POST", "/v1/tasks/1", big, 4 * MAX_BODY, true, NULL, &r);
    assert_error(&r, 413, "body_too_large");
    http(fx, "POST", "/v1/tasks/1", big, 100, true, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"len\":100"));
    free(big);
}

static void test_metrics_endpoint(void **state)
{
    fixture *fx = *state;
    reply r;
    double before = hr_metrics_value(fx->hits);
    http(fx, "GET", "/v1/tasks/1", NULL, 0, false, NULL, &r);
    assert_true(hr_metrics_value(fx->hits) == before + 1);
    http(fx, "GET", "/metrics", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "text/plain; version=0.0.4; charset=utf-8");
    char want[128];
    snprintf(want, sizeof want, "\ntest_hits_total{route=\"task\"} %.0f\n", before + 1);
    assert_non_null(strstr(r.body, "# HELP test_hits_total Handler calls.\n"));
    assert_non_null(strstr(r.body, want));
}

static void test_readyz(void **state)
{
    fixture *fx = *state;
    reply r;
    atomic_store(&fx->ready, false);
    http(fx, "GET", "/readyz", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 503);
    assert_string_equal(r.body, "{\"mysql\":\"connection refused\"}");
    atomic_store(&fx->ready, true);
    http(fx, "GET", "/readyz", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.ctype, "application/json");
    assert_string_equal(r.body, "{\"mysql\":\"ok\"}");
    atomic_store(&fx->ready, false);
    http(fx, "GET", "/readyz", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 503);
}

static void test_bearer(void **state)
{
    fixture *fx = *state;
    static const struct {
        const char *header; /* NULL: no Authorization header */
        long status;
    } cases[] = {
        {NULL, 401},
        {"Authorization: Bearer first-token", 200},
        {"Authorization: bearer second", 200},
        {"Authorization: Bearer  second", 200},
        {"Authorization: Bearer first-toke", 401},
        {"Authorization: Bearer first-tokenX", 401},
        {"Authorization: Bearer secont", 401},
        {"Authorization: Bearer ", 401},
        {"Authorization: Basic Zmlyc3QtdG9rZW4=", 401},
        {"Authorization: first-token", 401},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        reply r;
        http(fx, "GET", "/auth", NULL, 0, false, cases[i].header, &r);
        if (r.status != cases[i].status)
            fail_msg("'%s': %ld, want %ld", cases[i].header ? cases[i].header : "(none)", r.status,
                     cases[i].status);
        if (cases[i].status == 401)
            assert_error(&r, 401, "unauthorized");
    }
}

/* Sends the head of a request LINE ("POST /guarded") announcing LENGTH
 * body bytes, with AUTH (a whole header line or NULL), and no body at all:
 * whatever answers was decided on the headers alone.  The status into
 * *STATUS, the body into BODY; fails the test after 10 s without an answer. */
static void raw_head(const fixture *fx, const char *line, const char *auth, size_t length,
                     int *status, char *body, size_t bodylen)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)fx->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "%s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%sContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\n\r\n",
                     line, auth != NULL ? auth : "", auth != NULL ? "\r\n" : "", length);
    assert_int_equal(send(fd, head, (size_t)n, MSG_NOSIGNAL), n);
    char in[4096];
    size_t got = 0;
    for (int tries = 0; tries < 100 && got < sizeof in - 1; tries++) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t r = recv(fd, in + got, sizeof in - 1 - got, 0);
        if (r <= 0)
            break;
        got += (size_t)r;
        in[got] = '\0';
        const char *end = strstr(in, "\r\n\r\n");
        const char *cl = strcasestr(in, "\r\nContent-Length: ");
        if (end != NULL && cl != NULL && cl < end &&
            got >= (size_t)(end + 4 - in) + strtoull(cl + 18, NULL, 10))
            break;
    }
    close(fd);
    in[got] = '\0';
    if (sscanf(in, "HTTP/1.1 %d", status) != 1)
        fail_msg("no answer to the head alone: '%s'", in);
    const char *end = strstr(in, "\r\n\r\n");
    assert_non_null(end);
    snprintf(body, bodylen, "%s", end + 4);
}

/* The auth hook and the length check answer on the headers: a client that
 * announces 1 MiB and sends none of it gets its 401 or 413 at once. */
static void test_auth_before_body(void **state)
{
    fixture *fx = *state;
    char body[1024];
    int status = 0;
    int calls = atomic_load(&fx->guarded_calls);
    raw_head(fx, "POST /guarded", NULL, 1048576, &status, body, sizeof body);
    assert_int_equal(status, 401);
    assert_non_null(strstr(body, "\"code\":\"unauthorized\""));
    raw_head(fx, "POST /guarded", "Authorization: Bearer wrong", 1048576, &status, body,
             sizeof body);
    assert_int_equal(status, 401);
    raw_head(fx, "POST /guarded", "Authorization: Bearer first-token", 1048576, &status, body,
             sizeof body);
    assert_int_equal(status, 413);
    assert_non_null(strstr(body, "\"code\":\"body_too_large\""));
    assert_int_equal(atomic_load(&fx->guarded_calls), calls);
    /* Let in, the handler gets the body and what the hook recorded. */
    reply r;
    http(fx, "POST", "/guarded", "{}", 2, false, "Authorization: Bearer first-token", &r);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"auth_id\":42,\"len\":2}");
    http(fx, "POST", "/guarded", "{}", 2, true, NULL, &r);
    assert_error(&r, 401, "unauthorized");
    assert_int_equal(atomic_load(&fx->guarded_calls), calls + 1);
    assert_false(atomic_load(&fx->guard_saw_body));
}

/* ---- bodies, content types and HEAD -------------------------------------- */

/* A route without max_body takes no body: refused on the headers, whether
 * announced by length or chunked, on GET, DELETE and the probes alike. */
static void test_no_body(void **state)
{
    fixture *fx = *state;
    reply r;
    char body[1024];
    int status = 0;
    http(fx, "GET", "/healthz", "{}", 2, false, NULL, &r);
    assert_error(&r, 413, "body_too_large");
    http(fx, "GET", "/healthz", "{}", 2, true, NULL, &r);
    assert_error(&r, 413, "body_too_large");
    http(fx, "GET", "/v1/tasks/1", "{}", 2, false, NULL, &r);
    assert_error(&r, 413, "body_too_large");
    http(fx, "DELETE", "/v1/tasks/1/subscribers/2", "{}", 2, false, NULL, &r);
    assert_error(&r, 413, "body_too_large");
    /* Announced and never sent: the answer comes on the headers. */
    raw_head(fx, "GET /metrics", NULL, 1048576, &status, body, sizeof body);
    assert_int_equal(status, 413);
    assert_non_null(strstr(body, "\"code\":\"body_too_large\""));
    /* An empty body is no body. */
    http(fx, "GET", "/healthz", "", 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
}

/* A body, and any POST, must be application/json; the auth hook still
 * answers first. */
static void test_content_type(void **state)
{
    fixture *fx = *state;
    reply r;
    static const char *const refused[] = {
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "application/jsonx",
        "application/json-seq",
        NULL /* none */,
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        http_ct(fx, "POST", "/v1/tasks/7", "{}", refused[i], NULL, &r);
        if (r.status != 415)
            fail_msg("Content-Type %s: %ld, want 415", refused[i] ? refused[i] : "(none)",
                     r.status);
        assert_error(&r, 415, "unsupported_media_type");
    }
    /* A POST without a body (a form, or fetch() with none) is a POST too. */
    http_ct(fx, "POST", "/v1/tasks/7", NULL, NULL, NULL, &r);
    assert_error(&r, 415, "unsupported_media_type");
    http_ct(fx, "POST", "/v1/tasks/7", NULL, "application/json", NULL, &r);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "\"len\":0"));
    http_ct(fx, "POST", "/v1/tasks/7", "{}", "application/json; charset=utf-8", NULL, &r);
    assert_int_equal(r.status, 200);
    http_ct(fx, "POST", "/v1/tasks/7", "{}", "Application/JSON", NULL, &r);
    assert_int_equal(r.status, 200);
    int calls = atomic_load(&fx->guarded_calls);
    http_ct(fx, "POST", "/guarded", "{}", "text/plain", NULL, &r);
    assert_error(&r, 401, "unauthorized");
    http_ct(fx, "POST", "/guarded", "{}", "text/plain", "Authorization: Bearer first-token", &r);
    assert_error(&r, 415, "unsupported_media_type");
    assert_int_equal(atomic_load(&fx->guarded_calls), calls);
}

/* HEAD runs only a route that allows it; elsewhere 405, the handler not run. */
static void test_head(void **state)
{
    fixture *fx = *state;
    reply r;
    int calls = atomic_load(&fx->act_calls);
    http(fx, "HEAD", "/act", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.allow, "GET");
    http(fx, "HEAD", "/v1/tasks/1", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 405);
    assert_string_equal(r.allow, "GET, POST");
    assert_int_equal(atomic_load(&fx->act_calls), calls);
    http(fx, "GET", "/act", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
    assert_int_equal(atomic_load(&fx->act_calls), calls + 1);
    http(fx, "HEAD", "/readyz", NULL, 0, false, NULL, &r);
    assert_true(r.status == 200 || r.status == 503);
    assert_int_equal(r.len, 0);
}

/* ---- raw connections ----------------------------------------------------- */

/* A TCP connection to PORT from loopback address SRC ("127.0.0.2"; NULL:
 * the kernel's choice); -1 when it cannot be made. */
static int raw_connect(int port, const char *src)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (fd < 0)
        return -1;
    if (src != NULL) {
        struct sockaddr_in from = {.sin_family = AF_INET};
        inet_pton(AF_INET, src, &from.sin_addr);
        if (bind(fd, (struct sockaddr *)&from, sizeof from) != 0) {
            close(fd);
            return -1;
        }
    }
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* True when the server closed FD (end of stream or reset) within WAIT_MS;
 * whatever it sent before is read and dropped. */
static bool raw_closed(int fd, int wait_ms)
{
    int64_t end = hr_clock_mono_ms() + wait_ms;
    for (;;) {
        int64_t left = end - hr_clock_mono_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        char buf[4096];
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
            return false;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return true;
    }
}

/* Sends REQ whole on FD and returns the answer's status (0: none within 5 s). */
static int raw_status(int fd, const char *req)
{
    int status = 0;
    char in[4096];
    size_t got = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (send(fd, req, strlen(req), MSG_NOSIGNAL) != (ssize_t)strlen(req))
        return 0;
    while (got < sizeof in - 1 && poll(&pfd, 1, 5000) > 0) {
        ssize_t n = recv(fd, in + got, sizeof in - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        in[got] = '\0';
        if (strstr(in, "\r\n\r\n") != NULL)
            break;
    }
    in[got] = '\0';
    return sscanf(in, "HTTP/1.1 %d", &status) == 1 ? status : 0;
}

/* raw_status on a new connection from SRC. */
static int raw_request(int port, const char *src, const char *req)
{
    int fd = raw_connect(port, src), status;
    if (fd < 0)
        return 0;
    status = raw_status(fd, req);
    close(fd);
    return status;
}

/* The resident set of this process, in KiB. */
static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &pages, &resident), 2);
    fclose(f);
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

#define STALLED 100
#define MIB (1024 * 1024)

/* 100 connections (from two addresses, under the per-address limit) each
 * announce 1 MiB to /healthz, send all of it but the last byte, as far as
 * the socket takes it, and stall: the server buffers none of it (before,
 * each body was kept up to the server-wide limit: 4 -> 111 MB in a
 * dispatcher). */
static void test_stalled_uploads(void **state)
{
    fixture *fx = *state;
    static const char head[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                               "application/json\r\nContent-Length: 1048576\r\n\r\n";
    char *mib = malloc(MIB);
    int fds[STALLED];
    size_t sent[STALLED];
    reply r;
    assert_non_null(mib);
    memset(mib, 'x', MIB);
    http(fx, "GET", "/healthz", NULL, 0, false, NULL, &r); /* the pool's threads warmed up */
    long before = rss_kib();
    for (int i = 0; i < STALLED; i++) {
        fds[i] = raw_connect(fx->port, i % 2 == 0 ? "127.0.0.2" : "127.0.0.3");
        assert_true(fds[i] >= 0);
        assert_int_equal(send(fds[i], head, sizeof head - 1, MSG_NOSIGNAL),
                         (ssize_t)sizeof head - 1);
        fcntl(fds[i], F_SETFL, O_NONBLOCK);
        sent[i] = 0;
    }
    /* Push the bodies for 2 s, as far as each socket takes them. */
    for (int64_t end = hr_clock_mono_ms() + 2000; hr_clock_mono_ms() < end;) {
        for (int i = 0; i < STALLED; i++) {
            ssize_t n = sent[i] < MIB - 1
                            ? send(fds[i], mib + sent[i], MIB - 1 - sent[i], MSG_NOSIGNAL)
                            : 0;
            if (n > 0)
                sent[i] += (size_t)n;
        }
        usleep(20000);
    }
    long grown = rss_kib() - before;
    for (int i = 0; i < STALLED; i++)
        close(fds[i]);
    free(mib);
    if (grown > 16 * 1024)
        fail_msg("RSS grew %ld KiB under %d stalled uploads to a route that takes no body", grown,
                 STALLED);
    http(fx, "GET", "/healthz", NULL, 0, false, NULL, &r);
    assert_int_equal(r.status, 200);
}

/* ---- connection limits --------------------------------------------------- */

/* A server of the probe routes plus a POST echo with LIMITS; *PORT set. */
static hr_httpd *limits_server(fixture *fx, hr_httpd_limits limits, hr_httpd_route *routes,
                               int *port)
{
    hr_httpd *h = NULL;
    char err[256];
    routes[0] =
        (hr_httpd_route){"POST", "/v1/tasks/{id}", echo_task, fx, NULL, MAX_BODY, false, false};
    hr_httpd_probe_routes(&routes[1], fx->reg, &fx->readiness);
    if (hr_httpd_start("127.0.0.1:0", &limits, routes, 1 + HR_HTTPD_NPROBES, &h, err, sizeof err) !=
        0)
        fail_msg("start: %s", err);
    *port = hr_httpd_port(h);
    return h;
}

static const char healthz_req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/* At most max_per_ip connections from one address; another address is
 * still served. */
static void test_per_ip_limit(void **state)
{
    fixture *fx = *state;
    hr_httpd_route routes[1 + HR_HTTPD_NPROBES];
    int port, held[4];
    hr_httpd *h = limits_server(fx, (hr_httpd_limits){1, 64, 4, 10000}, routes, &port);
    for (int i = 0; i < 4; i++) {
        held[i] = raw_connect(port, "127.0.0.1");
        assert_true(held[i] >= 0);
    }
    for (int i = 0; i < 4; i++) /* accepted and kept */
        assert_false(raw_closed(held[i], i == 0 ? 300 : 0));
    int fifth = raw_connect(port, "127.0.0.1");
    assert_true(fifth >= 0);
    assert_true(raw_closed(fifth, 5000));
    close(fifth);
    assert_int_equal(raw_request(port, "127.0.0.2", healthz_req), 200);
    /* The held ones still work, and a place is free again once one is closed. */
    assert_int_equal(raw_status(held[0], healthz_req), 200);
    close(held[0]);
    int status = 0;
    for (int64_t end = hr_clock_mono_ms() + 5000; status != 200 && hr_clock_mono_ms() < end;) {
        status = raw_request(port, "127.0.0.1", healthz_req);
        if (status != 200)
            usleep(50000);
    }
    assert_int_equal(status, 200);
    for (int i = 1; i < 4; i++)
        close(held[i]);
    hr_httpd_stop(h);
}

/* The header deadline (600 ms here) holds against a client trickling a
 * byte every 50 ms, a silent one and an idle kept-alive one; a body
 * trickling after its headers is not cut by it. */
static void test_header_deadline(void **state)
{
    fixture *fx = *state;
    hr_httpd_route routes[1 + HR_HTTPD_NPROBES];
    int port;
    hr_httpd *h = limits_server(fx, (hr_httpd_limits){2, 64, 16, 600}, routes, &port);
    static const char trickle[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

    /* A trickle: one byte every 50 ms, the head never ends. */
    int fd = raw_connect(port, NULL);
    assert_true(fd >= 0);
    int64_t start = hr_clock_mono_ms(), closed_at = 0;
    for (size_t i = 0; closed_at == 0 && hr_clock_mono_ms() - start < 5000; i++) {
        char c = i < sizeof trickle - 1 ? trickle[i] : 'x';
        if (send(fd, &c, 1, MSG_NOSIGNAL) != 1 || raw_closed(fd, 50))
            closed_at = hr_clock_mono_ms();
    }
    close(fd);
    if (closed_at == 0 || closed_at - start < 550 || closed_at - start > 2000)
        fail_msg("a trickling client was closed after %" PRId64 " ms, want 600..2000",
                 closed_at == 0 ? (int64_t)-1 : closed_at - start);

    /* Silent after connecting. */
    fd = raw_connect(port, NULL);
    start = hr_clock_mono_ms();
    assert_true(raw_closed(fd, 3000));
    assert_true(hr_clock_mono_ms() - start >= 550);
    close(fd);

    /* Kept alive and idle after an answer. */
    fd = raw_connect(port, NULL);
    assert_int_equal(send(fd, healthz_req, sizeof healthz_req - 1, MSG_NOSIGNAL),
                     (ssize_t)sizeof healthz_req - 1);
    assert_false(raw_closed(fd, 400)); /* answered, not closed */
    assert_true(raw_closed(fd, 3000));
    close(fd);

    /* A body a byte every 150 ms for 1.5 s: the headers were in time. */
    static const char post[] = "POST /v1/tasks/5 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                               "application/json\r\nContent-Length: 10\r\n\r\n";
    fd = raw_connect(port, NULL);
    assert_int_equal(send(fd, post, sizeof post - 1, MSG_NOSIGNAL), (ssize_t)sizeof post - 1);
    for (int i = 0; i < 10; i++) {
        usleep(150000);
        assert_int_equal(send(fd, "1234567890" + i, 1, MSG_NOSIGNAL), 1);
    }
    char in[1024];
    size_t got = 0;
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    while (got < sizeof in - 1 && strstr(in, "\"len\":10") == NULL && poll(&pfd, 1, 5000) > 0) {
        ssize_t n = recv(fd, in + got, sizeof in - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        in[got] = '\0';
    }
    in[got] = '\0';
    close(fd);
    if (strncmp(in, "HTTP/1.1 200", 12) != 0 || strstr(in, "\"len\":10") == NULL)
        fail_msg("a slow body was not served: '%s'", in);
    hr_httpd_stop(h);
}

#define IDLE 2000
#define IDLE_PER_ADDR 50

/* 2,000 idle connections on one server (from 40 loopback addresses, each
 * under its per-address limit) while a probe server answers /healthz
 * within 100 ms every time (before, the probes shared the API's
 * listener: 1,030 idle sockets made /healthz time out). */
static void test_slow_clients(void **state)
{
    fixture *fx = *state;
    hr_httpd_route routes[1 + HR_HTTPD_NPROBES], probes[HR_HTTPD_NPROBES];
    static const char partial[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    struct rlimit rl;
    hr_httpd *ph = NULL;
    char err[256];
    int port, fds[IDLE];

    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 3 * IDLE) {
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 3 * IDLE)
            skip(); /* a hard limit below what the test needs */
        rl.rlim_cur = 3 * IDLE;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    hr_httpd *h = limits_server(fx, (hr_httpd_limits){2, 4096, 64, 60000}, routes, &port);
    hr_httpd_probe_routes(probes, fx->reg, &fx->readiness);
    if (hr_httpd_start("127.0.0.1:0", &HR_HTTPD_PROBE_LIMITS, probes, HR_HTTPD_NPROBES, &ph, err,
                       sizeof err) != 0)
        fail_msg("start: %s", err);
    for (int i = 0; i < IDLE; i++) {
        char src[32];
        snprintf(src, sizeof src, "127.0.0.%d", 2 + i / IDLE_PER_ADDR);
        fds[i] = raw_connect(port, src);
        if (fds[i] < 0)
            fail_msg("connection %d from %s: %s", i, src, strerror(errno));
        assert_int_equal(send(fds[i], partial, sizeof partial - 1, MSG_NOSIGNAL),
                         (ssize_t)sizeof partial - 1);
    }
    fixture probe = *fx;
    probe.port = hr_httpd_port(ph);
    for (int i = 0; i < 20; i++) {
        reply r;
        int64_t t0 = hr_clock_mono_ms();
        CURLcode rc = http_try(&probe, "GET", "/healthz", NULL, 0, false, NULL, &r);
        int64_t took = hr_clock_mono_ms() - t0;
        if (rc != CURLE_OK || r.status != 200 || took >= 100)
            fail_msg("/healthz %d with %d idle connections: %s, status %ld, %" PRId64 " ms", i,
                     IDLE, curl_easy_strerror(rc), r.status, took);
        usleep(50000);
    }
    /* All of them were held, none refused. */
    int closed = 0;
    for (int i = 0; i < IDLE; i++) {
        struct pollfd pfd = {.fd = fds[i], .events = POLLIN | POLLRDHUP};
        closed += poll(&pfd, 1, 0) > 0;
    }
    for (int i = 0; i < IDLE; i++)
        close(fds[i]);
    assert_int_equal(closed, 0);
    hr_httpd_stop(ph);
    hr_httpd_stop(h);
}

#define CLIENTS 5
#define PER_CLIENT 10

typedef struct client {
    const fixture *fx;
    int idx;
    atomic_int *ok;
} client;

static void *client_run(void *arg)
{
    client *cl = arg;
    for (int i = 0; i < PER_CLIENT; i++) {
        char path[64], want[64];
        int id = cl->idx * 1000 + i;
        snprintf(path, sizeof path, "/v1/tasks/%d", id);
        snprintf(want, sizeof want, "\"id\":\"%d\"", id);
        reply r;
        if (http_try(cl->fx, "GET", path, NULL, 0, false, NULL, &r) == CURLE_OK &&
            r.status == 200 && strstr(r.body, want) != NULL)
            atomic_fetch_add(cl->ok, 1);
    }
    return NULL;
}

static void test_concurrent(void **state)
{
    fixture *fx = *state;
    atomic_int ok;
    atomic_init(&ok, 0);
    pthread_t th[CLIENTS];
    client cl[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        cl[i] = (client){fx, i, &ok};
        assert_int_equal(pthread_create(&th[i], NULL, client_run, &cl[i]), 0);
    }
    for (int i = 0; i < CLIENTS; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(atomic_load(&ok), CLIENTS * PER_CLIENT);
}

static void test_start_errors(void **state)
{
    fixture *fx = *state;
    hr_httpd *h = NULL;
    char err[256];
    const hr_httpd_route good[] = {
        {"GET", "/healthz", hr_httpd_healthz, NULL, NULL, 0, true, false}};
    const hr_httpd_route bad[] = {{"GET", "/v1/{id", hr_httpd_healthz, NULL, NULL, 0, true, false}};
    const hr_httpd_route relative[] = {
        {"GET", "healthz", hr_httpd_healthz, NULL, NULL, 0, true, false}};
    char taken[64];
    snprintf(taken, sizeof taken, "127.0.0.1:%d", fx->port);
    const hr_httpd_limits one = {1, 64, 8, 1000};
    const struct {
        const char *listen;
        hr_httpd_limits limits;
        const hr_httpd_route *routes;
    } cases[] = {
        {"127.0.0.1", one, good},
        {"127.0.0.1:0", {0, 64, 8, 1000}, good},
        {"127.0.0.1:0", {65, 64, 8, 1000}, good},
        {"127.0.0.1:0", {1, 15, 8, 1000}, good},
        {"127.0.0.1:0", {1, 64, 0, 1000}, good},
        {"127.0.0.1:0", {1, 64, 8, 99}, good},
        {"127.0.0.1:http", one, good},
        {taken, one, good},
        {"127.0.0.1:0", one, bad},
        {"127.0.0.1:0", one, relative},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        assert_int_equal(hr_httpd_start(cases[i].listen, &cases[i].limits, cases[i].routes, 1, &h,
                                        err, sizeof err),
                         -1);
        assert_null(h);
        assert_true(err[0] != '\0');
    }
    /* IPv6 loopback in brackets, when the machine has it. */
    if (hr_httpd_start("[::1]:0", &one, good, 1, &h, err, sizeof err) == 0) {
        assert_true(hr_httpd_port(h) > 0);
        hr_httpd_stop(h);
    }
    hr_httpd_stop(NULL);
}

int main(void)
{
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_routes),           cmocka_unit_test(test_errors),
        cmocka_unit_test(test_body_limit),       cmocka_unit_test(test_metrics_endpoint),
        cmocka_unit_test(test_readyz),           cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_concurrent),       cmocka_unit_test(test_start_errors),
        cmocka_unit_test(test_auth_before_body), cmocka_unit_test(test_no_body),
        cmocka_unit_test(test_content_type),     cmocka_unit_test(test_head),
        cmocka_unit_test(test_stalled_uploads),  cmocka_unit_test(test_per_ip_limit),
        cmocka_unit_test(test_header_deadline),  cmocka_unit_test(test_slow_clients),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
