/* hr_finish: the end of a campaign (see hr_finish.h) — the stats hash read,
 * the subscriptions counted for hr_state_finish(), which moves the task,
 * and the raise of the outcome counters that reporter and recover share. */
#include "hr_finish.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_state.h"

int hr_finish_read_stats(hr_redis *r, int64_t id, hr_outcomes *out, char *errstr, size_t errlen)
{
    char key[256];
    redisReply *reply;
    int64_t *fields[] = {&out->sent,      &out->failed,  &out->throttled,   &out->pulled,
                         &out->cancelled, &out->retried, &out->unregistered};
    size_t i;

    hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_STATS);
    reply = hr_redis_cmdf(r, errstr, errlen,
                          "HMGET %s sent failed throttled pulled cancelled "
                          "retried unregistered",
                          key);
    if (reply == NULL)
        return -1;
    for (i = 0; i < sizeof fields / sizeof *fields; i++)
        *fields[i] = reply->type == REDIS_REPLY_ARRAY && i < reply->elements &&
                             reply->element[i]->type == REDIS_REPLY_STRING
                         ? strtoll(reply->element[i]->str, NULL, 10)
                         : 0;
    freeReplyObject(reply);
    return 0;
}

int hr_finish_raise(hr_mysql *m, int64_t id, const hr_outcomes *stats, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(stats->sent),         HR_P_I64(stats->failed),
                                HR_P_I64(stats->throttled),    HR_P_I64(stats->pulled),
                                HR_P_I64(stats->cancelled),    HR_P_I64(stats->retried),
                                HR_P_I64(stats->unregistered), HR_P_I64(id)};

    return hr_mysql_exec(m,
                         "UPDATE push_task SET sent = GREATEST(sent, ?), "
                         "failed = GREATEST(failed, ?), throttled = GREATEST(throttled, ?), "
                         "pulled = GREATEST(pulled, ?), cancelled = GREATEST(cancelled, ?), "
                         "retried = GREATEST(retried, ?), "
                         "unregistered = GREATEST(unregistered, ?) WHERE id = ?",
                         p, 8, NULL, NULL, NULL, errstr, errlen);
}

int hr_finish_task(hr_mysql *m, int64_t id, const hr_outcomes *stats, hr_finish_result *out,
                   char *errstr, size_t errlen)
{
    const hr_mysql_param pc[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    int64_t subs;
    int rc = -1;

    if (hr_mysql_query(m, "SELECT COUNT(*) FROM push_subscription WHERE task_id = ?", pc, 1, &rows,
                       errstr, errlen) < 0)
        goto done;
    subs = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    rows = NULL;
    rc = hr_state_finish(m, id, stats, subs, errstr, errlen);
    if (rc <= 0)
        goto done;
    rc = -1;
    if (hr_mysql_query(m, "SELECT unaccounted FROM push_task WHERE id = ?", pc, 1, &rows, errstr,
                       errlen) < 0)
        goto done;
    out->subscriptions = subs;
    out->unaccounted = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    rc = 1;
done:
    hr_mysql_rows_free(rows);
    return rc;
}
