/* Tests for common/hr_httpd.c over loopback (port 0, libcurl easy as the
 * client).  Needs no stack, so it never skips: routes with params and
 * query, 404/405/413 JSON errors, HEAD, /metrics, /readyz switching, the
 * bearer helper, start-up errors, 50 concurrent requests, and an auth hook
 * that answers on the headers before any body is sent (raw socket). */
#include <arpa/inet.h>
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
#include <sys/socket.h>
#include <unistd.h>

#include <cJSON.h>
#include <cmocka.h>
#include <curl/curl.h>

#include "hr_httpd.h"
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
    atomic_int guard_calls, guarded_calls;
    atomic_bool guard_saw_body;
} fixture;

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
    const hr_httpd_route routes[] = {
        {"GET", "/v1/tasks/{id}", echo_task, fx, NULL},
        {"POST", "/v1/tasks/{id}", echo_task, fx, NULL},
        {"DELETE", "/v1/tasks/{id}/subscribers/{uid}", echo_sub, fx, NULL},
        {"GET", "/auth", auth, NULL, NULL},
        {"POST", "/guarded", guarded, fx, guard},
        {"GET", "/metrics", hr_httpd_metrics, fx->reg, NULL},
        {"GET", "/healthz", hr_httpd_healthz, NULL, NULL},
        {"GET", "/readyz", hr_httpd_readyz, &fx->readiness, NULL},
    };
    if (hr_httpd_start("127.0.0.1:0", 4, routes, sizeof routes / sizeof routes[0], MAX_BODY, &fx->h,
                       err, sizeof err) != 0)
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

/* One request; BODY NULL for none, CHUNKED sends it without Content-Length.
 * Safe on any thread (asserts nothing). */
static CURLcode http_try(const fixture *fx, const char *method, const char *path, const char *body,
                         size_t body_len, bool chunked, const char *authz, reply *r)
{
    memset(r, 0, sizeof *r);
    char url[512];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", fx->port, path);
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
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode rc = curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    return rc;
}

static void http(const fixture *fx, const char *method, const char *path, const char *body,
                 size_t body_len, bool chunked, const char *authz, reply *r)
{
    CURLcode rc = http_try(fx, method, path, body, body_len, chunked, authz, r);
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
    assert_string_equal(r.allow, "GET, HEAD, POST");
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

/* Sends the head of a POST /guarded announcing LENGTH body bytes, with
 * AUTH (a whole header line or NULL), and no body at all: whatever answers
 * was decided on the headers alone.  The status into *STATUS, the body
 * into BODY; fails the test after 10 s without an answer. */
static void raw_post_head(const fixture *fx, const char *auth, size_t length, int *status,
                          char *body, size_t bodylen)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)fx->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char head[512];
    int n = snprintf(head, sizeof head,
                     "POST /guarded HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%sContent-Type: "
                     "application/json\r\nContent-Length: %zu\r\n\r\n",
                     auth != NULL ? auth : "", auth != NULL ? "\r\n" : "", length);
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
    raw_post_head(fx, NULL, 1048576, &status, body, sizeof body);
    assert_int_equal(status, 401);
    assert_non_null(strstr(body, "\"code\":\"unauthorized\""));
    raw_post_head(fx, "Authorization: Bearer wrong", 1048576, &status, body, sizeof body);
    assert_int_equal(status, 401);
    raw_post_head(fx, "Authorization: Bearer first-token", 1048576, &status, body, sizeof body);
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
    const hr_httpd_route good[] = {{"GET", "/healthz", hr_httpd_healthz, NULL, NULL}};
    const hr_httpd_route bad[] = {{"GET", "/v1/{id", hr_httpd_healthz, NULL, NULL}};
    const hr_httpd_route relative[] = {{"GET", "healthz", hr_httpd_healthz, NULL, NULL}};
    char taken[64];
    snprintf(taken, sizeof taken, "127.0.0.1:%d", fx->port);
    const struct {
        const char *listen;
        int threads;
        const hr_httpd_route *routes;
    } cases[] = {
        {"127.0.0.1", 1, good},       {"127.0.0.1:0", 0, good}, {"127.0.0.1:0", 65, good},
        {"127.0.0.1:http", 1, good},  {taken, 1, good},         {"127.0.0.1:0", 1, bad},
        {"127.0.0.1:0", 1, relative},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = '\0';
        assert_int_equal(hr_httpd_start(cases[i].listen, cases[i].threads, cases[i].routes, 1, 1024,
                                        &h, err, sizeof err),
                         -1);
        assert_null(h);
        assert_true(err[0] != '\0');
    }
    /* IPv6 loopback in brackets, when the machine has it. */
    if (hr_httpd_start("[::1]:0", 1, good, 1, 1024, &h, err, sizeof err) == 0) {
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
        cmocka_unit_test(test_auth_before_body),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    curl_global_cleanup();
    return rc;
}
