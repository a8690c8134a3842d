/* dsp_api_subs: the API's subscriber and pull endpoints (see dsp_api.c for
 * the server and the rules every handler follows).
 *
 * - POST /v1/tasks/{id}/subscribers {"uids":[...], "lead_s": N}: at most
 *   api.max_ids positive integers, all checked before anything is written,
 *   with an optional lead before the task's event_at (docs/scheduling.md
 *   "Lead times": 400 without event_at or when the wave would come before
 *   due_at); then one
 *   multi-row INSERT IGNORE into push_subscription and one refill_add.lua
 *   call per shard (SADD minus pulled, refused once chunking started), so a repeat
 *   changes nothing.  Only while the task is `scheduled`: a claim that
 *   raced the request makes the guard trigger refuse the INSERT (409
 *   wrong_state, nothing stored); rows that committed before the claim are
 *   read by the owner's reconciliation, whatever refill_add answers.
 * - DELETE /v1/tasks/{id}/subscribers/{uid}: the MySQL row and the set
 *   member, also only while `scheduled`.
 * - GET /v1/users/{uid}/reminders?date=YYYY-MM-DD[&ack=1]: the unfinished,
 *   frozen, unexpired tasks due that day (in the zone of the uid's `tz`
 *   attribute, else UTC) the uid is subscribed to, title and body
 *   rendered (uid, task.*, payload.*, user.* from P user:<uid>) from the
 *   variant the uid's profile locale picks, as a push's (hr_variant_pick;
 *   an acked pull counted for it in push_task_variant_count); a series'
 *   subscriber's occurrences too (HR_SUBS_SERIES_RECIPIENT).  ack=1
 *   moves the uid from subs to pulled (pull_ack.lua, on the uid's shard; one
 *   the set does not hold yet, a series' subscriber since the set's last
 *   fill before the claim, goes to pulled while chunking has not started) and,
 *   when it moved, writes a `pulled` push_delivery row (in the task's day,
 *   hr_dlog.h: a pulled task is frozen, so due_at no longer moves) and pulled + 1 (the
 *   shard row's, and push_task's sum, for a task of several shards).  A caller
 *   with a client token (req->auth_id, set by dsp_api_auth) is limited to
 *   dispatcher.api.pull_per_minute pulls a minute (hr_ratelimit). */
#include "dsp_api_subs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_api_parse.h"
#include "dsp_engage.h"
#include "dsp_pace.h"
#include "dsp_store.h"
#include "hr_batch.h"
#include "hr_civil.h"
#include "hr_clock.h"
#include "hr_consent.h"
#include "hr_dlog.h"
#include "hr_event.h"
#include "hr_finish.h"
#include "hr_httpd_req.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_ratelimit.h"
#include "hr_shard.h"
#include "hr_state.h"
#include "hr_subs.h"
#include "hr_template.h"
#include "hr_tz.h"
#include "hr_user.h"

#define DSP_API_RENDER_MAX ((size_t)1 << 20)

/* The task of a subscriber change, which must be scheduled; *SHARDS gets
 * its shard count.  LEAD_S (>= 0) is the added subscriptions' lead: the
 * task must have event_at, and the lead's wave must not come before
 * due_at (the claim; raw SQL's such rows are sent at it).  false after
 * answering 400/404/409/503. */
static bool dsp_api_sub_task(dsp_api_conn *ac, int64_t id, int64_t lead_s, hr_httpd_resp *resp,
                             int *shards)
{
    hr_task *t = NULL;
    char err[256];
    bool ok;

    if (!dsp_api_load_task(ac, id, resp, &t))
        return false;
    *shards = (int)t->shards;
    ok = t->state == HR_STATE_SCHEDULED;
    if (!ok)
        hr_httpd_error(resp, 409, "wrong_state",
                       "task %" PRId64 " is %s; subscribers change only while it is scheduled", id,
                       hr_state_name(t->state));
    else if (lead_s >= 0 && hr_task_lead_check(t, lead_s, err, sizeof err) < 0) {
        ok = false;
        hr_httpd_error(resp, 400, "bad_field", "%s", err);
    }
    hr_task_free(t);
    return ok;
}

/* Admission control again with the task's new size (docs/scheduling.md):
 * a warning is for the admin to read (GET), not a reason to fail the add. */
