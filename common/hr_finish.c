/* hr_finish: the end of a campaign (see hr_finish.h) — the stats hash read,
 * the subscriptions counted for hr_state_finish(), which moves the task,
 * and the raise of the outcome counters that reporter and recover share. */
#include "hr_finish.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_keys.h"
#include "hr_parse.h"
#include "hr_state.h"

int hr_finish_read_stats(hr_redis *r, int64_t id, int shard, hr_outcomes *out, char *errstr,
                         size_t errlen)
{
    char key[256];
    redisReply *reply;
    int64_t *fields[] = {&out->sent,      &out->failed,    &out->throttled,    &out->pulled,
                         &out->cancelled, &out->retried,   &out->unregistered, &out->expired,
                         &out->opted_out, &out->suppressed};
    size_t i;

    hr_key_shard(hr_redis_prefix(r), key, sizeof key, id, shard, HR_KEY_STATS);
    reply = hr_redis_cmdf(r, errstr, errlen,
                          "HMGET %s sent failed throttled pulled cancelled "
                          "retried unregistered expired opted_out suppressed",
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

/* The SET list "c = GREATEST(c, ?)" of every outcome counter, in
 * hr_outcomes order (the parameters of hr_finish_raise_params). */
#define HR_FINISH_RAISE_SET                                                      \
    "sent = GREATEST(sent, ?), failed = GREATEST(failed, ?), "                   \
    "throttled = GREATEST(throttled, ?), pulled = GREATEST(pulled, ?), "         \
    "cancelled = GREATEST(cancelled, ?), retried = GREATEST(retried, ?), "       \
    "unregistered = GREATEST(unregistered, ?), expired = GREATEST(expired, ?), " \
    "opted_out = GREATEST(opted_out, ?), suppressed = GREATEST(suppressed, ?)"

/* The counters of hr_outcomes, so many parameters. */
#define HR_FINISH_NCOUNTERS 10

/* STATS' counters into P[0..HR_FINISH_NCOUNTERS). */
static void hr_finish_raise_params(const hr_outcomes *stats, hr_mysql_param *p)
{
    const int64_t v[HR_FINISH_NCOUNTERS] = {
        stats->sent,    stats->failed,       stats->throttled, stats->pulled,    stats->cancelled,
        stats->retried, stats->unregistered, stats->expired,   stats->opted_out, stats->suppressed};

    for (size_t i = 0; i < HR_FINISH_NCOUNTERS; i++)
        p[i] = HR_P_I64(v[i]);
}

int hr_finish_raise(hr_mysql *m, int64_t id, const hr_outcomes *stats, char *errstr, size_t errlen)
{
    hr_mysql_param p[HR_FINISH_NCOUNTERS + 1];

    hr_finish_raise_params(stats, p);
    p[HR_FINISH_NCOUNTERS] = HR_P_I64(id);
    return hr_mysql_exec(m, "UPDATE push_task SET " HR_FINISH_RAISE_SET " WHERE id = ?", p,
                         HR_FINISH_NCOUNTERS + 1, NULL, NULL, NULL, errstr, errlen);
}

/* Locks task ID's row: every writer of a sharded task's counters takes it
 * before its shard's row, so two of them never wait on each other's rows
 * the other way round.  0 or -1. */
static int hr_finish_lock_task(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;

    if (hr_mysql_query(m, "SELECT id FROM push_task WHERE id = ? FOR UPDATE", p, 1, &rows, errstr,
                       errlen) < 0)
        return -1;
    hr_mysql_rows_free(rows);
    return 0;
}

/* push_task's counters raised to the sums of task ID's shard rows (never
 * lowered: a sum read before another writer's commit is only late).  0 or
 * -1. */
static int hr_finish_sum(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(id)};

    return hr_mysql_exec(
        m,
        "UPDATE push_task t, (SELECT COALESCE(SUM(sent), 0) sent, COALESCE(SUM(failed), 0) failed, "
        "COALESCE(SUM(throttled), 0) throttled, COALESCE(SUM(pulled), 0) pulled, "
        "COALESCE(SUM(cancelled), 0) cancelled, COALESCE(SUM(retried), 0) retried, "
        "COALESCE(SUM(unregistered), 0) unregistered, COALESCE(SUM(expired), 0) expired, "
        "COALESCE(SUM(opted_out), 0) opted_out, COALESCE(SUM(suppressed), 0) suppressed "
        "FROM push_task_shard WHERE task_id = ?) s "
        "SET t.sent = GREATEST(t.sent, s.sent), t.failed = GREATEST(t.failed, s.failed), "
        "t.throttled = GREATEST(t.throttled, s.throttled), "
        "t.pulled = GREATEST(t.pulled, s.pulled), "
        "t.cancelled = GREATEST(t.cancelled, s.cancelled), "
        "t.retried = GREATEST(t.retried, s.retried), "
        "t.unregistered = GREATEST(t.unregistered, s.unregistered), "
        "t.expired = GREATEST(t.expired, s.expired), "
        "t.opted_out = GREATEST(t.opted_out, s.opted_out), "
        "t.suppressed = GREATEST(t.suppressed, s.suppressed) WHERE t.id = ?",
        p, 2, NULL, NULL, NULL, errstr, errlen);
}

/* The ON DUPLICATE KEY part of a shard row's raise: every counter to at
 * least the one given (an unknown, -1, was inserted as 0 and keeps the
 * row's). */
#define HR_FINISH_RAISE_DUP                                                            \
    "sent = GREATEST(sent, VALUES(sent)), failed = GREATEST(failed, VALUES(failed)), " \
    "throttled = GREATEST(throttled, VALUES(throttled)), "                             \
    "pulled = GREATEST(pulled, VALUES(pulled)), "                                      \
    "cancelled = GREATEST(cancelled, VALUES(cancelled)), "                             \
    "retried = GREATEST(retried, VALUES(retried)), "                                   \
    "unregistered = GREATEST(unregistered, VALUES(unregistered)), "                    \
    "expired = GREATEST(expired, VALUES(expired)), "                                   \
    "opted_out = GREATEST(opted_out, VALUES(opted_out)), "                             \
    "suppressed = GREATEST(suppressed, VALUES(suppressed))"

int hr_finish_raise_shard(hr_mysql *m, int64_t id, int shard, const hr_outcomes *stats,
                          char *errstr, size_t errlen)
{
    hr_mysql_param p[HR_FINISH_NCOUNTERS + 2];

    if (shard == HR_SHARD_NONE)
        return hr_finish_raise(m, id, stats, errstr, errlen);
    p[0] = HR_P_I64(id);
    p[1] = HR_P_I64(shard);
    hr_finish_raise_params(stats, p + 2);
    /* A row the reconciliation has not written yet (the task is not
     * claimed: a pull or a cancel before due) is made `waiting`, which no
     * dispatcher claims; the reconciliation makes it `ready`. */
    if (hr_finish_lock_task(m, id, errstr, errlen) < 0 ||
        hr_mysql_exec(m,
                      "INSERT INTO push_task_shard (task_id, shard, state, sent, failed, "
                      "throttled, pulled, cancelled, retried, unregistered, expired, opted_out, "
                      "suppressed) "
                      "VALUES (?, ?, 'waiting', GREATEST(?, 0), GREATEST(?, 0), GREATEST(?, 0), "
                      "GREATEST(?, 0), GREATEST(?, 0), GREATEST(?, 0), GREATEST(?, 0), "
                      "GREATEST(?, 0), GREATEST(?, 0), GREATEST(?, 0)) "
                      "ON DUPLICATE KEY UPDATE " HR_FINISH_RAISE_DUP,
                      p, HR_FINISH_NCOUNTERS + 2, NULL, NULL, NULL, errstr, errlen) < 0)
        return -1;
    return hr_finish_sum(m, id, errstr, errlen);
}

/* Runs hr_finish_raise_shard for STATS in a transaction of its own (the
 * callers run outside of one).  0 or -1. */
static int hr_finish_raise_tx(hr_mysql *m, int64_t id, int shard, const hr_outcomes *stats,
                              char *errstr, size_t errlen)
{
    if (hr_mysql_begin(m, errstr, errlen) < 0)
        return -1;
    if (hr_finish_raise_shard(m, id, shard, stats, errstr, errlen) < 0 ||
        hr_mysql_commit(m, errstr, errlen) < 0) {
        hr_mysql_rollback(m);
        return -1;
    }
    return 0;
}

int hr_finish_add(hr_mysql *m, int64_t id, int shard, hr_outcome outcome, int64_t delta,
                  char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(shard), HR_P_I64(delta), HR_P_I64(delta)};
    const hr_mysql_param pt[] = {HR_P_I64(delta), HR_P_I64(id)};
    const char *sql;

    /* Column names cannot be parameters: one statement each. */
    if (outcome != HR_OUTCOME_PULLED && outcome != HR_OUTCOME_FAILED) {
        snprintf(errstr, errlen, "hr_finish_add: outcome %s is not added to",
                 hr_progress_outcome_name(outcome));
        return -1;
    }
    if (shard == HR_SHARD_NONE)
        return hr_mysql_exec(m,
                             outcome == HR_OUTCOME_PULLED
                                 ? "UPDATE push_task SET pulled = GREATEST(pulled + ?, 0) "
                                   "WHERE id = ?"
                                 : "UPDATE push_task SET failed = GREATEST(failed + ?, 0) "
                                   "WHERE id = ?",
                             pt, 2, NULL, NULL, NULL, errstr, errlen);
    sql = outcome == HR_OUTCOME_PULLED
              ? "INSERT INTO push_task_shard (task_id, shard, state, pulled) "
                "VALUES (?, ?, 'waiting', GREATEST(?, 0)) "
                "ON DUPLICATE KEY UPDATE pulled = GREATEST(pulled + ?, 0)"
              : "INSERT INTO push_task_shard (task_id, shard, state, failed) "
                "VALUES (?, ?, 'waiting', GREATEST(?, 0)) "
                "ON DUPLICATE KEY UPDATE failed = GREATEST(failed + ?, 0)";
    if (hr_mysql_begin(m, errstr, errlen) < 0)
        return -1;
    if (hr_finish_lock_task(m, id, errstr, errlen) < 0 ||
        hr_mysql_exec(m, sql, p, 4, NULL, NULL, NULL, errstr, errlen) < 0 ||
        hr_finish_sum(m, id, errstr, errlen) < 0 || hr_mysql_commit(m, errstr, errlen) < 0) {
        hr_mysql_rollback(m);
        return -1;
    }
    return 0;
}

