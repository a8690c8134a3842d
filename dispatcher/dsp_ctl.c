/* dsp_ctl: the dispatcher's side of pause / resume / cancel, run by the
 * background job after each scan.
 *
 * An admin sets push_task.control (SQL, API or heraldctl; the latter two
 * also set the ctl key at once).  Everything here is rebuilt from MySQL and
 * Redis on every scan, nothing is remembered in memory:
 *   - control=pause on a scheduled/dispatching/dispatched task: the ctl key
 *     says pause, state -> paused.  The owner stops chunking at its next
 *     lease tick (the row is no longer `dispatching`); workers park their
 *     chunks (recipients stay, pending stays, no lease).
 *   - control=run on a paused task: never claimed -> scheduled; otherwise
 *     dispatching with an expired lease and no owner (any dispatcher's
 *     poller takes it over and chunks what is left) when subs is not empty
 *     or it never reached dispatched, else dispatched.  Parked chunks
 *     (pending, no lease) are republished at once, counted as redelivered.
 *   - control=cancel on an unfinished task: subs and the pending chunks no
 *     worker holds are dropped and counted as cancelled (cancel_set.lua,
 *     stats and MySQL), state -> cancelled.  Chunks held by live workers
 *     are cancelled by those workers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp.h"
#include "hr_log.h"

#define DSP_CTL_MAX 100 /* transitions per scan */

static int dsp_ctl_pause(dsp *d, int64_t id, char *err, size_t errlen)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param p[] = {HR_P_I64(id)};
    uint64_t affected = 0;

    if (hr_task_set_control(NULL, c->r, id, "pause", err, errlen) < 0)
        return -1;
    if (hr_mysql_exec(c->m,
                      "UPDATE push_task SET state = 'paused' WHERE id = ? AND control = 'pause' "
                      "AND state IN ('scheduled', 'dispatching', 'dispatched')",
                      p, 1, &affected, NULL, NULL, err, errlen) < 0)
        return -1;
    if (affected == 1)
        hr_log_info("task_paused", "task=%lld", (long long)id);
    return 0;
}

static int dsp_ctl_resume(dsp *d, int64_t id, bool claimed, bool reached_dispatched,
                          int64_t due_ms, char *err, size_t errlen)
{
    dsp_conn *c = &d->bg_conn;
    char subs[256];
    const char *state = "scheduled";
    redisReply *reply;
    uint64_t affected = 0;
    int64_t nsubs, now = dsp_now_ms();
    int budget = DSP_SWEEP_MAX;

    if (claimed) {
        hr_redis_task_key(c->r, subs, sizeof subs, id, "subs");
        reply = hr_redis_cmdf(c->r, err, errlen, "SCARD %s", subs);
        if (reply == NULL)
            return -1;
        nsubs = reply->integer;
        freeReplyObject(reply);
        state = nsubs > 0 || !reached_dispatched ? "dispatching" : "dispatched";
    }
    if (hr_task_set_control(NULL, c->r, id, "run", err, errlen) < 0)
        return -1;
    {
        const hr_mysql_param p[] = {HR_P_STR(state), HR_P_I64(id)};

        /* lease_until in the past and no owner: a poller takes it over. */
        if (hr_mysql_exec(c->m,
                          "UPDATE push_task SET state = ?, claimed_by = NULL, "
                          "lease_until = UTC_TIMESTAMP(3) - INTERVAL 1 SECOND "
                          "WHERE id = ? AND control = 'run' AND state = 'paused'",
                          p, 2, &affected, NULL, NULL, err, errlen) < 0)
            return -1;
    }
    if (affected != 1)
        return 0;
    hr_log_info("task_resumed", "task=%lld state=%s", (long long)id, state);
    if (claimed && dsp_sweep_task(d, id, due_ms, now, now, &budget) < 0) {
        /* The sweeper republishes the parked chunks after the redelivery
         * timeout instead. */
        hr_log_warn("resume_republish_failed", "task=%lld", (long long)id);
    }
    return 0;
}

/* Drops one set (subs, or chunk SEQ >= 0) with cancel_set.lua.  The count
 * cancelled, 0 for a chunk a worker holds, -1 on error. */