static void dsp_api_subs_readmit(dsp *d, dsp_api_conn *ac, int64_t id)
{
    hr_task *t = NULL;
    char err[512];
    int rc = hr_task_load(ac->m, id, &t, err, sizeof err);

    if (rc < 0 || (rc == 0 && dsp_pace_admit(d, ac->m, ac->r, NULL, t, hr_clock_now_ms(), err,
                                             sizeof err) < 0))
        hr_log_warn("admission_failed", "task=%" PRId64 " error=%s", id, err);
    hr_task_free(t);
}

void dsp_api_subs_add(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    cJSON *j = NULL, *o, *after = NULL;
    int64_t *uids = NULL, *rows = NULL, added, lead_s;
    char **ids = NULL, err[1024];
    const char *code;
    size_t n = 0, i;
    int64_t id;
    uint64_t inserted = 0;
    unsigned errnum = 0;
    int shards = 1;

    if (!dsp_api_id(req, "id", resp, &id) || (j = dsp_api_body(req, resp)) == NULL)
        goto done;
    if (dsp_api_parse_uids(j, d->cfg->dispatcher.api.max_ids, &uids, &n, &lead_s, &code, err,
                           sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        goto done;
    }
    if (!dsp_api_sub_task(ac, id, lead_s, resp, &shards))
        goto done;

    ids = calloc(n, sizeof *ids);
    rows = malloc(3 * n * sizeof *rows);
    if (ids == NULL || rows == NULL)
        goto oom;
    for (i = 0; i < n; i++) {
        if ((ids[i] = malloc(24)) == NULL)
            goto oom;
        snprintf(ids[i], 24, "%" PRId64, uids[i]);
        rows[3 * i] = id;
        rows[3 * i + 1] = uids[i];
        rows[3 * i + 2] = lead_s;
    }
    if (!dsp_api_begin(ac, resp))
        goto done;
    /* The uids as one JSON_TABLE parameter: one statement whatever their
     * number (a VALUES list of 2 placeholders a row passed MariaDB's
     * 65,535 past 32,767 uids and failed for ever), atomic as before.
     * The lead rides in each row (-1: none); a uid already subscribed keeps
     * its own (INSERT IGNORE). */
    if (hr_batch_exec(ac->m,
                      "INSERT IGNORE INTO push_subscription (task_id, uid, lead_s) "
                      "SELECT j.task_id, j.uid, NULLIF(j.lead_s, -1) FROM JSON_TABLE(?, '$[*]' "
                      "COLUMNS (task_id BIGINT UNSIGNED PATH '$[0]', uid BIGINT UNSIGNED PATH "
                      "'$[1]', lead_s INT PATH '$[2]')) j",
                      &(hr_batch){rows, n, 3}, NULL, 0, &inserted, &errnum, err, sizeof err) < 0) {
        hr_mysql_rollback(ac->m);
        /* The guard trigger: the task was claimed after our state check.
         * The statement is atomic, so none of the uids was stored. */
        if (errnum == HR_MYSQL_ER_SIGNAL)
            hr_httpd_error(resp, 409, "wrong_state", "%s; none of the %zu uids was stored", err, n);
        else
            dsp_api_backend_error(resp, "mysql", err);
        goto done;
    }
    /* The audit row names the counts, not the uids (up to max_ids). */
    after = cJSON_CreateObject();
    cJSON_AddNumberToObject(after, "received", (double)n);
    cJSON_AddNumberToObject(after, "added", (double)inserted);
    if (lead_s >= 0)
        cJSON_AddNumberToObject(after, "lead_s", (double)lead_s);
    if (!dsp_api_audit(ac, req, id, NULL, NULL, after, resp)) {
        hr_mysql_rollback(ac->m);
        goto done;
    }
    if (!dsp_api_commit(ac, resp))
        goto done;
    /* Redis after the commit: a set never holds a uid MySQL does not. */
    if (hr_subs_add_sharded(ac->r, id, shards, (const char **)ids, n, &added, err, sizeof err) <
        0) {
        /* MySQL has them: the scanner's refill adds them before due. */
        hr_log_warn("api_subs_redis_failed", "task=%" PRId64 " uids=%zu error=%s", id, n, err);
    }
    /* A refusal (seq exists) is no loss: the rows committed before the
     * claim (the trigger refuses them after it), so the owner's
     * reconciliation, which runs after the claim and creates seq, read
     * them from MySQL. */
    if (inserted > 0)
        dsp_api_subs_readmit(d, ac, id);
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "task_id", id);
    cJSON_AddNumberToObject(o, "received", (double)n);
    cJSON_AddNumberToObject(o, "added", (double)inserted);
    if (lead_s >= 0)
        cJSON_AddNumberToObject(o, "lead_s", (double)lead_s);
    dsp_api_reply(resp, 200, o);
    goto done;
oom:
    hr_httpd_error(resp, 500, "internal", "out of memory");
done:
    for (i = 0; ids != NULL && i < n; i++)
        free(ids[i]);
    free(ids);
    free(uids);
    free(rows);
    cJSON_Delete(after);
    cJSON_Delete(j);
}

