/* dsp_control: the dispatcher's side of pause / resume / cancel, run by the
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
 *     poller takes it over and chunks what is left) when subs or the wait
 *     set is not empty
 *     or it never reached dispatched, else dispatched.  Parked chunks
 *     (pending, no lease) are republished at once, counted as redelivered.
 *   - control=cancel on an unfinished task: subs, the wait set and the
 *     pending chunks no worker holds (of every shard of a sharded task,
 *     each counted on its shard row) are dropped and counted as cancelled
 *     (drop_set.lua,
 *     stats), state -> cancelled.  Chunks held by live workers are
 *     cancelled by those workers; the task goes into the cancel_held set,
 *     and every later scan drops those chunks once their leases expired
 *     (a holder stopped past its lease never cancels), until pending is
 *     empty.
 *   - a task heraldctl redrive marked (the redriven set): a done task
 *     whose pending hash is not empty goes back to dispatched, so the
 *     sweeper publishes the redriven chunks; it leaves the set once pending
 *     is empty.  (A done transition that read an empty pending just before
 *     the redrive's move can land after the redrive's own UPDATE.)
 *   push_task.cancelled is always the stats hash's cancelled counter (as
 *   drop_set.lua answers it, to dispatchers and workers) written with GREATEST:
 *   several dispatchers cancel one task at once, each dropping a part, and
 *   workers cancel held chunks; adding each one's part would count only the
 *   parts whose UPDATE passed the state guard. */
#include "dsp_control.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_conn.h"
#include "dsp_drop.h"
#include "dsp_sweep.h"
#include "hr_clock.h"
#include "hr_finish.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_shard.h"
#include "hr_state.h"

#define DSP_CONTROL_MAX 100 /* transitions per scan */

static int dsp_control_pause(dsp_conn *conn, int64_t id, char *errstr, size_t errlen)
{
    int rc;

    if (hr_task_set_control(NULL, conn->r, id, HR_CONTROL_PAUSE, errstr, errlen) < 0)
        return -1;
    rc = hr_state_pause(conn->m, id, errstr, errlen);
    if (rc < 0)
        return -1;
    if (rc == 1)
        hr_log_info("task_paused", "task=%" PRId64, id);
    return 0;
}

static int dsp_control_resume(dsp *d, dsp_conn *conn, int64_t id, int shards, bool claimed,
                              bool reached_dispatched, int64_t due_ms, char *errstr, size_t errlen)
{
    hr_task_state to = HR_STATE_SCHEDULED;
    int64_t nsubs, nwait, now = hr_clock_now_ms();
    int budget = DSP_SWEEP_MAX, rc;

    if (claimed) {
        /* Recipients waiting for their instant (docs/scheduling.md) need an
         * owner to release them, even after a recover of a dispatched task. */
        if (hr_shard_sum(conn->r, id, shards, "SCARD", HR_KEY_SUBS, &nsubs, errstr, errlen) < 0 ||
            hr_shard_sum(conn->r, id, shards, "ZCARD", HR_KEY_WAIT, &nwait, errstr, errlen) < 0)
            return -1;
        to = nsubs + nwait > 0 || !reached_dispatched ? HR_STATE_DISPATCHING : HR_STATE_DISPATCHED;
    }
    if (hr_task_set_control(NULL, conn->r, id, HR_CONTROL_RUN, errstr, errlen) < 0)
        return -1;
    /* No owner and an expired lease: a poller takes a dispatching task over. */
    rc = hr_state_resume(conn->m, id, to, errstr, errlen);
    if (rc != 1)
        return rc;
    hr_log_info("task_resumed", "task=%" PRId64 " state=%s", id, hr_state_name(to));
    if (claimed && dsp_sweep_task(d, conn, id, shards, due_ms, now, now, &budget) < 0) {
        /* The sweeper republishes the parked chunks after the redelivery
         * timeout instead. */
        hr_log_warn("resume_republish_failed", "task=%" PRId64, id);
    }
    return 0;
}

/* The Redis set of cancelled tasks with chunks a worker held at the
 * cancel (dsp_control_held). */
static char *dsp_control_held_key(dsp_conn *conn, char *buf, size_t len)
{
    return hr_key_cancel_held(hr_redis_prefix(conn->r), buf, len);
}

/* Drops shard SHARD (of SHARDS; 0 for a task of one set) of cancelled task
 * ID (dsp_drop_shard: its wait set, subs and the pending chunks no worker
 * holds), counted as cancelled on its counter (the shard row's for a
 * sharded task).  Adds
 * to *DROPPED, and the shard's cancelled counter to *SUM; sets *HELD when a
 * worker held a chunk.  0 or -1. */
