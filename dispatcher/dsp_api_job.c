/* dsp_api_job: the API's jobs (see dsp_api_job.h).  The runner is a queue
 * (a ring of DSP_API_JOB_QUEUE items under mu, signalled by cv) and one
 * thread that takes items in order and runs them with the runner's own
 * MySQL and Redis connections, made on first use.  The thread alone
 * touches those connections; the queue is shared with the API's request
 * threads. */
#include "dsp_api_job.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_clock.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_mysql.h"
#include "hr_parse.h"
#include "hr_recover.h"
#include "hr_task.h"

/* One queued job. */
typedef struct dsp_api_job_item {
    int64_t id, task_id;
    hr_audit_who who;
} dsp_api_job_item;

struct dsp_api_job_runner {
    dsp *d;
    pthread_t thread;
    bool started;
    pthread_mutex_t mu; /* the queue and stopping */
    pthread_cond_t cv;
    dsp_api_job_item queue[DSP_API_JOB_QUEUE];
    size_t head, n;
    bool stopping;
    atomic_bool stop; /* read by hr_recover's waits */
    hr_mysql *m;      /* the thread's */
    hr_redis *r;
};

/* ---- the record ------------------------------------------------------------- */

/* Writes the NKV field/value pairs KV into job ID's record on R (its
 * retention renewed).  0, or -1 with ERRSTR. */
static int dsp_api_job_set(hr_redis *r, int64_t id, const char *const *kv, size_t nkv, char *errstr,
                           size_t errlen)
{
    const char *argv[3 + 2 * 12];
    char key[HR_KEY_MAX], keep[24];
    redisReply *reply;

    if (nkv > 12)
        return -1;
    argv[0] = hr_key_job(hr_redis_prefix(r), key, sizeof key, id);
    snprintf(keep, sizeof keep, "%" PRId64, DSP_API_JOB_KEEP_MS);
    argv[1] = keep;
    memcpy(argv + 2, kv, 2 * nkv * sizeof *kv);
    reply = hr_redis_eval(r, HR_LUA_JOB_SET, 1, (int)(2 + 2 * nkv), argv, NULL, errstr, errlen);
    if (reply == NULL)
        return -1;
    freeReplyObject(reply);
    return 0;
}

/* Job ID's end: STATE, and RESULT (JSON) or ERROR, on the thread's
 * connection; a failure to write is logged (the job has ended anyway). */
static void dsp_api_job_end(dsp_api_job_runner *runner, int64_t id, const char *state,
                            const cJSON *result, const char *error)
{
    char now[24], err[256], *text = result != NULL ? cJSON_PrintUnformatted(result) : NULL;
    const char *kv[] = {"state",
                        state,
                        "phase",
                        "ended",
                        "finished_ms",
                        now,
                        text != NULL ? "result" : "error",
                        text != NULL ? text : (error != NULL ? error : "")};

    snprintf(now, sizeof now, "%" PRId64, hr_clock_now_ms());
    if (runner->r == NULL || dsp_api_job_set(runner->r, id, kv, 4, err, sizeof err) != 0)
        hr_log_warn("api_job_record_lost", "job=%" PRId64 " state=%s error=%s", id, state,
                    runner->r == NULL ? "no redis connection" : err);
    free(text);
}

/* ---- running a recover ------------------------------------------------------------ */

typedef struct dsp_api_job_wait {
    dsp_api_job_runner *runner;
    int64_t id;
} dsp_api_job_wait;

/* hr_recover's `waiting`: the phase says what it waits for, and how long. */
static void dsp_api_job_waiting(void *ctx, int64_t task, int renewal_ms, int quiet_ms)
{
    const dsp_api_job_wait *w = ctx;
    char phase[200], err[256];
    const char *kv[] = {"phase", phase};

    snprintf(phase, sizeof phase,
             "waiting for the workers' last reports of task %" PRId64 ": one lease renewal (%d "
             "ms), then until the delivery log stands still for %d ms (at most %d s)",
             task, renewal_ms, quiet_ms, HR_RECOVER_QUIET_MAX_MS / 1000);
    if (dsp_api_job_set(w->runner->r, w->id, kv, 1, err, sizeof err) != 0)
        hr_log_warn("api_job_record_lost", "job=%" PRId64 " error=%s", w->id, err);
}