void dsp_api_subs_del(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    int64_t id, uid;
    uint64_t deleted = 0;
    char err[512], key[256], uid_s[24], target[40];
    redisReply *reply;
    cJSON *o, *before = NULL;
    int shards = 1;

    (void)d;
    if (!dsp_api_id(req, "id", resp, &id) || !dsp_api_id(req, "uid", resp, &uid) ||
        !dsp_api_sub_task(ac, id, -1, resp, &shards) || !dsp_api_begin(ac, resp))
        return;
    {
        const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(uid)};

        if (hr_mysql_exec(ac->m, "DELETE FROM push_subscription WHERE task_id = ? AND uid = ?", p,
                          2, &deleted, NULL, NULL, err, sizeof err) < 0) {
            hr_mysql_rollback(ac->m);
            dsp_api_backend_error(resp, "mysql", err);
            return;
        }
    }
    snprintf(target, sizeof target, "uid %" PRId64, uid);
    before = cJSON_CreateObject();
    cJSON_AddBoolToObject(before, "subscribed", deleted > 0);
    o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "subscribed", false);
    if (!dsp_api_audit(ac, req, id, target, before, o, resp) || !dsp_api_commit(ac, resp)) {
        hr_mysql_rollback(ac->m);
        cJSON_Delete(before);
        cJSON_Delete(o);
        return;
    }
    cJSON_Delete(before);
    cJSON_Delete(o);
    snprintf(uid_s, sizeof uid_s, "%" PRId64, uid);
    hr_key_shard(hr_redis_prefix(ac->r), key, sizeof key, id, hr_shard_of_str(uid_s, shards),
                 HR_KEY_SUBS);
    reply = hr_redis_cmdf(ac->r, err, sizeof err, "SREM %s %s", key, uid_s);
    if (reply == NULL) {
        dsp_api_backend_error(resp, "redis", err);
        return;
    }
    freeReplyObject(reply);
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "task_id", id);
    dsp_api_add_id(o, "uid", uid);
    cJSON_AddNumberToObject(o, "deleted", (double)deleted);
    dsp_api_reply(resp, 200, o);
}

/* ---- the pull ------------------------------------------------------------- */

/* What a rendering looks values up in. */
typedef struct dsp_api_vars {
    const char *uid;
    const hr_task *t;
    const cJSON *payload;
    const redisReply *user; /* HGETALL reply or NULL */
    char id[24];
    char scratch[64];
} dsp_api_vars;

static const char *dsp_api_lookup(void *ctx, hr_tvar_kind kind, const char *name, size_t *len)
{
    dsp_api_vars *v = ctx;
    const cJSON *f;
    const char *s = NULL;
    size_t i;

    switch (kind) {
    case HR_TVAR_UID:
        s = v->uid;
        break;
    case HR_TVAR_TITLE:
        s = v->t->title;
        break;
    case HR_TVAR_BODY:
        s = v->t->body;
        break;
    case HR_TVAR_TASK:
        if (strcmp(name, "id") == 0)
            s = v->id;
        else if (strcmp(name, "name") == 0)
            s = v->t->name;
        else if (strcmp(name, "topic") == 0)
            s = v->t->topic;
        break;
    case HR_TVAR_PAYLOAD:
        f = v->payload != NULL ? cJSON_GetObjectItemCaseSensitive(v->payload, name) : NULL;
        if (cJSON_IsString(f)) {
            s = f->valuestring;
        } else if (cJSON_IsNumber(f) || cJSON_IsBool(f)) {
            if (cJSON_IsBool(f))
                snprintf(v->scratch, sizeof v->scratch, "%s", cJSON_IsTrue(f) ? "true" : "false");
            else
                snprintf(v->scratch, sizeof v->scratch, "%.17g", f->valuedouble);
            s = v->scratch;
        }
        break;
    case HR_TVAR_USER:
        for (i = 0; v->user != NULL && i + 1 < v->user->elements; i += 2)
            if (strcmp(v->user->element[i]->str, name) == 0)
                s = v->user->element[i + 1]->str;
        break;
    }
    if (s != NULL)
        *len = strlen(s);
    return s;
}