static int dsp_control_cancel_shard(dsp_conn *conn, int64_t id, int shards, int shard,
                                    dsp_events_drop *ev, int64_t *dropped, int64_t *sum, bool *held,
                                    char *errstr, size_t errlen)
{
    int64_t total = 0;

    if (dsp_drop_shard(conn, id, shard, HR_OUTCOME_CANCELLED, ev, dropped, &total, held, errstr,
                       errlen) < 0)
        return -1;
    if (hr_finish_count(conn->m, id, hr_shard_row(shards, shard), HR_OUTCOME_CANCELLED, total,
                        errstr, errlen) < 0) {
        /* The stats hash keeps the count; the next scan writes it. */
        hr_log_error("cancel_count_lost",
                     "task=%" PRId64 " shard=%d cancelled=%" PRId64 " error=%s", id, shard, total,
                     errstr);
        return -1;
    }
    *sum += total;
    return 0;
}

static int dsp_control_cancel(dsp *d, dsp_conn *conn, int64_t id, int shards, char *errstr,
                              size_t errlen)
{
    char key[256];
    redisReply *reply;
    int64_t dropped = 0, total = 0;
    bool held = false;
    dsp_events_drop ev;
    int moved, events;

    if (hr_task_set_control(NULL, conn->r, id, HR_CONTROL_CANCEL, errstr, errlen) < 0 ||
        (events = dsp_events_drop_init(d, conn->m, id, HR_OUTCOME_CANCELLED, &ev, errstr, errlen)) <
            0)
        return -1;
    for (int k = 0; k < (shards > 1 ? shards : 1); k++)
        if (dsp_control_cancel_shard(conn, id, shards, k, events ? &ev : NULL, &dropped, &total,
                                     &held, errstr, errlen) < 0)
            return -1;
    if (held) {
        /* The holder cancels its chunk itself, unless it never comes back
         * (stopped, cut off past its lease): later scans drop the chunk
         * then.  Recorded before the task leaves the scan's query. */
        reply = hr_redis_cmdf(conn->r, errstr, errlen, "SADD %s %" PRId64,
                              dsp_control_held_key(conn, key, sizeof key), id);
        if (reply == NULL)
            return -1;
        freeReplyObject(reply);
    }
    moved = hr_state_cancel(conn->m, id, errstr, errlen);
    if (moved < 0)
        return -1;
    /* Nothing of it is chunked any more: its shard rows leave the shard
     * claims' index range (ready, or chunking with a lease that expired),
     * which would otherwise keep every cancelled sharded task in it. */
    if (moved == 1 && shards > 1) {
        const hr_mysql_param p[] = {HR_P_I64(id)};

        if (hr_mysql_exec(conn->m,
                          "UPDATE push_task_shard SET state = 'chunked' "
                          "WHERE task_id = ? AND state <> 'chunked'",
                          p, 1, NULL, NULL, NULL, errstr, errlen) < 0)
            return -1;
    }
    hr_log_info("task_cancelled",
                "task=%" PRId64 " dropped=%" PRId64 " cancelled=%" PRId64 " held=%d", id, dropped,
                total, held);
    if (moved == 1 && dsp_sweep_retire_keys(conn, &id, &shards, 1, errstr, errlen) < 0)
        hr_log_warn("retire_failed", "task=%" PRId64 " error=%s", id, errstr);
    return 0;
}

/* The chunks of cancelled tasks that a worker held at the cancel: each is
 * dropped once no lease protects it (the holder normally cancels it itself;
 * one that was stopped or cut off past its lease finds the lease gone and
 * gives the chunk up, so nobody else would).  A task leaves the set when
 * its pending hash is empty.  Every recipient of a cancelled task thus ends
 * sent, failed or cancelled. */
static void dsp_control_held(dsp *d, dsp_conn *conn)
{
    char key[256], err[512];
    redisReply *ids, *reply;
    size_t i;

    ids = hr_redis_cmdf(conn->r, err, sizeof err, "SRANDMEMBER %s %d",
                        dsp_control_held_key(conn, key, sizeof key), DSP_CONTROL_MAX);
    if (ids == NULL) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return;
    }
    for (i = 0; i < ids->elements && !atomic_load(&d->stopping); i++) {
        int64_t id = strtoll(ids->element[i]->str, NULL, 10), dropped = 0, total = 0;
        bool held = false, failed = false;
        int shards = 1, events;
        dsp_events_drop ev;

        if (hr_shard_load(conn->m, id, &shards, err, sizeof err) < 0 ||
            (events = dsp_events_drop_init(d, conn->m, id, HR_OUTCOME_CANCELLED, &ev, err,
                                           sizeof err)) < 0) {
            hr_log_warn("control_failed", "task=%" PRId64 " control=cancel error=%s", id, err);
            break;
        }
        for (int k = 0; k < shards && !failed; k++) {
            int64_t n = 0, shard_total = 0;

            failed =
                dsp_drop_chunks(conn, id, k, HR_OUTCOME_CANCELLED, events ? &ev : NULL, &n,
                                &shard_total, &held, err, sizeof err) < 0 ||
                (n > 0 && hr_finish_count(conn->m, id, hr_shard_row(shards, k),
                                          HR_OUTCOME_CANCELLED, shard_total, err, sizeof err) < 0);
            dropped += n;
            total += shard_total;
        }
        if (failed) {
            hr_log_warn("control_failed", "task=%" PRId64 " control=cancel error=%s", id, err);
            break;
        }
        if (dropped > 0)
            hr_log_info("cancel_held_dropped",
                        "task=%" PRId64 " dropped=%" PRId64 " cancelled=%" PRId64, id, dropped,
                        total);
        if (held)
            continue;
        reply = hr_redis_cmdf(conn->r, err, sizeof err, "SREM %s %" PRId64, key, id);
        if (reply == NULL) {
            dsp_conn_failed(d, conn, DSP_REDIS, err);
            break;
        }
        freeReplyObject(reply);
    }
    freeReplyObject(ids);
}

