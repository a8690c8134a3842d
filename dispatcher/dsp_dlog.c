/* dsp_dlog: the delivery log's partitions kept (see dsp_dlog.h).
 *
 * The lease is the push_job row HR_DLOG_JOB: owner and lease_until on the
 * database's clock, taken when free or expired and extended by its owner,
 * so one dispatcher does a pass at a time and a dead one's lease runs out
 * after DSP_DLOG_EVERY_MS.  The partition DDL carries its names and bounds
 * (our own dates, not values from anyone) and waits at most
 * DSP_DLOG_DDL_WAIT_S for the table's metadata lock, since writers queue
 * behind a waiting ALTER; a failed step is logged and tried again after
 * DSP_DLOG_RETRY_MS.  Old partitions are dropped only in a pass whose
 * partitions ahead exist, so the log never shrinks to pmax alone. */
#include "dsp_dlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsp_conn.h"
#include "dsp_store.h"
#include "hr_clock.h"
#include "hr_dlog.h"
#include "hr_log.h"

#define DSP_DLOG_RETRY_MS 60000
#define DSP_DLOG_DDL_WAIT_S 2
/* Partitions one ALTER adds or drops at most (a dispatcher back after a
 * long absence catches up over a few passes). */
#define DSP_DLOG_ALTER_MAX 64
/* Tasks with rows written without a day settled per pass. */
#define DSP_DLOG_SETTLE_TASKS 100
/* The legacy copy's slice per pass: the background job's other work waits
 * for it. */
#define DSP_DLOG_COPY_ROWS 50000
#define DSP_DLOG_COPY_MS 250
/* An ALTER's text: DSP_DLOG_ALTER_MAX clauses of under 80 bytes. */
#define DSP_DLOG_SQL_MAX 8192

struct dsp_dlog {
    int64_t next_mono_ms; /* the next pass is due then */
    bool told_unpartitioned;
};

/* One partition of push_delivery: its name, the last day it holds (epoch
 * days; INT64_MAX for pmax), its estimated rows and bytes. */
typedef struct dsp_dlog_part {
    char name[64];
    int64_t last_day;
    int64_t rows, bytes;
} dsp_dlog_part;

int dsp_dlog_new(dsp *d)
{
    d->dlog = calloc(1, sizeof *d->dlog);
    return d->dlog != NULL ? 0 : -1;
}

void dsp_dlog_free(dsp *d)
{
    free(d->dlog);
    d->dlog = NULL;
}

/* push_delivery's partitions, oldest first, into *PARTS (*N of them; none
 * when the table is not partitioned).  0 or -1. */