/* The audit row of a job's end (its own statement: the change it made is
 * Redis's and several of MySQL's). */
static void dsp_api_job_audit(dsp_api_job_runner *runner, const dsp_api_job_item *item,
                              const char *state, const cJSON *result, const char *error)
{
    char target[40], err[512];
    cJSON *after = cJSON_CreateObject();

    snprintf(target, sizeof target, "job %" PRId64, item->id);
    cJSON_AddStringToObject(after, "state", state);
    if (result != NULL)
        cJSON_AddItemToObject(after, "result", cJSON_Duplicate(result, true));
    else
        cJSON_AddStringToObject(after, "error", error);
    if (runner->m == NULL || hr_audit_write(runner->m,
                                            &(hr_audit){.who = &item->who,
                                                        .action = "recover job",
                                                        .task_id = item->task_id,
                                                        .target = target,
                                                        .after = after},
                                            err, sizeof err) != 0)
        hr_log_error("audit_write_failed", "action=recover_job task=%" PRId64 " error=%s",
                     item->task_id, runner->m == NULL ? "no mysql connection" : err);
    cJSON_Delete(after);
}

static cJSON *dsp_api_job_result(const hr_recover_result *res, int64_t task)
{
    cJSON *o = cJSON_CreateObject();
    char id[24];

    snprintf(id, sizeof id, "%" PRId64, task);
    cJSON_AddRawToObject(o, "task_id", id);
    cJSON_AddNumberToObject(o, "subs", (double)res->subs);
    cJSON_AddNumberToObject(o, "undelivered", (double)res->undelivered);
    cJSON_AddNumberToObject(o, "dropped_chunks", (double)res->dropped_chunks);
    cJSON_AddNumberToObject(o, "dropped_leases", (double)res->dropped_leases);
    cJSON_AddNumberToObject(o, "seq", (double)res->seq);
    cJSON_AddStringToObject(o, "state", hr_state_name(res->state));
    cJSON_AddBoolToObject(o, "books_reloaded", res->books_reloaded);
    cJSON_AddNumberToObject(o, "book_uids", (double)res->book_uids);
    return o;
}

static void dsp_api_job_run(dsp_api_job_runner *runner, const dsp_api_job_item *item)
{
    const dsp *d = runner->d;
    char err[1024] = "", token[256], now[24];
    const char *state = "failed";
    const char *kv[] = {"state", "running", "phase", "loading the task", "started_ms", now};
    dsp_api_job_wait w = {runner, item->id};
    hr_recover_opts opts;
    hr_recover_result res;
    hr_task *t = NULL;
    cJSON *result = NULL;
    int rc;

    snprintf(now, sizeof now, "%" PRId64, hr_clock_now_ms());
    if ((runner->r == NULL && hr_redis_connect(d->cfg, &runner->r, err, sizeof err) != 0) ||
        (runner->m == NULL && hr_mysql_connect(d->cfg, &runner->m, err, sizeof err) != 0) ||
        dsp_api_job_set(runner->r, item->id, kv, 3, err, sizeof err) != 0)
        goto end;
    if ((rc = hr_task_load(runner->m, item->task_id, &t, err, sizeof err)) != 0) {
        if (rc == 1)
            snprintf(err, sizeof err, "task %" PRId64 " does not exist", item->task_id);
        goto end;
    }
    snprintf(token, sizeof token, "%s/job%" PRId64, d->owner, item->id);
    opts = (hr_recover_opts){.token = token,
                             .lease_ms = d->cfg->worker.lease_ms,
                             .now_ms = hr_clock_now_ms(),
                             .cfg = d->cfg,
                             .retention_days = d->cfg->dispatcher.delivery_retention_days,
                             .waiting = dsp_api_job_waiting,
                             .ctx = &w,
                             .stop = &runner->stop};
    rc = hr_recover(runner->m, runner->r, t, &opts, &res, err, sizeof err);
    if (rc == 0) {
        state = "done";
        result = dsp_api_job_result(&res, item->task_id);
        hr_log_info("api_task_recovered",
                    "task=%" PRId64 " job=%" PRId64 " subs=%" PRId64 " state=%s", item->task_id,
                    item->id, res.subs, hr_state_name(res.state));
    } else if (rc == HR_RECOVER_REFUSED) {
        state = "refused";
    } else if (rc == HR_RECOVER_BUSY) {
        state = atomic_load(&runner->stop) ? "interrupted" : "busy";
    }
end:
    if (result == NULL)
        hr_log_warn("api_job_ended", "job=%" PRId64 " task=%" PRId64 " state=%s error=%s", item->id,
                    item->task_id, state, err);
    dsp_api_job_end(runner, item->id, state, result, err);
    dsp_api_job_audit(runner, item, state, result, err);
    cJSON_Delete(result);
    hr_task_free(t);
}

