/* wk_control: control key reads and lease renewals (see wk_control.h). */
#include "wk_control.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hr_log.h"

/* What a GET of the control key says: run unless pause or cancel. */
static wk_chunk_halt wk_control_parse(const redisReply *reply)
{
    if (reply->type != REDIS_REPLY_STRING)
        return WK_CHUNK_RUN;
    if (strcmp(reply->str, "pause") == 0)
        return WK_CHUNK_PARK;
    if (strcmp(reply->str, "cancel") == 0)
        return WK_CHUNK_CANCEL;
    return WK_CHUNK_RUN;
}

int wk_control_read(hr_redis *r, int64_t task, char *errstr, size_t errlen)
{
    char key[WK_CHUNK_KEY_MAX];
    const char *argv[] = {"GET", key};
    redisReply *reply;
    wk_chunk_halt halt;

    hr_redis_task_key(r, key, sizeof key, task, "ctl");
    reply = hr_redis_cmd(r, errstr, errlen, 2, argv, NULL);
    if (reply == NULL)
        return -1;
    halt = wk_control_parse(reply);
    freeReplyObject(reply);
    return (int)halt;
}

int wk_control_read_many(hr_redis *r, const int64_t *tasks, size_t n, wk_chunk_halt *halts,
                         size_t *queued, char *errstr, size_t errlen)
{
    char key[WK_CHUNK_KEY_MAX];
    bool failed = false;

    *queued = 0;
    for (size_t i = 0; i < n; i++) {
        const char *argv[] = {"GET", key};

        hr_redis_task_key(r, key, sizeof key, tasks[i], "ctl");
        if (hr_redis_pipe_cmd(r, 2, argv, NULL) != 0)
            break;
        (*queued)++;
    }
    /* Every queued reply is read, so the connection stays in step. */
    for (size_t i = 0; i < *queued; i++) {
        redisReply *reply = hr_redis_pipe_reply(r, errstr, errlen);

        halts[i] = WK_CHUNK_RUN;
        if (reply == NULL) {
            failed = true;
            continue;
        }
        halts[i] = wk_control_parse(reply);
        freeReplyObject(reply);
    }
    return failed ? -1 : 0;
}

void wk_control_renew(hr_redis *r, wk_metrics *met, wk_chunk **held, size_t n, const char *owner,
                      int lease_ms, wk_chunk **lost, size_t *nlost)
{
    char ms[24], errstr[256];
    wk_chunk *again[WK_CHUNK_MAX_OPEN];
    size_t queued = 0, nagain = 0;

    *nlost = 0;
    snprintf(ms, sizeof ms, "%d", lease_ms);
    for (size_t i = 0; i < n; i++) {
        const char *argv[] = {held[i]->k_lease, owner, ms};

        if (hr_redis_pipe_eval(r, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL) != 0)
            break;
        queued++;
    }
    for (size_t i = 0; i < queued; i++) {
        redisReply *reply = hr_redis_pipe_reply(r, errstr, sizeof errstr);

        if (reply == NULL && strncmp(errstr, "NOSCRIPT", 8) == 0 &&
            nagain < WK_CHUNK_MAX_OPEN) {
            again[nagain++] = held[i]; /* Redis lost its scripts: reload, renew again */
        } else if (reply == NULL) {
            hr_metrics_inc(met->backend_errors[WK_BACKEND_REDIS]);
            hr_log_warn("lease_renew_failed", "error=%s", errstr);
        } else if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) {
            lost[(*nlost)++] = held[i];
        }
        if (reply != NULL)
            freeReplyObject(reply);
    }
    if (nagain > 0 && hr_redis_reload_scripts(r, errstr, sizeof errstr) != 0) {
        hr_metrics_inc(met->backend_errors[WK_BACKEND_REDIS]);
        hr_log_warn("lease_renew_failed", "error=%s", errstr);
        nagain = 0;
    }
    for (size_t i = 0; i < nagain; i++) {
        const char *argv[] = {again[i]->k_lease, owner, ms};
        redisReply *reply =
            hr_redis_eval(r, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL, errstr, sizeof errstr);

        if (reply == NULL) {
            hr_metrics_inc(met->backend_errors[WK_BACKEND_REDIS]);
            hr_log_warn("lease_renew_failed", "error=%s", errstr);
            continue;
        }
        if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)
            lost[(*nlost)++] = again[i];
        freeReplyObject(reply);
    }
}