/* The tasks heraldctl redrive gave new chunks (hr_key_redriven): a done
 * one with pending chunks is reopened (dispatched, so the sweeper publishes
 * them and the last chunk's close makes it done again), since a done
 * transition that read pending just before the redrive may land after it;
 * so is one such a finish made failed with unaccounted recipients (it read
 * MySQL's failed counter after the redrive lowered it: with shards, a
 * worker's last report raises only its own shard's row back); one whose
 * pending hash is empty leaves the set.  The number of tasks reopened. */
static int dsp_control_redriven(dsp *d, dsp_conn *conn)
{
    char key[256], err[512];
    redisReply *ids, *reply;
    size_t i;
    int reopened = 0;

    ids =
        hr_redis_cmdf(conn->r, err, sizeof err, "SRANDMEMBER %s %d",
                      hr_key_redriven(hr_redis_prefix(conn->r), key, sizeof key), DSP_CONTROL_MAX);
    if (ids == NULL) {
        dsp_conn_failed(d, conn, DSP_REDIS, err);
        return 0;
    }
    for (i = 0; i < ids->elements && !atomic_load(&d->stopping); i++) {
        int64_t id = strtoll(ids->element[i]->str, NULL, 10), npending;
        int rc, shards = 1;

        if (hr_shard_load(conn->m, id, &shards, err, sizeof err) < 0) {
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            break;
        }
        if (hr_shard_sum(conn->r, id, shards, "HLEN", HR_KEY_PENDING, &npending, err, sizeof err) <
            0) {
            dsp_conn_failed(d, conn, DSP_REDIS, err);
            break;
        }
        if (npending == 0) {
            reply = hr_redis_cmdf(conn->r, err, sizeof err, "SREM %s %" PRId64, key, id);
            if (reply == NULL) {
                dsp_conn_failed(d, conn, DSP_REDIS, err);
                break;
            }
            freeReplyObject(reply);
            continue;
        }
        rc = hr_state_reopen(conn->m, id, err, sizeof err);
        if (rc < 0) {
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            break;
        }
        if (rc == 1) {
            hr_log_info("task_reopened", "task=%" PRId64 " pending=%" PRId64 " reason=redrive", id,
                        npending);
            reopened++;
        }
    }
    freeReplyObject(ids);
    return reopened;
}

bool dsp_control_scan(dsp *d, dsp_conn *conn)
{
    bool finished = false;
    const hr_mysql_param p[] = {DSP_TOPIC_PARAMS, HR_P_I64(DSP_CONTROL_MAX)};
    hr_mysql_rows *rows = NULL;
    char err[512];
    size_t i;

    if (atomic_load(&d->stopping))
        return false;
    if (hr_mysql_query(conn->m, DSP_CONTROL_SCAN_SQL, p, 3, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return false;
    }
    for (i = 0; i < rows->nrows && !atomic_load(&d->stopping); i++) {
        int64_t id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        const char *control = hr_mysql_cell(rows, i, 1);
        hr_control want = HR_CONTROL_CANCEL; /* the query's third kind of row */
        int rc, shards = atoi(hr_mysql_cell(rows, i, 5));

        hr_control_parse(control, &want);
        if (want == HR_CONTROL_PAUSE)
            rc = dsp_control_pause(conn, id, err, sizeof err);
        else if (want == HR_CONTROL_RUN)
            rc = dsp_control_resume(d, conn, id, shards, hr_mysql_cell(rows, i, 2)[0] == '1',
                                    hr_mysql_cell(rows, i, 3)[0] == '1',
                                    strtoll(hr_mysql_cell(rows, i, 4), NULL, 10), err, sizeof err);
        else if ((rc = dsp_control_cancel(d, conn, id, shards, err, sizeof err)) >= 0)
            finished = true;
        if (rc < 0) {
            hr_log_warn("control_failed", "task=%" PRId64 " control=%s error=%s", id, control, err);
            break;
        }
    }
    hr_mysql_rows_free(rows);
    dsp_control_held(d, conn);
    return dsp_control_redriven(d, conn) > 0 || finished;
}
