/* hr_purge: finished tasks and what they left, in bounded batches (see
 * hr_purge.h). */
#include "hr_purge.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_dlog.h"
#include "hr_keys.h"

/* Tasks read per page. */
#define HR_PURGE_PAGE 100

/* A task's rows in one table: counted (dry run) or deleted BATCH at a
 * time.  BY_DAY: the delivery log, pruned to the task's day (and rows
 * written without one). */
typedef struct hr_purge_table {
    const char *count, *del;
    size_t field; /* offsetof the hr_purge_task counter */
    bool by_day;
} hr_purge_table;

static const hr_purge_table hr_purge_tables[] = {
    {"SELECT COUNT(*) FROM push_subscription WHERE task_id = ?",
     "DELETE FROM push_subscription WHERE task_id = ? LIMIT ?",
     offsetof(hr_purge_task, subscriptions), false},
    {"SELECT COUNT(*) FROM push_delivery WHERE task_id = ? AND day IN (?, ?)",
     "DELETE FROM push_delivery WHERE task_id = ? AND day IN (?, ?) LIMIT ?",
     offsetof(hr_purge_task, deliveries), true},
    {"SELECT COUNT(*) FROM push_chunk WHERE task_id = ?",
     "DELETE FROM push_chunk WHERE task_id = ? LIMIT ?", offsetof(hr_purge_task, chunks), false},
    {"SELECT COUNT(*) FROM push_task_shard WHERE task_id = ?",
     "DELETE FROM push_task_shard WHERE task_id = ? LIMIT ?", offsetof(hr_purge_task, shard_rows),
     false},
};

#define HR_PURGE_TABLES (sizeof hr_purge_tables / sizeof hr_purge_tables[0])

/* Task PT->id's rows (delivery log day DAY, YYYYMMDD) in every table: each
 * counted into PT, or deleted in DELETEs of at most BATCH rows. */
static int hr_purge_rows(hr_mysql *m, int64_t day, int batch, bool count_only, hr_purge_task *pt,
                         char *errstr, size_t errlen)
{
    for (size_t i = 0; i < HR_PURGE_TABLES; i++) {
        const hr_purge_table *tb = &hr_purge_tables[i];
        const hr_mysql_param pd[] = {HR_P_I64(pt->id), HR_P_I64(day), HR_P_I64(HR_DLOG_UNSET),
                                     HR_P_I64(batch)};
        const hr_mysql_param ps[] = {HR_P_I64(pt->id), HR_P_I64(batch)};
        const hr_mysql_param *p = tb->by_day ? pd : ps;
        size_t np = tb->by_day ? 4 : 2;
        int64_t *n = (int64_t *)((char *)pt + tb->field);
        hr_mysql_rows *rows = NULL;
        uint64_t affected;

        if (count_only) {
            if (hr_mysql_query(m, tb->count, p, np - 1, &rows, errstr, errlen) < 0)
                return -1;
            *n = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
            hr_mysql_rows_free(rows);
            continue;
        }
        do {
            if (hr_mysql_exec(m, tb->del, p, np, &affected, NULL, NULL, errstr, errlen) < 0)
                return -1;
            *n += (int64_t)affected;
            pt->deletes++;
        } while (affected == (uint64_t)batch);
    }
    return 0;
}

/* DELs KEY; adds what went to *N. */
static int hr_purge_del(hr_redis *r, const char *key, int64_t *n, char *errstr, size_t errlen)
{
    redisReply *reply = hr_redis_cmdf(r, errstr, errlen, "DEL %s", key);

    if (reply == NULL)
        return -1;
    *n += reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
    freeReplyObject(reply);
    return 0;
}

/* Task ID's Redis keys (SHARDS sets) into *N, and its members of the
 * shared sets. */
