/* dsp_store: the MySQL statements the scanner, poller and timer share:
 * loading task rows, validating them (a bad row becomes `failed` with a
 * readable last_error) and the conditional claim that makes exactly one
 * dispatcher the owner of a task, alone or for a batch of due tasks (the
 * timer's pop: one statement claims them all, one more reads the rows
 * won). */
#include "dsp_store.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsp_conn.h"
#include "hr_batch.h"
#include "hr_log.h"
#include "hr_state.h"

#define DSP_DUE_EARLY_MS 1000 /* a claim accepts due_at at most this far ahead */

int dsp_store_claim(dsp *d, hr_mysql *m, int64_t id, int64_t now_ms, char *errstr, size_t errlen)
{
    /* One we already claimed counts again: hr_mysql retries a statement
     * after reconnecting, and a retry of a claim that committed before its
     * reply was lost must still see the task as ours. */
    return hr_state_claim(m, id, d->owner, d->cfg->dispatcher.lease_s, now_ms + DSP_DUE_EARLY_MS,
                          errstr, errlen);
}

void dsp_store_tasks_free(hr_task **tasks, size_t n)
{
    size_t i;

    if (tasks == NULL)
        return;
    for (i = 0; i < n; i++)
        hr_task_free(tasks[i]);
    free(tasks);
}

/* The tasks of ROWS (selected with HR_TASK_COLUMNS; freed here) into
 * *OUT of *N.  0 or -1. */
static int dsp_store_rows_tasks(hr_mysql_rows *rows, hr_task ***out, size_t *n, char *errstr,
                                size_t errlen)
{
    hr_task **tasks = NULL;
    size_t i, got = 0;
    int rc = -1;

    *out = NULL;
    *n = 0;
    if (rows->nrows > 0) {
        tasks = calloc(rows->nrows, sizeof *tasks);
        if (tasks == NULL) {
            snprintf(errstr, errlen, "out of memory");
            goto done;
        }
    }
    for (i = 0; i < rows->nrows; i++, got++)
        if (hr_task_from_row(rows, i, &tasks[i], errstr, errlen) < 0)
            goto done;
    *out = tasks;
    *n = got;
    tasks = NULL;
    rc = 0;
done:
    dsp_store_tasks_free(tasks, got);
    hr_mysql_rows_free(rows);
    return rc;
}

int dsp_store_claim_batch(dsp *d, hr_mysql *m, const int64_t *ids, size_t n, int64_t now_ms,
                          hr_task ***out, size_t *nout, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(d->owner)};
    hr_mysql_rows *rows = NULL;
    uint64_t claimed = 0;
    int rc;

    *out = NULL;
    *nout = 0;
    rc = hr_state_claim_batch(m, ids, n, d->owner, d->cfg->dispatcher.lease_s,
                              now_ms + DSP_DUE_EARLY_MS, &claimed, errstr, errlen);
    if (rc != 0 || claimed == 0)
        return rc;
    /* Ours now: the ones this statement claimed and any that a claim whose
     * reply was lost claimed before (dsp_owned_add skips those it has). */
    if (hr_batch_query(m,
                       "SELECT " HR_TASK_COLUMNS " FROM push_task WHERE id IN "
                       "(SELECT claim_id FROM JSON_TABLE(?, '$[*]' COLUMNS "
                       "(claim_id BIGINT PATH '$')) j) "
                       "AND state = 'dispatching' AND claimed_by = ?",
                       &(hr_batch){ids, n, 1}, p, 1, &rows, errstr, errlen) < 0)
        return -1;
    return dsp_store_rows_tasks(rows, out, nout, errstr, errlen);
}

int dsp_store_mine(dsp *d, hr_mysql *m, const int64_t *ids, size_t n, hr_task_state state,
                   bool *mine, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(hr_state_name(state)), HR_P_STR(d->owner)};

    for (size_t i = 0; i < n; i++)
        mine[i] = false;
    return hr_batch_select(m,
                           "SELECT id FROM push_task WHERE id IN (SELECT task_id FROM "
                           "JSON_TABLE(?, '$[*]' COLUMNS (task_id BIGINT PATH '$')) j) "
                           "AND state = ? AND claimed_by = ?",
                           &(hr_batch){ids, n, 1}, p, 2, 1, hr_batch_mark, mine, errstr, errlen);
}

int dsp_store_tasks(hr_mysql *m, const char *sql, const hr_mysql_param *p, size_t np,
                    hr_task ***out, size_t *n, char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;

    *out = NULL;
    *n = 0;
    if (hr_mysql_query(m, sql, p, np, &rows, errstr, errlen) < 0)
        return -1;
    return dsp_store_rows_tasks(rows, out, n, errstr, errlen);
}

bool dsp_store_check(dsp *d, hr_mysql *m, const hr_task *t)
{
    char why[512], err[512];
    int rc;

    if (hr_task_validate(t, d->cfg, why, sizeof why) == 0)
        return true;
    rc = hr_state_fail(m, t->id, t->state, why, err, sizeof err);
    if (rc < 0)
        dsp_health_fail(d, DSP_MYSQL, err);
    else if (rc == 1)
        hr_log_warn("task_failed", "task=%" PRId64 " error=%s", t->id, why);
    return false;
}

int64_t dsp_store_rate_limit(const dsp *d, const hr_task *t)
{
    const hr_channel *ch;

    if (t->rate_limit > 0)
        return t->rate_limit;
    ch = hr_config_channel(d->cfg, t->channel);
    return ch != NULL ? ch->rate_limit : 0;
}

int dsp_store_job_lease(dsp *d, hr_mysql *m, const char *job, int lease_s, char *errstr,
                        size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(job), HR_P_STR(d->owner), HR_P_I64(lease_s)};
    const hr_mysql_param q[] = {HR_P_STR(job)};
    hr_mysql_rows *rows = NULL;
    int rc;

    /* owner is assigned first, so lease_until's IF sees the new owner. */
    if (hr_mysql_exec(m,
                      "INSERT INTO push_job (name, owner, lease_until) "
                      "VALUES (?, ?, UTC_TIMESTAMP(3) + INTERVAL ? SECOND) "
                      "ON DUPLICATE KEY UPDATE "
                      "owner = IF(lease_until < UTC_TIMESTAMP(3) OR owner = VALUES(owner), "
                      "VALUES(owner), owner), "
                      "lease_until = IF(owner = VALUES(owner), VALUES(lease_until), lease_until)",
                      p, 3, NULL, NULL, NULL, errstr, errlen) < 0 ||
        hr_mysql_query(m, "SELECT owner FROM push_job WHERE name = ?", q, 1, &rows, errstr,
                       errlen) < 0)
        return -1;
    rc = rows->nrows == 1 && strcmp(hr_mysql_cell(rows, 0, 0), d->owner) == 0;
    hr_mysql_rows_free(rows);
    return rc;
}
