/* hr_finish: the end of a campaign (see hr_finish.h) — the stats hash read,
 * the subscriptions counted for hr_state_finish(), which moves the task,
 * and the raise of the outcome counters that reporter and recover share. */
#include "hr_finish.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"
#include "hr_keys.h"
#include "hr_parse.h"
#include "hr_pipe.h"
#include "hr_state.h"
#include "hr_subs.h"

/* The stats hash's fields an HMGET reads, in the order of the reply. */
static const char *const hr_finish_stats_fields[] = {
    "sent",    "failed",       "throttled", "pulled",    "cancelled",
    "retried", "unregistered", "expired",   "opted_out", "suppressed"};
#define HR_FINISH_STATS_N (sizeof hr_finish_stats_fields / sizeof *hr_finish_stats_fields)

int hr_finish_stats_reply(redisReply *reply, hr_outcomes *out)
{
    int64_t *fields[HR_FINISH_STATS_N] = {
        &out->sent,    &out->failed,       &out->throttled, &out->pulled,    &out->cancelled,
        &out->retried, &out->unregistered, &out->expired,   &out->opted_out, &out->suppressed};

    if (reply == NULL)
        return -1;
    for (size_t i = 0; i < HR_FINISH_STATS_N; i++)
        *fields[i] = reply->type == REDIS_REPLY_ARRAY && i < reply->elements &&
                             reply->element[i]->type == REDIS_REPLY_STRING
                         ? strtoll(reply->element[i]->str, NULL, 10)
                         : 0;
    freeReplyObject(reply);
    return 0;
}

int hr_finish_stats_queue(hr_pipe *pipe, const char *prefix, int64_t id, int shard)
{
    char key[HR_KEY_MAX];
    const char *argv[2 + HR_FINISH_STATS_N] = {"HMGET", key};

    hr_key_shard(prefix, key, sizeof key, id, shard, HR_KEY_STATS);
    memcpy(argv + 2, hr_finish_stats_fields, sizeof hr_finish_stats_fields);
    return hr_pipe_cmd(pipe, 2 + (int)HR_FINISH_STATS_N, argv, NULL);
}

int hr_finish_read_stats(hr_redis *r, int64_t id, int shard, hr_outcomes *out, char *errstr,
                         size_t errlen)
{
    hr_pipe *pipe = hr_pipe_new(r);
    int rc = -1;

    if (pipe == NULL || hr_finish_stats_queue(pipe, hr_redis_prefix(r), id, shard) < 0)
        snprintf(errstr, errlen, "out of memory");
    else if (hr_pipe_exec(pipe, errstr, errlen) == 0)
        rc = hr_finish_stats_reply(hr_pipe_reply(pipe, 0, errstr, errlen), out);
    hr_pipe_free(pipe);
    return rc;
}

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

static int hr_finish_raise_cmp(const void *a, const void *b)
{
    int64_t x = (*(const hr_finish_raise_row *const *)a)->id,
            y = (*(const hr_finish_raise_row *const *)b)->id;

    return (x > y) - (x < y);
}