static int hr_purge_keys(hr_redis *r, int64_t id, int shards, int64_t *n, char *errstr,
                         size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char key[HR_KEY_MAX];
    int64_t got;
    redisReply *reply;

    for (int k = 0; k < (shards > 1 ? shards : 1); k++) {
        for (int kind = 0; kind < HR_KEY__COUNT; kind++)
            if (hr_purge_del(r, hr_key_shard(prefix, key, sizeof key, id, k, (hr_key_kind)kind), n,
                             errstr, errlen) < 0)
                return -1;
        if ((got =
                 hr_redis_del_matching(r, hr_key_shard_chunks_match(prefix, key, sizeof key, id, k),
                                       true, errstr, errlen)) < 0)
            return -1;
        *n += got;
        if ((got =
                 hr_redis_del_matching(r, hr_key_shard_leases_match(prefix, key, sizeof key, id, k),
                                       true, errstr, errlen)) < 0)
            return -1;
        *n += got;
    }
    reply = hr_redis_cmdf(r, errstr, errlen, "ZREM %s %" PRId64,
                          hr_key_timer(prefix, key, sizeof key), id);
    freeReplyObject(reply);
    if (reply == NULL)
        return -1;
    reply = hr_redis_cmdf(r, errstr, errlen, "SREM %s %" PRId64,
                          hr_key_cancel_held(prefix, key, sizeof key), id);
    freeReplyObject(reply);
    if (reply == NULL)
        return -1;
    reply = hr_redis_cmdf(r, errstr, errlen, "SREM %s %" PRId64,
                          hr_key_redriven(prefix, key, sizeof key), id);
    freeReplyObject(reply);
    return reply != NULL ? 0 : -1;
}

/* What task PT->id (taken: its push_purge row written) left: its rows, its
 * keys, then the push_purge row. */
static int hr_purge_finish(hr_mysql *m, hr_redis *r, const hr_purge_opts *o, int64_t day,
                           int shards, hr_purge_task *pt, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(pt->id)};

    if (hr_purge_rows(m, day, o->batch, false, pt, errstr, errlen) < 0 ||
        hr_purge_keys(r, pt->id, shards, &pt->keys, errstr, errlen) < 0)
        return -1;
    return hr_mysql_exec(m, "DELETE FROM push_purge WHERE task_id = ?", p, 1, NULL, NULL, NULL,
                         errstr, errlen);
}

static void hr_purge_done(const hr_purge_opts *o, const hr_purge_task *pt, hr_purge_result *out)
{
    out->tasks++;
    out->subscriptions += pt->subscriptions;
    out->deliveries += pt->deliveries;
    out->chunks += pt->chunks;
    out->shard_rows += pt->shard_rows;
    out->keys += pt->keys;
    out->deletes += pt->deletes;
    if (o->each != NULL)
        o->each(o->ctx, pt);
}

/* The purges a cut-short run left (push_purge), finished first. */
static int hr_purge_resume(hr_mysql *m, hr_redis *r, const hr_purge_opts *o, hr_purge_result *out,
                           char *errstr, size_t errlen)
{
    for (;;) {
        const hr_mysql_param p[] = {HR_P_I64(HR_PURGE_PAGE)};
        hr_mysql_rows *rows = NULL;
        size_t n;

        if (hr_mysql_query(m,
                           "SELECT task_id, day + 0, shards FROM push_purge ORDER BY task_id "
                           "LIMIT ?",
                           p, 1, &rows, errstr, errlen) < 0)
            return -1;
        n = rows->nrows;
        for (size_t i = 0; i < n; i++) {
            hr_purge_task pt = {.id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10),
                                .state = HR_STATE__COUNT};

            if (hr_purge_finish(m, r, o, strtoll(hr_mysql_cell(rows, i, 1), NULL, 10),
                                atoi(hr_mysql_cell(rows, i, 2)), &pt, errstr, errlen) < 0) {
                hr_mysql_rows_free(rows);
                return -1;
            }
            out->resumed++;
            hr_purge_done(o, &pt, out);
        }
        hr_mysql_rows_free(rows);
        if (n < HR_PURGE_PAGE)
            return 0;
    }
}