/* Renders template SRC of task T for the uid into a new JSON string, or
 * NULL when it does not compile (validated tasks always do). */
static cJSON *dsp_api_render(const char *src, dsp_api_vars *vars)
{
    hr_template *tpl = NULL;
    hr_buf out;
    cJSON *s = NULL;
    char err[256];

    hr_buf_init(&out, DSP_API_RENDER_MAX);
    if (hr_template_compile(src, strlen(src), false, &tpl, err, sizeof err) == 0 &&
        hr_template_render(tpl, dsp_api_lookup, vars, &out, NULL) == 0 &&
        hr_buf_append(&out, "", 1) == 0)
        s = cJSON_CreateString(out.data);
    hr_template_free(tpl);
    hr_buf_free(&out);
    return s != NULL ? s : cJSON_CreateNull();
}

static const char *dsp_api_attr(const redisReply *user, const char *name);

const char *dsp_api_subs_rendering(cJSON *o, const hr_task *t, const hr_variant_set *vs,
                                   const char *uid_s, const redisReply *user)
{
    dsp_api_vars vars = {.uid = uid_s, .t = t, .user = user};
    const char *title = t->title, *body = t->body, *payload = t->payload, *key = NULL;
    int v = -1;

    if (vs != NULL && vs->n > 0) {
        v = hr_variant_ab_pick(vs, t, strtoull(uid_s, NULL, 10),
                               user != NULL ? dsp_api_attr(user, HR_USER_F_LOCALE) : NULL);
        if (v == HR_VARIANT_HELD) {
            /* Outside a winner step's sample: its content is the winner's,
             * not picked yet (a pull of it counts for no variant). */
            cJSON_AddNullToObject(o, "variant");
            cJSON_AddTrueToObject(o, "held");
            cJSON_AddNullToObject(o, "title");
            cJSON_AddNullToObject(o, "body");
            cJSON_AddNullToObject(o, "payload");
            return NULL;
        }
        if (v >= 0) {
            title = vs->v[v].title != NULL ? vs->v[v].title : title;
            body = vs->v[v].body != NULL ? vs->v[v].body : body;
            payload = vs->v[v].payload != NULL ? vs->v[v].payload : payload;
        }
        key = v >= 0 ? vs->v[v].key : HR_VARIANT_DEFAULT;
        cJSON_AddStringToObject(o, "variant", key);
    }
    snprintf(vars.id, sizeof vars.id, "%" PRId64, t->id);
    vars.payload = payload != NULL ? cJSON_Parse(payload) : NULL;
    cJSON_AddItemToObject(o, "title", dsp_api_render(title, &vars));
    cJSON_AddItemToObject(o, "body", dsp_api_render(body, &vars));
    cJSON_AddItemToObject(o, "payload",
                          vars.payload != NULL ? (cJSON *)vars.payload : cJSON_CreateNull());
    return key;
}