int hr_finish_raise_batch(hr_mysql *m, const hr_finish_raise_row *rows, size_t n, char *errstr,
                          size_t errlen)
{
    const hr_finish_raise_row **by_id = calloc(n + 1, sizeof *by_id);
    int64_t *cells = calloc(n * 11 + 1, sizeof *cells);
    int rc = -1;

    if (by_id == NULL || cells == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    /* In id order, as every batch that locks task rows: two writers never
     * wait on each other's rows the other way round. */
    for (size_t i = 0; i < n; i++)
        by_id[i] = &rows[i];
    qsort(by_id, n, sizeof *by_id, hr_finish_raise_cmp);
    for (size_t i = 0; i < n; i++) {
        const hr_outcomes *o = &by_id[i]->stats;
        const int64_t row[11] = {by_id[i]->id, o->sent,      o->failed,    o->throttled,
                                 o->pulled,    o->cancelled, o->retried,   o->unregistered,
                                 o->expired,   o->opted_out, o->suppressed};

        memcpy(cells + 11 * i, row, sizeof row);
    }
    rc = n == 0 ? 0
                : hr_batch_exec(m,
                                "UPDATE JSON_TABLE(?, '$[*]' COLUMNS (task BIGINT PATH '$[0]', "
                                "sent BIGINT PATH '$[1]', failed BIGINT PATH '$[2]', "
                                "throttled BIGINT PATH '$[3]', pulled BIGINT PATH '$[4]', "
                                "cancelled BIGINT PATH '$[5]', retried BIGINT PATH '$[6]', "
                                "unregistered BIGINT PATH '$[7]', expired BIGINT PATH '$[8]', "
                                "opted_out BIGINT PATH '$[9]', suppressed BIGINT PATH '$[10]')) j "
                                "STRAIGHT_JOIN push_task t FORCE INDEX (PRIMARY) ON t.id = j.task "
                                "SET t.sent = GREATEST(t.sent, j.sent), "
                                "t.failed = GREATEST(t.failed, j.failed), "
                                "t.throttled = GREATEST(t.throttled, j.throttled), "
                                "t.pulled = GREATEST(t.pulled, j.pulled), "
                                "t.cancelled = GREATEST(t.cancelled, j.cancelled), "
                                "t.retried = GREATEST(t.retried, j.retried), "
                                "t.unregistered = GREATEST(t.unregistered, j.unregistered), "
                                "t.expired = GREATEST(t.expired, j.expired), "
                                "t.opted_out = GREATEST(t.opted_out, j.opted_out), "
                                "t.suppressed = GREATEST(t.suppressed, j.suppressed)",
                                &(hr_batch){cells, n, 11}, NULL, 0, NULL, NULL, errstr, errlen);
done:
    free(cells);
    free(by_id);
    return rc;
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
        return hr_finish_raise_batch(m, &(hr_finish_raise_row){id, *stats}, 1, errstr, errlen);
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

static int hr_finish_item_cmp(const void *a, const void *b)
{
    int64_t x = ((const hr_finish_item *)a)->id, y = ((const hr_finish_item *)b)->id;

    return (x > y) - (x < y);
}

/* What the candidates' read writes: batch row I is ITEMS[I]. */
static bool hr_finish_candidate_row(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    hr_finish_item *items = ctx;

    items[i].ended = true; /* a candidate, until the lock says */
    items[i].fin.subscriptions = strtoll(hr_mysql_cell(rows, row, 1), NULL, 10);
    return true;
}

/* What the read back of the ended rows writes: batch row I is
 * ITEMS[AT[I]]. */
typedef struct hr_finish_gaps {
    hr_finish_item *items;
    const size_t *at;
} hr_finish_gaps;

static bool hr_finish_gap_row(void *ctx, size_t i, const hr_mysql_rows *rows, size_t row)
{
    hr_finish_gaps *g = ctx;

    hr_finish_result *fin = &g->items[g->at[i]].fin;

    fin->unaccounted = strtoll(hr_mysql_cell(rows, row, 1), NULL, 10);
    /* The row is locked and ours to read back: nothing moves a final state
     * but the admin's repairs. */
    fin->state = HR_STATE_DONE;
    hr_state_parse(hr_mysql_cell(rows, row, 2), &fin->state);
    return true;
}

int hr_finish_tasks(hr_mysql *m, hr_finish_item *items, size_t n, char *errstr, size_t errlen)
{
    int64_t *ids = calloc(n + 1, sizeof *ids), *pairs = calloc(2 * n + 1, sizeof *pairs);
    hr_finish_raise_row *raise = calloc(n + 1, sizeof *raise);
    size_t *at = calloc(n + 1, sizeof *at);
    bool *locked = calloc(n + 1, sizeof *locked);
    size_t i, k = 0, nraise = 0;
    uint64_t moved = 0;
    int rc = -1;

    if (ids == NULL || pairs == NULL || raise == NULL || at == NULL || locked == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    if (n > 0)
        qsort(items, n, sizeof *items, hr_finish_item_cmp);
    for (i = 0; i < n; i++) {
        items[i].ended = false;
        items[i].fin = (hr_finish_result){0};
        ids[i] = items[i].id;
    }
    /* The dispatched ones and their subscriptions, without a lock: most
     * tasks a reporter asks about are not dispatched yet (their last
     * chunk closed before the dispatcher's report), and a lock on their
     * rows would hold up the dispatcher that makes them dispatched.  By
     * the primary key, as hr_state_lock_dispatched: through the state
     * index it read every dispatched task. */
    if (n == 0)
        goto out;
    if (hr_batch_select(m,
                        "SELECT t.id, " HR_SUBS_COUNT(
                            "t") " FROM JSON_TABLE(?, '$[*]' "
                                 "COLUMNS (task BIGINT PATH '$')) j "
                                 "STRAIGHT_JOIN push_task t FORCE INDEX (PRIMARY) ON t.id = j.task "
                                 "WHERE t.state = 'dispatched'",
                        &(hr_batch){ids, n, 1}, NULL, 0, 1, hr_finish_candidate_row, items, errstr,
                        errlen) < 0)
        goto done;
    for (i = 0; i < n; i++)
        if (items[i].ended) {
            at[k] = i;
            ids[k++] = items[i].id;
        }
    if (k == 0)
        goto out;
    if (hr_state_lock_dispatched(m, ids, k, locked, errstr, errlen) < 0)
        goto done;
    for (i = 0; i < k; i++) {
        hr_finish_item *it = &items[at[i]];

        it->ended = locked[i];
        if (!it->ended)
            continue;
        pairs[2 * nraise] = it->id;
        pairs[2 * nraise + 1] = it->fin.subscriptions;
        at[nraise] = at[i];
        ids[nraise] = it->id;
        raise[nraise++] = (hr_finish_raise_row){it->id, it->stats};
    }
    k = nraise;
    /* The counters raised first (a reporter's are written already: its
     * stats are unknown), then the state from them. */
    nraise = 0;
    for (i = 0; i < k; i++)
        if (memcmp(&raise[i].stats, &HR_OUTCOMES_UNKNOWN, sizeof raise[i].stats) != 0)
            raise[nraise++] = raise[i];
    if (hr_finish_raise_batch(m, raise, nraise, errstr, errlen) < 0 ||
        hr_state_finish(m, pairs, k, &moved, errstr, errlen) < 0 ||
        (k > 0 &&
         hr_batch_select(
             m,
             "SELECT t.id, t.unaccounted, t.state FROM JSON_TABLE(?, '$[*]' COLUMNS (task "
             "BIGINT PATH '$')) j STRAIGHT_JOIN push_task t FORCE INDEX (PRIMARY) ON t.id = j.task",
             &(hr_batch){ids, k, 1}, NULL, 0, 1, hr_finish_gap_row, &(hr_finish_gaps){items, at},
             errstr, errlen) < 0))
        goto done;
out:
    rc = 0;
done:
    if (rc < 0)
        for (i = 0; i < n; i++)
            items[i].ended = false;
    free(ids);
    free(pairs);
    free(raise);
    free(at);
    free(locked);
    return rc;
}