static void *dsp_api_job_main(void *arg)
{
    dsp_api_job_runner *runner = arg;
    dsp_api_job_item item;

    for (;;) {
        pthread_mutex_lock(&runner->mu);
        while (!runner->stopping && runner->n == 0)
            pthread_cond_wait(&runner->cv, &runner->mu);
        if (runner->stopping) {
            pthread_mutex_unlock(&runner->mu);
            break;
        }
        item = runner->queue[runner->head];
        runner->head = (runner->head + 1) % DSP_API_JOB_QUEUE;
        runner->n--;
        pthread_mutex_unlock(&runner->mu);
        dsp_api_job_run(runner, &item);
    }
    /* What is still queued will not run here (nothing is queued once
     * stopping is set). */
    pthread_mutex_lock(&runner->mu);
    for (size_t i = 0; i < runner->n; i++)
        dsp_api_job_end(runner, runner->queue[(runner->head + i) % DSP_API_JOB_QUEUE].id,
                        "interrupted", NULL, "the dispatcher stopped before the job ran");
    runner->n = 0;
    pthread_mutex_unlock(&runner->mu);
    return NULL;
}

/* ---- the runner ----------------------------------------------------------------- */

int dsp_api_job_start(dsp *d, dsp_api_job_runner **out, char *errstr, size_t errlen)
{
    dsp_api_job_runner *runner = calloc(1, sizeof *runner);

    *out = NULL;
    if (runner == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    runner->d = d;
    atomic_init(&runner->stop, false);
    pthread_mutex_init(&runner->mu, NULL);
    pthread_cond_init(&runner->cv, NULL);
    if (pthread_create(&runner->thread, NULL, dsp_api_job_main, runner) != 0) {
        snprintf(errstr, errlen, "cannot start the API's job thread");
        dsp_api_job_stop(runner);
        return -1;
    }
    runner->started = true;
    *out = runner;
    return 0;
}

void dsp_api_job_stop(dsp_api_job_runner *runner)
{
    if (runner == NULL)
        return;
    atomic_store(&runner->stop, true);
    pthread_mutex_lock(&runner->mu);
    runner->stopping = true;
    pthread_cond_signal(&runner->cv);
    pthread_mutex_unlock(&runner->mu);
    if (runner->started)
        pthread_join(runner->thread, NULL);
    hr_mysql_free(runner->m);
    hr_redis_free(runner->r);
    pthread_mutex_destroy(&runner->mu);
    pthread_cond_destroy(&runner->cv);
    free(runner);
}

int dsp_api_job_recover(dsp_api_job_runner *runner, hr_redis *r, int64_t task_id,
                        const hr_audit_who *who, int64_t *id, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX], task[24], created[24], deadline[24];
    const int64_t now = hr_clock_now_ms();
    const char *kv[] = {"kind",        "recover",  "task_id",    task,
                        "actor",       who->actor, "state",      "queued",
                        "phase",       "queued",   "created_ms", created,
                        "deadline_ms", deadline,   "owner",      runner->d->owner};
    redisReply *reply;
    bool queued = false;

    *id = 0;
    reply = hr_redis_cmdf(r, errstr, errlen, "INCR %s",
                          hr_key_job_seq(hr_redis_prefix(r), key, sizeof key));
    if (reply == NULL)
        return -1;
    *id = (int64_t)reply->integer;
    freeReplyObject(reply);
    snprintf(task, sizeof task, "%" PRId64, task_id);
    snprintf(created, sizeof created, "%" PRId64, now);
    snprintf(deadline, sizeof deadline, "%" PRId64, now + DSP_API_JOB_DEADLINE_MS);
    if (dsp_api_job_set(r, *id, kv, 8, errstr, errlen) != 0)
        return -1;
    pthread_mutex_lock(&runner->mu);
    if (!runner->stopping && runner->n < DSP_API_JOB_QUEUE) {
        runner->queue[(runner->head + runner->n) % DSP_API_JOB_QUEUE] =
            (dsp_api_job_item){.id = *id, .task_id = task_id, .who = *who};
        runner->n++;
        queued = true;
        pthread_cond_signal(&runner->cv);
    }
    pthread_mutex_unlock(&runner->mu);
    if (!queued) {
        const char *end[] = {"state", "refused", "error", "the job queue is full"};

        dsp_api_job_set(r, *id, end, 2, errstr, errlen);
        snprintf(errstr, errlen, "%d jobs are waiting on this dispatcher; try again later",
                 DSP_API_JOB_QUEUE);
        return -1;
    }
    return 0;
}

