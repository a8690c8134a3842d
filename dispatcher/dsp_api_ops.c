/* dsp_api_ops: the admin operations heraldctl has too, over HTTP (see
 * dsp_api.c for the server and the rules every handler follows).
 *
 * - GET /v1/tasks/{id}/chunks: the chunks in flight — the task's pending
 *   hash (seq -> last publish), at most DSP_API_CHUNKS_MAX of them by seq,
 *   each with what its set still holds and its lease holder; a pending
 *   chunk nobody leases is parked (paused, or waiting for the sweeper).
 * - GET /v1/tasks/{id}/dead-letters?limit=&cursor=: HSCAN of the failed
 *   hash.  HSCAN's COUNT is a hint (a small hash answers whole), so the
 *   cursor is "<redis cursor>:<entries of that step already served>":
 *   a page never holds more than limit, and the next resumes where it
 *   stopped.  As with SCAN, an entry added or removed while paging may be
 *   missed or served twice; one present throughout is served.
 * - POST /v1/tasks/{id}/redrive and /recover: common/hr_redrive.c and
 *   common/hr_recover.c, the code of `heraldctl redrive|recover`.  Recover
 *   waits up to about 90 s (the workers' last reports, the prepare lock),
 *   so it runs as a job (dsp_api_job.h): its refusals that need no wait
 *   are answered at once (409), else 202 with the job.
 * - GET /v1/tasks/{id}/subscribers/count: push_subscription rows and the
 *   subs set's size (recipients not chunked yet).
 * - POST /v1/render and GET /v1/tasks/{id}/render?uid=: the title, body and
 *   payload the pull would serve that uid (user.* from its attribute
 *   hash), for a task body (validated as POST /v1/tasks does, nothing
 *   stored) or an existing task. */
#include "dsp_api_ops.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_parse.h"
#include "dsp_api_subs.h"
#include "dsp_api_task.h"
#include "hr_clock.h"
#include "hr_httpd_req.h"
#include "hr_log.h"
#include "hr_parse.h"
#include "hr_pipe.h"
#include "hr_recover.h"
#include "hr_redrive.h"
#include "hr_shard.h"

#define DSP_API_CHUNKS_MAX 1000
#define DSP_API_DEAD_MAX 1000
#define DSP_API_DEAD_DEFAULT 100

/* ---- chunks in flight ----------------------------------------------------- */

static int dsp_api_seq_cmp(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;

    return (a > b) - (a < b);
}

/* Up to DSP_API_CHUNKS_MAX seqs of the pending hashes of task ID's SHARDS
 * shards, sorted, into SEQS; *TOTAL = the hashes' sizes.  0 or -1
 * (ERRSTR). */
static int dsp_api_pending_seqs(hr_redis *r, int64_t id, int shards, int64_t *seqs, size_t *n,
                                int64_t *total, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], cursor[32];
    redisReply *reply;
    size_t i;
    int rounds = 0;

    if (hr_shard_sum(r, id, shards, "HLEN", HR_KEY_PENDING, total, errstr, errlen) < 0)
        return -1;
    *n = 0;
    for (int k = 0; k < (shards > 1 ? shards : 1) && *n < DSP_API_CHUNKS_MAX; k++) {
        hr_key_shard(hr_redis_prefix(r), key, sizeof key, id, k, HR_KEY_PENDING);
        snprintf(cursor, sizeof cursor, "0");
        do {
            reply = hr_redis_cmdf(r, errstr, errlen, "HSCAN %s %s COUNT 1000", key, cursor);
            if (reply == NULL)
                return -1;
            snprintf(cursor, sizeof cursor, "%s", reply->element[0]->str);
            for (i = 0; i + 1 < reply->element[1]->elements && *n < DSP_API_CHUNKS_MAX; i += 2)
                seqs[(*n)++] = strtoll(reply->element[1]->element[i]->str, NULL, 10);
            freeReplyObject(reply);
        } while (strcmp(cursor, "0") != 0 && *n < DSP_API_CHUNKS_MAX && ++rounds < 100000);
    }
    qsort(seqs, *n, sizeof *seqs, dsp_api_seq_cmp);
    return 0;
}