redisReply *dsp_api_subs_user(dsp_api_conn *ac, const hr_config *cfg, const char *uid_s,
                              char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], mark[HR_KEY_MAX];
    const char *get[] = {"HGETALL", hr_key_user(hr_redis_prefix(ac->r), key, sizeof key, uid_s)};
    const char *has[] = {"EXISTS", hr_key_user_synced(hr_redis_prefix(ac->r), mark, sizeof mark)};
    hr_pipe *pipe = hr_pipe_new(ac->r);
    redisReply *user = NULL, *synced = NULL;
    int64_t uid = strtoll(uid_s, NULL, 10);

    if (pipe == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return NULL;
    }
    if (hr_pipe_cmd(pipe, 2, get, NULL) < 0 || hr_pipe_cmd(pipe, 2, has, NULL) < 0 ||
        hr_pipe_exec(pipe, errstr, errlen) < 0 ||
        (user = hr_pipe_reply(pipe, 0, errstr, errlen)) == NULL ||
        (synced = hr_pipe_reply(pipe, 1, errstr, errlen)) == NULL)
        goto done;
    /* No hash and no synced mark: Redis may have lost the profile (the
     * book's sync reloads it soon); read it from MySQL now rather than
     * answer without its zone and opt-outs. */
    if (user->type == REDIS_REPLY_ARRAY && user->elements == 0 &&
        synced->type == REDIS_REPLY_INTEGER && synced->integer == 0) {
        freeReplyObject(user);
        user = NULL;
        if (hr_user_rewrite(ac->m, ac->r, &uid, 1, cfg, NULL, errstr, errlen) == 0)
            user = hr_redis_cmdf(ac->r, errstr, errlen, "HGETALL %s", key);
    }
done:
    freeReplyObject(synced);
    hr_pipe_free(pipe);
    return user;
}

/* Moves UID of task T from subs (or the wait set) to pulled, in the uid's
 * shard; true when it moved (then its event and its minute of the series
 * follow: dsp_engage_pulled), counted for variant VARIANT (NULL: T has no
 * variants) as the workers count a push's (push_task_variant_count). */
static int dsp_api_ack(dsp *d, dsp_api_conn *ac, const hr_task *t, int64_t uid, const char *uid_s,
                       const char *variant, char *errstr, size_t errlen)
{
    char keys[5][256];
    const char *argv[6] = {keys[0], keys[1], keys[2], keys[3], keys[4], uid_s};
    const hr_mysql_param p[] = {HR_P_I64(t->id), HR_P_I64(uid), HR_P_I64(hr_dlog_day(t->due_ms))};
    int shard = hr_shard_of_str(uid_s, (int)t->shards);
    int64_t id = t->id;
    redisReply *reply;
    int moved;

    hr_key_shard(hr_redis_prefix(ac->r), keys[0], sizeof keys[0], id, shard, HR_KEY_SUBS);
    hr_key_shard(hr_redis_prefix(ac->r), keys[1], sizeof keys[1], id, shard, HR_KEY_PULLED);
    hr_key_shard(hr_redis_prefix(ac->r), keys[2], sizeof keys[2], id, shard, HR_KEY_STATS);
    hr_key_shard(hr_redis_prefix(ac->r), keys[3], sizeof keys[3], id, shard, HR_KEY_WAIT);
    hr_key_shard(hr_redis_prefix(ac->r), keys[4], sizeof keys[4], id, shard, HR_KEY_SEQ);
    reply = hr_redis_eval(ac->r, HR_LUA_PULL_ACK, 5, 6, argv, NULL, errstr, errlen);
    if (reply == NULL)
        return -1;
    moved = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    if (!moved)
        return 0;
    if (hr_mysql_exec(ac->m,
                      "INSERT INTO push_delivery (task_id, uid, status, at, day) "
                      "VALUES (?, ?, 'pulled', UTC_TIMESTAMP(3), ?) "
                      "ON DUPLICATE KEY UPDATE status = 'pulled', at = VALUES(at)",
                      p, 3, NULL, NULL, NULL, errstr, errlen) < 0 ||
        hr_finish_add(ac->m, id, hr_shard_row((int)t->shards, shard), HR_OUTCOME_PULLED, 1, errstr,
                      errlen) < 0 ||
        (variant != NULL &&
         hr_variant_count_add(ac->m,
                              &(hr_variant_count){.task = id,
                                                  .key = variant,
                                                  .outcome = hr_event_type_name(HR_EVENT_PULLED),
                                                  .n = 1},
                              1, errstr, errlen) < 0)) {
        hr_log_error("pull_count_lost", "task=%" PRId64 " uid=%" PRId64 " error=%s", id, uid,
                     errstr);
        return -1;
    }
    /* The pull is counted: a late event still goes (it stays queued), a
     * lost minute of the series only thins the chart. */
    if (dsp_engage_pulled(d, ac->m, t, (uint64_t)uid, errstr, errlen) < 0)
        hr_log_warn("pull_event_late", "task=%" PRId64 " uid=%" PRId64 " error=%s", id, uid,
                    errstr);
    return 1;
}