/* Field NAME of the HGETALL reply H, or NULL. */
static const char *dsp_api_job_field(const redisReply *h, const char *name)
{
    for (size_t i = 0; i + 1 < h->elements; i += 2)
        if (strcmp(h->element[i]->str, name) == 0)
            return h->element[i + 1]->str;
    return NULL;
}

/* The _ms field NAME of H as a time member NAME_AT of O (null when absent). */
static void dsp_api_job_time(cJSON *o, const redisReply *h, const char *field, const char *name)
{
    const char *ms = dsp_api_job_field(h, field);
    char text[HR_PARSE_TIME_LEN];

    if (ms == NULL) {
        cJSON_AddNullToObject(o, name);
        return;
    }
    hr_parse_time_format(strtoll(ms, NULL, 10), text, sizeof text);
    cJSON_AddStringToObject(o, name, text);
}

int dsp_api_job_get(hr_redis *r, int64_t id, int64_t now_ms, cJSON **out, char *errstr,
                    size_t errlen)
{
    static const char *const strs[] = {"kind", "actor", "phase", "owner", "error"};
    char key[HR_KEY_MAX], idtext[24];
    const char *state, *task, *result, *deadline;
    redisReply *h;
    cJSON *o;

    *out = NULL;
    h = hr_redis_cmdf(r, errstr, errlen, "HGETALL %s",
                      hr_key_job(hr_redis_prefix(r), key, sizeof key, id));
    if (h == NULL)
        return -1;
    if (h->type != REDIS_REPLY_ARRAY || h->elements == 0) {
        freeReplyObject(h);
        return 1;
    }
    o = cJSON_CreateObject();
    snprintf(idtext, sizeof idtext, "%" PRId64, id);
    cJSON_AddRawToObject(o, "id", idtext);
    state = dsp_api_job_field(h, "state");
    deadline = dsp_api_job_field(h, "deadline_ms");
    /* Not ended by its deadline: its dispatcher died with it. */
    if (state != NULL && (strcmp(state, "queued") == 0 || strcmp(state, "running") == 0) &&
        deadline != NULL && now_ms > strtoll(deadline, NULL, 10))
        state = "lost";
    cJSON_AddStringToObject(o, "state", state != NULL ? state : "lost");
    /* Raw only when it is the decimal this module wrote. */
    if ((task = dsp_api_job_field(h, "task_id")) != NULL && task[0] != '\0' &&
        strspn(task, "0123456789") == strlen(task) && strlen(task) < 20)
        cJSON_AddRawToObject(o, "task_id", task);
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        const char *v = dsp_api_job_field(h, strs[i]);

        if (v != NULL)
            cJSON_AddStringToObject(o, strs[i], v);
        else
            cJSON_AddNullToObject(o, strs[i]);
    }
    dsp_api_job_time(o, h, "created_ms", "created_at");
    dsp_api_job_time(o, h, "started_ms", "started_at");
    dsp_api_job_time(o, h, "finished_ms", "finished_at");
    dsp_api_job_time(o, h, "deadline_ms", "deadline_at");
    result = dsp_api_job_field(h, "result");
    cJSON_AddItemToObject(o, "result", result != NULL ? cJSON_Parse(result) : cJSON_CreateNull());
    freeReplyObject(h);
    *out = o;
    return 0;
}