void dsp_api_ops_chunks(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_task *t = NULL;
    hr_pipe *pipe = NULL;
    int64_t id, total, parked = 0, *seqs = NULL;
    size_t n = 0, i;
    char err[512], key[HR_KEY_MAX];
    cJSON *o = NULL, *arr;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_load_task(ac, id, resp, &t))
        return;
    seqs = malloc(DSP_API_CHUNKS_MAX * sizeof *seqs);
    pipe = hr_pipe_new(ac->r);
    if (seqs == NULL || pipe == NULL) {
        hr_httpd_error(resp, 500, "internal", "out of memory");
        goto done;
    }
    if (dsp_api_pending_seqs(ac->r, id, (int)t->shards, seqs, &n, &total, err, sizeof err) < 0)
        goto redis_failed;
    /* Per chunk: what its set holds, its lease's holder and time left (in
     * the shard its number belongs to). */
    for (i = 0; i < n; i++) {
        const char *scard[] = {"SCARD", key}, *get[] = {"GET", key}, *pttl[] = {"PTTL", key};
        int shard = hr_shard_of_seq((int)t->shards, seqs[i]);

        hr_key_shard_chunk(hr_redis_prefix(ac->r), key, sizeof key, id, shard, seqs[i]);
        if (hr_pipe_cmd(pipe, 2, scard, NULL) < 0)
            goto oom;
        hr_key_shard_lease(hr_redis_prefix(ac->r), key, sizeof key, id, shard, seqs[i]);
        if (hr_pipe_cmd(pipe, 2, get, NULL) < 0 || hr_pipe_cmd(pipe, 2, pttl, NULL) < 0)
            goto oom;
    }
    if (n > 0 && hr_pipe_exec(pipe, err, sizeof err) < 0)
        goto redis_failed;
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "chunks");
    for (i = 0; i < n; i++) {
        redisReply *size = hr_pipe_reply(pipe, 3 * i, err, sizeof err),
                   *holder = hr_pipe_reply(pipe, 3 * i + 1, err, sizeof err),
                   *ttl = hr_pipe_reply(pipe, 3 * i + 2, err, sizeof err);
        cJSON *c = cJSON_CreateObject();
        bool held = holder != NULL && holder->type == REDIS_REPLY_STRING;

        cJSON_AddItemToArray(arr, c);
        dsp_api_add_id(c, "seq", seqs[i]);
        cJSON_AddNumberToObject(c, "remaining", size != NULL ? (double)size->integer : 0);
        if (held)
            cJSON_AddStringToObject(c, "holder", holder->str);
        else
            cJSON_AddNullToObject(c, "holder");
        if (held && ttl != NULL && ttl->integer >= 0)
            cJSON_AddNumberToObject(c, "lease_ms_left", (double)ttl->integer);
        else
            cJSON_AddNullToObject(c, "lease_ms_left");
        parked += !held;
        freeReplyObject(size);
        freeReplyObject(holder);
        freeReplyObject(ttl);
    }
    cJSON_AddNumberToObject(o, "parked", (double)parked);
    cJSON_AddNumberToObject(o, "pending", (double)total);
    cJSON_AddBoolToObject(o, "truncated", total > (int64_t)n);
    dsp_api_reply(resp, 200, o);
    goto done;
oom:
    hr_httpd_error(resp, 500, "internal", "out of memory");
    goto done;
redis_failed:
    dsp_api_backend_error(resp, "redis", err);
done:
    hr_pipe_free(pipe);
    free(seqs);
    hr_task_free(t);
}

/* ---- dead letters ----------------------------------------------------------- */

/* ?cursor= "<redis cursor>:<skip>", for a task of several shards
 * "<shard>/<redis cursor>:<skip>" (NULL: the start). */
