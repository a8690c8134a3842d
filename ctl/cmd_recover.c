/* cmd_recover: `heraldctl recover TASK` — rebuilds a task's Redis state from
 * MySQL after Redis lost it (or part of it).
 *
 *   0. A `failed` task is recovered only when it failed unaccounted (its
 *      outcomes did not cover its subscriptions, hr_finish.h): Redis lost
 *      recipients, and this is what pushes them.  A `dispatching` task is
 *      refused: its owner chunks it and would
 *      INCR seq under our feet.  Pause it first (state becomes paused), or
 *      let it reach dispatched.  So is a task with a live chunk lease (any
 *      lease:* key): its holder pushes the members it read into memory
 *      while the rebuilt set, which still holds them, is chunked again, so
 *      every one of them would go out twice.  Pausing makes the holders park
 *      their chunks (lease released); leases lost with Redis are no
 *      obstacle.  The task's prepare lock is taken and held
 *      until the set is filled, so no dispatcher's refill or first chunk
 *      runs meanwhile.
 *   1. The stale working keys go: subs, seq, pending, every chunk:* and
 *      lease:* of the task (pulled, failed and stats stay: what survived of
 *      them is still true; counters of a lost stats hash are raised back to
 *      MySQL's, which workers only ever raise).
 *   2. subs = push_subscription minus the recipients push_delivery shows
 *      as sent/failed/throttled/pulled, minus the pulled set: hr_subs_refill
 *      (the dispatcher's refill, excluding delivered recipients).  A refill
 *      cut short (seq appeared, lock lost) is an error.
 *   3. seq is set to the highest push_chunk seq, so new chunks never reuse a
 *      number whose row exists (a reused one would not count in total).
 *      The push_chunk rows of chunks that were not done are deleted (their
 *      Redis sets are gone; what they still held is back in subs), and
 *      total restarts from the recipients the delivery log shows as
 *      delivered, so the rebuilt chunks are not counted twice; the stats
 *      hash's `published` restarts from the same number (the rebuilt
 *      chunks' first publishes add to both), or progress and status would
 *      count the recipients republished twice.
 *   4. A dispatched task becomes `dispatching` with no owner and an
 *      expired lease, so a dispatcher's poller takes it over
 *      and chunks the rebuilt set; a scheduled one goes back into the timer;
 *      a paused one stays paused (resume chunks it).  The ctl key mirrors
 *      control. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "ctl.h"
#include "hr_finish.h"
#include "hr_state.h"
#include "hr_subs.h"
#include "hr_task.h"

#define RECOVER_BATCH 10000
#define RECOVER_LOCK_MS 120000
#define RECOVER_LOCK_WAIT_MS 30000
#define RECOVER_SCAN_ROUNDS 100000

/* Step 3's MySQL side, in one transaction: the rows of chunks that were not
 * done go, and total becomes what the delivery log shows as delivered; the
 * chunks cut from the rebuilt set add their sizes again. */
static int recover_reset_total(hr_mysql *m, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    const hr_mysql_param p2[] = {HR_P_I64(id), HR_P_I64(id)};

    if (hr_mysql_begin(m, errstr, errlen) < 0)
        return -1;
    if (hr_mysql_exec(m, "DELETE FROM push_chunk WHERE task_id = ? AND state <> 'done'", p, 1,
                      NULL, NULL, NULL, errstr, errlen) < 0 ||
        hr_mysql_exec(m,
                      "UPDATE push_task SET total = (SELECT COUNT(*) FROM push_delivery "
                      "WHERE task_id = ? AND status IN ('sent', 'failed', 'throttled')) "
                      "WHERE id = ?",
                      p2, 2, NULL, NULL, NULL, errstr, errlen) < 0 ||
        hr_mysql_commit(m, errstr, errlen) < 0) {
        hr_mysql_rollback(m);
        return -1;
    }
    return 0;
}