/* One drop_set.lua call's reply (taken): its counts, and with EACH the
 * members it popped; -1 with ERRSTR on another reply. */
static int hr_finish_dropped(redisReply *reply, hr_finish_dropped_fn each, void *ctx, int64_t *n,
                             int64_t *total, char *errstr, size_t errlen)
{
    uint64_t *uids = NULL;
    size_t k = 0;
    int rc = -1;

    if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 2 ||
        (each == NULL && reply->elements != 2) || reply->element[0]->type != REDIS_REPLY_INTEGER ||
        reply->element[1]->type != REDIS_REPLY_INTEGER) {
        snprintf(errstr, errlen, "drop_set: unexpected reply");
        goto done;
    }
    *n = reply->element[0]->integer;
    *total = reply->element[1]->integer;
    if (each != NULL && reply->elements > 2) {
        if ((uids = calloc(reply->elements - 2, sizeof *uids)) == NULL) {
            snprintf(errstr, errlen, "out of memory");
            goto done;
        }
        for (size_t i = 2; i < reply->elements; i++) {
            const redisReply *e = reply->element[i];
            int64_t uid;

            if (e->type == REDIS_REPLY_STRING && hr_parse_uid(e->str, e->len, &uid) == 0)
                uids[k++] = (uint64_t)uid;
        }
        each(ctx, uids, k);
    }
    rc = 0;