static int64_t dsp_ctl_drop(dsp_conn *c, int64_t id, const char *seq, char *err, size_t errlen)
{
    char base[256], set[320], stats[320], pending[320], lease[320];
    const char *argv[5] = {set, stats, pending, lease, seq};
    redisReply *reply;
    int64_t n;

    hr_redis_task_key(c->r, base, sizeof base, id, "");
    snprintf(stats, sizeof stats, "%sstats", base);
    if (seq == NULL) {
        snprintf(set, sizeof set, "%ssubs", base);
        reply = hr_redis_eval(c->r, HR_LUA_CANCEL_SET, 2, 2, argv, NULL, err, errlen);
    } else {
        snprintf(set, sizeof set, "%schunk:%.24s", base, seq);
        snprintf(pending, sizeof pending, "%spending", base);
        snprintf(lease, sizeof lease, "%slease:%.24s", base, seq);
        reply = hr_redis_eval(c->r, HR_LUA_CANCEL_SET, 4, 5, argv, NULL, err, errlen);
    }
    if (reply == NULL)
        return -1;
    n = reply->type == REDIS_REPLY_INTEGER ? reply->integer : 0;
    freeReplyObject(reply);
    return n < 0 ? 0 : n;
}

static int dsp_ctl_cancel(dsp *d, int64_t id, char *err, size_t errlen)
{
    dsp_conn *c = &d->bg_conn;
    char pending[256];
    redisReply *all = NULL;
    int64_t n, cancelled;
    uint64_t affected = 0;
    size_t i;
    int rc = -1;

    if (hr_task_set_control(NULL, c->r, id, "cancel", err, errlen) < 0)
        return -1;
    cancelled = dsp_ctl_drop(c, id, NULL, err, errlen);
    if (cancelled < 0)
        return -1;
    hr_redis_task_key(c->r, pending, sizeof pending, id, "pending");
    all = hr_redis_cmdf(c->r, err, errlen, "HKEYS %s", pending);
    if (all == NULL)
        goto done;
    for (i = 0; i < all->elements; i++) {
        n = dsp_ctl_drop(c, id, all->element[i]->str, err, errlen);
        if (n < 0)
            goto done;
        cancelled += n;
    }
    {
        const hr_mysql_param p[] = {HR_P_I64(cancelled), HR_P_I64(id)};

        if (hr_mysql_exec(c->m,
                          "UPDATE push_task SET cancelled = cancelled + ?, state = 'cancelled', "
                          "finished_at = UTC_TIMESTAMP(3) WHERE id = ? AND control = 'cancel' "
                          "AND state NOT IN ('done', 'cancelled', 'failed')",
                          p, 2, &affected, NULL, NULL, err, errlen) < 0) {
            /* Redis counted them; the next scan finds nothing left. */
            hr_log_error("cancel_count_lost", "task=%lld cancelled=%lld error=%s",
                         (long long)id, (long long)cancelled, err);
            goto done;
        }
    }
    hr_log_info("task_cancelled", "task=%lld cancelled=%lld", (long long)id,
                (long long)cancelled);
    if (affected == 1 && dsp_retire_keys(c, id, err, errlen) < 0)
        hr_log_warn("retire_failed", "task=%lld error=%s", (long long)id, err);
    rc = 0;
done:
    freeReplyObject(all);
    return rc;
}

void dsp_ctl_scan(dsp *d)
{
    dsp_conn *c = &d->bg_conn;
    const hr_mysql_param p[] = {DSP_TOPIC_PARAMS(d), HR_P_I64(DSP_CTL_MAX)};
    hr_mysql_rows *rows = NULL;
    char err[512];
    size_t i;

    if (atomic_load(&d->stopping))
        return;
    if (hr_mysql_query(c->m,
                       "SELECT id, control, started_at IS NOT NULL, dispatched_at IS NOT NULL, "
                       "COALESCE(CAST(ROUND(UNIX_TIMESTAMP(due_at) * 1000) AS SIGNED), 0) "
                       "FROM push_task WHERE ((control = 'pause' AND state IN "
                       "('scheduled', 'dispatching', 'dispatched')) "
                       "OR (control = 'run' AND state = 'paused') "
                       "OR (control = 'cancel' AND state IN "
                       "('scheduled', 'dispatching', 'dispatched', 'paused'))) "
                       "AND (? IS NULL OR topic = ?) ORDER BY id LIMIT ?",
                       p, 3, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, c, DSP_MYSQL, err);
        return;
    }
    for (i = 0; i < rows->nrows && !atomic_load(&d->stopping); i++) {
        int64_t id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        const char *control = hr_mysql_cell(rows, i, 1);
        int rc;

        if (strcmp(control, "pause") == 0)
            rc = dsp_ctl_pause(d, id, err, sizeof err);
        else if (strcmp(control, "run") == 0)
            rc = dsp_ctl_resume(d, id, hr_mysql_cell(rows, i, 2)[0] == '1',
                                hr_mysql_cell(rows, i, 3)[0] == '1',
                                strtoll(hr_mysql_cell(rows, i, 4), NULL, 10), err, sizeof err);
        else
            rc = dsp_ctl_cancel(d, id, err, sizeof err);
        if (rc < 0) {
            hr_log_warn("control_failed", "task=%lld control=%s error=%s", (long long)id,
                        control, err);
            break;
        }
    }
    hr_mysql_rows_free(rows);
}
