/* hr_dlog: the delivery log's partition key, retention check, settling of
 * rows written without a day, and the copy of a log that predates
 * partitioning (see hr_dlog.h). */
#include "hr_dlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hr_civil.h"
#include "hr_clock.h"

#define HR_DLOG_DAY_MS 86400000
/* Legacy rows per INSERT ... SELECT of the copy: one statement (and one
 * transaction) of a few tens of milliseconds. */
#define HR_DLOG_COPY_BATCH 5000

/* The columns 001..009 give push_delivery, which the copy and the settling
 * carry (the partition key comes on top). */
#define HR_DLOG_COLUMNS "task_id, uid, status, attempts, http_status, latency_ms, at"

int64_t hr_dlog_epoch_day(int64_t ms)
{
    return hr_civil_floordiv(ms, HR_DLOG_DAY_MS);
}

int64_t hr_dlog_ymd(int64_t days)
{
    int y, m, d;

    hr_civil_date(days, &y, &m, &d);
    return (int64_t)y * 10000 + m * 100 + d;
}

int64_t hr_dlog_from_ymd(int64_t ymd)
{
    return hr_civil_days((int)(ymd / 10000), (int)(ymd / 100 % 100), (int)(ymd % 100));
}

char *hr_dlog_text(int64_t ymd, char *buf)
{
    /* Unsigned and bounded, so the compiler sees that it fits. */
    unsigned y = (unsigned)(ymd / 10000) % 10000u, m = (unsigned)(ymd / 100 % 100) % 100u,
             d = (unsigned)(ymd % 100) % 100u;

    snprintf(buf, HR_DLOG_DAY_TEXT, "%04u-%02u-%02u", y, m, d);
    return buf;
}

int64_t hr_dlog_day(int64_t due_ms)
{
    return hr_dlog_ymd(hr_dlog_epoch_day(due_ms));
}

/* The one integer of a one-cell query (0 for NULL), or -1 on an error. */
static int hr_dlog_int(hr_mysql *m, const char *sql, const hr_mysql_param *p, size_t np,
                       int64_t *out, char *errstr, size_t errlen)
{
    hr_mysql_rows *rows = NULL;

    if (hr_mysql_query(m, sql, p, np, &rows, errstr, errlen) < 0)
        return -1;
    *out = rows->nrows > 0 && hr_mysql_cell(rows, 0, 0) != NULL
               ? strtoll(hr_mysql_cell(rows, 0, 0), NULL, 10)
               : 0;
    hr_mysql_rows_free(rows);
    return 0;
}

/* Whether push_delivery_legacy exists (1), or not (0); -1 on an error. */
static int hr_dlog_legacy_exists(hr_mysql *m, char *errstr, size_t errlen)
{
    int64_t n;

    if (hr_dlog_int(m,
                    "SELECT COUNT(*) FROM information_schema.TABLES WHERE "
                    "TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'push_delivery_legacy'",
                    NULL, 0, &n, errstr, errlen) < 0)
        return -1;
    return n > 0;
}

/* The legacy copy's cursor: every legacy row up to (*TASK, *UID) is copied
 * or skipped; *UID -1 = the whole of *TASK.  OWNER NULL: whoever holds the
 * lease.  0 (no cursor yet: 0, 0), 1 when OWNER does not hold the lease,
 * -1. */
static int hr_dlog_cursor(hr_mysql *m, const char *owner, int64_t *task, int64_t *uid, char *errstr,
                          size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_STR(HR_DLOG_JOB), owner ? HR_P_STR(owner) : HR_P_NULL,
                                owner ? HR_P_STR(owner) : HR_P_NULL};
    hr_mysql_rows *rows = NULL;
    const char *progress;
    long long t = 0, u = 0;
    int rc = 0;

    if (hr_mysql_query(m,
                       "SELECT progress FROM push_job WHERE name = ? AND (? IS NULL OR owner = ?)",
                       p, 3, &rows, errstr, errlen) < 0)
        return -1;
    if (rows->nrows == 0)
        rc = owner != NULL ? 1 : 0;
    else if ((progress = hr_mysql_cell(rows, 0, 0)) != NULL &&
             sscanf(progress, "%lld %lld", &t, &u) != 2)
        t = u = 0;
    hr_mysql_rows_free(rows);
    *task = t;
    *uid = u;
    return rc;
}

/* Stores the cursor while OWNER holds the lease: 0, 1 when it lost it, -1. */
static int hr_dlog_cursor_store(hr_mysql *m, const char *owner, int64_t task, int64_t uid,
                                char *errstr, size_t errlen)
{
    char progress[64];
    uint64_t affected = 0;

    snprintf(progress, sizeof progress, "%" PRId64 " %" PRId64, task, uid);
    const hr_mysql_param p[] = {HR_P_STR(progress), HR_P_STR(HR_DLOG_JOB), HR_P_STR(owner)};
    if (hr_mysql_exec(m, "UPDATE push_job SET progress = ? WHERE name = ? AND owner = ?", p, 3,
                      &affected, NULL, NULL, errstr, errlen) < 0)
        return -1;
    return affected == 1 ? 0 : 1;
}