/* Step 3's Redis side: stats.published = push_task.total as just reset. */
static int recover_reset_published(hr_mysql *m, hr_redis *r, int64_t id, char *errstr,
                                   size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    redisReply *reply;
    char key[HR_KEY_MAX];
    int rc = -1;

    if (hr_mysql_query(m, "SELECT total FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                       errlen) < 0)
        return -1;
    if (rows->nrows != 1 || hr_mysql_cell(rows, 0, 0) == NULL) {
        snprintf(errstr, errlen, "task %" PRId64 " disappeared", id);
        goto done;
    }
    reply = hr_redis_cmdf(r, errstr, errlen, "HSET %s published %s",
                          hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_STATS),
                          hr_mysql_cell(rows, 0, 0));
    if (reply == NULL)
        goto done;
    freeReplyObject(reply);
    rc = 0;
done:
    hr_mysql_rows_free(rows);
    return rc;
}

/* Workers write the stats hash's counters to MySQL as absolute values
 * (GREATEST), so a stats hash lost with Redis must not restart from 0: each
 * counter is raised back to what MySQL recorded (the task is paused or not
 * started, so no worker bumps them meanwhile). */
/* Raises T's outcome counters, in T and in MySQL, to what the delivery
 * log shows (one row per recipient): a stats hash lost with Redis, or one
 * that workers recreated from zero afterwards, leaves push_task's counters
 * below the outcomes the log holds, and those recipients are neither
 * pushed again (the refill skips them) nor counted.  0 or -1 (ERR). */
static int recover_log_counts(hr_mysql *m, hr_task *t, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(t->id)};
    hr_mysql_rows *rows = NULL;
    size_t i;

    if (hr_mysql_query(m, "SELECT status, COUNT(*) FROM push_delivery WHERE task_id = ? "
                          "GROUP BY status",
                       p, 1, &rows, errstr, errlen) < 0)
        return -1;
    for (i = 0; i < rows->nrows; i++) {
        const char *status = hr_mysql_cell(rows, i, 0);
        int64_t n = strtoll(hr_mysql_cell(rows, i, 1), NULL, 10);
        int64_t *field = strcmp(status, "sent") == 0        ? &t->sent
                         : strcmp(status, "failed") == 0    ? &t->failed
                         : strcmp(status, "throttled") == 0 ? &t->throttled
                         : strcmp(status, "pulled") == 0    ? &t->pulled
                         : strcmp(status, "cancelled") == 0 ? &t->cancelled
                                                            : NULL;

        if (field != NULL && n > *field)
            *field = n;
    }
    hr_mysql_rows_free(rows);
    {
        const hr_outcomes raised = {.sent = t->sent,           .failed = t->failed,
                                    .throttled = t->throttled, .pulled = t->pulled,
                                    .cancelled = t->cancelled, .retried = -1};

        return hr_finish_raise(m, t->id, &raised, errstr, errlen);
    }
}

static int recover_restore_stats(hr_redis *r, const hr_task *t, char *errstr, size_t errlen)
{
    const struct {
        const char *field;
        int64_t value;
    } counters[] = {{"sent", t->sent},           {"failed", t->failed},
                    {"throttled", t->throttled}, {"retried", t->retried},
                    {"pulled", t->pulled},       {"cancelled", t->cancelled}};
    redisReply *reply;
    char key[HR_KEY_MAX];
    size_t i;

    hr_key_task(hr_redis_prefix(r), key, sizeof key, t->id, HR_KEY_STATS);
    for (i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        int64_t have;

        reply = hr_redis_cmdf(r, errstr, errlen, "HGET %s %s", key, counters[i].field);
        if (reply == NULL)
            return -1;
        have = reply->type == REDIS_REPLY_STRING ? strtoll(reply->str, NULL, 10) : 0;
        freeReplyObject(reply);
        if (have >= counters[i].value)
            continue;
        reply = hr_redis_cmdf(r, errstr, errlen, "HSET %s %s %" PRId64, key, counters[i].field,
                              counters[i].value);
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    return 0;
}

/* Deletes the keys matching MATCH (SCAN, bounded); with DEL false only
 * counts them, stopping at the first.  The number deleted (or found), or
 * -1. */
static int64_t recover_del_matching(hr_redis *r, const char *match, bool del, char *errstr,
                                    size_t errlen)
{
    char cursor[32] = "0";
    int64_t deleted = 0;
    size_t i;
    int rounds = 0;

    do {
        redisReply *reply = hr_redis_cmdf(r, errstr, errlen, "SCAN %s MATCH %s COUNT 1000", cursor,
                                          match);

        if (reply == NULL)
            return -1;
        snprintf(cursor, sizeof cursor, "%s", reply->element[0]->str);
        if (!del) {
            deleted += (int64_t)reply->element[1]->elements;
            freeReplyObject(reply);
            if (deleted > 0)
                break;
            continue;
        }
        for (i = 0; i < reply->element[1]->elements; i++) {
            redisReply *gone = hr_redis_cmdf(r, errstr, errlen, "DEL %s",
                                             reply->element[1]->element[i]->str);

            if (gone == NULL) {
                freeReplyObject(reply);
                return -1;
            }
            deleted += gone->integer;
            freeReplyObject(gone);
        }
        freeReplyObject(reply);
    } while (strcmp(cursor, "0") != 0 && ++rounds < RECOVER_SCAN_ROUNDS);
    return deleted;
}

/* Task ID's unaccounted subscriptions (a `failed` task whose outcomes did
 * not cover them, hr_finish.h), or -1 (reported). */
static int64_t recover_unaccounted(hr_mysql *m, int64_t id)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    char errstr[512];
    int64_t v;

    if (hr_mysql_query(m, "SELECT unaccounted FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                       sizeof errstr) < 0) {
        ctl_fail("%s", errstr);
        return -1;
    }
    v = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    hr_mysql_rows_free(rows);
    return v;
}

/* Records that the rebuilt set holds every subscription up to the task's
 * current epoch (P T:synced, see hr_subs.h).  0 or -1 (ERR). */
static int recover_mark_synced(hr_mysql *m, hr_redis *r, int64_t id, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    hr_mysql_rows *rows = NULL;
    redisReply *reply;
    char key[HR_KEY_MAX];
    int64_t epoch;

    if (hr_mysql_query(m, "SELECT subs_epoch FROM push_task WHERE id = ?", p, 1, &rows, errstr,
                       errlen) < 0)
        return -1;
    epoch = rows->nrows == 1 ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10) : 0;
    hr_mysql_rows_free(rows);
    reply = hr_redis_cmdf(r, errstr, errlen, "SET %s %" PRId64,
                          hr_key_task(hr_redis_prefix(r), key, sizeof key, id, HR_KEY_SYNCED),
                          epoch + 1);
    freeReplyObject(reply);
    return reply != NULL ? 0 : -1;
}

