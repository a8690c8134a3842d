/* wk_control: control key reads and lease renewals (see wk_control.h). */
#include "wk_control.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "hr_log.h"
#include "hr_pipe.h"
#include "hr_state.h"

/* What a GET of the control key says: run unless pause or cancel. */
static wk_chunk_halt wk_control_parse(const redisReply *reply)
{
    hr_control control;

    if (reply->type != REDIS_REPLY_STRING || hr_control_parse(reply->str, &control) < 0)
        return WK_CHUNK_RUN;
    return control == HR_CONTROL_PAUSE    ? WK_CHUNK_PARK
           : control == HR_CONTROL_CANCEL ? WK_CHUNK_CANCEL
                                          : WK_CHUNK_RUN;
}

int wk_control_read(hr_redis *r, int64_t task, char *errstr, size_t errlen)
{
    char key[HR_KEY_MAX];
    const char *argv[] = {"GET", key};
    redisReply *reply;
    wk_chunk_halt halt;

    hr_key_task(hr_redis_prefix(r), key, sizeof key, task, HR_KEY_CTL);
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
    char key[HR_KEY_MAX];
    hr_pipe *pipe = hr_pipe_new(r);
    bool failed = false;

    *queued = 0;
    if (pipe == NULL) {
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *argv[] = {"GET", key};

        hr_key_task(hr_redis_prefix(r), key, sizeof key, tasks[i], HR_KEY_CTL);
        if (hr_pipe_cmd(pipe, 2, argv, NULL) != 0)
            break;
        (*queued)++;
    }
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(pipe, errstr, errlen);
    for (size_t i = 0; i < *queued; i++) {
        redisReply *reply = hr_pipe_reply(pipe, i, errstr, errlen);

        halts[i] = WK_CHUNK_RUN;
        if (reply == NULL) {
            failed = true;
            continue;
        }
        halts[i] = wk_control_parse(reply);
        freeReplyObject(reply);
    }
    hr_pipe_free(pipe);
    return failed ? -1 : 0;
}

void wk_control_renew(hr_redis *r, wk_metrics *met, wk_chunk **held, size_t n, const char *owner,
                      int lease_ms, wk_chunk **lost, size_t *nlost)
{
    char ms[24], errstr[256];
    hr_pipe *pipe = hr_pipe_new(r);
    size_t queued = 0, failed = 0;

    *nlost = 0;
    if (pipe == NULL) {
        snprintf(errstr, sizeof errstr, "out of memory");
        failed = n;
        goto done;
    }
    snprintf(ms, sizeof ms, "%d", lease_ms);
    for (size_t i = 0; i < n; i++) {
        const char *argv[] = {held[i]->k_lease, owner, ms};

        if (hr_pipe_eval(pipe, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL) != 0)
            break;
        queued++;
    }
    /* A connection that failed makes every reply below report it. */
    hr_pipe_exec(pipe, errstr, sizeof errstr);
    for (size_t i = 0; i < queued; i++) {
        redisReply *reply = hr_pipe_reply(pipe, i, errstr, sizeof errstr);

        if (reply == NULL) {
            failed++;
            continue;
        }
        if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0)
            lost[(*nlost)++] = held[i];
        freeReplyObject(reply);
    }
done:
    if (failed > 0) {
        hr_metrics_inc(met->backend_errors[WK_BACKEND_REDIS]);
        hr_log_warn("lease_renew_failed", "leases=%zu error=%s", failed, errstr);
    }
    hr_pipe_free(pipe);
}
