/* dsp_api.h: what dsp_api.c (server, pool, tasks, control), dsp_api_ops.c
 * (admin operations),
 * dsp_api_subs.c (subscribers, pull) and dsp_api_addr.c (addresses)
 * share.  Private to the dispatcher.
 *
 * Every /v1 handler gets a connection pair of the API's own pool
 * (dsp_api_conn), held for the length of one request; the loop thread's and
 * the background job's connections are never touched from here. */
#ifndef DSP_API_H
#define DSP_API_H

#include <cJSON.h>

#include "dsp.h"
#include "hr_addr.h"
#include "hr_state.h"

typedef struct dsp_api_conn {
    hr_mysql *m;
    hr_redis *r;
    bool busy;
} dsp_api_conn;

typedef void (*dsp_api_fn)(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req,
                           hr_httpd_resp *resp);

/* What a route's ctx points to. */
typedef struct dsp_api_route {
    dsp_api *a;
    const char *name;         /* the route label of herald_api_requests_total */
    bool open;                /* no token needed, no connection */
    hr_httpd_handler builtin; /* open routes: the hr_httpd built-in */
    void *builtin_ctx;
    dsp_api_fn fn;   /* /v1 routes */
    bool is_control; /* a control route, setting CONTROL */
    bool client;     /* a client token may call it, for the {uid} of its path */
    hr_control control;
} dsp_api_route;

#define DSP_API_NROUTES 40

struct dsp_api {
    dsp *d;
    hr_httpd *h;
    hr_httpd_ready ready;
    dsp_api_route rctx[DSP_API_NROUTES];
    hr_httpd_route routes[DSP_API_NROUTES];
    size_t nroutes;
    pthread_mutex_t pool_mu;
    pthread_cond_t pool_cv;
    dsp_api_conn *pool;
    size_t npool;
};

/* ---- request parsing (dsp_api_parse.c) -----------------------------------
 * Pure: no backend, request or response, so tests/fuzz/fuzz_api_request.c
 * runs it without servers.  Each parser returns 0, or -1 with the error
 * code of docs/api.md in *CODE (static) and the message in ERRSTR; the
 * handler answers 400 with both. */

/* S (NULL: absent) as a positive integer below 2^63; NAME is for the message. */
int dsp_api_parse_id(const char *s, const char *name, int64_t *out, const char **code, char *errstr,
                     size_t errlen);
/* BODY (LEN bytes) as a UTF-8 JSON object into *OUT (the caller's, freed
 * with cJSON_Delete) through hr_parse_json: a member named twice anywhere
 * is refused with duplicate_field, numbers keep their literal text. */
int dsp_api_parse_json(const char *body, size_t len, cJSON **out, const char **code, char *errstr,
                       size_t errlen);

/* The values of a task request, pointing into its cJSON (payload: owned,
 * freed by the caller whatever the parser returned). */
typedef struct dsp_api_input {
    hr_task t;
    bool has_due, has_freeze;
    int64_t expire_in_s; /* expiry: "expire_in", 0 = not given; sets t.expire_ms */
    int64_t expected;    /* "expected_recipients", 0 = not given; sets t.shards */
} dsp_api_input;

/* The members of body J of POST /v1/tasks (PATCH: only title, body,
 * payload and due_at) into IN, which starts with the defaults or the stored
 * task.  POST also needs name, channel and due_at, refuses freeze_at
 * after due_at, and turns expire_in (seconds after due_at) into
 * t.expire_ms (not with expire_at); name, topic, channel, throttle_scope and throttle_key must
 * not be empty (hr_parse_name).  The values are not
 * checked against the config: that is hr_task_validate's job. */
int dsp_api_parse_task(const cJSON *j, bool patch, dsp_api_input *in, const char **code,
                       char *errstr, size_t errlen);
/* A time string of hr_parse_time (RFC 3339 UTC, a real calendar time) or
 * epoch ms, 1970..9999, into *MS; 0, or -1 with ERRSTR naming WHAT. */
int dsp_api_parse_time(const cJSON *v, const char *what, int64_t *ms, char *errstr, size_t errlen);
/* Body J of POST .../subscribers: {"uids": [...]}, 1..MAX_IDS uids in
 * 1..2^63-1, each a JSON integer literal or its decimal string
 * (hr_parse_json_uid: exact, not through a double), into *UIDS (malloc'd,
 * the caller frees it) of *N. */
int dsp_api_parse_uids(const cJSON *j, int max_ids, int64_t **uids, size_t *n, const char **code,
                       char *errstr, size_t errlen);
/* One address {"platform", "app" (default ""), "address"} into *OUT (its
 * strings point into J), checked with hr_addr_check (invalid_address);
 * WHAT names it in messages ("" for a whole body, "addresses[2]"). */
int dsp_api_parse_address(const cJSON *j, const char *what, hr_addr *out, const char **code,
                          char *errstr, size_t errlen);