static int dsp_dlog_parts(dsp_conn *conn, dsp_dlog_part **parts, size_t *n, char *errstr,
                          size_t errlen)
{
    hr_mysql_rows *rows = NULL;

    *parts = NULL;
    *n = 0;
    if (hr_mysql_query(conn->m,
                       "SELECT PARTITION_NAME, PARTITION_DESCRIPTION, TABLE_ROWS, "
                       "DATA_LENGTH + INDEX_LENGTH FROM information_schema.PARTITIONS "
                       "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'push_delivery' "
                       "AND PARTITION_NAME IS NOT NULL ORDER BY PARTITION_ORDINAL_POSITION",
                       NULL, 0, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows > 0 && (*parts = calloc(rows->nrows, sizeof **parts)) == NULL) {
        hr_mysql_rows_free(rows);
        snprintf(errstr, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < rows->nrows; i++) {
        dsp_dlog_part *p = &(*parts)[*n];
        const char *bound = hr_mysql_cell(rows, i, 1);
        int y, mo, da;

        snprintf(p->name, sizeof p->name, "%s", hr_mysql_cell(rows, i, 0));
        /* RANGE COLUMNS(day): 'YYYY-MM-DD' (exclusive) or MAXVALUE. */
        if (bound != NULL && sscanf(bound, "'%d-%d-%d'", &y, &mo, &da) == 3)
            p->last_day = hr_dlog_from_ymd((int64_t)y * 10000 + mo * 100 + da) - 1;
        else
            p->last_day = INT64_MAX;
        p->rows = hr_mysql_cell(rows, i, 2) ? strtoll(hr_mysql_cell(rows, i, 2), NULL, 10) : 0;
        p->bytes = hr_mysql_cell(rows, i, 3) ? strtoll(hr_mysql_cell(rows, i, 3), NULL, 10) : 0;
        ++*n;
    }
    hr_mysql_rows_free(rows);
    return 0;
}

/* Runs one partition ALTER (SQL); false after logging why it failed. */
static bool dsp_dlog_alter(dsp_conn *conn, const char *what, const char *sql)
{
    char err[512];
    unsigned errnum = 0;

    if (hr_mysql_exec(conn->m, sql, NULL, 0, NULL, NULL, &errnum, err, sizeof err) == 0)
        return true;
    hr_log_warn("delivery_partitions_failed", "step=%s errno=%u error=%s", what, errnum, err);
    return false;
}

/* Appends "PARTITION pYYYYMMDD VALUES LESS THAN ('...')" for the partition
 * whose last day is LAST (epoch days) to SQL (SIZE bytes, used USED). */
static void dsp_dlog_clause(char *sql, size_t size, size_t *used, int64_t last)
{
    char bound[HR_DLOG_DAY_TEXT];
    int n =
        snprintf(sql + *used, size - *used, "PARTITION p%08" PRId64 " VALUES LESS THAN ('%s'), ",
                 hr_dlog_ymd(last), hr_dlog_text(hr_dlog_ymd(last + 1), bound));

    if (n > 0 && (size_t)n < size - *used)
        *used += (size_t)n;
}

/* The partitions of the days up to TODAY + DSP_DLOG_AHEAD_DAYS, split off
 * pmax (which holds no rows then but those of far-future days and rows
 * written without a day).  True when they exist (after this). */
static bool dsp_dlog_ahead(const dsp_dlog_part *parts, size_t n, int64_t today, dsp_conn *conn)
{
    char sql[DSP_DLOG_SQL_MAX];
    int64_t newest = INT64_MIN, want = today + DSP_DLOG_AHEAD_DAYS, day;
    bool pmax = n > 0 && parts[n - 1].last_day == INT64_MAX;
    size_t used = 0;
    int added = 0;

    for (size_t i = 0; i < n; i++)
        if (parts[i].last_day != INT64_MAX)
            newest = parts[i].last_day;
    if (newest >= want)
        return true;
    used = (size_t)snprintf(sql, sizeof sql,
                            "SET STATEMENT lock_wait_timeout = %d FOR ALTER TABLE push_delivery "
                            "%s (",
                            DSP_DLOG_DDL_WAIT_S,
                            pmax ? "REORGANIZE PARTITION pmax INTO" : "ADD PARTITION");
    /* After a long absence the first new partition takes every day since
     * the newest one up to today: those days are over. */
    day = newest == INT64_MIN || newest + 1 < today ? today : newest + 1;
    for (; day <= want && added < DSP_DLOG_ALTER_MAX; day++, added++)
        dsp_dlog_clause(sql, sizeof sql, &used, day);
    snprintf(sql + used, sizeof sql - used, "PARTITION pmax VALUES LESS THAN (MAXVALUE))");
    if (!dsp_dlog_alter(conn, "ahead", sql))
        return false;
    hr_log_info("delivery_partitions_added",
                "partitions=%d through=%" PRId64 " pmax_rows_est=%" PRId64, added,
                hr_dlog_ymd(day - 1), pmax ? parts[n - 1].rows : 0);
    return day > want;
}

/* Drops the partitions whose last day is before FIRST (today - the
 * retention), each recorded in push_delivery_dropped before.  Returns how
 * many were dropped. */
static int dsp_dlog_drop(dsp *d, const dsp_dlog_part *parts, size_t n, int64_t first,
                         dsp_conn *conn)
{
    char sql[DSP_DLOG_SQL_MAX], err[512], day[HR_DLOG_DAY_TEXT];
    int64_t rows = 0, bytes = 0;
    size_t used, i;
    int dropped = 0;

    used = (size_t)snprintf(sql, sizeof sql,
                            "SET STATEMENT lock_wait_timeout = %d FOR ALTER TABLE push_delivery "
                            "DROP PARTITION ",
                            DSP_DLOG_DDL_WAIT_S);
    for (i = 0; i < n && parts[i].last_day < first && dropped < DSP_DLOG_ALTER_MAX; i++) {
        const hr_mysql_param p[] = {HR_P_I64(hr_dlog_ymd(parts[i].last_day)),
                                    HR_P_I64(parts[i].rows), HR_P_I64(parts[i].bytes),
                                    HR_P_STR(d->owner)};
        int k;

        /* Recorded first: recover refuses on a drop that may not have
         * happened yet, never the other way round. */
        if (hr_mysql_exec(conn->m,
                          "INSERT INTO push_delivery_dropped (day, rows_est, bytes, dropped_at, "
                          "dropped_by) VALUES (?, ?, ?, UTC_TIMESTAMP(3), ?) "
                          "ON DUPLICATE KEY UPDATE rows_est = VALUES(rows_est), "
                          "bytes = VALUES(bytes), dropped_at = VALUES(dropped_at), "
                          "dropped_by = VALUES(dropped_by)",
                          p, 4, NULL, NULL, NULL, err, sizeof err) < 0) {
            dsp_conn_failed(d, conn, DSP_MYSQL, err);
            return 0;
        }
        k = snprintf(sql + used, sizeof sql - used, "%s%s", dropped > 0 ? ", " : "", parts[i].name);
        if (k < 0 || (size_t)k >= sizeof sql - used)
            break;
        used += (size_t)k;
        rows += parts[i].rows;
        bytes += parts[i].bytes;
        dropped++;
    }
    if (dropped == 0 || !dsp_dlog_alter(conn, "retention", sql))
        return 0;
    hr_metrics_add(d->met.dlog_dropped, (uint64_t)dropped);
    hr_log_info("delivery_partitions_dropped",
                "partitions=%d through=%s rows_est=%" PRId64 " bytes=%" PRId64 " retention_days=%d",
                dropped, hr_dlog_text(hr_dlog_ymd(parts[i - 1].last_day), day), rows, bytes,
                d->cfg->dispatcher.delivery_retention_days);
    return dropped;
}

/* Moves rows written without a day (an older release, raw SQL) to their
 * tasks' days; true when some may be left for the next pass. */
static bool dsp_dlog_settle(dsp *d, dsp_conn *conn)
{
    const hr_mysql_param p[] = {HR_P_I64(HR_DLOG_UNSET), HR_P_I64(DSP_DLOG_SETTLE_TASKS)};
    hr_mysql_rows *rows = NULL;
    char err[512];
    bool more;

    /* day = the default prunes to pmax, which holds little else. */
    if (hr_mysql_query(conn->m,
                       "SELECT DISTINCT d.task_id, COALESCE(DATE(t.due_at) + 0, -1) "
                       "FROM push_delivery d LEFT JOIN push_task t ON t.id = d.task_id "
                       "WHERE d.day = ? LIMIT ?",
                       p, 2, &rows, err, sizeof err) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        return false;
    }
    more = rows->nrows == DSP_DLOG_SETTLE_TASKS;
    for (size_t i = 0; i < rows->nrows && !atomic_load(&d->stopping); i++) {
        int64_t id = strtoll(hr_mysql_cell(rows, i, 0), NULL, 10);
        int64_t day = strtoll(hr_mysql_cell(rows, i, 1), NULL, 10);
        int64_t moved = hr_dlog_settle(conn->m, id, day, err, sizeof err);

        if (moved < 0) {
            hr_log_warn("delivery_settle_failed", "task=%" PRId64 " error=%s", id, err);
            more = true;
            break;
        }
        hr_log_info("delivery_rows_settled", "task=%" PRId64 " day=%" PRId64 " rows=%" PRId64, id,
                    day, moved);
    }
    hr_mysql_rows_free(rows);
    return more;
}

/* A slice of the legacy copy; true when more is left. */
static bool dsp_dlog_copy(dsp *d, dsp_conn *conn, int64_t now)
{
    hr_dlog_copy out;
    char err[512];
    int rc = hr_dlog_legacy_copy(conn->m, d->owner, d->cfg->dispatcher.delivery_retention_days, now,
                                 DSP_DLOG_COPY_ROWS, hr_clock_mono_ms() + DSP_DLOG_COPY_MS, &out,
                                 err, sizeof err);

    if (rc < 0) {
        hr_log_warn("delivery_legacy_copy_failed", "error=%s", err);
        return false;
    }
    if (out.copied > 0 || out.skipped > 0)
        hr_log_info("delivery_legacy_copied",
                    "rows=%" PRId64 " tasks_skipped=%" PRId64 " at_task=%" PRId64, out.copied,
                    out.skipped, out.task);
    if (rc == 1 && out.task > 0)
        hr_log_info("delivery_legacy_done", "last_task=%" PRId64, out.task);
    return rc == 0;
}

void dsp_dlog_run(dsp *d, dsp_conn *conn)
{
    dsp_dlog *dl = d->dlog;
    dsp_dlog_part *parts = NULL;
    int64_t now = hr_clock_now_ms(), today = hr_dlog_epoch_day(now), newest = INT64_MIN;
    int64_t next = DSP_DLOG_RETRY_MS;
    char err[512];
    size_t n = 0;
    bool more;
    int rc;

    if (hr_clock_mono_ms() < dl->next_mono_ms || atomic_load(&d->stopping))
        return;
    if (dsp_dlog_parts(conn, &parts, &n, err, sizeof err) < 0 ||
        (rc = dsp_store_job_lease(d, conn->m, HR_DLOG_JOB, DSP_DLOG_EVERY_MS / 1000, err,
                                  sizeof err)) < 0) {
        dsp_conn_failed(d, conn, DSP_MYSQL, err);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        if (parts[i].last_day != INT64_MAX)
            newest = parts[i].last_day;
    if (newest != INT64_MIN)
        hr_metrics_set(d->met.dlog_days_ahead, (double)(newest - today));
    next = DSP_DLOG_EVERY_MS;
    if (rc == 0)
        goto done; /* another dispatcher's pass */
    if (n == 0) {
        if (!dl->told_unpartitioned)
            hr_log_warn("delivery_log_unpartitioned",
                        "push_delivery has no partitions: run heraldctl migrate "
                        "(013_delivery_partitions.sql)");
        dl->told_unpartitioned = true;
        goto done;
    }
    if (!dsp_dlog_ahead(parts, n, today, conn)) {
        next = DSP_DLOG_RETRY_MS;
        goto done;
    }
    if (newest < today + DSP_DLOG_AHEAD_DAYS)
        hr_metrics_set(d->met.dlog_days_ahead, DSP_DLOG_AHEAD_DAYS);
    dsp_dlog_drop(d, parts, n, today - d->cfg->dispatcher.delivery_retention_days, conn);
    /* Work left over runs again at the next scan, under the lease. */
    more = dsp_dlog_settle(d, conn);
    more = dsp_dlog_copy(d, conn, now) || more;
    if (more)
        next = 0;
done:
    free(parts);
    dl->next_mono_ms = hr_clock_mono_ms() + next;
}
