/* hr_subs: the refill of a task's subscriber set and its prepare lock (see
 * hr_subs.h).  One implementation for the dispatcher's prepare and
 * `heraldctl recover`, so both renew the lock, respect the seq guard and
 * report an incomplete refill the same way. */
#include "hr_subs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hr_subs_lock(hr_redis *r, int64_t id, const char *token, int ms, char *errstr,
                 size_t errlen)
{
    char key[256];
    redisReply *reply;
    int rc;

    hr_redis_task_key(r, key, sizeof key, id, "prep");
    reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %s NX PX %d", key, token, ms);
    if (reply == NULL)
        return -1;
    rc = reply->type == REDIS_REPLY_STATUS;
    freeReplyObject(reply);
    if (rc)
        return 1;
    /* A SET retried after an I/O error fails on the lock its first try
     * already took: that one is ours. */
    reply = hr_redis_cmdf(r, errstr, errlen, "GET %s", key);
    if (reply == NULL)
        return -1;
    rc = reply->type == REDIS_REPLY_STRING && strcmp(reply->str, token) == 0;
    freeReplyObject(reply);
    return rc;
}

int hr_subs_unlock(hr_redis *r, int64_t id, const char *token, char *errstr, size_t errlen)
{
    char key[256];
    const char *argv[2] = {key, token};
    redisReply *reply;

    hr_redis_task_key(r, key, sizeof key, id, "prep");
    reply = hr_redis_eval(r, HR_LUA_LEASE_RELEASE, 1, 2, argv, NULL, errstr, errlen);
    freeReplyObject(reply);
    return reply != NULL ? 0 : -1;
}

/* Extends the lock if TOKEN still holds it: 1, 0 (lost) or -1. */
static int hr_subs_renew(hr_redis *r, int64_t id, const hr_subs_refill_opts *o, char *errstr,
                         size_t errlen)
{
    char key[256], ms[24];
    const char *argv[3] = {key, o->token, ms};
    redisReply *reply;
    int rc;

    hr_redis_task_key(r, key, sizeof key, id, "prep");
    snprintf(ms, sizeof ms, "%d", o->lock_ms);
    reply = hr_redis_eval(r, HR_LUA_LEASE_RENEW, 1, 3, argv, NULL, errstr, errlen);
    if (reply == NULL)
        return -1;
    rc = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
    freeReplyObject(reply);
    return rc;
}

int hr_subs_refill(hr_mysql *m, hr_redis *r, int64_t id, const hr_subs_refill_opts *o,
                   int64_t *added, int64_t *seen, char *errstr, size_t errlen)
{
    static const char *const sql_all =
        "SELECT uid FROM push_subscription WHERE task_id = ? AND uid > ? "
        "ORDER BY uid LIMIT ?";
    static const char *const sql_undelivered =
        "SELECT s.uid FROM push_subscription s WHERE s.task_id = ? "
        "AND s.uid > ? AND NOT EXISTS (SELECT 1 FROM push_delivery d "
        "WHERE d.task_id = s.task_id AND d.uid = s.uid AND d.status IN "
        "('sent', 'failed', 'throttled', 'pulled')) "
        "ORDER BY s.uid LIMIT ?";
    char keys[3][256];
    const char **argv = NULL;
    hr_mysql_rows *rows = NULL;
    int64_t last = 0, n_added = 0, n_seen = 0;
    int rc;
    size_t i;

    rc = hr_subs_lock(r, id, o->token, o->lock_ms, errstr, errlen);
    if (rc <= 0)
        return rc < 0 ? -1 : HR_SUBS_BUSY;
    argv = malloc(((size_t)o->batch + 3) * sizeof *argv);
    if (argv == NULL) {
        snprintf(errstr, errlen, "out of memory");
        rc = -1;
        goto done;
    }
    argv[0] = hr_redis_task_key(r, keys[0], sizeof keys[0], id, "subs");
    argv[1] = hr_redis_task_key(r, keys[1], sizeof keys[1], id, "pulled");
    argv[2] = hr_redis_task_key(r, keys[2], sizeof keys[2], id, "seq");
    for (;;) {
        const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(last), HR_P_I64(o->batch)};
        redisReply *reply;
        long long got;

        if (o->stop != NULL && atomic_load(o->stop)) {
            rc = HR_SUBS_STOPPED;
            goto done;
        }
        if (hr_mysql_query(m, o->exclude_delivered ? sql_undelivered : sql_all, p, 3, &rows,
                           errstr, errlen) < 0) {
            rc = -1;
            goto done;
        }
        if (rows->nrows == 0)
            break;
        /* The MySQL page may have taken long: the lock must still be ours
         * before anything is added under it. */
        rc = hr_subs_renew(r, id, o, errstr, errlen);
        if (rc <= 0) {
            rc = rc < 0 ? -1 : HR_SUBS_LOCK_LOST;
            goto done;
        }
        for (i = 0; i < rows->nrows; i++)
            argv[3 + i] = hr_mysql_cell(rows, i, 0);
        last = strtoll(argv[2 + rows->nrows], NULL, 10);
        reply = hr_redis_eval(r, HR_LUA_REFILL_ADD, 3, 3 + (int)rows->nrows, argv, NULL,
                              errstr, errlen);
        if (reply == NULL) {
            rc = -1;
            goto done;
        }
        got = reply->type == REDIS_REPLY_INTEGER ? reply->integer : -1;
        freeReplyObject(reply);
        if (got < 0) {
            rc = HR_SUBS_STARTED;
            goto done;
        }
        n_added += got;
        n_seen += (int64_t)rows->nrows;
        if (rows->nrows < (size_t)o->batch)
            break;
        hr_mysql_rows_free(rows);
        rows = NULL;
    }
    rc = HR_SUBS_DONE;
done:
    if (added != NULL)
        *added = n_added;
    if (seen != NULL)
        *seen = n_seen;
    hr_mysql_rows_free(rows);
    free(argv);
    if (rc != HR_SUBS_LOCK_LOST) {
        char e2[256];

        /* A failed release expires by itself after lock_ms. */
        hr_subs_unlock(r, id, o->token, e2, sizeof e2);
    }
    return rc;
}

const char *hr_subs_result_str(int result)
{
    switch (result) {
    case HR_SUBS_DONE:
        return "done";
    case HR_SUBS_BUSY:
        return "another party holds the prepare lock";
    case HR_SUBS_STARTED:
        return "chunking started before the refill ended";
    case HR_SUBS_LOCK_LOST:
        return "the prepare lock expired and was taken during the refill";
    case HR_SUBS_STOPPED:
        return "stopped";
    }
    return "error";
}
