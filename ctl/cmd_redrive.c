/* cmd_redrive: `heraldctl redrive TASK` — the task's dead letters (the
 * `failed` hash) go back into a new chunk: INCR seq, then redrive.lua moves
 * every uid into chunk:<seq>, records pending[seq] with a publish time
 * older than the redelivery timeout (so the next sweep publishes it),
 * deletes the hash and takes them off stats.failed.  MySQL's failed
 * counter drops by the same number, and a `done` task becomes
 * `dispatched` again so the sweeper serves it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "hr_task.h"

int ctl_cmd_redrive(ctl_ctx *ctx, int argc, char **argv)
{
    hr_mysql *m;
    hr_redis *r;
    hr_task *t = NULL;
    redisReply *reply;
    char err[512], base[256], keys[4][320], seq_s[24], at_s[24], *end;
    const char *eargv[6] = {keys[0], keys[1], keys[2], keys[3], seq_s, at_s};
    long long id, seq, moved;
    int64_t now;
    int rc = CTL_EXIT_FAIL;

    if (argc != 2)
        return ctl_usage(argv[0], "expected one TASK id");
    id = strtoll(argv[1], &end, 10);
    if (id <= 0 || *end != '\0')
        return ctl_usage(argv[0], "TASK must be a positive integer, not '%s'", argv[1]);
    if (ctl_mysql(ctx, &m) < 0 || ctl_redis(ctx, &r) < 0)
        return CTL_EXIT_FAIL;
    switch (hr_task_load(m, id, &t, err, sizeof err)) {
    case 1:
        return ctl_fail("task %lld does not exist", id);
    case -1:
        return ctl_fail("%s", err);
    }
    if (strcmp(t->state, "dispatching") != 0 && strcmp(t->state, "dispatched") != 0 &&
        strcmp(t->state, "done") != 0) {
        ctl_fail("task %lld is %s; redrive serves dispatching, dispatched and done tasks", id,
                 t->state);
        goto done;
    }
    hr_redis_task_key(r, base, sizeof base, id, "");
    snprintf(keys[0], sizeof keys[0], "%sfailed", base);
    reply = hr_redis_cmdf(r, err, sizeof err, "HLEN %s", keys[0]);
    if (reply == NULL) {
        ctl_fail("%s", err);
        goto done;
    }
    moved = reply->integer;
    freeReplyObject(reply);
    if (moved == 0) {
        printf("task %lld: no dead letters\n", id);
        rc = CTL_EXIT_OK;
        goto done;
    }
    reply = hr_redis_cmdf(r, err, sizeof err, "INCR %sseq", base);
    if (reply == NULL) {
        ctl_fail("%s", err);
        goto done;
    }
    seq = reply->integer;
    freeReplyObject(reply);
    if (hr_redis_time_ms(r, &now, err, sizeof err) < 0) {
        ctl_fail("%s", err);
        goto done;
    }
    snprintf(keys[1], sizeof keys[1], "%schunk:%lld", base, seq);
    snprintf(keys[2], sizeof keys[2], "%spending", base);
    snprintf(keys[3], sizeof keys[3], "%sstats", base);
    snprintf(seq_s, sizeof seq_s, "%lld", seq);
    snprintf(at_s, sizeof at_s, "%lld",
             (long long)(now - ((int64_t)ctx->cfg->dispatcher.redelivery_timeout_s + 1) * 1000));
    reply = hr_redis_eval(r, HR_LUA_REDRIVE, 4, 6, eargv, NULL, err, sizeof err);
    if (reply == NULL) {
        ctl_fail("%s", err);
        goto done;
    }
    moved = reply->integer;
    freeReplyObject(reply);
    {
        const hr_mysql_param p[] = {HR_P_I64(moved), HR_P_I64(id)};

        if (hr_mysql_exec(m,
                          "UPDATE push_task SET failed = GREATEST(failed - ?, 0), "
                          "state = IF(state = 'done', 'dispatched', state), "
                          "finished_at = IF(state = 'dispatched', NULL, finished_at) "
                          "WHERE id = ?",
                          p, 2, NULL, NULL, NULL, err, sizeof err) < 0) {
            ctl_fail("chunk %lld holds %lld recipients, but MySQL was not updated: %s", seq,
                     moved, err);
            goto done;
        }
    }
    printf("task %lld: redrove %lld recipients into chunk %lld\n", id, moved, seq);
    rc = CTL_EXIT_OK;
done:
    hr_task_free(t);
    return rc;
}