done:
    free(uids);
    freeReplyObject(reply);
    return rc;
}

int hr_finish_drop(hr_redis *r, int64_t id, int shard, int64_t seq, hr_outcome outcome,
                   const char *owner, hr_finish_dropped_fn each, void *ctx, int64_t *n,
                   int64_t *total, char *errstr, size_t errlen)
{
    const char *prefix = hr_redis_prefix(r);
    char set[HR_KEY_MAX], stats[HR_KEY_MAX], pending[HR_KEY_MAX], lease[HR_KEY_MAX], seq_s[24];
    char limit[24];
    const char *name = hr_progress_outcome_name(outcome);
    const char *argv[8] = {set,  stats, pending, lease, name, seq_s, owner != NULL ? owner : "",
                           limit};
    const char *subs_argv[4] = {set, stats, name, limit};
    int64_t step;

    snprintf(limit, sizeof limit, "%d", each != NULL ? HR_FINISH_DROP_SLICE : 0);
    hr_key_shard(prefix, stats, sizeof stats, id, shard, HR_KEY_STATS);
    if (seq < 0) {
        hr_key_shard(prefix, set, sizeof set, id, shard,
                     seq == HR_FINISH_WAIT ? HR_KEY_WAIT : HR_KEY_SUBS);
    } else {
        snprintf(seq_s, sizeof seq_s, "%" PRId64, seq);
        hr_key_shard_chunk(prefix, set, sizeof set, id, shard, seq);
        hr_key_shard(prefix, pending, sizeof pending, id, shard, HR_KEY_PENDING);
        hr_key_shard_lease(prefix, lease, sizeof lease, id, shard, seq);
    }
    *n = 0;
    do {
        redisReply *reply =
            seq < 0 ? hr_redis_eval(r, HR_LUA_DROP_SET, 2, 4, subs_argv, NULL, errstr, errlen)
                    : hr_redis_eval(r, HR_LUA_DROP_SET, 4, 8, argv, NULL, errstr, errlen);

        if (reply == NULL || hr_finish_dropped(reply, each, ctx, &step, total, errstr, errlen) != 0)
            return -1;
        if (step < 0) {
            /* Another holds the chunk: nothing (more) of it is ours. */
            if (*n == 0)
                *n = -1;
            break;
        }
        *n += step;
    } while (each != NULL && step == HR_FINISH_DROP_SLICE);
    return 0;
}

