/* hr_finish: the dispatched -> done transition that only claims success
 * when every subscription is accounted for (see hr_finish.h). */
#include "hr_finish.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hr_finish_read_stats(hr_redis *r, int64_t id, hr_outcomes *out, char *errstr,
                         size_t errlen)
{
    char key[256];
    redisReply *reply;
    int64_t *fields[] = {&out->sent,      &out->failed,    &out->throttled,
                         &out->pulled,    &out->cancelled, &out->retried};
    size_t i;

    hr_redis_task_key(r, key, sizeof key, id, "stats");
    reply = hr_redis_cmdf(r, errstr, errlen, "HMGET %s sent failed throttled pulled cancelled "
                          "retried", key);
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

int hr_finish_task(hr_mysql *m, int64_t id, const hr_outcomes *stats, hr_finish_result *out,
                   char *errstr, size_t errlen)
{
    const hr_mysql_param pc[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    uint64_t affected = 0;
    int64_t subs;
    int rc = -1;

    if (hr_mysql_query(m, "SELECT COUNT(*) FROM push_subscription WHERE task_id = ?", pc, 1,
                       &rows, errstr, errlen) < 0)
        goto done;
    subs = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    hr_mysql_rows_free(rows);
    rows = NULL;
    {
        /* MariaDB assigns left to right, so unaccounted sees the raised
         * counters and state sees unaccounted.  total (recipients published
         * in chunks) is capped at the subscriptions: a recipient chunked
         * again under a new seq (Redis rewound: subs held it again and seq
         * went backwards) was added to it twice. */
        const hr_mysql_param p[] = {
            HR_P_I64(stats->sent),   HR_P_I64(stats->failed),    HR_P_I64(stats->throttled),
            HR_P_I64(stats->pulled), HR_P_I64(stats->cancelled), HR_P_I64(stats->retried),
            HR_P_I64(subs),          HR_P_I64(subs),             HR_P_I64(subs),
            HR_P_I64(id),            HR_P_I64(id)};

        if (hr_mysql_exec(m,
                          "UPDATE push_task SET sent = GREATEST(sent, ?), "
                          "failed = GREATEST(failed, ?), throttled = GREATEST(throttled, ?), "
                          "pulled = GREATEST(pulled, ?), cancelled = GREATEST(cancelled, ?), "
                          "retried = GREATEST(retried, ?), total = LEAST(total, ?), "
                          "unaccounted = GREATEST(0, CAST(? AS SIGNED) - "
                          "CAST(sent + failed + throttled + pulled + cancelled AS SIGNED)), "
                          "state = IF(unaccounted > 0, 'failed', 'done'), "
                          "last_error = IF(unaccounted > 0, CONCAT(unaccounted, ' of ', ?, "
                          "' subscriptions have no outcome (sent ', sent, ', failed ', failed, "
                          "', throttled ', throttled, ', pulled ', pulled, ', cancelled ', "
                          "cancelled, '): the working state in Redis lost them; heraldctl "
                          "recover ', ?, ' pushes them'), last_error), "
                          "finished_at = UTC_TIMESTAMP(3) WHERE id = ? AND state = 'dispatched'",
                          p, 11, &affected, NULL, NULL, errstr, errlen) < 0)
            goto done;
    }
    if (affected != 1) {
        rc = 0;
        goto done;
    }
    if (hr_mysql_query(m, "SELECT unaccounted FROM push_task WHERE id = ?", pc, 1, &rows,
                       errstr, errlen) < 0)
        goto done;
    out->subscriptions = subs;
    out->unaccounted = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    rc = 1;
done:
    hr_mysql_rows_free(rows);
    return rc;
}
