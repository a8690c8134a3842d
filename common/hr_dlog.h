/* hr_dlog: what every reader and writer of the delivery log (push_delivery,
 * partitioned by day: schemas/mysql/013_delivery_partitions.sql) agrees on.
 *
 * - The partition key.  Every row of a task carries the task's day,
 *   DATE(due_at) in UTC, in the column `day` (hr_dlog_day gives it as the
 *   integer YYYYMMDD, which MariaDB reads as a DATE), so a task's rows sit
 *   in one partition and a reader prunes to it with `day = ?`.  A row
 *   written without it has HR_DLOG_UNSET (the column's default, in pmax)
 *   until hr_dlog_settle moves it.
 * - The retention window.  With dispatcher.delivery_retention_days R, the
 *   dispatchers keep the partitions of the days from today - R on and drop
 *   older ones (dispatcher/dsp_dlog.c), recording each drop in
 *   push_delivery_dropped first.  hr_dlog_ready tells recover whether a
 *   task's rows are all still there.
 * - The conversion of a log that predates partitioning: the migration
 *   renamed it push_delivery_legacy; hr_dlog_legacy_copy copies the rows of
 *   the tasks due within the retention into their days, in batches from a
 *   cursor kept in push_job (the lease holder's), and drops the legacy
 *   table at the end.
 *
 * Days are counted as days since 1970-01-01 (UTC) in C and passed to SQL as
 * YYYYMMDD.  Connections are the caller's; nothing here logs. */
#ifndef HR_DLOG_H
#define HR_DLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "hr_mysql.h"

/* push_delivery.day's default: a row written without its task's day. */
#define HR_DLOG_UNSET 99991231
/* "YYYY-MM-DD" and its NUL. */
#define HR_DLOG_DAY_TEXT 11
/* The push_job row of the dispatchers' upkeep of the log (its lease, and
 * the legacy copy's cursor as its progress). */
#define HR_DLOG_JOB "delivery_log"

/* Days since 1970-01-01 of the UTC day of MS (ms since the epoch). */
int64_t hr_dlog_epoch_day(int64_t ms);
/* YYYYMMDD of epoch day DAYS, and back (YMD must be a valid date). */
int64_t hr_dlog_ymd(int64_t days);
int64_t hr_dlog_from_ymd(int64_t ymd);
/* "YYYY-MM-DD" of YMD into BUF (HR_DLOG_DAY_TEXT bytes); returns BUF. */
char *hr_dlog_text(int64_t ymd, char *buf);
/* push_delivery.day (YYYYMMDD) of the rows of a task due at DUE_MS. */
int64_t hr_dlog_day(int64_t due_ms);

/* A second answer of hr_dlog_ready: recover must not read the task's rows
 * (ERRSTR says why and what to do). */
enum {
    HR_DLOG_GONE = 1,    /* they may have been dropped: outside the retention */
    HR_DLOG_COPYING = 2, /* some are still in push_delivery_legacy: try again later */
};

/* Whether the delivery rows of task ID, due at DUE_MS, are all in the log
 * at NOW_MS with a retention of RETENTION_DAYS: refused (HR_DLOG_GONE)
 * when its day is before today - RETENTION_DAYS (the dispatchers drop it,
 * or are about to) or not after the newest day push_delivery_dropped
 * records (dropped under another retention), HR_DLOG_COPYING while the
 * legacy copy has not reached it; 0 when they are, after its rows written
 * without a day were settled (hr_dlog_settle); -1 on a database error. */
int hr_dlog_ready(hr_mysql *m, int64_t id, int64_t due_ms, int retention_days, int64_t now_ms,
                  char *errstr, size_t errlen);

/* Moves task ID's rows written without a day (HR_DLOG_UNSET: an older
 * release, raw SQL) to DAY (YYYYMMDD; < 0: each row's own DATE(at), for a
 * task that is gone), the newest row of a uid winning over one already
 * there, in one transaction.  A task due on HR_DLOG_UNSET itself is left
 * alone.  The rows moved, or -1. */
int64_t hr_dlog_settle(hr_mysql *m, int64_t id, int64_t day, char *errstr, size_t errlen);

/* The legacy copy's pass (see above).  OWNER must hold the HR_DLOG_JOB
 * lease: the cursor is stored only while it does, and the pass stops when
 * it does not.  Copies at most MAX_ROWS rows or until DEADLINE_MONO_MS
 * (hr_clock_mono_ms), of the tasks due from today - RETENTION_DAYS on;
 * the rows of older tasks and of tasks that no longer exist are skipped
 * (they go with the table).  OUT gets the rows copied and the tasks
 * skipped.  1 when there is no legacy table (any more: the
 * pass dropped it), 0 when there is more to copy, -1 on an error. */
typedef struct hr_dlog_copy {
    int64_t copied;  /* legacy rows copied into push_delivery */
    int64_t skipped; /* tasks not copied: due before the retention, or gone */
    int64_t task;    /* the cursor's task after the pass */
} hr_dlog_copy;

int hr_dlog_legacy_copy(hr_mysql *m, const char *owner, int retention_days, int64_t now_ms,
                        int64_t max_rows, int64_t deadline_mono_ms, hr_dlog_copy *out, char *errstr,
                        size_t errlen);

#endif