int hr_finish_count(hr_mysql *m, int64_t id, int shard, hr_outcome outcome, int64_t total,
                    char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(total), HR_P_I64(id)};
    hr_outcomes one = HR_OUTCOMES_UNKNOWN;

    if (outcome != HR_OUTCOME_CANCELLED && outcome != HR_OUTCOME_EXPIRED) {
        snprintf(errstr, errlen, "hr_finish_count: outcome %s is not dropped",
                 hr_progress_outcome_name(outcome));
        return -1;
    }
    if (shard != HR_SHARD_NONE) {
        *(outcome == HR_OUTCOME_CANCELLED ? &one.cancelled : &one.expired) = total;
        return hr_finish_raise_tx(m, id, shard, &one, errstr, errlen);
    }
    /* Column names cannot be parameters: one statement per outcome. */
    return hr_mysql_exec(
        m,
        outcome == HR_OUTCOME_CANCELLED
            ? "UPDATE push_task SET cancelled = GREATEST(cancelled, ?) WHERE id = ?"
            : "UPDATE push_task SET expired = GREATEST(expired, ?) WHERE id = ?",
        p, 2, NULL, NULL, NULL, errstr, errlen);
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
    if (hr_mysql_query(m, "SELECT unaccounted, state FROM push_task WHERE id = ?", pc, 1, &rows,
                       errstr, errlen) < 0)
        goto done;
    out->subscriptions = subs;
    out->unaccounted = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    /* The row is ours to read back: nothing moves a final state but the
     * admin's repairs. */
    out->state = HR_STATE_DONE;
    if (rows->nrows == 1)
        hr_state_parse(hr_mysql_cell(rows, 0, 1), &out->state);
    rc = 1;
done:
    hr_mysql_rows_free(rows);
    return rc;
}