/* A client's pull takes one of its uid's pulls of the minute, counted in
 * Redis so every dispatcher shares the budget; false after answering 429
 * (with Retry-After) or 503. */
static bool dsp_api_pull_allowed(dsp *d, dsp_api_conn *ac, int64_t uid, hr_httpd_resp *resp)
{
    char scope[40], err[512], retry[24];
    int64_t granted, wait_ms;

    snprintf(scope, sizeof scope, "pull:%" PRId64, uid);
    if (hr_ratelimit_take_window(ac->r, scope, d->cfg->dispatcher.api.pull_per_minute, 60, 1,
                                 &granted, &wait_ms, err, sizeof err) < 0) {
        dsp_api_backend_error(resp, "redis", err);
        return false;
    }
    if (granted == 1)
        return true;
    snprintf(retry, sizeof retry, "%" PRId64, (wait_ms + 999) / 1000);
    hr_httpd_error(resp, 429, "rate_limited",
                   "more than %d pulls of this uid in a minute; retry in %s s",
                   d->cfg->dispatcher.api.pull_per_minute, retry);
    hr_httpd_resp_header(resp, "Retry-After", retry);
    return false;
}

/* The value of attribute NAME in USER (an HGETALL reply), or NULL. */
static const char *dsp_api_attr(const redisReply *user, const char *name)
{
    size_t i;

    for (i = 0; i + 1 < user->elements; i += 2)
        if (strcmp(user->element[i]->str, name) == 0)
            return user->element[i + 1]->str;
    return NULL;
}

/* The pull's day as UTC instants [*START, *END): DATE_Q (NULL: today;
 * DAY_MS its UTC midnight as dsp_api_parse_pull read it) in the zone of
 * the uid's `tz` attribute when hr_tz knows it, else in UTC; *ZONE names
 * the zone used and DAY_S (11 bytes) the date.  A day of a zone is not
 * always 24 h (a DST change), hence both ends from the zone. */
static void dsp_api_pull_day(const char *date_q, int64_t day_ms, const redisReply *user,
                             int64_t now_ms, int64_t *start, int64_t *end, const char **zone,
                             char *day_s)
{
    const char *tz = dsp_api_attr(user, "tz");
    int64_t days = day_ms / 86400000;
    int32_t off = 0;
    int y, m, d, y2, m2, d2;
    char err[256];

    if (tz != NULL && hr_tz_offset_at(tz, now_ms, &off, err, sizeof err) == 0) {
        if (date_q == NULL) /* today where the user is (instants after 1970) */
            days = (now_ms + (int64_t)off * 1000) / 86400000;
        hr_civil_date(days, &y, &m, &d);
        hr_civil_date(days + 1, &y2, &m2, &d2);
        if (hr_tz_local_to_utc(tz, y, m, d, 0, 0, 0, start, err, sizeof err) == 0 &&
            hr_tz_local_to_utc(tz, y2, m2, d2, 0, 0, 0, end, err, sizeof err) == 0) {
            *zone = tz;
            snprintf(day_s, 11, "%04d-%02d-%02d", y, m, d);
            return;
        }
    }
    /* No zone, or one hr_tz does not know: UTC. */
    *zone = "UTC";
    *start = day_ms;
    *end = day_ms + 86400000;
    hr_civil_date(days, &y, &m, &d);
    snprintf(day_s, 11, "%04d-%02d-%02d", y, m, d);
}

/* Whether the profile USER (an HGETALL reply) opted out of task T's
 * category by T's channel type; a mandatory category never is. */
static bool dsp_api_pull_opted_out(const hr_config *cfg, const hr_task *t, const redisReply *user)
{
    const hr_category *cat = hr_config_category(cfg, hr_task_category(t));
    const hr_channel *ch = hr_config_channel(cfg, t->channel);

    return (cat == NULL || !cat->mandatory) &&
           hr_consent_opted_out(dsp_api_attr(user, HR_USER_F_OPTOUT), hr_task_category(t),
                                ch != NULL ? hr_channel_type_name(ch->type) : "*");
}