int ctl_cmd_recover(ctl_ctx *ctx, int argc, char **argv)
{
    hr_mysql *m;
    hr_redis *r;
    hr_task *t = NULL;
    hr_mysql_rows *rows = NULL;
    redisReply *reply;
    char errstr[512], key[HR_KEY_MAX], keys[3][HR_KEY_MAX], token[128];
    const char *prefix;
    hr_subs_refill_opts o = {.token = token, .lock_ms = RECOVER_LOCK_MS,
                             .batch = RECOVER_BATCH, .exclude_delivered = true};
    int64_t id, dropped, dropped2, maxseq, added = 0, seen = 0, unaccounted;
    hr_task_state state;
    int wait;
    bool claimed, locked = false;
    int rc, fill;

    rc = ctl_task_arg(ctx, argc, argv, &m, &r, &t);
    if (rc != CTL_EXIT_OK)
        return rc;
    rc = CTL_EXIT_FAIL;
    id = t->id;
    prefix = hr_redis_prefix(r);
    if (hr_state_parse(t->state, &state) < 0) {
        ctl_fail("task %" PRId64 " has an unknown state \"%s\"", id, t->state);
        goto done;
    }
    unaccounted = state == HR_STATE_FAILED ? recover_unaccounted(m, id) : 0;
    if (unaccounted < 0)
        goto done;
    if (state == HR_STATE_DONE || state == HR_STATE_CANCELLED ||
        (state == HR_STATE_FAILED && unaccounted == 0)) {
        ctl_fail("task %" PRId64 " is %s; nothing to recover", id, t->state);
        goto done;
    }
    if (state == HR_STATE_DISPATCHING) {
        ctl_fail("task %" PRId64 " is dispatching: a dispatcher is chunking it; pause it first "
                 "(heraldctl pause %" PRId64 "), wait until it is paused, recover, then resume",
                 id, id);
        goto done;
    }
    claimed = state != HR_STATE_SCHEDULED;
    snprintf(token, sizeof token, "heraldctl/%ld", (long)getpid());
    /* A scanner's sync holds the lock for a moment; a refill or a
     * reconciliation of a big set for longer. */
    for (wait = 0; (rc = hr_subs_lock(r, id, token, RECOVER_LOCK_MS, errstr, sizeof errstr)) == 0 &&
                   wait < RECOVER_LOCK_WAIT_MS;
         wait += 100)
        usleep(100000);
    rc = rc < 0 ? -1 : rc;
    if (rc < 0)
        goto redis_failed;
    rc = CTL_EXIT_FAIL;
    if (wait >= RECOVER_LOCK_WAIT_MS) {
        ctl_fail("task %" PRId64 ": a dispatcher is preparing it (prepare lock held for %d s); try "
                 "again in a minute", id, RECOVER_LOCK_WAIT_MS / 1000);
        goto done;
    }
    locked = true;
    dropped = recover_del_matching(r, hr_key_leases_match(prefix, key, sizeof key, id), false,
                                   errstr, sizeof errstr);
    if (dropped < 0)
        goto redis_failed;
    if (dropped > 0) {
        ctl_fail("task %" PRId64 " has chunks in flight (a worker holds a chunk lease): its "
                 "workers would push what they hold while the rebuilt set is chunked again; "
                 "pause it first (heraldctl pause %" PRId64 "), wait until it is paused and its "
                 "chunks are "
                 "parked, recover, then resume", id, id);
        goto done;
    }
    reply = hr_redis_cmdf(r, errstr, sizeof errstr, "DEL %s %s %s",
                          hr_key_task(prefix, keys[0], sizeof keys[0], id, HR_KEY_SUBS),
                          hr_key_task(prefix, keys[1], sizeof keys[1], id, HR_KEY_SEQ),
                          hr_key_task(prefix, keys[2], sizeof keys[2], id, HR_KEY_PENDING));
    if (reply == NULL)
        goto redis_failed;
    freeReplyObject(reply);
    dropped = recover_del_matching(r, hr_key_chunks_match(prefix, key, sizeof key, id), true,
                                   errstr, sizeof errstr);
    if (dropped < 0)
        goto redis_failed;
    dropped2 = recover_del_matching(r, hr_key_leases_match(prefix, key, sizeof key, id), true,
                                    errstr, sizeof errstr);
    if (dropped2 < 0)
        goto redis_failed;
    /* Our own lock counts as taken: hr_subs_refill holds it on and
     * releases it. */
    fill = hr_subs_refill(m, r, id, &o, &added, &seen, errstr, sizeof errstr);
    locked = false;
    if (fill < 0) {
        ctl_fail("%s", errstr);
        goto done;
    }
    if (fill != HR_SUBS_DONE) {
        ctl_fail("task %" PRId64 ": the set is incomplete (%" PRId64 " added): %s; run recover "
                 "again", id, added, hr_subs_result_str(fill));
        goto done;
    }
    {
        const hr_mysql_param p[] = {HR_P_I64(id)};

        if (hr_mysql_query(m, "SELECT COALESCE(MAX(seq), 0) FROM push_chunk WHERE task_id = ?",
                           p, 1, &rows, errstr, sizeof errstr) < 0) {
            ctl_fail("%s", errstr);
            goto done;
        }
        maxseq = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    }
    /* The set holds every subscription now: the owner's reconciliation
     * must not read them again (it would bring back the delivered ones). */
    if (recover_mark_synced(m, r, id, errstr, sizeof errstr) < 0) {
        ctl_fail("%s", errstr);
        goto done;
    }
    if (claimed && maxseq > 0) {
        reply = hr_redis_cmdf(r, errstr, sizeof errstr, "SET %s %" PRId64,
                              hr_key_task(prefix, key, sizeof key, id, HR_KEY_SEQ), maxseq);
        if (reply == NULL)
            goto redis_failed;
        freeReplyObject(reply);
    }
    if (claimed && (recover_reset_total(m, id, errstr, sizeof errstr) < 0 ||
                    recover_reset_published(m, r, id, errstr, sizeof errstr) < 0)) {
        ctl_fail("%s", errstr);
        goto done;
    }
    if (recover_log_counts(m, t, errstr, sizeof errstr) < 0) {
        ctl_fail("%s", errstr);
        goto done;
    }
    if (recover_restore_stats(r, t, errstr, sizeof errstr) < 0)
        goto redis_failed;
    reply = hr_redis_cmdf(r, errstr, sizeof errstr, "SET %s %s",
                          hr_key_task(prefix, key, sizeof key, id, HR_KEY_CTL), t->control);
    if (reply == NULL)
        goto redis_failed;
    freeReplyObject(reply);
    if (!claimed) {
        reply = hr_redis_cmdf(r, errstr, sizeof errstr, "ZADD %s %" PRId64 " %" PRId64,
                              hr_key_timer(prefix, key, sizeof key), t->due_ms, id);
        if (reply == NULL)
            goto redis_failed;
        freeReplyObject(reply);
    } else if (state != HR_STATE_PAUSED) {
        if (hr_state_recover(m, id, errstr, sizeof errstr) < 0) {
            ctl_fail("%s", errstr);
            goto done;
        }
        state = HR_STATE_DISPATCHING;
    }
    printf("task %" PRId64 ": recovered subs=%" PRId64 " (undelivered subscriptions=%" PRId64
           ") dropped_chunks=%" PRId64 " dropped_leases=%" PRId64 " seq=%" PRId64 " state=%s\n",
           id, added, seen, dropped, dropped2, claimed ? maxseq : 0, hr_state_name(state));
    rc = CTL_EXIT_OK;
    goto done;
redis_failed:
    ctl_fail("%s", errstr);
done:
    if (locked)
        hr_subs_unlock(r, id, token, errstr, sizeof errstr);
    hr_mysql_rows_free(rows);
    hr_task_free(t);
    return rc;
}