/* The closed subscription intervals of series no occurrence can read
 * (push_series_subscription_past, migration 026): an occurrence's
 * recipients are the members at its claim, so an interval that ended
 * before the claim of every occurrence of its series still kept is no
 * one's (a later claim is later still).  The hour's margin keeps clear of
 * a claim whose transaction is still open.  Counted into OUT, or deleted
 * BATCH at a time (each DELETE its own transaction). */
#define HR_PURGE_PAST_WHERE                                                                   \
    "WHERE unsubscribed_at < UTC_TIMESTAMP(3) - INTERVAL 1 HOUR AND NOT EXISTS "              \
    "(SELECT 1 FROM push_task t WHERE t.series_id = push_series_subscription_past.series_id " \
    "AND t.started_at < push_series_subscription_past.unsubscribed_at)"

static int hr_purge_past(hr_mysql *m, const hr_purge_opts *o, hr_purge_result *out, char *errstr,
                         size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(o->batch)};
    hr_mysql_rows *rows = NULL;
    uint64_t affected;

    if (o->dry_run) {
        if (hr_mysql_query(
                m, "SELECT COUNT(*) FROM push_series_subscription_past " HR_PURGE_PAST_WHERE, NULL,
                0, &rows, errstr, errlen) < 0)
            return -1;
        out->past_intervals = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
        hr_mysql_rows_free(rows);
        return 0;
    }
    do {
        if (hr_mysql_exec(
                m, "DELETE FROM push_series_subscription_past " HR_PURGE_PAST_WHERE " LIMIT ?", p,
                1, &affected, NULL, NULL, errstr, errlen) < 0)
            return -1;
        out->past_intervals += (int64_t)affected;
        out->deletes++;
    } while (affected == (uint64_t)o->batch);
    return 0;
}

int hr_purge(hr_mysql *m, hr_redis *r, const hr_purge_opts *o, hr_purge_result *out, char *errstr,
             size_t errlen)
{
    int64_t after = 0;
    size_t n;

    memset(out, 0, sizeof *out);
    if (!o->dry_run && hr_purge_resume(m, r, o, out, errstr, errlen) < 0)
        return -1;
    do {
        const hr_mysql_param p[] = {HR_P_I64(after), HR_P_I64(o->before_ms),
                                    HR_P_I64(HR_PURGE_PAGE)};
        hr_mysql_rows *rows = NULL;

        if (hr_mysql_query(m,
                           "SELECT id, state, DATE_FORMAT(finished_at, '%Y-%m-%dT%H:%i:%sZ'), "
                           "shards, COALESCE(DATE(due_at) + 0, 19700101) FROM push_task "
                           "WHERE id > ? AND state IN ('done', 'failed', 'cancelled') "
                           "AND finished_at < FROM_UNIXTIME(? / 1000) ORDER BY id LIMIT ?",
                           p, 3, &rows, errstr, errlen) < 0)
            return -1;
        n = rows->nrows;
        for (size_t i = 0; i < n; i++) {
            hr_purge_task pt = {.id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10)};
            int64_t day = strtoll(hr_mysql_cell(rows, i, 4), NULL, 10);
            int shards = atoi(hr_mysql_cell(rows, i, 3)), rc;

            after = pt.id;
            hr_state_parse(hr_mysql_cell(rows, i, 1), &pt.state);
            snprintf(pt.finished_at, sizeof pt.finished_at, "%s", hr_mysql_cell(rows, i, 2));
            if (o->dry_run)
                rc = hr_purge_rows(m, day, o->batch, true, &pt, errstr, errlen) < 0 ? -1 : 1;
            else if ((rc = hr_state_purge(m, pt.id, o->before_ms, errstr, errlen)) == 1 &&
                     hr_purge_finish(m, r, o, day, shards, &pt, errstr, errlen) < 0)
                rc = -1;
            if (rc < 0) {
                hr_mysql_rows_free(rows);
                return -1;
            }
            if (rc == 1) /* 0: reopened or changed meanwhile, not final: left alone */
                hr_purge_done(o, &pt, out);
        }
        hr_mysql_rows_free(rows);
    } while (n == HR_PURGE_PAGE);
    return hr_purge_past(m, o, out, errstr, errlen);
}
