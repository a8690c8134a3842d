/* dsp_shard: the shards of sharded tasks (docs/architecture.md "Sharded
 * tasks"), on the loop thread except dsp_shard_rows (the reconciliation
 * job's).
 *
 * A task of S > 1 shards is owned by one dispatcher, its coordinator,
 * like any task (claim, lease, reconciliation); the reconciliation writes
 * its S push_task_shard rows.  Then any dispatcher claims a shard:
 *   - poll (every DSP_SHARD_POLL_MS, and at once after one of ours ended):
 *     one indexed read of claimable rows (ready, or chunking with an
 *     expired lease) of dispatching tasks whose control is run, then a
 *     conditional UPDATE of one of them (one winner).  A ready shard is
 *     taken only by a dispatcher that chunks no shard of its task yet, so
 *     shards go to whoever is free and the fastest take more; a shard whose
 *     claimant died (its lease expired) is taken by whoever sees it first,
 *     busy or not, so it waits one lease and one poll, not for a free
 *     dispatcher;
 *   - the claimed shard becomes an owned entry (dsp_owned_add_shard)
 *     chunked by dsp_chunk.c on the shard's keys;
 *   - renew (with the task leases, through dsp_owned_renew's routine):
 *     our rows' leases; a row another
 *     dispatcher took, or whose task was paused, cancelled or is no longer
 *     dispatching, drops its entry (a pause ends the lease at once, so the
 *     resumed task's shards are claimable without waiting);
 *   - chunked: the shard's subs ran out and its reports are written.
 * The coordinator's task becomes dispatched once every row is chunked
 * (dsp_shard_all_chunked, from dsp_chunk.c).
 *
 * No statement here writes a shard row while it reads push_task under a
 * lock: counter writers lock the task row first (hr_finish.c), and a
 * claim or renewal that held a shard row while waiting for the task row
 * could deadlock with them.  The reads that join push_task are plain
 * (non-locking) reads. */
#include "dsp_shard.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_conn.h"
#include "hr_keys.h"
#include "hr_log.h"
#include "hr_state.h"

#define DSP_SHARD_CANDIDATES 64 /* claimable rows read per poll */

/* Ends the lease of our row of shard SHARD of task ID, so another
 * dispatcher may claim it at once (its state stays). */
static void dsp_shard_end_lease(dsp *d, int64_t id, int shard)
{
    dsp_conn *conn = &d->loop_conn;
    const hr_mysql_param p[] = {HR_P_I64(id), HR_P_I64(shard), HR_P_STR(d->owner)};
    char err[512];

    if (hr_mysql_exec(conn->m,
                      "UPDATE push_task_shard SET lease_until = UTC_TIMESTAMP(3) "
                      "WHERE task_id = ? AND shard = ? AND claimed_by = ? AND state = 'chunking'",
                      p, 3, NULL, NULL, NULL, err, sizeof err) < 0)
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
}

/* Claims shard SHARD of task ID for us: 1 = ours, 0 = taken or no longer
 * claimable, -1 (ERRSTR).  Our own claim counts again: hr_mysql retries a
 * statement whose reply was lost. */
static int dsp_shard_claim(dsp *d, int64_t id, int shard, char *errstr, size_t errlen)
{
    dsp_conn *conn = &d->loop_conn;
    const hr_mysql_param p[] = {HR_P_STR(d->owner), HR_P_I64(d->cfg->dispatcher.lease_s),
                                HR_P_I64(id), HR_P_I64(shard), HR_P_STR(d->owner)};
    uint64_t affected = 0;

    if (hr_mysql_exec(conn->m,
                      "UPDATE push_task_shard SET state = 'chunking', claimed_by = ?, "
                      "lease_until = UTC_TIMESTAMP(3) + INTERVAL ? SECOND "
                      "WHERE task_id = ? AND shard = ? AND (state = 'ready' OR "
                      "(state = 'chunking' AND (lease_until < UTC_TIMESTAMP(3) OR "
                      "claimed_by = ?)))",
                      p, 5, &affected, NULL, NULL, errstr, errlen) < 0)
        return -1;
    return affected == 1;
}

/* Claims the first candidate of ROWS (task_id, shard, state): an orphaned
 * one (chunking, its lease expired), or a ready one of a task we chunk no
 * shard of.  0 (whether or not one was claimed), or -1 on a MySQL error
 * (logged). */