int hr_dlog_ready(hr_mysql *m, int64_t id, int64_t due_ms, int retention_days, int64_t now_ms,
                  char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(id)};
    int64_t day, first, dropped, ctask, cuid, found;
    char due[HR_DLOG_DAY_TEXT], from[HR_DLOG_DAY_TEXT];
    int legacy;

    if (due_ms < 0)
        return 0; /* never due, never pushed: no rows */
    day = hr_dlog_epoch_day(due_ms);
    first = hr_dlog_epoch_day(now_ms) - retention_days;
    hr_dlog_text(hr_dlog_ymd(day), due);
    if (day < first) {
        snprintf(errstr, errlen,
                 "task %" PRId64 " was due %s, before the delivery log's retention "
                 "(dispatcher.delivery_retention_days = %d keeps the tasks due from %s on): its "
                 "delivery rows are dropped, or about to be, and recover would push again "
                 "recipients who were reached; nothing was changed",
                 id, due, retention_days, hr_dlog_text(hr_dlog_ymd(first), from));
        return HR_DLOG_GONE;
    }
    if (hr_dlog_int(m, "SELECT COALESCE(MAX(day) + 0, 0) FROM push_delivery_dropped", NULL, 0,
                    &dropped, errstr, errlen) < 0)
        return -1;
    if (dropped > 0 && hr_dlog_ymd(day) <= dropped) {
        snprintf(errstr, errlen,
                 "task %" PRId64 " was due %s, and the delivery log's partitions up to %s were "
                 "dropped (push_delivery_dropped; dispatcher.delivery_retention_days = %d now): "
                 "its delivery rows may be gone, and recover would push again recipients who "
                 "were reached; nothing was changed",
                 id, due, hr_dlog_text(dropped, from), retention_days);
        return HR_DLOG_GONE;
    }
    if ((legacy = hr_dlog_legacy_exists(m, errstr, errlen)) < 0)
        return -1;
    if (legacy && hr_dlog_cursor(m, NULL, &ctask, &cuid, errstr, errlen) < 0)
        return -1;
    if (legacy && (id > ctask || (id == ctask && cuid >= 0))) {
        if (hr_dlog_int(m, "SELECT EXISTS (SELECT 1 FROM push_delivery_legacy WHERE task_id = ?)",
                        p, 1, &found, errstr, errlen) < 0)
            return -1;
        if (found > 0) {
            snprintf(errstr, errlen,
                     "task %" PRId64 " has delivery rows the dispatchers have not yet copied "
                     "from push_delivery_legacy (the log's conversion to partitions, "
                     "013_delivery_partitions.sql; the copy is at task %" PRId64
                     "): try again when it is past this task",
                     id, ctask);
            return HR_DLOG_COPYING;
        }
    }
    return hr_dlog_settle(m, id, hr_dlog_ymd(day), errstr, errlen) < 0 ? -1 : 0;
}

int64_t hr_dlog_settle(hr_mysql *m, int64_t id, int64_t day, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {hr_mysql_p_i64_or_null(day), HR_P_I64(id), HR_P_I64(HR_DLOG_UNSET)};
    uint64_t moved = 0;

    if (day == HR_DLOG_UNSET)
        return 0;
    if (hr_mysql_begin(m, errstr, errlen) < 0)
        return -1;
    /* The target's columns are named push_delivery.*: the SELECT reads the
     * same table (as l). */
    if (hr_mysql_exec(
            m,
            "INSERT INTO push_delivery (" HR_DLOG_COLUMNS ", day) "
            "SELECT l.task_id, l.uid, l.status, l.attempts, l.http_status, l.latency_ms, l.at, "
            "COALESCE(?, DATE(l.at)) FROM push_delivery l WHERE l.task_id = ? AND l.day = ? "
            "ON DUPLICATE KEY UPDATE "
            "status = IF(VALUES(at) >= push_delivery.at, VALUES(status), push_delivery.status), "
            "attempts = IF(VALUES(at) >= push_delivery.at, VALUES(attempts), "
            "push_delivery.attempts), "
            "http_status = IF(VALUES(at) >= push_delivery.at, VALUES(http_status), "
            "push_delivery.http_status), "
            "latency_ms = IF(VALUES(at) >= push_delivery.at, VALUES(latency_ms), "
            "push_delivery.latency_ms), "
            "at = GREATEST(push_delivery.at, VALUES(at))",
            p, 3, NULL, NULL, NULL, errstr, errlen) < 0 ||
        hr_mysql_exec(m, "DELETE FROM push_delivery WHERE task_id = ? AND day = ?", p + 1, 2,
                      &moved, NULL, NULL, errstr, errlen) < 0 ||
        hr_mysql_commit(m, errstr, errlen) < 0) {
        hr_mysql_rollback(m);
        return -1;
    }
    return (int64_t)moved;
}

