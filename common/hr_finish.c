/* hr_finish: the end of a campaign (see hr_finish.h) — the stats hash read,
 * the subscriptions counted for hr_state_finish(), which moves the task,
 * and the raise of the outcome counters that reporter and recover share. */
#include "hr_finish.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_keys.h"
#include "hr_state.h"

int hr_finish_read_stats(hr_redis *r, int64_t id, hr_outcomes *out, char *errstr, size_t errlen)
{
    char key[256];
    redisReply *reply;
    int64_t *fields[] = {&out->sent,      &out->failed,  &out->throttled,    &out->pulled,
                         &out->cancelled, &out->retried, &out->unregistered, &out->expired};
    size_t i;

    hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_STATS);
    reply = hr_redis_cmdf(r, errstr, errlen,
                          "HMGET %s sent failed throttled pulled cancelled "
                          "retried unregistered expired",
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
    const hr_mysql_param p[] = {
        HR_P_I64(stats->sent),         HR_P_I64(stats->failed),    HR_P_I64(stats->throttled),
        HR_P_I64(stats->pulled),       HR_P_I64(stats->cancelled), HR_P_I64(stats->retried),
        HR_P_I64(stats->unregistered), HR_P_I64(stats->expired),   HR_P_I64(id)};

    return hr_mysql_exec(m,
                         "UPDATE push_task SET sent = GREATEST(sent, ?), "
                         "failed = GREATEST(failed, ?), throttled = GREATEST(throttled, ?), "
                         "pulled = GREATEST(pulled, ?), cancelled = GREATEST(cancelled, ?), "
                         "retried = GREATEST(retried, ?), "
                         "unregistered = GREATEST(unregistered, ?), "
                         "expired = GREATEST(expired, ?) WHERE id = ?",
                         p, 9, NULL, NULL, NULL, errstr, errlen);
}

int hr_finish_drop(hr_redis *r, int64_t id, int64_t seq, hr_outcome outcome, const char *owner,
                   int64_t *n, int64_t *total, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char set[HR_KEY_MAX], stats[HR_KEY_MAX], pending[HR_KEY_MAX], lease[HR_KEY_MAX], seq_s[24];
    const char *name = hr_progress_outcome_name(outcome);
    const char *argv[7] = {set, stats, pending, lease, name, seq_s, owner};
    const char *subs_argv[3] = {set, stats, name};
    redisReply *reply;
    int rc = -1;

    hr_key_task(prefix, stats, sizeof stats, id, HR_KEY_STATS);
    if (seq < 0) {
        hr_key_task(prefix, set, sizeof set, id, seq == HR_FINISH_WAIT ? HR_KEY_WAIT : HR_KEY_SUBS);
        reply = hr_redis_eval(r, HR_LUA_DROP_SET, 2, 3, subs_argv, NULL, errstr, errlen);
    } else {
        snprintf(seq_s, sizeof seq_s, "%" PRId64, seq);
        hr_key_chunk(prefix, set, sizeof set, id, seq);
        hr_key_task(prefix, pending, sizeof pending, id, HR_KEY_PENDING);
        hr_key_lease(prefix, lease, sizeof lease, id, seq);
        reply =
            hr_redis_eval(r, HR_LUA_DROP_SET, 4, owner != NULL ? 7 : 6, argv, NULL, errstr, errlen);
    }
    if (reply == NULL)
        return -1;
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 ||
        reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_INTEGER) {
        snprintf(errstr, errlen, "drop_set: unexpected reply");
        goto done;
    }
    *n = reply->element[0]->integer;
    *total = reply->element[1]->integer;
    rc = 0;
done:
    freeReplyObject(reply);
    return rc;
}

int hr_finish_count(hr_mysql *m, int64_t id, hr_outcome outcome, int64_t total, char *errstr,
                    size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(total), HR_P_I64(id)};
    const char *sql;

    /* Column names cannot be parameters: one statement per outcome. */
    if (outcome == HR_OUTCOME_CANCELLED)
        sql = "UPDATE push_task SET cancelled = GREATEST(cancelled, ?) WHERE id = ?";
    else if (outcome == HR_OUTCOME_EXPIRED)
        sql = "UPDATE push_task SET expired = GREATEST(expired, ?) WHERE id = ?";
    else {
        snprintf(errstr, errlen, "hr_finish_count: outcome %s is not dropped",
                 hr_progress_outcome_name(outcome));
        return -1;
    }
    return hr_mysql_exec(m, sql, p, 2, NULL, NULL, NULL, errstr, errlen);
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