static int dsp_shard_take(dsp *d, const hr_mysql_rows *rows)
{
    dsp_conn *conn = &d->loop_conn;
    char err[512];
    size_t i;

    for (i = 0; i < rows->nrows; i++) {
        int64_t id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        int shard = atoi(hr_mysql_cell(rows, i, 1)), rc;
        hr_task *t = NULL;

        if (strcmp(hr_mysql_cell(rows, i, 2), "ready") == 0 && dsp_owned_has_shard(d, id))
            continue;
        rc = dsp_shard_claim(d, id, shard, err, sizeof err);
        if (rc < 0)
            goto failed;
        if (rc == 0)
            continue; /* another dispatcher was faster */
        if (hr_task_load(conn->m, id, &t, err, sizeof err) != 0 ||
            !dsp_owned_add_shard(d, t, shard)) {
            hr_task_free(t);
            hr_log_warn("shard_released", "task=%" PRId64 " shard=%d reason=not loaded", id, shard);
            dsp_shard_end_lease(d, id, shard);
            return 0;
        }
        hr_task_free(t);
        return 0;
    }
    return 0;
failed:
    dsp_conn_failed(d, conn, DSP_MYSQL, err);
    return -1;
}

void dsp_shard_poll(dsp *d)
{
    dsp_conn *conn = &d->loop_conn;
    const hr_mysql_param p[] = {DSP_TOPIC_PARAMS, HR_P_I64(DSP_SHARD_CANDIDATES)};
    hr_mysql_rows *rows = NULL;
    char err[512];

    if (atomic_load(&d->stopping) || !dsp_conn_ready(d, conn))
        return;
    if (hr_mysql_query(conn->m,
                       "SELECT s.task_id, s.shard, s.state FROM push_task_shard s "
                       "JOIN push_task t ON t.id = s.task_id "
                       "WHERE (s.state = 'ready' OR (s.state = 'chunking' AND "
                       "s.lease_until < UTC_TIMESTAMP(3))) "
                       "AND t.state = 'dispatching' AND t.control = 'run' "
                       "AND (? IS NULL OR t.topic = ?) "
                       "ORDER BY s.state = 'ready', s.task_id, s.shard LIMIT ?",
                       p, 3, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    dsp_shard_take(d, rows);
    hr_mysql_rows_free(rows);
}

static void dsp_shard_lost(dsp *d, const dsp_task *dt)
{
    (void)d;
    hr_log_warn("shard_lost", "task=%" PRId64 " shard=%d reason=lease taken over or task ended",
                dt->id, dt->shard);
}

/* A pause ends the lease at once, so the resumed task's shards are
 * claimable without waiting. */
static void dsp_shard_stopped(dsp *d, const dsp_task *dt, const hr_mysql_rows *rows, size_t row)
{
    (void)rows;
    (void)row;
    hr_log_info("shard_stopped", "task=%" PRId64 " shard=%d reason=task not running", dt->id,
                dt->shard);
    dsp_shard_end_lease(d, dt->id, dt->shard);
}

/* The leases of the claimed shards: their push_task_shard rows, running
 * while their task is dispatching with control run. */
static const dsp_owned_lease dsp_shard_lease = {
    .renew_sql = "UPDATE push_task_shard SET lease_until = UTC_TIMESTAMP(3) + "
                 "INTERVAL ? SECOND WHERE claimed_by = ? AND state = 'chunking'",
    .read_sql = "SELECT s.task_id, s.shard, t.state = 'dispatching' AND t.control = 'run', NULL "
                "FROM push_task_shard s JOIN push_task t ON t.id = s.task_id "
                "WHERE s.claimed_by = ? AND s.state = 'chunking'",
    .shards = true,
    .lost = dsp_shard_lost,
    .stopped = dsp_shard_stopped,
    .stray = NULL,
};

void dsp_shard_renew(dsp *d)
{
    /* Nothing to renew without a shard entry (the usual case). */
    if (dsp_owned_any_shard(d))
        dsp_owned_renew(d, &dsp_shard_lease, false);
}

void dsp_shard_chunked(dsp *d, dsp_task *dt)
{
    dsp_conn *conn = &d->loop_conn;
    const hr_mysql_param p[] = {HR_P_I64(dt->id), HR_P_I64(dt->shard), HR_P_STR(d->owner)};
    uint64_t affected = 0;
    char err[512];

    if (hr_mysql_exec(conn->m,
                      "UPDATE push_task_shard SET state = 'chunked', "
                      "lease_until = UTC_TIMESTAMP(3) WHERE task_id = ? AND shard = ? "
                      "AND claimed_by = ? AND state = 'chunking'",
                      p, 3, &affected, NULL, NULL, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return;
    }
    if (affected == 1)
        hr_log_info("shard_chunked", "task=%" PRId64 " shard=%d chunks=%" PRId64, dt->id, dt->shard,
                    dt->chunks);
    else
        hr_log_warn("shard_lost", "task=%" PRId64 " shard=%d reason=not chunking or not ours",
                    dt->id, dt->shard);
    dsp_owned_drop(d, dt);
    /* Free for the next shard now, not a poll period later. */
    dsp_shard_poll(d);
}

int dsp_shard_all_chunked(dsp *d, const dsp_task *dt, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(dt->id)};
    hr_mysql_rows *rows = NULL;
    int64_t rowsn, left;

    if (hr_mysql_query(d->loop_conn.m,
                       "SELECT COUNT(*), COALESCE(SUM(state <> 'chunked'), 0) "
                       "FROM push_task_shard WHERE task_id = ?",
                       p, 1, &rows, errstr, errlen) < 0)
        return -1;
    rowsn = strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10);
    left = strtoll(hr_mysql_cell(rows, 0, 1), NULL, 10);
    hr_mysql_rows_free(rows);
    /* Fewer rows than shards: written by the reconciliation, not yet. */
    return rowsn >= dt->shards && left == 0;
}

void dsp_shard_release_all(dsp *d)
{
    dsp_conn *conn = &d->loop_conn;
    const hr_mysql_param p[] = {HR_P_STR(d->owner)};
    uint64_t affected = 0;
    char err[512];

    if (conn->m == NULL)
        return;
    if (hr_mysql_exec(conn->m,
                      "UPDATE push_task_shard SET lease_until = UTC_TIMESTAMP(3) "
                      "WHERE claimed_by = ? AND state = 'chunking'",
                      p, 1, &affected, NULL, NULL, err, sizeof err) < 0)
        hr_log_error("shard_release_failed", "error=%s", err);
    else if (affected > 0)
        hr_log_info("shards_released", "shards=%" PRIu64, affected);
}

int dsp_shard_rows(dsp_conn *conn, int64_t id, int shards, char *errstr, size_t errlen)
{
    hr_mysql_param *p = calloc(2 * (size_t)shards, sizeof *p);
    char *sql = malloc(160 + 16 * (size_t)shards);
    char key[HR_KEY_MAX];
    size_t off;
    int rc = -1;

    if (p == NULL || sql == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    /* A row a counter wrote before (waiting) becomes claimable now. */
    off = (size_t)sprintf(sql, "INSERT INTO push_task_shard (task_id, shard, state) VALUES ");
    for (int k = 0; k < shards; k++) {
        p[2 * k] = HR_P_I64(id);
        p[2 * k + 1] = HR_P_I64(k);
        off += (size_t)sprintf(sql + off, k ? ",(?,?,'ready')" : "(?,?,'ready')");
    }
    sprintf(sql + off, " ON DUPLICATE KEY UPDATE state = IF(state = 'waiting', 'ready', state)");
    if (hr_mysql_exec(conn->m, sql, p, 2 * (size_t)shards, NULL, NULL, NULL, errstr, errlen) < 0)
        goto done;
    /* A chunked shard with recipients again (a resume, a recover, Redis
     * rewound, recipients a worker put off to their quiet hours' end) is
     * chunked again. */
    for (int k = 0; k < shards; k++) {
        const hr_mysql_param pu[] = {HR_P_I64(id), HR_P_I64(k)};
        int64_t left = dsp_reply_int(hr_redis_cmdf(
            conn->r, errstr, errlen, "SCARD %s",
            hr_key_shard(hr_redis_prefix(conn->r), key, sizeof key, id, k, HR_KEY_SUBS)));
        int64_t waiting = dsp_reply_int(hr_redis_cmdf(
            conn->r, errstr, errlen, "ZCARD %s",
            hr_key_shard(hr_redis_prefix(conn->r), key, sizeof key, id, k, HR_KEY_WAIT)));

        if (left < 0 || waiting < 0)
            goto done;
        left += waiting;
        if (left > 0 && hr_mysql_exec(conn->m,
                                      "UPDATE push_task_shard SET state = 'ready', "
                                      "claimed_by = NULL, lease_until = NULL "
                                      "WHERE task_id = ? AND shard = ? AND state = 'chunked'",
                                      pu, 2, NULL, NULL, NULL, errstr, errlen) < 0)
            goto done;
    }
    rc = 0;
done:
    free(p);
    free(sql);
    return rc;
}