/* Body J of PUT .../addresses: {"addresses": [...]}, 0..HR_ADDR_PER_UID_MAX
 * addresses of dsp_api_parse_address into *OUT (malloc'd, the caller frees
 * it; NULL when none) of *N. */
int dsp_api_parse_addresses(const cJSON *j, hr_addr **out, size_t *n, const char **code,
                            char *errstr, size_t errlen);
/* GET /v1/tasks ?state= and ?limit= (NULL: absent) into *LIMIT. */
int dsp_api_parse_list(const char *state, const char *limit_s, long *limit, const char **code,
                       char *errstr, size_t errlen);
/* GET /v1/tasks ?before= (NULL: absent, *BEFORE = INT64_MAX) as a task id
 * and ?q= (NULL: absent; at most 200 bytes of UTF-8). */
int dsp_api_parse_page(const char *before_s, const char *q, int64_t *before, const char **code,
                       char *errstr, size_t errlen);
/* The pull's ?date=YYYY-MM-DD (NULL: the UTC day of NOW_S) as the day's
 * first ms, and ?ack=0|1. */
int dsp_api_parse_pull(const char *date, const char *ack_s, int64_t now_s, int64_t *day, bool *ack,
                       const char **code, char *errstr, size_t errlen);
/* "2024-05-01T08:00:00.000Z" into BUF (33 bytes). */
void dsp_api_time(int64_t ms, char *buf, size_t len);

/* ---- handler helpers (dsp_api.c) ----------------------------------------- */

/* A path param as a positive integer (BIGINT UNSIGNED ids below 2^63);
 * false after answering 400. */
bool dsp_api_id(const hr_httpd_req *req, const char *name, hr_httpd_resp *resp, int64_t *out);
/* Parses the body as a JSON object; NULL after answering 400. */
cJSON *dsp_api_body(const hr_httpd_req *req, hr_httpd_resp *resp);
/* Adds id/uid V to object O as an exact JSON integer (a raw literal: a
 * cJSON number is a double and rounds past 2^53). */
void dsp_api_add_id(cJSON *o, const char *name, int64_t v);
/* Puts J (consumed) as the response body with STATUS. */
void dsp_api_reply(hr_httpd_resp *resp, int status, cJSON *j);
/* Answers a backend failure with 503 and logs it once. */
void dsp_api_backend_error(hr_httpd_resp *resp, const char *what, const char *err);
/* Loads task ID; false after answering 404 or 503 (*T NULL). */
bool dsp_api_task(dsp_api_conn *ac, int64_t id, hr_httpd_resp *resp, hr_task **t);
/* The checks of POST /v1/tasks on body J into IN (which it initialises with
 * the defaults; IN->t.payload is the caller's to free whatever happens);
 * *SCOPE is the throttle_scope as given (NULL: the topic's).  false after
 * answering 400. */
bool dsp_api_task_input(dsp_api *a, const cJSON *j, dsp_api_input *in, const char **scope,
                        hr_httpd_resp *resp);
/* COUNT(push_subscription) of task ID, or -1 when MySQL does not answer. */
int64_t dsp_api_subscriptions(dsp_api_conn *ac, int64_t id);
/* Adds "title", "body" (rendered for uid UID_S with the attributes of USER,
 * an HGETALL reply or NULL) and "payload" of task T to O, as the pull
 * serves them. */
void dsp_api_add_rendering(cJSON *o, const hr_task *t, const char *uid_s, const redisReply *user);
/* HGETALL of the uid's attribute hash (herald:user:<uid>); NULL with ERRSTR. */
redisReply *dsp_api_user(dsp_api_conn *ac, const char *uid_s, char *errstr, size_t errlen);
/* moved from dsp_api.c: dsp_api_view.c, dsp_api_task.c, dsp_api_routes.c */
cJSON *dsp_api_task_json(const hr_task *t);
void dsp_api_add_time(cJSON *o, const char *name, int64_t ms);
void dsp_api_task_live(dsp_api_conn *ac, const hr_task *t, cJSON *o);
void dsp_api_create(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_patch(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_get(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_list(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_control(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp,
                     hr_control control);
void dsp_api_add_routes(dsp_api *a);
void dsp_api_serve(void *ctx, const hr_httpd_req *req, hr_httpd_resp *resp);
bool dsp_api_auth(void *ctx, hr_httpd_req *req, hr_httpd_resp *resp);
/* dsp_api_ops.c: the admin operations heraldctl has too */
void dsp_api_chunks(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_dead_letters(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req,
                          hr_httpd_resp *resp);
void dsp_api_redrive(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_recover(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_subs_count(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_render_new(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_render_task(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req,
                         hr_httpd_resp *resp);
/* dsp_api_addr.c */
void dsp_api_addr_get(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_addr_add(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_addr_put(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_addr_del(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
/* dsp_api_subs.c */
void dsp_api_subs_add(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_subs_del(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);
void dsp_api_reminders(dsp_api *a, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp);

#endif