static bool dsp_api_dead_cursor(const char *s, int shards, int *shard, unsigned long long *cursor,
                                long *skip)
{
    char *end;

    *shard = 0;
    *cursor = 0;
    *skip = 0;
    if (s == NULL)
        return true;
    if (*s < '0' || *s > '9')
        return false;
    if (shards > 1) {
        long k = strtol(s, &end, 10);

        if (*end != '/' || k < 0 || k >= shards)
            return false;
        *shard = (int)k;
        s = end + 1;
        if (*s < '0' || *s > '9')
            return false;
    }
    *cursor = strtoull(s, &end, 10);
    if (*end != ':' || end[1] < '0' || end[1] > '9')
        return false;
    *skip = strtol(end + 1, &end, 10);
    return *end == '\0' && *skip >= 0 && *skip <= 1000000;
}

void dsp_api_ops_dead_letters(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req,
                              hr_httpd_resp *resp)
{
    const char *limit_s = hr_httpd_query(req, "limit");
    hr_task *t = NULL;
    int64_t id, uid;
    unsigned long long cursor;
    long limit = DSP_API_DEAD_DEFAULT, skip, served = 0, i, rounds = 0;
    char err[512], key[HR_KEY_MAX], *end, next[64] = "", at[16] = "";
    int shards, shard;
    cJSON *o = NULL, *arr;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id))
        return;
    if (limit_s != NULL) {
        limit = strtol(limit_s, &end, 10);
        if (*limit_s == '\0' || *end != '\0' || limit < 1 || limit > DSP_API_DEAD_MAX) {
            hr_httpd_error(resp, 400, "bad_query", "limit must be 1..%d", DSP_API_DEAD_MAX);
            return;
        }
    }
    if (!dsp_api_load_task(ac, id, resp, &t))
        return;
    shards = t->shards > 1 ? (int)t->shards : 1;
    if (!dsp_api_dead_cursor(hr_httpd_query(req, "cursor"), shards, &shard, &cursor, &skip)) {
        hr_httpd_error(resp, 400, "bad_query", "cursor must be one a previous page returned");
        goto done;
    }
    hr_key_shard(hr_redis_prefix(ac->r), key, sizeof key, id, shard, HR_KEY_FAILED);
    o = cJSON_CreateObject();
    arr = cJSON_AddArrayToObject(o, "dead_letters");
    /* Steps until the page is full or the scan ends; a step's entries past
     * the page stay for the next one (same cursor, more to skip). */
    do {
        redisReply *reply =
            hr_redis_cmdf(ac->r, err, sizeof err, "HSCAN %s %llu COUNT %ld", key, cursor, limit);
        unsigned long long after;
        long entries;

        if (reply == NULL) {
            dsp_api_backend_error(resp, "redis", err);
            goto done;
        }
        after = strtoull(reply->element[0]->str, NULL, 10);
        entries = (long)reply->element[1]->elements / 2;
        for (i = skip; i < entries && served < limit; i++, served++) {
            cJSON *dl = cJSON_CreateObject();
            const redisReply *k = reply->element[1]->element[2 * i],
                             *v = reply->element[1]->element[2 * i + 1];

            cJSON_AddItemToArray(arr, dl);
            if (hr_parse_uid(k->str, k->len, &uid) == 0)
                dsp_api_add_id(dl, "uid", uid);
            else
                cJSON_AddStringToObject(dl, "uid", k->str);
            cJSON_AddStringToObject(dl, "reason", v->str);
        }
        freeReplyObject(reply);
        if (shards > 1)
            snprintf(at, sizeof at, "%d/", shard);
        if (i < entries) { /* the page filled inside this step */
            snprintf(next, sizeof next, "%s%llu:%ld", at, cursor, i);
            break;
        }
        cursor = after;
        skip = 0;
        if (cursor == 0) {
            /* This shard's hash is done: the next shard's, if any. */
            if (++shard >= shards)
                break;
            hr_key_shard(hr_redis_prefix(ac->r), key, sizeof key, id, shard, HR_KEY_FAILED);
            snprintf(at, sizeof at, "%d/", shard);
        }
        if (served == limit) {
            snprintf(next, sizeof next, "%s%llu:0", at, cursor);
            break;
        }
    } while (++rounds < 100000);
    if (next[0] != '\0')
        cJSON_AddStringToObject(o, "cursor", next);
    else
        cJSON_AddNullToObject(o, "cursor");
    dsp_api_reply(resp, 200, o);
    o = NULL;
