/* hr_stats: push_task_series written and read, the funnel composed (see
 * hr_stats.h). */
#include "hr_stats.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_batch.h"

int hr_stats_add_rows(hr_mysql *m, const hr_stats_add *rows, size_t n, char *errstr, size_t errlen)
{
    int64_t *v = malloc((n ? n : 1) * 3 * sizeof *v);
    bool *done = calloc(n ? n : 1, sizeof *done);
    int rc = -1;

    if (v == NULL || done == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto out;
    }
    /* One statement per channel and outcome, its rows (task, minute, n)
     * one JSON_TABLE parameter: a reporter's round over 1,500 small tasks
     * wrote 1,500 single-row upserts, most of the MariaDB statements a
     * small task cost after due.  (A comma join: after a JOIN the ON of
     * ON DUPLICATE KEY would be read as the join's.) */
    for (size_t i = 0; i < n; i++) {
        const hr_mysql_param p[] = {HR_P_STR(rows[i].channel), HR_P_STR(rows[i].outcome)};
        size_t k = 0;

        if (done[i])
            continue;
        for (size_t j = i; j < n; j++) {
            if (done[j] || strcmp(rows[j].channel, rows[i].channel) != 0 ||
                strcmp(rows[j].outcome, rows[i].outcome) != 0)
                continue;
            done[j] = true;
            v[3 * k] = rows[j].task;
            v[3 * k + 1] = rows[j].minute_ms;
            v[3 * k + 2] = rows[j].n;
            k++;
        }
        if (hr_batch_exec(m,
                          "INSERT INTO push_task_series (task_id, channel, outcome, minute, n) "
                          "SELECT j.task, c.channel, c.outcome, FROM_UNIXTIME(j.minute DIV 1000), "
                          "j.n FROM JSON_TABLE(?, '$[*]' COLUMNS (task BIGINT UNSIGNED PATH "
                          "'$[0]', minute BIGINT PATH '$[1]', n BIGINT PATH '$[2]')) j "
                          ", (SELECT ? AS channel, ? AS outcome) c "
                          "ON DUPLICATE KEY UPDATE n = push_task_series.n + VALUES(n)",
                          &(hr_batch){v, k, 3}, p, 2, NULL, NULL, errstr, errlen) < 0)
            goto out;
    }
    rc = 0;
out:
    free(v);
    free(done);
    return rc;
}

/* Copies the cell (ROW, COL) of ROWS into OUT (HR_STATS_NAME bytes). */
static void hr_stats_name(const hr_mysql_rows *rows, size_t row, size_t col, char *out)
{
    const char *v = hr_mysql_cell(rows, row, col);

    snprintf(out, HR_STATS_NAME, "%s", v != NULL ? v : "");
}

int hr_stats_funnel_load(hr_mysql *m, const hr_task *t, hr_stats_funnel *out, char *errstr,
                         size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(t->id)};
    hr_mysql_rows *rows = NULL;

    memset(out, 0, sizeof *out);
    snprintf(out->channel, sizeof out->channel, "%s", t->channel);
    out->sent = t->sent;
    out->delivered = t->pulled;
    /* Opened and clicked: every minute's. */
    if (hr_mysql_query(m,
                       "SELECT outcome, CAST(SUM(n) AS SIGNED) FROM push_task_series "
                       "WHERE task_id = ? AND outcome IN ('opened', 'clicked') GROUP BY outcome",
                       p, 1, &rows, errstr, errlen) < 0)
        return -1;
    for (size_t i = 0; i < rows->nrows; i++) {
        int64_t n = strtoll(hr_mysql_cell(rows, i, 1), NULL, 10);

        if (strcmp(hr_mysql_cell(rows, i, 0), "opened") == 0)
            out->opened = n;
        else
            out->clicked = n;
    }
    hr_mysql_rows_free(rows);
    return 0;
}

int hr_stats_load(hr_mysql *m, const hr_task *t, hr_stats *out, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(t->id), HR_P_I64(t->id), HR_P_I64(HR_STATS_MINUTES_MAX)};
    hr_mysql_rows *rows = NULL;
    int rc = -1;

    memset(out, 0, sizeof *out);
    if (hr_stats_funnel_load(m, t, &out->funnel, errstr, errlen) < 0)
        return -1;
    /* The last minutes that have counts, oldest first. */
    if (hr_mysql_query(m,
                       "SELECT channel, outcome, "
                       "CAST(UNIX_TIMESTAMP(minute) AS SIGNED) * 1000, n FROM push_task_series "
                       "WHERE task_id = ? AND minute >= COALESCE((SELECT MIN(minute) FROM "
                       "(SELECT DISTINCT minute FROM push_task_series WHERE task_id = ? "
                       "ORDER BY minute DESC LIMIT ?) AS last), '1970-01-01') "
                       "ORDER BY channel, minute, outcome",
                       p, 3, &rows, errstr, errlen) < 0)
        goto done;
    if (rows->nrows > 0 && (out->points = calloc(rows->nrows, sizeof *out->points)) == NULL) {
        snprintf(errstr, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < rows->nrows; i++) {
        hr_stats_point *pt = &out->points[out->npoints++];

        hr_stats_name(rows, i, 0, pt->channel);
        hr_stats_name(rows, i, 1, pt->outcome);
        pt->minute_ms = strtoll(hr_mysql_cell(rows, i, 2), NULL, 10);
        pt->n = strtoll(hr_mysql_cell(rows, i, 3), NULL, 10);
    }
    rc = 0;
done:
    hr_mysql_rows_free(rows);
    if (rc != 0)
        hr_stats_free(out);
    return rc;
}

void hr_stats_free(hr_stats *s)
{
    free(s->points);
    s->points = NULL;
    s->npoints = 0;
}