/* The legacy copy's next task after TASK into *NEXT (0: none left). */
static int hr_dlog_next_task(hr_mysql *m, int64_t task, int64_t *next, char *errstr, size_t errlen)
{
    const hr_mysql_param p[] = {HR_P_I64(task)};

    return hr_dlog_int(m, "SELECT MIN(task_id) FROM push_delivery_legacy WHERE task_id > ?", p, 1,
                       next, errstr, errlen);
}

/* One batch of task TASK's legacy rows after UID into DAY (YYYYMMDD):
 * *LAST gets the batch's last uid, -1 when it reached the task's end. */
static int hr_dlog_copy_batch(hr_mysql *m, int64_t task, int64_t uid, int64_t day, int64_t *last,
                              int64_t *copied, char *errstr, size_t errlen)
{
    const hr_mysql_param pl[] = {HR_P_I64(task), HR_P_I64(uid), HR_P_I64(HR_DLOG_COPY_BATCH - 1)};
    uint64_t affected = 0;
    int rc;

    if (hr_dlog_int(m,
                    "SELECT COALESCE((SELECT uid FROM push_delivery_legacy WHERE task_id = ? "
                    "AND uid > ? ORDER BY uid LIMIT 1 OFFSET ?), -1)",
                    pl, 3, last, errstr, errlen) < 0)
        return -1;
    {
        /* INSERT IGNORE: a row written since the rename is newer. */
        const hr_mysql_param p[] = {HR_P_I64(day), HR_P_I64(task), HR_P_I64(uid),
                                    hr_mysql_p_i64_or_null(*last), hr_mysql_p_i64_or_null(*last)};

        rc = hr_mysql_exec(m,
                           "INSERT IGNORE INTO push_delivery (" HR_DLOG_COLUMNS ", day) "
                           "SELECT " HR_DLOG_COLUMNS ", ? FROM push_delivery_legacy "
                           "WHERE task_id = ? AND uid > ? AND (? IS NULL OR uid <= ?)",
                           p, 5, &affected, NULL, NULL, errstr, errlen);
    }
    *copied += (int64_t)affected;
    return rc;
}

int hr_dlog_legacy_copy(hr_mysql *m, const char *owner, int retention_days, int64_t now_ms,
                        int64_t max_rows, int64_t deadline_mono_ms, hr_dlog_copy *out, char *errstr,
                        size_t errlen)
{
    int64_t first = hr_dlog_ymd(hr_dlog_epoch_day(now_ms) - retention_days);
    int64_t task, uid, day = -1, next;
    int rc;

    memset(out, 0, sizeof *out);
    if ((rc = hr_dlog_legacy_exists(m, errstr, errlen)) <= 0)
        return rc < 0 ? -1 : 1;
    if ((rc = hr_dlog_cursor(m, owner, &task, &uid, errstr, errlen)) != 0)
        return rc < 0 ? -1 : 0;
    while (out->copied < max_rows && hr_clock_mono_ms() < deadline_mono_ms) {
        if (task == 0 || uid < 0) {
            if (hr_dlog_next_task(m, task, &next, errstr, errlen) < 0)
                return -1;
            if (next == 0) {
                /* Every task is past: the table goes, and with it the rows
                 * of the tasks due before the retention. */
                const hr_mysql_param p[] = {HR_P_STR(HR_DLOG_JOB), HR_P_STR(owner)};

                if (hr_mysql_exec(m, "DROP TABLE IF EXISTS push_delivery_legacy", NULL, 0, NULL,
                                  NULL, NULL, errstr, errlen) < 0 ||
                    hr_mysql_exec(
                        m, "UPDATE push_job SET progress = NULL WHERE name = ? AND owner = ?", p, 2,
                        NULL, NULL, NULL, errstr, errlen) < 0)
                    return -1;
                out->task = task;
                return 1;
            }
            task = next;
            uid = 0;
            day = -1;
        }
        if (day < 0) {
            const hr_mysql_param p[] = {HR_P_I64(task)};

            if (hr_dlog_int(m, "SELECT COALESCE(DATE(due_at) + 0, 0) FROM push_task WHERE id = ?",
                            p, 1, &day, errstr, errlen) < 0)
                return -1;
        }
        if (day == 0 || day < first) {
            /* The task is gone, or due before the retention: not kept. */
            out->skipped++;
            uid = -1;
        } else if (hr_dlog_copy_batch(m, task, uid, day, &uid, &out->copied, errstr, errlen) < 0)
            return -1;
        if ((rc = hr_dlog_cursor_store(m, owner, task, uid, errstr, errlen)) != 0)
            return rc < 0 ? -1 : 0;
    }
    out->task = task;
    return 0;
}