done:
    cJSON_Delete(o);
    hr_task_free(t);
}

/* ---- redrive, recover --------------------------------------------------------- */

void dsp_api_ops_redrive(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_audit_who who;
    hr_task *t = NULL;
    hr_redrive_result res;
    int64_t id;
    char err[1024];
    cJSON *o;

    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_load_task(ac, id, resp, &t))
        return;
    switch (hr_redrive(ac->m, ac->r, t, d->cfg->dispatcher.redelivery_timeout_s, &res, err,
                       sizeof err)) {
    case 1:
        hr_httpd_error(resp, 409, "wrong_state", "%s", err);
        break;
    case 0:
        hr_log_info("api_task_redriven", "task=%" PRId64 " recipients=%" PRId64 " chunks=%" PRId64,
                    id, res.moved, res.chunks);
        o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "redriven", (double)res.moved);
        cJSON_AddNumberToObject(o, "chunks", (double)res.chunks);
        /* Redis moves and several statements: the row comes after them.
         * The redrive is done, so a row that fails is logged, not
         * answered (a client's retry would redrive nothing). */
        dsp_api_who(req, &who);
        if (hr_audit_write(
                ac->m, &(hr_audit){.who = &who, .action = ac->action, .task_id = id, .after = o},
                err, sizeof err) != 0)
            hr_log_error("audit_write_failed", "action=%s task=%" PRId64 " error=%s", ac->action,
                         id, err);
        dsp_api_add_id(o, "task_id", id);
        dsp_api_reply(resp, 200, o);
        break;
    default:
        dsp_api_backend_error(resp, "redis or mysql", err);
    }
    hr_task_free(t);
}

void dsp_api_ops_recover(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_audit_who who;
    hr_task *t = NULL;
    int64_t id, job;
    char err[1024], target[40];
    cJSON *o = NULL;

    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_load_task(ac, id, resp, &t))
        return;
    /* What needs no wait is answered now; the rest runs as a job. */
    switch (hr_recover_check(ac->m, t, hr_clock_now_ms(),
                             d->cfg->dispatcher.delivery_retention_days, err, sizeof err)) {
    case 0:
        break;
    case HR_RECOVER_BUSY:
        hr_httpd_error(resp, 409, "busy", "%s", err);
        goto done;
    case HR_RECOVER_REFUSED:
        hr_httpd_error(resp, 409, "wrong_state", "%s", err);
        goto done;
    default:
        dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    dsp_api_who(req, &who);
    if (dsp_api_job_recover(dsp_api_runner(d), ac->r, id, &who, &job, err, sizeof err) != 0) {
        dsp_api_backend_error(resp, "redis or the job queue", err);
        goto done;
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "job", job);
    snprintf(target, sizeof target, "job %" PRId64, job);
    /* The request is audited now (the job writes its end): a queued job
     * whose row fails is still run, and the failure answered and logged. */
    if (!dsp_api_audit(ac, req, id, target, NULL, o, resp))
        goto done;
    dsp_api_add_id(o, "task_id", id);
    cJSON_AddStringToObject(o, "state", "queued");
    snprintf(target, sizeof target, "/v1/jobs/%" PRId64, job);
    cJSON_AddStringToObject(o, "status_url", target);
    hr_httpd_resp_header(resp, "Location", target);
    dsp_api_reply(resp, 202, o);
    o = NULL;
done:
    cJSON_Delete(o);
    hr_task_free(t);
}

/* ---- subscriber counts --------------------------------------------------------- */