void dsp_api_subs_reminders(dsp *d, dsp_api_conn *ac, const hr_httpd_req *req, hr_httpd_resp *resp)
{
    const char *code, *date_q = hr_httpd_query(req, "date"), *zone;
    bool ack;
    hr_task **tasks = NULL;
    hr_variant_set vs = {0}; /* the current task's */
    redisReply *user = NULL;
    size_t n = 0, i;
    int64_t uid, day, start, end, now_ms = hr_clock_now_ms();
    char err[1024], uid_s[24], day_s[16];
    cJSON *o = NULL, *arr;

    if (!dsp_api_id(req, "uid", resp, &uid))
        return;
    /* Clients are limited; an admin token (the platform's backend) is not. */
    if (req->auth_id > 0 && !dsp_api_pull_allowed(d, ac, uid, resp))
        return;
    if (dsp_api_parse_pull(date_q, hr_httpd_query(req, "ack"), now_ms / 1000, &day, &ack, &code,
                           err, sizeof err) < 0) {
        hr_httpd_error(resp, 400, code, "%s", err);
        return;
    }
    /* The attributes give the zone of the day and the templates' user.*. */
    snprintf(uid_s, sizeof uid_s, "%" PRId64, uid);
    user = dsp_api_subs_user(ac, d->cfg, uid_s, err, sizeof err);
    if (user == NULL) {
        dsp_api_backend_error(resp, "redis", err);
        return;
    }
    dsp_api_pull_day(date_q, day, user, now_ms, &start, &end, &zone, day_s);
    {
        const hr_mysql_param p[] = {HR_P_I64(uid), HR_P_I64(uid), HR_P_I64(uid), HR_P_I64(start),
                                    HR_P_I64(end)};

        /* A task's subscribers, and a series' of its occurrences. */
        if (dsp_store_tasks(ac->m, "SELECT " HR_TASK_COLUMNS HR_SUBS_PULL_TASKS_FROM, p, 5, &tasks,
                            &n, err, sizeof err) < 0) {
            dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
    }
    o = cJSON_CreateObject();
    dsp_api_add_id(o, "uid", uid);
    cJSON_AddStringToObject(o, "date", day_s);
    cJSON_AddStringToObject(o, "tz", zone);
    arr = cJSON_AddArrayToObject(o, "reminders");
    for (i = 0; i < n; i++) {
        const hr_task *t = tasks[i];
        const char *variant;
        cJSON *r;
        char due[40];
        int moved = 0;

        /* The user's opt-outs hold for the pull as for a push
         * (docs/recipients.md): a category it left, by any channel or by
         * the task's channel type, is not returned. */
        if (dsp_api_pull_opted_out(d->cfg, t, user))
            continue;
        if (hr_variant_load(ac->m, t->id, &vs, err, sizeof err) != 0) {
            dsp_api_backend_error(resp, "mysql", err);
            goto done;
        }
        /* A uid an A/B winner step holds until its pick gets the winner's
         * content by push once it is picked: listing it now would show an
         * empty reminder, and acknowledging it would pull it for no arm. */
        if (vs.n > 0 && hr_variant_ab_pick(&vs, t, (uint64_t)uid,
                                           dsp_api_attr(user, HR_USER_F_LOCALE)) == HR_VARIANT_HELD)
            continue;
        r = cJSON_CreateObject();
        cJSON_AddItemToArray(arr, r);
        dsp_api_add_id(r, "task_id", t->id);
        cJSON_AddStringToObject(r, "name", t->name);
        cJSON_AddStringToObject(r, "topic", t->topic);
        cJSON_AddStringToObject(r, "channel", t->channel);
        dsp_api_time(t->due_ms, due, sizeof due);
        cJSON_AddStringToObject(r, "due_at", due);
        /* The content of the uid's locale, as a push would carry it. */
        variant = dsp_api_subs_rendering(r, t, &vs, uid_s, user);
        if (ack && (moved = dsp_api_ack(d, ac, t, uid, uid_s, variant, err, sizeof err)) < 0) {
            dsp_api_backend_error(resp, "redis", err);
            goto done;
        }
        if (ack)
            cJSON_AddBoolToObject(r, "acked", moved == 1);
    }
    dsp_api_reply(resp, 200, o);
    o = NULL;
done:
    hr_variant_set_clear(&vs);
    cJSON_Delete(o);
    freeReplyObject(user);
    dsp_store_tasks_free(tasks, n);
}