void dsp_api_ops_subs_count(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_task *t = NULL;
    int64_t id, rows, left;
    char err[512];
    int shards;
    cJSON *o;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_load_task(ac, id, resp, &t))
        return;
    shards = (int)t->shards;
    hr_task_free(t);
    if ((rows = dsp_api_subscriptions(ac, id)) < 0) {
        dsp_api_backend_error(resp, "mysql", "COUNT(push_subscription) failed");
        return;
    }
    if (hr_shard_sum(ac->r, id, shards, "SCARD", HR_KEY_SUBS, &left, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "redis", err);
        return;
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "task_id", id);
    cJSON_AddNumberToObject(o, "mysql", (double)rows);
    cJSON_AddNumberToObject(o, "redis_pending", (double)left);
    dsp_api_reply(resp, 200, o);
}

/* ---- dry-run render ------------------------------------------------------------- */

/* Answers the rendering of T (with its variants VS, NULL: none) for UID:
 * the content the uid's locale picks. */
static void dsp_api_render_reply(dsp *d, dsp_api_conn *ac, const hr_task *t,
                                 const hr_variant_set *vs, int64_t uid, hr_httpd_resp *resp)
{
    redisReply *user;
    char uid_s[24], err[512];
    cJSON *o;

    snprintf(uid_s, sizeof uid_s, "%" PRId64, uid);
    if ((user = dsp_api_subs_user(ac, d->cfg, uid_s, err, sizeof err)) == NULL) {
        dsp_api_backend_error(resp, "redis", err);
        return;
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "uid", uid);
    dsp_api_subs_rendering(o, t, vs, uid_s, user);
    freeReplyObject(user);
    dsp_api_reply(resp, 200, o);
}

void dsp_api_ops_render_new(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = dsp_api_body(req, resp), *uid_j = NULL, *vj = NULL;
    dsp_api_input in = {0};
    hr_variant_set vs = {0};
    const char *scope;
    char err[1024];
    int64_t uid;
    int rc;

    if (j == NULL)
        return;
    vj = cJSON_DetachItemFromObjectCaseSensitive(j, "variants");
    /* uid is the render's own member; the rest is a task body. */
    uid_j = cJSON_DetachItemFromObjectCaseSensitive(j, "uid");
    if (uid_j == NULL || hr_parse_json_uid(uid_j, &uid) < 0) {
        hr_httpd_error(resp, 400, uid_j == NULL ? "missing_field" : "bad_field",
                       "uid must be a positive integer (the recipient to render for)");
        goto done;
    }
    if (!dsp_api_task_input(d, j, &in, &scope, resp))
        goto done;
    /* The variants a create would take, checked alike. */
    rc = vj != NULL ? hr_variant_from_json(vj, &vs, err, sizeof err) : 0;
    if (rc == 0)
        rc = hr_variant_check(&vs, &in.t, d->cfg, err, sizeof err);
    if (rc != 0) {
        hr_httpd_error(resp, rc == -1 ? 503 : 400, rc == -1 ? "unavailable" : "invalid_variant",
                       "%s", err);
        goto done;
    }
    in.t.id = 0; /* not stored: task.id renders as 0 */
    dsp_api_render_reply(d, ac, &in.t, &vs, uid, resp);
done:
    hr_variant_set_clear(&vs);
    dsp_api_input_clear(&in);
    cJSON_Delete(uid_j);
    cJSON_Delete(vj);
    cJSON_Delete(j);
}

void dsp_api_ops_render_task(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    hr_variant_set vs = {0};
    hr_task *t = NULL;
    const char *code;
    char err[256];
    int64_t id, uid;

    if (!dsp_api_id(req, "id", resp, &id))
        return;
    if (dsp_api_parse_id(hr_httpd_query(req, "uid"), "uid", &uid, &code, err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, "bad_query", "%s", err);
        return;
    }
    if (!dsp_api_load_task(ac, id, resp, &t))
        return;
    if (hr_variant_load(ac->m, id, &vs, err, sizeof err) != 0)
        dsp_api_backend_error(resp, "mysql", err);
    else
        dsp_api_render_reply(d, ac, t, &vs, uid, resp);
    hr_variant_set_clear(&vs);
    hr_task_free(t);
}
